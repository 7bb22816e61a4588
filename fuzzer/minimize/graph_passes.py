"""Structural shrink passes: fewer outputs, truncated suffixes, bypassed nodes, recorded values, unused inputs."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from ..dtypes import is_float, round_to
from ..interpret import evaluate
from ..ir import Case, Graph, Input, infer, input_values
from ..ops import OPS
from .candidates import Candidate, Pass, offer
from .edit import elements, loss_head, prune, simplest_spec, substitute, unused_inputs
from .size import size

SMALL_TENSOR = 256  # largest node output (elements) that may be replaced by an input holding its recorded values


def _by_size(cands: list[Candidate]) -> list[Candidate]:
    """Candidates sorted smallest first (stable, so ties keep graph order)."""
    return sorted(cands, key=lambda c: size(c.case))


def fitted_spec(values: np.ndarray, seed: int = 0) -> dict:
    """A short value spec with the range of `values`: constant, uniform over [min, max] if one-signed, else normal."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"dist": "normal", "seed": seed}
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:
        return {"dist": "constant", "value": lo}
    if lo >= 0 or hi <= 0:
        return {"dist": "uniform", "low": lo, "high": hi, "seed": seed}
    return {"dist": "normal", "mean": float(v.mean()), "std": float(v.std()) or 1.0, "seed": seed}


EXACT_LIMIT = 1 << 16  # largest operand (elements) isolate writes out exactly, as inline values


def isolate(ops: tuple[str, ...], blamed: str = "") -> "Pass":
    """A pass: one node of an op in `ops` alone, its operands made inputs. The node the finding blamed
    (`blamed`) comes first, then the others in graph order.

    Per node: first its operands as inputs holding exactly the values the original graph fed it (graph
    inputs keep their specs; intermediates get their reference values rounded to their dtype, whatever their
    size up to EXACT_LIMIT), then (for the blamed node) the graph truncated right after it, then operands
    fitted to a distribution of their range. The biggest cuts there are: a finding localized on that node
    needs nothing else of the graph, and whatever follows it never does.
    """
    def isolate_node(case: Case) -> Iterator[Candidate]:
        g = case.graph
        if len(g.nodes) < 2:
            return
        typed = infer(g)
        envs: list | None = None
        cands = []
        order = sorted(g.nodes, key=lambda n: n.id != blamed)  # stable: the blamed node first
        for node in order:
            if node.op not in ops or typed.values[node.id].kind == "scalar":
                continue
            for recorded in (True, False):
                if not recorded and node.id == blamed and g.outputs != (node.id,):
                    cands.append(Candidate(f"truncate after {node.id} ({node.op})",
                                           case.with_graph(prune(replace(g, outputs=(node.id,)), g))))
                inputs, sets, ok = [], [dict() for _ in case.input_sets], True
                for operand in dict.fromkeys(o for o in node.inputs if isinstance(o, str)):
                    if operand in {i.name for i in g.inputs}:
                        inputs.append(g.input(operand))
                        for k, s in enumerate(case.input_sets):
                            if operand in s:
                                sets[k][operand] = s[operand]
                        continue
                    if envs is None:
                        envs = [evaluate(g, input_values(case, k), rounded=False) for k in range(len(case.input_sets))]
                    info = typed.values[operand]
                    vals = [round_to(env[operand], info.dtype) for env in envs]
                    if not all(np.all(np.isfinite(v)) for v in vals):
                        ok = False
                        break
                    if recorded and elements(info.shape) > EXACT_LIMIT:
                        ok = False
                        break
                    spec = (lambda v: simplest_spec(v)) if recorded else fitted_spec
                    scalar = info.kind == "scalar"
                    inputs.append(Input(operand, () if scalar else info.shape, info.dtype, "input",
                                        "scalar" if scalar else "tensor", spec(vals[0])))
                    for k, v in enumerate(vals[1:], start=1):
                        if not np.array_equal(v, vals[0]):
                            sets[k][operand] = spec(v)
                if ok:
                    graph = Graph(tuple(inputs), (node,), (node.id,))
                    if g.wrt:  # a training case stays one: the node alone under a fresh loss head, the gradients
                        # of its operands checked where they were an intermediate's or an input's that had one
                        made = {i.name for i in inputs} - {i.name for i in g.inputs}
                        graph = loss_head(graph, node.id, graph, set(g.wrt) | made)
                    how = "exact" if recorded else "fitted"
                    cands.append(Candidate(f"isolate {node.id} ({node.op}), {how} operands",
                                           replace(case, graph=graph, input_sets=tuple(sets))))
        yield from offer(case, cands)

    isolate_node.__name__ = "isolate"
    return isolate_node


def rehead(case: Case) -> Iterator[Candidate]:
    """A training case's loss moved to one node's output: sum(node * upstream), a plain upstream gradient (smallest
    graph first); what follows the node goes. A forward-only case has no loss to move."""
    g = case.graph
    if not g.wrt:
        return
    typed = infer(g)
    cands = [Candidate(f"loss head at {n.id} ({n.op})", case.with_graph(loss_head(g, n.id, g, set(g.wrt))))
             for n in g.nodes if typed.values[n.id].kind != "scalar" and is_float(typed.values[n.id].dtype)
             and n.id != g.outputs[0]]
    yield from offer(case, _by_size(cands))


def fewer_outputs(case: Case) -> Iterator[Candidate]:
    """Keep a single output (each in turn), then drop one output at a time."""
    g = case.graph
    if len(g.outputs) < 2:
        return
    cands = [Candidate(f"keep only output {o}", case.with_graph(prune(replace(g, outputs=(o,)), g))) for o in g.outputs]
    cands += [Candidate(f"drop output {o}", case.with_graph(prune(replace(g, outputs=tuple(x for x in g.outputs if x != o)), g)))
              for o in g.outputs]
    yield from offer(case, cands)


def truncate(case: Case) -> Iterator[Candidate]:
    """Make one intermediate node the only output (smallest resulting graph first)."""
    g = case.graph
    typed = infer(g)
    cands = [Candidate(f"truncate at {n.id} ({n.op})", case.with_graph(prune(replace(g, outputs=(n.id,)), g)))
             for n in g.nodes if typed.values[n.id].kind != "scalar" and g.outputs != (n.id,)]
    yield from offer(case, _by_size(cands))


def bypass_nodes(case: Case) -> Iterator[Candidate]:
    """Remove one node by forwarding one of its operands to its users (graph order, operand order)."""
    g = case.graph
    cands = []
    for node in g.nodes:
        for operand in dict.fromkeys(o for o in node.inputs if isinstance(o, str)):
            new = prune(substitute(g, node.id, operand), g)
            cands.append(Candidate(f"bypass {node.id} ({node.op}) with {operand}", case.with_graph(new)))
    yield from offer(case, cands)


def drop_optional_operands(case: Case) -> Iterator[Candidate]:
    """Set one optional operand (a weight or bias) of one node to null."""
    g = case.graph
    cands = []
    for k, node in enumerate(g.nodes):
        slots = OPS[node.op].operands
        for i, operand in enumerate(node.inputs):
            if operand is None or not slots[i].endswith("?"):
                continue
            ins = list(node.inputs)
            ins[i] = None
            while ins and ins[-1] is None:
                ins.pop()
            nodes = g.nodes[:k] + (replace(node, inputs=tuple(ins)),) + g.nodes[k + 1:]
            cands.append(Candidate(f"drop {slots[i].rstrip('?')} of {node.id} ({node.op})",
                                   case.with_graph(prune(replace(g, nodes=nodes), g))))
    yield from offer(case, cands)


def replace_by_values(case: Case) -> Iterator[Candidate]:
    """Replace a small node (and the subgraph only it needs) by an input holding its reference values, rounded to its dtype."""
    g = case.graph
    typed = infer(g)
    small = [n for n in g.nodes if elements(typed.values[n.id].shape) <= SMALL_TENSOR]
    if not small:
        return
    envs = [evaluate(g, input_values(case, k), rounded=False) for k in range(len(case.input_sets))]
    cands = []
    for node in small:
        info = typed.values[node.id]
        vals = [round_to(env[node.id], info.dtype) for env in envs]
        if not all(np.all(np.isfinite(v)) for v in vals):
            continue
        scalar = info.kind == "scalar"
        new_input = Input(node.id, () if scalar else info.shape, info.dtype, "input",
                          "scalar" if scalar else "tensor", simplest_spec(vals[0]))
        sets = tuple({**s, node.id: simplest_spec(v)} if k and not np.array_equal(v, vals[0]) else dict(s)
                     for k, (s, v) in enumerate(zip(case.input_sets, vals)))
        graph = Graph(g.inputs + (new_input,), tuple(n for n in g.nodes if n.id != node.id), g.outputs)
        cands.append(Candidate(f"replace {node.id} ({node.op}) by its values",
                               replace(case, input_sets=sets).with_graph(prune(graph, g))))
    yield from offer(case, _by_size(cands))


def drop_unused_inputs(case: Case) -> Iterator[Candidate]:
    """Drop every unused input at once, then one at a time."""
    g = case.graph
    unused = unused_inputs(g)
    if not unused:
        return
    cands = [Candidate("drop unused inputs", case.with_graph(replace(g, inputs=tuple(i for i in g.inputs if i.name not in unused))))]
    cands += [Candidate(f"drop unused input {i.name}", case.with_graph(replace(g, inputs=tuple(x for x in g.inputs if x.name != i.name))))
              for i in g.inputs if i.name in unused]
    yield from offer(case, cands)


def default_attrs(case: Case) -> Iterator[Candidate]:
    """Drop one explicit attribute of one node (the op's default applies)."""
    g = case.graph
    cands = []
    for k, node in enumerate(g.nodes):
        for key in node.attrs:
            nodes = g.nodes[:k] + (replace(node, attrs={a: v for a, v in node.attrs.items() if a != key}),) + g.nodes[k + 1:]
            cands.append(Candidate(f"{node.id} ({node.op}): default {key}", case.with_graph(replace(g, nodes=nodes))))
    yield from offer(case, cands)
