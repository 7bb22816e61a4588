"""Static analyses of a typed graph shared by the oracles and the minimizer: where a chain break's dtype came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ir import Graph, TypedGraph, infer
from .ops import OPS, is_cast
from .promotion import Operand, result_type


@dataclass(frozen=True)
class Promotion:
    """Where a dtype came from: the inputs/operands whose dtype won, and the nodes where it met another dtype."""

    culprits: tuple[str, ...]  # input names, node ids (casts, parametrized ops) or scalar literals
    promoted_at: tuple[str, ...]  # nodes whose result took `dtype` from one operand over another of another dtype
    path: tuple[str, ...]  # every value visited, from the break backwards


def trace_promotion(graph: Graph, typed: TypedGraph, value: str, dtype: str) -> Promotion:
    """Follow `value` (of `dtype`) back through the nodes that passed `dtype` on, to where it came from.

    At an elementwise node an operand "won" if dropping it changes the result dtype (leave-one-out over
    PyTorch's promotion); when no single operand decides it (all share `dtype`), every operand of `dtype` is
    followed. Inputs, explicit casts and parametrized ops end a path.
    """
    culprits: list[str] = []
    promoted: list[str] = []
    path: list[str] = []
    nodes = {n.id: n for n in graph.nodes}
    stack = [value]
    while stack:
        name = stack.pop()
        if name in path:
            continue
        path.append(name)
        node = nodes.get(name)
        if node is None or is_cast(node.op) or any(
                i < len(node.inputs) and node.inputs[i] is not None for i in OPS[node.op].params):
            culprits.append(name)
            continue
        views = [(o, _operand_view(typed, o)) for o in node.inputs if o is not None]
        winners = []
        if len(views) > 1:
            for i in range(len(views)):
                rest = [v for j, (_, v) in enumerate(views) if j != i]
                if result_type(*rest) != dtype:
                    winners.append(views[i][0])
            if winners and any(v.dtype != dtype and v.kind != "scalar" for _, v in views):
                promoted.append(name)
        if not winners:  # no single operand decides it: follow the tensors of `dtype` (a literal never decides a tie)
            winners = ([o for o, v in views if v.kind != "scalar" and v.dtype == dtype]
                       or [o for o, v in views if v.kind != "scalar"])
        for o in winners:
            if isinstance(o, str) and o in typed.values:
                stack.append(o)
            else:
                culprits.append(repr(o))
    return Promotion(tuple(dict.fromkeys(culprits)), tuple(promoted), tuple(path))


def _operand_view(typed: TypedGraph, operand: Any) -> Operand:
    if isinstance(operand, str):
        return typed.values[operand].operand()
    return Operand("float64" if isinstance(operand, float) else "int64", "scalar")


def break_trace(graph: Graph, typed: TypedGraph, node_id: str) -> Promotion | None:
    """Where the odd dtype at chain break `node_id` came from (None when the operand is not a graph value)."""
    brk = typed.chain_breaks().get(node_id)
    node = next((n for n in graph.nodes if n.id == node_id), None)
    if brk is None or node is None:
        return None
    if OPS[node.op].params:  # conv, linear, norms: the activation's dtype is the odd one
        operand, dtype = node.inputs[brk.operand], brk.activation_dtype
    else:  # matmul, attention: trace an operand whose (wider) dtype won, not the odd one
        wide = [o for k, o in enumerate(node.inputs) if k != brk.operand and isinstance(o, str)
                and typed.values[o].dtype == brk.param_dtype]
        operand, dtype = (wide[0] if wide else None), brk.param_dtype
    return trace_promotion(graph, typed, operand, dtype) if isinstance(operand, str) else None


def promoted_breaks(graph: Graph) -> set[str]:
    """Chain-break nodes whose odd activation dtype comes from a type promotion inside the graph."""
    typed = infer(graph)
    found = set()
    for node_id in typed.chain_breaks():
        trace = break_trace(graph, typed, node_id)
        if trace is not None and trace.promoted_at:
            found.add(node_id)
    return found


def ancestors(graph: Graph, value: str) -> set[str]:
    """Node ids and input names `value` depends on (itself included)."""
    nodes = {n.id: n for n in graph.nodes}
    seen: set[str] = set()
    stack = [value]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = nodes.get(name)
        if node is not None:
            stack += [o for o in node.inputs if isinstance(o, str)]
    return seen
