"""Graph edits shared by the shrink passes: pruning, operand substitution, reshaping value specs, validity."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..identifiers import fresh_name
from ..ir import Case, Graph, Input, IRError, Node, check_training, infer, input_values
from ..values import ValueSpecError, has_inline, inline

Spec = dict[str, Any]


def referenced(graph: Graph) -> set[str]:
    """Value names that some node operand or output refers to."""
    names = set(graph.outputs)
    for node in graph.nodes:
        names.update(o for o in node.inputs if isinstance(o, str))
    return names


def unused_inputs(graph: Graph) -> set[str]:
    """Names of inputs that nothing refers to."""
    used = referenced(graph)
    return {i.name for i in graph.inputs if i.name not in used}


def prune(graph: Graph, before: Graph) -> Graph:
    """Drop nodes no output depends on, and inputs this edit left unused (inputs already unused in `before` stay)."""
    live = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if node.id in live:
            kept.append(node)
            live.update(o for o in node.inputs if isinstance(o, str))
    kept.reverse()
    keep_unused = unused_inputs(before)
    inputs = tuple(i for i in graph.inputs if i.name in live or i.name in keep_unused)
    return Graph(inputs, tuple(kept), graph.outputs)


def substitute(graph: Graph, old: str, new: str) -> Graph:
    """Every reference to value `old` (operands and outputs) redirected to value `new`; the node `old` removed."""
    nodes = tuple(replace(n, inputs=tuple(new if o == old else o for o in n.inputs)) for n in graph.nodes if n.id != old)
    outputs: list[str] = []
    for out in graph.outputs:
        name = new if out == old else out
        if name not in outputs:
            outputs.append(name)
    return Graph(graph.inputs, nodes, tuple(outputs))


def valid(case: Case) -> bool:
    """True when the case type-checks and every input set's values can be made."""
    try:
        check_training(case.graph, infer(case.graph))
        for k in range(len(case.input_sets)):
            input_values(case, k)
    except (IRError, ValueSpecError, ValueError, KeyError, TypeError):
        return False
    return True


def reshape_spec(spec: Spec, old: tuple[int, ...], new: tuple[int, ...], edit: Callable[[np.ndarray], np.ndarray]) -> Spec:
    """A value spec for a reshaped input: distributions are shape-free, inline values go through `edit`."""
    if not has_inline(spec):
        return spec
    arr = np.broadcast_to(inline(spec), old)
    return {"values": np.asarray(edit(arr), dtype=np.float64).reshape(new).tolist()}


def reshape_input(case: Case, name: str, new: tuple[int, ...], edit: Callable[[np.ndarray], np.ndarray]) -> Case:
    """The case with input `name` given shape `new`, its inline values (init and overrides) edited to fit."""
    old = case.graph.input(name).shape
    inputs = tuple(replace(i, shape=new, init=reshape_spec(i.init, old, new, edit)) if i.name == name else i
                   for i in case.graph.inputs)
    sets = tuple({k: (reshape_spec(v, old, new, edit) if k == name else v) for k, v in s.items()} for s in case.input_sets)
    return replace(case, graph=replace(case.graph, inputs=inputs), input_sets=sets)


def elements(shape: tuple[int, ...]) -> int:
    """Number of elements of a shape (1 for 0-dim)."""
    return math.prod(shape)


def simplest_spec(values: np.ndarray) -> Spec:
    """The shortest spec that makes exactly `values`: a constant, an alternating +-a pattern, else inline values."""
    arr = np.asarray(values, dtype=np.float64)
    flat = arr.ravel()
    if flat.size and np.all(flat == flat[0]):
        return {"dist": "constant", "value": float(flat[0])}
    if flat.size >= 2 and flat[1] > 0 and np.array_equal(np.resize(np.array([-flat[1], flat[1]]), arr.shape), arr):
        return {"dist": "alternating", "value": float(flat[1])}
    return {"values": arr.tolist()}


def loss_head(graph: Graph, value: str, before: Graph, trained: set[str]) -> Graph:
    """A training graph whose loss is sum(value * upstream): the graph pruned to `value`, a new upstream input (normal,
    value's shape and dtype), and gradients of the float tensor inputs in `trained` that it keeps (the op before the
    head has its backward fed a plain upstream gradient)."""
    info = infer(graph).values[value]
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    up, weighted, loss = (fresh_name(stem, taken) for stem in ("upstream", "weighted", "loss"))
    head = Graph(graph.inputs, graph.nodes, (value,))
    pruned = prune(head, before)
    inputs = tuple(replace(i, grad=i.name in trained and i.kind == "tensor" and i.dtype in TRAINABLE)
                   for i in pruned.inputs)
    if info.shape == ():  # a 0-dim value: value * upstream is the loss (sum takes rank >= 1)
        nodes = pruned.nodes + (Node(loss, "mul", (value, up)),)
    else:
        nodes = pruned.nodes + (Node(weighted, "mul", (value, up)), Node(loss, "sum", (weighted,)))
    return Graph(inputs + (Input(up, info.shape, info.dtype, init={"dist": "normal", "seed": 0}),), nodes, (loss,))


TRAINABLE = ("float16", "bfloat16", "float32")  # dtypes every backend takes gradients of
