"""The error-bound oracle: each ok output against the fp64 reference under the ideal-implementation bound.

A violation becomes a finding only with a margin a maintainer would act on: an error at least MARGIN
times the allowed error, a non-finite value where the reference and the ideals are finite, or the same
output out of bound on a second input set. The node at fault is named by judging every node of a probe
run on its own operands (the backend's own values), so an error that an earlier node made and a later
node carried is pinned on the earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.dtypes import cast_results, is_float, round_to
from fuzzer.ir import Graph, Node, TypedGraph, infer, op_attrs
from fuzzer.ops import OPS
from fuzzer.outcome import Outcome

from .bounds import ErrorStats, error_stats, slack_ulps
from .findings import Finding
from .nodes import passed_through
from .vocabulary import ErrorClass, Oracle

MARGIN = 2.0  # a bound finding needs ratio >= MARGIN (or non-finite values, or a second violating input set)


@dataclass(frozen=True)
class OutputJudgement:
    """Error statistics of one output of one input set."""

    input_set: int
    output: str
    dtype: str
    stats: ErrorStats


def rounding_chain(graph: Graph, name: str) -> tuple[str, list[Node]] | None:
    """(the input, the casts from it in order) where `name` is made by single-rounding ops (casts) of an input alone."""
    chain: list[Node] = []
    producers = {n.id: n for n in graph.nodes}
    while name in producers:
        node = producers[name]
        operands = [o for o in node.inputs if o is not None]
        if "single-rounding" not in OPS[node.op].tags or len(operands) != 1 or not isinstance(operands[0], str):
            return None
        chain.append(node)
        name = operands[0]
    return (name, chain[::-1]) if chain else None


def single_rounding(graph: Graph, name: str, values: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """The values `name` may take where it is a chain of single roundings (casts) of an input, else None: each cast
    correctly rounded, or each as PyTorch's cast rounds (fuzzer.dtypes.cast_results).

    Each cast rounds the exact result of the one before it once (an fp8 round trip is its input rounded to fp8),
    so that chain, not the arithmetic bound, is what such an output is held to. `values`: the exact answer's values.
    """
    found = rounding_chain(graph, name)
    if found is None or found[0] not in values:
        return None
    typed = infer(graph)
    chains = []
    for way in (0, -1):  # correctly rounded; as PyTorch rounds
        value = np.asarray(values[found[0]], dtype=np.float64)
        with np.errstate(all="ignore"):
            for node in found[1]:
                dtype = typed.values[node.id].dtype
                cast = OPS[node.op].reference(value, **op_attrs(node))
                value = cast_results(cast, dtype)[way] if is_float(dtype) else round_to(cast, dtype)
        chains.append(np.asarray(value, dtype=np.float64))
    return chains


def judge_outputs(graph: Graph, numeric: TypedGraph, outcomes: list[Outcome],
                  expected: list[dict[str, np.ndarray]], ideal: list[dict[str, list[np.ndarray]]],
                  budget: float = 0.0, program: Graph | None = None) -> list[OutputJudgement]:
    """Error stats of every output of every ok outcome (expected/ideal: values per input set).

    `budget`: a relative error the executor may add (documented approximate math), as extra slack on every output;
    localization then holds each node to the budget of its own op only. `program`: the numeric graph itself, whose
    outputs made by casts of an input alone are held to correct rounding (`single_rounding`), and an output a
    centering norm makes is judged at the magnitudes its kernel passes through (nodes.passed_through).
    """
    out = []
    for k, oc in enumerate(outcomes):
        if not oc.ok or oc.outputs is None:
            continue
        for name, actual in zip(graph.outputs, oc.outputs):
            dtype = numeric.values[name].dtype
            rounded = single_rounding(program, name, expected[k]) if program is not None else None
            producer = next((n for n in program.nodes if n.id == name), None) if program is not None else None
            floor = passed_through(producer, expected[k], dtype) if producer is not None else None
            out.append(OutputJudgement(k, name, dtype, error_stats(actual, expected[k][name], ideal[k][name], dtype,
                                                                   slack_ulps=slack_ulps(dtype, budget), floor=floor,
                                                                   rounded=rounded)))
    return out


def violates(judgements: list[OutputJudgement]) -> list[OutputJudgement]:
    """The judgements that make a finding: non-finite, ratio >= MARGIN, or ratio > 1 on two input sets of one output."""
    over: dict[str, list[OutputJudgement]] = {}
    for j in judgements:
        if j.stats.ratio > 1.0:
            over.setdefault(j.output, []).append(j)
    bad = []
    for js in over.values():
        if len({j.input_set for j in js}) >= 2:
            bad += js
        else:
            bad += [j for j in js if j.stats.nonfinite_mismatch or j.stats.ratio >= MARGIN]
    return bad


def node_signature(graph: Graph, typed: TypedGraph, node_id: str) -> tuple[list[str], list[str]]:
    """(ops, dtypes) of a node: its op, and operand dtypes -> output dtype."""
    node = graph.node(node_id)
    ins = [typed.values[o].dtype if isinstance(o, str) else "scalar" for o in node.inputs if o is not None]
    return [node.op], [",".join(ins) + "->" + typed.values[node_id].dtype]


def bound_findings(executor: str, graph: Graph, numeric: TypedGraph, judgements: list[OutputJudgement]) -> list[Finding]:
    """One finding per executor for the worst violating output (see `violates`)."""
    bad = violates(judgements)
    if not bad:
        return []
    worst = max(bad, key=lambda j: (j.stats.nonfinite_mismatch > 0, j.stats.ratio))
    s = worst.stats
    producer = worst.output if worst.output in {n.id for n in graph.nodes} else ""
    ops, dtypes = node_signature(graph, numeric, producer) if producer else (["input"], [worst.dtype])
    cls = ErrorClass.NONFINITE if s.nonfinite_mismatch else ErrorClass.BOUND
    if s.nonfinite_mismatch:
        msg = f"{s.nonfinite_mismatch} non-finite value(s) in {worst.output} where the reference and ideal are finite (or the reverse)"
    else:
        msg = (f"{worst.output}: max error {s.max_abs:.4g} ({s.max_ulp:.1f} ULP of {worst.dtype}) is {s.ratio:.3g}x "
               f"the allowed error")
    sets = sorted({j.input_set for j in bad if j.output == worst.output})
    return [Finding(Oracle.ERROR_BOUND, executor, ops, dtypes, cls, msg, ratio=s.ratio, max_ulp=s.max_ulp,
                    input_set=worst.input_set, output=worst.output, node=producer,
                    details={"max_abs": s.max_abs, "worst_index": s.worst_index, "violating_outputs": len(bad),
                             "violating_sets": sets})]


def at_fault(node_stats: list[tuple[str, ErrorStats]], nonfinite: bool = False,
             flushed: frozenset[str] | set[str] = frozenset()) -> str | None:
    """The node to blame from per-node stats judged on the backend's own operands (in graph order).

    The first node with a finding-sized violation of its own (non-finite, or ratio >= MARGIN); None when
    no node has one (the graph's error grew from small ones: nothing a maintainer can act on). For a
    `nonfinite` finding, the first node that makes non-finite values of finite operands on its own, where one
    does: an earlier finite deviation did not make them (triage12 b0239f15cc: XLA's bf16 conv -> float32 cast
    one bf16 rounding off, then its float32 layer_norm NaN on the constant rows, was filed against the cast).
    A node whose error flushing subnormals explains (`flushed`: a coverage note at most) yields to a later node with a
    violation of its own that flushing does not explain: TVM's float32 -> float8_e4m3fn flushes 0.0029 to 0, and then
    its float8 -> float32 cast turns that 0 (and every exact 0) into 0.0078125, the bug to file.
    """
    if nonfinite:
        culprit = next((n for n, s in node_stats if s.nonfinite_mismatch), None)
        if culprit is not None:
            return culprit
    over = [n for n, s in node_stats if s.nonfinite_mismatch or s.ratio >= MARGIN]
    return next((n for n in over if n not in flushed), over[0] if over else None)
