"""The error-bound oracle: each ok output against the fp64 reference under the ideal-implementation bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.ir import Graph, TypedGraph, infer
from fuzzer.outcome import Outcome

from .bounds import ErrorStats, error_stats
from .findings import Finding


@dataclass(frozen=True)
class OutputJudgement:
    """Error statistics of one output of one input set."""

    input_set: int
    output: str
    dtype: str
    stats: ErrorStats


def judge_outputs(graph: Graph, policy: TypedGraph, outcomes: list[Outcome],
                  expected: list[dict[str, np.ndarray]], ideal: list[dict[str, list[np.ndarray]]]) -> list[OutputJudgement]:
    """Error stats of every output of every ok outcome (expected/ideal: values per input set)."""
    out = []
    for k, oc in enumerate(outcomes):
        if not oc.ok or oc.outputs is None:
            continue
        for name, actual in zip(graph.outputs, oc.outputs):
            dtype = policy.values[name].dtype
            out.append(OutputJudgement(k, name, dtype, error_stats(actual, expected[k][name], ideal[k][name], dtype)))
    return out


def node_signature(graph: Graph, typed: TypedGraph, node_id: str) -> tuple[list[str], list[str]]:
    """(ops, dtypes) of a node: its op, and operand dtypes -> output dtype."""
    node = graph.node(node_id)
    ins = [typed.values[o].dtype if isinstance(o, str) else "scalar" for o in node.inputs if o is not None]
    return [node.op], [",".join(ins) + "->" + typed.values[node_id].dtype]


def bound_findings(executor: str, graph: Graph, policy: TypedGraph, judgements: list[OutputJudgement]) -> list[Finding]:
    """One finding per executor for the worst violating output (ratio > 1 or non-finite mismatch)."""
    bad = [j for j in judgements if j.stats.ratio > 1.0]
    if not bad:
        return []
    worst = max(bad, key=lambda j: (j.stats.nonfinite_mismatch > 0, j.stats.ratio))
    s = worst.stats
    producer = worst.output if worst.output in {n.id for n in graph.nodes} else ""
    ops, dtypes = node_signature(graph, policy, producer) if producer else (["input"], [worst.dtype])
    cls = "nonfinite" if s.nonfinite_mismatch else "bound"
    if s.nonfinite_mismatch:
        msg = f"{s.nonfinite_mismatch} non-finite value(s) in {worst.output} where the reference and ideal are finite (or the reverse)"
    else:
        msg = (f"{worst.output}: max error {s.max_abs:.4g} ({s.max_ulp:.1f} ULP of {worst.dtype}) is {s.ratio:.3g}x "
               f"the allowed error")
    return [Finding("error-bound", executor, ops, dtypes, cls, msg, ratio=s.ratio, max_ulp=s.max_ulp,
                    input_set=worst.input_set, output=worst.output, node=producer,
                    details={"max_abs": s.max_abs, "worst_index": s.worst_index, "violating_outputs": len(bad)})]


def localize(graph: Graph, policy: TypedGraph, probe: Outcome, expected: dict[str, np.ndarray],
             ideal: dict[str, list[np.ndarray]]) -> str | None:
    """The first node (in order) whose own output breaks the bound in a probe run that output every node."""
    if not probe.ok or probe.outputs is None:
        return None
    for name, actual in zip(probe_outputs(graph), probe.outputs):
        st = error_stats(actual, expected[name], ideal[name], policy.values[name].dtype)
        if st.ratio > 1.0:
            return name
    return None


def probe_outputs(graph: Graph) -> list[str]:
    """Node ids that a probe run exposes as outputs (every tensor-valued node)."""
    typed = infer(graph)
    return [n.id for n in graph.nodes if typed.values[n.id].kind != "scalar"]
