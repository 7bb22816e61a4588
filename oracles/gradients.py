"""The gradient oracles of a training case: each gradient judged like a forward output.

Per gradient tensor (Graph.wrt), against PyTorch eager on the same policy program (the semantic oracle) and the
float64 reference (fuzzer.gradients):
- status: the backward raises where eager's runs (error class `backward-raises`);
- dtype: the gradient's dtype differs from eager's (a parameter's gradient has the parameter's dtype; under
  autocast, float32 parameters get float32 gradients) (`grad-dtype`);
- bound: the error against the exact gradient exceeds the ideal 16-bit backward's bound (`grad-bound`, or
  `grad-nonfinite` for inf/NaN where the reference and ideals are finite), with the forward's margin rule.

A bound finding is pinned on the op whose backward is wrong (`locate`): each op that leads to the gradient runs its
backward alone on the backend, fed the ideal forward operands and the ideal upstream gradient, and is judged
against that op's own reference; the op nearest the loss that fails on its own is the culprit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from fuzzer.dtypes import FLOAT32_SQUARE_MAX, FLOAT_FORMATS, is_float, round_to
from fuzzer.gradients import grad_name, reference
from fuzzer.ir import Graph, Input, Node, infer
from fuzzer.ops import OPS
from fuzzer.outcome import Outcome

from .bounds import ErrorStats, error_stats
from .error_bounds import MARGIN, OutputJudgement, node_signature, violates
from .errors import message_key
from .findings import Finding, backend_of
from .localize import EAGER_PAR
from .nodes import node_graph
from .vocabulary import ErrorClass, Oracle

Values = dict[str, np.ndarray]
Reference = tuple[list[np.ndarray], list[list[np.ndarray]], list[float]]  # exact, ideals per ideal, scale floors
Run = Callable[[Graph, Values], Outcome]  # the backend under test on one graph and one input set


class Culprit(NamedTuple):
    """The op whose backward alone is out of bound (`locate`), and what its gradient shows."""

    node: str
    stats: ErrorStats
    operand: str  # the operand whose gradient is off
    forward_wrong: bool  # its forward alone is off too
    row_scale: tuple[float, float] | None = None  # (least, most) factor of a gradient off by one factor per row


def status(executor: str, graph: Graph, outcomes: list[Outcome], eager: list[Outcome]) -> list[Finding]:
    """The backward raises on `executor` where PyTorch eager's backward of the same program runs."""
    for k, (o, e) in enumerate(zip(outcomes, eager)):
        if o.ok and o.backward_error is not None and e.ok and e.grads is not None:
            why = o.backward_error
            return [Finding(Oracle.STATUS_DIVERGENCE, executor, ["backward"], [], ErrorClass.BACKWARD_RAISES,
                            f"the backward raises {why['type']}: {why['message'][:300]} where PyTorch eager's runs",
                            against="torch/eager", input_set=k, output=grad_name(graph.wrt[0]),
                            details={"grad": graph.wrt[0], "error_key": message_key(why["message"]),
                                     "stage": "backward"})]
    return []


def dtypes(executor: str, graph: Graph, outcomes: list[Outcome], eager: list[Outcome],
           reported: Callable[[str], str]) -> list[Finding]:
    """A gradient whose dtype differs from eager's on the same program (as the policy reports dtypes)."""
    for k, (o, e) in enumerate(zip(outcomes, eager)):
        if o.grad_dtypes is None or e.grad_dtypes is None:
            continue
        for name, got, want in zip(graph.wrt, o.grad_dtypes, e.grad_dtypes):
            if got != reported(want):
                return [Finding(Oracle.DTYPE_DIVERGENCE, executor, consumers(graph, name), [f"{want}->{got}"], ErrorClass.GRAD_DTYPE,
                                f"the gradient of {name} is {got} where PyTorch eager's is {reported(want)}",
                                against="torch/eager", input_set=k, output=grad_name(name),
                                details={"grad": name, "expected_dtype": reported(want)})]
    return []


def consumers(graph: Graph, name: str) -> list[str]:
    """The ops whose backward gives an input its gradient (those that read it), in graph order; ["backward"] where
    none does (triage22 b94a8c15e3: a gradient dtype finding named no op and was titled "float16 backward backward")."""
    return list(dict.fromkeys(n.op for n in graph.nodes if name in n.inputs)) or ["backward"]


def judge(outcomes: list[Outcome], refs: list[Reference | None], wrt: list[Input]) -> list[OutputJudgement]:
    """Error statistics of every gradient (output `grad:<name>`, the input's dtype) of every outcome that has them."""
    out = []
    for k, (o, ref) in enumerate(zip(outcomes, refs)):
        if not o.ok or o.grads is None or ref is None:
            continue
        exact, ideals, floors = ref
        for i, (g, inp) in enumerate(zip(o.grads, wrt)):
            stats = error_stats(g, exact[i], [ideal[i] for ideal in ideals], inp.dtype, floor=np.asarray(floors[i]))
            if cancels(exact[i], floors[i], inp.dtype) and not stats.nonfinite_mismatch:
                stats = replace(stats, ratio=0.0)  # zero to the dtype's precision: only inf/nan are judged there
            out.append(OutputJudgement(k, grad_name(inp.name), inp.dtype, stats))
    return out


def cancels(exact: np.ndarray, floor: float, dtype: str) -> bool:
    """True when a gradient cancels to below half an ULP (of `dtype`) of the terms its backward sums (`floor`): it is
    zero to the dtype's precision, and a 16-bit backward that saves its 16-bit output (softmax's, a norm's) returns
    that output's rounding there (triage19 bc010f26db: sum(softmax) judged 2e3x; b1b1b0968a: attention over equal
    keys, whose q gradient is 1.7e-17)."""
    e = np.asarray(exact, dtype=np.float64)
    fin = e[np.isfinite(e)]
    if not fin.size or floor <= 0.0 or dtype not in FLOAT_FORMATS:
        return False
    return float(np.sqrt(np.mean(fin ** 2))) < floor * 2.0 ** -(FLOAT_FORMATS[dtype].mantissa_bits + 1)


def at_range_edge(graph: Graph, values: Values) -> bool:
    """True when a value of the ideal forward pass exceeds FLOAT32_SQUARE_MAX: the square of it overflows float32,
    so every float32 implementation of a norm's, a variance's or a softmax's definition overflows there, and a
    non-finite gradient is the range's edge, not a backend's bug (issue 33; a bfloat16 layer_norm of rows near 1e30
    gave NaN gradients on every executor, eager's included)."""
    from fuzzer.interpret import evaluate

    forward = evaluate(graph, values, rounded=True)
    with np.errstate(invalid="ignore"):
        return any(np.nanmax(np.abs(v), initial=0.0) > FLOAT32_SQUARE_MAX for v in forward.values()
                   if np.asarray(v).dtype.kind == "f")


def past_range(exact: np.ndarray, dtype: str) -> bool:
    """True when the exact gradient passes the dtype's largest finite value somewhere: the backward's shared terms (a
    norm's row sums, which every element of the row reads) pass it too, and inf or NaN beside those elements is the
    range's edge (triage29 31cc3bd553: a float16 layer_norm of rows at 30000, exact gradient of x up to 1.1e5; the
    ideal backward is non-finite in 1001 places, eager in 555, 14 of them where the ideal rounded finite)."""
    fmt = FLOAT_FORMATS.get(dtype)
    e = np.abs(np.asarray(exact, dtype=np.float64))
    return fmt is not None and bool(np.any(e[np.isfinite(e)] > fmt.max_value))


def bound(executor: str, graph: Graph, numeric: Graph, outcomes: list[Outcome], refs: list[Reference | None],
          sets: list[Values], run: Run | None = None, eager: list[Outcome] | None = None,
          notes: list[str] | None = None, forward_found: bool = False, eager_run: Run | None = None) -> list[Finding]:
    """The worst gradient out of bound (ratio >= MARGIN, non-finite, or over on two input sets), located by `run`.

    Not a finding: a gradient that PyTorch eager gets as wrong on the same program (`eager`, for a backend other than
    PyTorch: eager's own finding is the record, as for the forward pass), a non-finite gradient at the range's edge
    (at_range_edge), or beside an exact gradient past its dtype's range (past_range), and, where `run` is given, one that no op's backward explains alone (the error grew from small
    ones), and one whose op is out of bound in its own forward pass where the forward has a finding on this executor
    (`forward_found`: that finding is the record). An op whose backward alone is as far off in eager (`eager_run`)
    is PyTorch's derivative, not the backend's, and is not blamed. What was dropped and why goes to `notes`."""
    wrt = [numeric.input(name) for name in numeric.wrt]
    notes = notes if notes is not None else []
    judged = [j for j in judge(outcomes, refs, wrt)
              if not (j.stats.nonfinite_mismatch and (at_range_edge(numeric, sets[j.input_set]) or past_range(
                  refs[j.input_set][0][numeric.wrt.index(j.output.removeprefix("grad:"))], j.dtype)))]
    if eager is not None and backend_of(executor) != "torch":
        theirs = {(t.input_set, t.output): t.stats for t in judge(eager, refs, wrt)}
        shared = [j for j in judged if (t := theirs.get((j.input_set, j.output))) is not None and (
            (j.stats.nonfinite_mismatch and t.nonfinite_mismatch) or t.ratio * EAGER_PAR >= j.stats.ratio)]
        notes += [f"{executor}: the {j.output.replace('grad:', 'gradient of ')} is as far off as PyTorch eager's on "
                  f"the same program ({j.stats.ratio:.3g}x vs {theirs[(j.input_set, j.output)].ratio:.3g}x): not a "
                  "backend bug" for j in shared if j.stats.ratio > 1.0]
        judged = [j for j in judged if j not in shared]
    bad = violates(judged)
    if not bad:
        return []
    worst = max(bad, key=lambda j: (j.stats.nonfinite_mismatch > 0, j.stats.ratio))
    k, s, dtype = worst.input_set, worst.stats, worst.dtype
    name = worst.output.removeprefix("grad:")
    cls = ErrorClass.GRAD_NONFINITE if s.nonfinite_mismatch else ErrorClass.GRAD_BOUND
    if s.nonfinite_mismatch:
        msg = f"{s.nonfinite_mismatch} non-finite value(s) in the gradient of {name} where the reference is finite"
    else:
        msg = (f"gradient of {name}: max error {s.max_abs:.4g} ({s.max_ulp:.1f} ULP of {dtype}) is {s.ratio:.3g}x "
               f"the allowed error of an ideal 16-bit backward")
    finding = Finding(Oracle.ERROR_BOUND, executor, ["backward"], [dtype], cls, msg, ratio=s.ratio, max_ulp=s.max_ulp,
                      input_set=k, output=worst.output,
                      details={"grad": name, "max_abs": s.max_abs, "worst_index": s.worst_index})
    if run is None:
        return [finding]
    culprit = locate(numeric, sets[k], run, name, nonfinite=bool(s.nonfinite_mismatch),
                     eager=eager_run if backend_of(executor) != "torch" else None)
    if culprit is None:
        notes.append(f"{executor}: {msg}, but no op's backward is out of bound alone (the error grew from small ones)")
        return []
    node, node_stats, operand, forward_wrong, scaled = culprit
    typed = infer(numeric)
    ops, dtypes = node_signature(numeric, typed, node)
    summed = math.prod(typed.values[operand].shape) < math.prod(typed.values[node].shape)  # a broadcast operand: its
    # gradient is a reduce over the broadcast axes (triage27 b2d3b5a110: XLA's bf16 sum of mul's gradient of a
    # scalar, the same 16-bit reduce its forward sum has)
    if forward_wrong and forward_found:
        notes.append(f"{executor}: {msg}; {ops[0]} ({node}) is out of bound in its forward pass alone already: its "
                     "forward finding is the record")
        return []
    alone = ("has non-finite values" if node_stats.nonfinite_mismatch
             else f"is {node_stats.ratio:.3g}x the allowed error")
    said = (f"{ops[0]} backward ({node}): the gradient of its operand {operand} {alone} alone, fed exact operands and "
            f"upstream gradient{' (its forward alone is off too)' if forward_wrong else ''}"
            + (f"; it is the exact gradient times {factor_text(scaled)} per row, as a wrong saved 1/std would make it (the "
               "statistic its forward computes, unseen in an output where x - mean is 0)" if scaled else "")
            + ("; that gradient sums the op's gradient over the axes it is broadcast along (a reduce)" if summed else "")
            + f"; {msg}")
    return [replace(finding, ops=ops, dtypes=dtypes, node=node, message=said,
                    details={**finding.details, "located": True, "operand": operand,
                             **({"broadcast_sum": True} if summed else {}),
                             **({"forward_wrong": True} if forward_wrong else {}),
                             **({"row_scale": list(scaled)} if scaled else {})})]


def factor_text(scaled: tuple[float, float] | list[float]) -> str:
    """A per-row factor range as a reader takes it in: "0.18", "1-0.00046", "0.18 to 0.25"."""
    def one(k: float) -> str:
        return f"1{k - 1:+.2g}" if abs(k - 1) < 0.01 else f"{k:.3g}"
    low, high = scaled
    return one(low) if math.isclose(low, high, rel_tol=1e-3, abs_tol=1e-9) else f"{one(low)} to {one(high)}"


def row_scale(got: np.ndarray, exact: np.ndarray, node: Node) -> tuple[float, float] | None:
    """(least, most) per-row factor k where a norm's gradient of its input is k times the exact one row by row, k
    not 1: the mark of a wrong saved 1/std (triage26 b521ee6a3d: torch_xla's layer_norm of constant rows, whose
    one-pass variance is not 0, gives the exact gradient times 0.18; its forward output, (x - mean) * rstd = 0, is
    right; b5e4011b9a: its float32 one at gamma = 0, times 0.9995). A row's factor must explain 90% of its error.
    None for other ops (no normalized_shape) and other errors."""
    shape = node.attrs.get("normalized_shape")
    if not shape or got.shape != exact.shape or not np.all(np.isfinite(got)):
        return None
    width = math.prod(int(d) for d in shape)
    if width < 2 or got.size % width:
        return None
    factors = []
    for g, e in zip(got.reshape(-1, width), exact.reshape(-1, width), strict=True):
        off = float(np.max(np.abs(g - e)))
        norm = float(np.dot(e, e))
        if norm == 0.0:
            if off > 0.0:
                return None  # off where the exact row is 0: no factor explains it
            continue
        k = float(np.dot(g, e)) / norm
        if off > 0.0 and np.max(np.abs(g - k * e)) > 0.1 * off:
            return None  # a factor explains less than 90% of this row's error
        factors.append(k)
    if not factors or max(abs(k - 1.0) for k in factors) == 0.0:
        return None
    return min(factors), max(factors)


def _forward_off(one: Graph, node: Node, ins: Values, got: Outcome, run: Run, dtype: str) -> bool:
    """True when the op's forward alone is out of bound on the backend: as run (`got`), or, for an op with a weight
    operand, with that weight all ones, which shows the normalized values a zero or tiny weight hides (triage25
    b5e4011b9a: torch_xla's float32 layer_norm variance, invisible in the forward at gamma = 0, blamed on the
    backward through the gradient of gamma)."""
    from fuzzer.interpret import evaluate, ideal_values

    def off(outcome: Outcome, values: Values) -> bool:
        if not outcome.ok or len(outcome.outputs or []) < 2:
            return False
        st = error_stats(outcome.outputs[1], evaluate(one, values, rounded=False)[node.id],
                         ideal_values(one, values)[node.id], dtype)
        return bool(st.nonfinite_mismatch or st.ratio >= MARGIN)

    if off(got, ins):
        return True
    slots = OPS[node.op].operands
    at = slots.index("weight?") if "weight?" in slots else len(node.inputs)
    weight = node.inputs[at] if at < len(node.inputs) else None
    if not isinstance(weight, str) or weight not in ins:
        return False
    ones = {**ins, weight: np.ones_like(np.asarray(ins[weight], dtype=np.float64))}
    return off(run(one, ones), ones)


def single_op_case(graph: Graph, node_id: str) -> Graph:
    """A training graph of one op: its float tensor operands as inputs with gradients, loss = sum(op * upstream);
    the op's own output is the second output (its forward, judged apart)."""
    one = node_graph(graph, node_id)
    out = infer(one).values[node_id]
    inputs = tuple(replace(i, grad=i.kind == "tensor" and is_float(i.dtype)) for i in one.inputs)
    upstream = "__upstream"
    nodes = one.nodes + ((Node("__loss", "mul", (node_id, upstream)),) if out.shape == () else
                         (Node("__weighted", "mul", (node_id, upstream)), Node("__loss", "sum", ("__weighted",))))
    return Graph(inputs + (Input(upstream, out.shape, out.dtype),), nodes, ("__loss", node_id))


def downstream(graph: Graph, name: str) -> set[str]:
    """The nodes that `name`'s value flows into on its way to the outputs (its consumers, transitively)."""
    seen: set[str] = set()
    frontier = {name}
    for node in graph.nodes:
        if any(isinstance(o, str) and o in frontier for o in node.inputs):
            seen.add(node.id)
            frontier.add(node.id)
    return seen


def locate(graph: Graph, values: Values, run: Run, wrt: str, nonfinite: bool = False,
           eager: Run | None = None) -> Culprit | None:
    """The Culprit (node, stats, operand, forward wrong, row scale) of the op whose backward alone is furthest out of bound on `run`, among
    the ops between input `wrt` and the loss; None when none is (the error grew from small ones). For a `nonfinite`
    finding, an op whose backward alone makes non-finite values comes first. `forward wrong`: the op's own forward
    output is already out of bound there (its forward finding is the record, not its backward: triage19 b0f0576cc4,
    XLA's float16 group_norm NaN before any gradient).

    Each op is fed the ideal forward operands (fp64 math rounded per op) and the exact upstream gradient at its
    output rounded to the output's dtype, so an op is judged on its own, not on what another op's backward did
    (nearest-the-loss blamed a broadcast mul for eager's float16 group_norm backward in triage19 b4a8815266)."""
    from fuzzer.gradients import intermediate_grads
    from fuzzer.interpret import evaluate, ideal_values

    typed = infer(graph)
    forward = evaluate(graph, values, rounded=True)
    upstream = intermediate_grads(graph, values)
    path = downstream(graph, wrt)
    over: list[Culprit] = []
    for node in reversed(graph.nodes):
        info = typed.values[node.id]
        if node.id not in path or node.id not in upstream or not is_float(info.dtype) or info.kind == "scalar":
            continue
        one = single_op_case(graph, node.id)
        if not one.wrt:
            continue
        ins = {i.name: (round_to(forward[i.name], i.dtype) if i.kind == "tensor" else np.asarray(forward[i.name]))
               for i in one.inputs if i.name != "__upstream"}
        ins["__upstream"] = round_to(np.broadcast_to(upstream[node.id], info.shape), info.dtype)
        got = run(one, ins)
        if not got.ok or got.grads is None:
            continue
        exact, ideals, floors = reference(one, ins)
        feeds = path | {wrt}  # an operand whose gradient flows on into wrt's: only these can make wrt's gradient wrong
        order = sorted((i for i in range(len(one.wrt)) if one.wrt[i] in feeds),  # (triage29 bd86210ab6: a linear's
                       key=lambda i: one.wrt[i] != wrt)  # bias sum, off alone, blamed for the gradient of hidden)
        theirs = None
        for i in order:
            s = error_stats(got.grads[i], exact[i], [ideal[i] for ideal in ideals], one.input(one.wrt[i]).dtype,
                            floor=np.asarray(floors[i]))
            if (s.nonfinite_mismatch or s.ratio >= MARGIN) and eager is not None:
                theirs = theirs if theirs is not None else eager(one, ins)  # PyTorch's own backward of the op alone
                if theirs.ok and theirs.grads is not None:
                    t = error_stats(theirs.grads[i], exact[i], [ideal[i] for ideal in ideals],
                                    one.input(one.wrt[i]).dtype, floor=np.asarray(floors[i]))
                    if (s.nonfinite_mismatch and t.nonfinite_mismatch) or t.ratio * EAGER_PAR >= s.ratio:
                        continue  # as far off in eager: PyTorch's derivative formula, not this backend's (triage25
                        # bd18a077ac: a bf16 div's float32 divisor gradient, computed in bf16 by PyTorch itself)
            if s.nonfinite_mismatch or s.ratio >= MARGIN:
                scaled = row_scale(got.grads[i], exact[i], node) if one.wrt[i] == node.inputs[0] else None
                over.append(Culprit(node.id, s, one.wrt[i], _forward_off(one, node, ins, got, run, info.dtype), scaled))
                break
    if not over:
        return None
    # an op whose backward alone is off on the very input the finding is about comes before one off on another of
    # its operands (triage27 b0a5795659: XLA's bf16 group_norm sums beta's gradient over N, H, W in bf16; a conv2d
    # after it, off alone on its activation's gradient by more, was blamed)
    return max(over, key=lambda o: ((nonfinite and o.stats.nonfinite_mismatch > 0), o.operand == wrt, o.stats.ratio))
