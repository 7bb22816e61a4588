"""Pinning a finding on the node at fault, given a way to run the backend (pure judging; the checker runs).

Each function takes `run(graph, inputs) -> Outcome`: the finding's executor on one graph and one input set
(the checker counts that work as the oracles'). A probe is the graph with every tensor node as an output.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, FP8, LOW_PRECISION, holds_exactly
from fuzzer.interpret import evaluate, ideal_values
from fuzzer.ir import Graph, IRError, forward_inputs, infer
from fuzzer.ops import OPS, is_cast
from fuzzer.outcome import Outcome

from . import cast_semantics, semantics
from .bounds import error_stats
from .error_bounds import MARGIN, at_fault, node_signature
from .errors import classify_error, message_key
from .findings import Finding
from .nodes import LIFTABLE, judge_nodes, lifted, node_graph, node_stats, rounded_inputs
from .precision import device_narrower
from .subjects import Subject
from .vocabulary import ErrorClass, Kind, Oracle

Values = dict[str, np.ndarray]
Run = Callable[[Graph, Values], Outcome]  # the executor at fault on one graph and one input set
Probe = tuple[dict[str, np.ndarray], dict[str, "str | None"], dict[str, str]]


def probe(s: Subject, inputs: Values, run: Run, k: int = -1) -> Probe | None:
    """The executor's values, device dtypes and reported dtypes of every tensor node of the case graph.

    Where the graph already outputs every tensor node, the outcome of input set `k` is the probe.
    """
    typed = infer(s.graph)
    names = [n.id for n in s.graph.nodes if typed.values[n.id].kind != "scalar"]
    if not names:
        return None
    if 0 <= k < len(s.outcomes) and list(s.graph.outputs) == names:
        outcome = s.outcomes[k]
    else:
        outcome = run(Graph(forward_inputs(s.graph), s.graph.nodes, tuple(names)), inputs)
    if not outcome.ok or outcome.outputs is None:
        return None
    device = dict(zip(names, outcome.info.get("device_dtypes") or [None] * len(names)))
    return dict(zip(names, outcome.outputs)), device, dict(zip(names, outcome.dtypes or []))

LIFTS = (1.0, 2.0, 4.0, 8.0, 16.0)  # multiples of the smallest normal tried, the first whose results are normal


def wrong_when_widened(run: Run, graph: Graph, node: str, values: Values, dtype: str) -> bool:
    """True when the op, run alone on its operands' `values` (the backend's own) with every float operand already in
    the promoted `dtype` (no mixed dtypes left to narrow), still misses its bound: its error is the op's own, not a
    downcast (sample30 #20: torch_xla's group_norm of a float64 activation with bfloat16 parameters computes in
    float64, and its NaN is the one-pass variance)."""
    if dtype not in FLOAT_FORMATS:
        return False
    sub = node_graph(graph, node)
    wide = Graph(tuple(replace(i, dtype=dtype) if i.kind == "tensor" and i.dtype in FLOAT_FORMATS else i
                       for i in sub.inputs), sub.nodes, sub.outputs)
    try:
        infer(wide)
    except IRError:
        return False
    operands = {i.name: values[i.name] for i in wide.inputs if i.name in values}
    if len(operands) != len(wide.inputs):
        return False
    out = run(wide, operands)
    if not out.ok or not out.outputs:
        return False
    exact = np.asarray(evaluate(wide, operands, rounded=False)[node], dtype=np.float64)
    st = node_stats(wide.node(node).op, np.asarray(out.outputs[0], dtype=np.float64), exact,
                    ideal_values(wide, operands)[node], dtype)
    return bool(st.nonfinite_mismatch or st.ratio >= MARGIN)


def fails_above_subnormals(run: Run, v: Any, dtype: str) -> bool:
    """True when the op, run alone with its small operands lifted just above the subnormal range (nodes.lifted: the
    least lift whose exact results are normal too), still misses its bound: flushing cannot explain its error
    (triage14 85007d003d: TVM's float16 tanh returns 0 for 6.1e-5 and 1e-4, normal numbers; triage16 b65c40d3ea:
    PyTorch's oneDNN bfloat16 gelu flushes subnormal inputs and results, and is exact at twice the smallest normal)."""
    if v.alone is None or dtype not in FLOAT_FORMATS:
        return False
    sub, operands = v.alone
    if getattr(OPS.get(sub.node(sub.outputs[0]).op), "family", "") not in LIFTABLE:
        return False  # a product of lifted operands (a weight below 1 times them) can still be subnormal and flushed:
        # no lift tells flushing from the op there (smoke: oneDNN's bf16 conv1d, exact once its products are normal)
    node, tiny = sub.outputs[0], 2.0 ** FLOAT_FORMATS[dtype].min_exponent
    for times in LIFTS:
        up = lifted(sub, operands, times)
        exact = np.asarray(evaluate(sub, up, rounded=False)[node], dtype=np.float64)
        if np.any((exact != 0) & (np.abs(exact) < tiny)):
            continue  # a subnormal result: a flushing backend would still flush it
        out = run(sub, up)
        if not out.ok or not out.outputs:
            return False  # nothing to weigh: flushing stays the reading
        st = node_stats(sub.node(node).op, np.asarray(out.outputs[0], dtype=np.float64), exact,
                        ideal_values(sub, up)[node], dtype)
        return st.ratio > 1.0
    return False


MASKED_ROWS = "masked-rows"  # attention rows whose every key is masked: NaN in softmax arithmetic, 0 in PyTorch


def fully_masked_rows(graph: Graph, node: str, inputs: Values, observed: dict[str, np.ndarray]) -> np.ndarray | None:
    """For an attention node with a mask: which query rows have every key masked (a False bool entry or a -inf
    bias), shaped like the output without its last dim; None for other nodes or where no row is."""
    n = graph.node(node)
    if n.op != "scaled_dot_product_attention" or len(n.inputs) < 4 or not isinstance(n.inputs[3], str):
        return None
    name = n.inputs[3]
    mask = observed[name] if name in observed else rounded_inputs(graph, inputs).get(name)
    if mask is None:
        return None
    mask = np.asarray(mask)
    boolean = mask.dtype == bool or infer(graph).values[name].dtype == "bool"  # observed values come back as numbers
    allowed = (mask != 0) if boolean else np.isfinite(mask) | (mask > 0)
    rows = ~np.any(allowed, axis=-1)
    out_rows = np.shape(observed[node])[:-1]
    try:
        rows = np.broadcast_to(rows, out_rows)
    except ValueError:
        return None
    return rows if rows.any() else None


def _only_in(actual: np.ndarray, rows: np.ndarray) -> bool:
    """True when every non-finite output element lies in one of `rows` (and some does)."""
    bad = ~np.isfinite(np.asarray(actual, dtype=np.float64))
    return bool(bad.any()) and not np.any(bad & ~rows[..., None])


def bound(finding: Finding, s: Subject, inputs: Values, run: Run, notes: list[str]) -> Finding | None:
    """Pin a numeric finding on the first node that is out of bound on its own operands (None: no node is).

    A violation of the whole graph that no node explains on its own (each op within its bound on the
    backend's own operands) is not something a maintainer can act on: it is noted, not reported.
    """
    seen = probe(s, inputs, run, finding.input_set)
    if seen is None:
        return replace(finding, details={**finding.details, "localized": False})
    observed, device, _ = seen
    env = {**rounded_inputs(s.numeric, inputs), **observed}  # every value as the backend has it
    verdicts = judge_nodes(s.numeric, inputs, observed, device, s.approximate)
    node = at_fault([(v.node, v.stats) for v in verdicts], nonfinite=finding.error_class == ErrorClass.NONFINITE,
                    flushed={v.node for v in verdicts if v.underflow})
    if node is None:
        notes.append(f"{s.name}: {finding.message} (no single node is out of bound on its own operands)")
        return None
    v = next(v for v in verdicts if v.node == node)
    typed = s.typed("numeric")
    ops, dtypes = node_signature(s.numeric, typed, node)
    declared = typed.values[node].dtype
    narrow = v.narrow or (v.device if device_narrower(v.device, declared) else None)
    details = {**finding.details, "localized": True, "excess_precision": v.excess, "output_ratio": finding.ratio,
               "max_abs": v.stats.max_abs, "worst_index": v.stats.worst_index}
    brk = s.typed().chain_breaks().get(node) if node not in s.bridged and not v.underflow else None
    if brk is not None and narrow is None and wrong_when_widened(run, s.numeric, node, env, declared):
        brk = None  # as wrong with no mixed dtypes: the op's own error, judged as such below
    # (an error that flushing subnormals to zero explains is that, not a narrowed operand: triage23's conv3d of 1e-40)
    if brk is not None:  # mixed operand dtypes PyTorch rejects, numbers out of bound: ARCHITECTURE.md's silent downcast (a
        # correct promotion would be within bound), said as such, not as an accuracy claim (triage14 bf46a13882:
        # "2.3e3x the allowed error" read as a float32 result PyTorch defines); the distance from the promotion is
        # its evidence
        computed = narrow or declared
        return Finding(Oracle.SILENT_DOWNCAST, s.name, [ops[0]], [brk.activation_dtype, brk.param_dtype, computed],
                       ErrorClass.DOWNCAST, semantics.downcast_message(s.name, node, ops[0], brk, computed,
                                                              off=None if narrow else v.stats.ratio),
                       against=semantics.EAGER, input_set=finding.input_set, node=node,
                       details={**details, "chain_break": True})
    if v.shape is not None:
        return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class="shape",
                       message=f"{node} ({ops[0]}, {dtypes[0]}) returns shape {list(v.shape)} where PyTorch's is "
                               f"{list(typed.values[node].shape)}", ratio=None, max_ulp=None, details=details)
    if narrow is not None:
        evidence = f"the device holds {v.device}" if v.device == narrow else f"every value of {node} is a {narrow} number"
        return Finding(Oracle.EFFECTIVE_PRECISION, s.name, ops, [declared, narrow], f"{declared}-carries-{narrow}",
                       f"{node} ({ops[0]}) declares {declared} but computes in {narrow}: {evidence} "
                       f"({v.stats.ratio:.3g}x the {declared} bound)", ratio=v.stats.ratio,
                       max_ulp=v.stats.max_ulp, input_set=finding.input_set, node=node,
                       details={**details, "evidence": evidence})
    st = v.stats
    fused = fused_producer(s, node, inputs, observed, run) if not v.underflow and not v.excess else None
    if fused is not None:  # the node alone is right: its producer's lowering, fused into it, is not
        producer, pair = fused
        p_ops, p_dtypes = node_signature(s.numeric, typed, producer)
        cls = ErrorClass.NONFINITE if pair.nonfinite_mismatch else ErrorClass.BOUND
        what = (f"{pair.nonfinite_mismatch} non-finite value(s) where the reference is finite" if pair.nonfinite_mismatch
                else f"max error {pair.max_abs:.4g} ({pair.max_ulp:.1f} ULP) is {pair.ratio:.3g}x the allowed error")
        msg = (f"{producer} ({p_ops[0]}, {p_dtypes[0]}) computed with {node} ({ops[0]}) after it: {what} at {node}, "
               f"fed {producer}'s own operands, while {node} alone on the same values is within its bound (the "
               f"backend's {p_ops[0]} fused into the {ops[0]} is wrong; each alone is right)")
        return replace(finding, ops=p_ops, dtypes=p_dtypes, node=producer, error_class=cls, message=msg,
                       ratio=pair.ratio, max_ulp=pair.max_ulp,
                       details={**details, "fused_into": node, "consumer_op": ops[0]})
    broke = cast_semantics.cast_range(s.numeric, node, inputs, observed) if st.nonfinite_mismatch else None
    if broke is not None:  # PyTorch's cast gives NaN/inf past the fp8 range: a dtype-semantics finding
        return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=cast_semantics.CLASS,
                       message=f"{node} ({ops[0]}, {dtypes[0]}) {broke.how} past the {declared} range: "
                               f"{broke.count} value(s) finite where PyTorch's cast gives {broke.pytorch} (e.g. "
                               f"{broke.example[0]:.6g} -> {broke.example[1]:.6g})",
                       ratio=st.ratio, max_ulp=st.max_ulp,
                       details={**details, "cast_range": broke.how, "pytorch_gives": broke.pytorch})
    flushes = v.underflow and not fails_above_subnormals(run, v, declared)
    cls = ErrorClass.UNDERFLOW if flushes else (ErrorClass.NONFINITE if st.nonfinite_mismatch else ErrorClass.BOUND)
    if v.underflow and not flushes:
        details = {**details, "fails_above_subnormals": True}  # flushing would explain it, but the op fails without
    if cls == ErrorClass.UNDERFLOW:  # flushing subnormals is a documented choice of many backends: a coverage note
        return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=cls, kind=Kind.UNSUPPORTED,
                       message=f"{node} ({ops[0]}, {dtypes[0]}): {st.ratio:.3g}x the allowed error where an operand "
                               f"or the result is subnormal (below the smallest normal {declared})",
                       ratio=st.ratio, max_ulp=st.max_ulp, details=details)
    masked = fully_masked_rows(s.numeric, node, inputs, observed) if st.nonfinite_mismatch else None
    if masked is not None and _only_in(observed[node], masked):  # PyTorch's convention, not arithmetic: its own record
        return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=MASKED_ROWS, ratio=st.ratio,
                       max_ulp=st.max_ulp, details={**details, "masked_rows": int(np.count_nonzero(masked))},
                       message=f"{node} ({ops[0]}, {dtypes[0]}): {int(np.count_nonzero(masked))} fully masked row(s) "
                               "give NaN where PyTorch's attention returns 0 (its safe softmax, since 2.5)")
    decode = fp8_decode(s.numeric, typed, node, env, run)
    if decode is not None:  # the op's float8 operand is read wrong before any arithmetic (triage27 b1e2721d62: TVM's
        # float8 -> float32 conversion turns 0 into 0.0078125; scaled_mm, which lowers to it, was named)
        operand, fmt, got, want = decode
        return replace(finding, ops=["astype"], dtypes=[f"{fmt}->float32"], node=node, error_class=cls,
                       ratio=st.ratio, max_ulp=st.max_ulp, details={**details, "decoded": operand, "consumer_op": ops[0]},
                       message=f"{node} ({ops[0]}) reads its {fmt} operand {operand} wrong: the backend's {fmt} -> "
                               f"float32 conversion alone gives {got:.6g} for {want:.6g} ({ops[0]} is "
                               f"{st.ratio:.3g}x the allowed error)")
    widened = widened_from(s.numeric, typed, node)
    if widened is not None and not cast_alone_wrong(s.numeric, typed, node, observed.get(widened), run):  # an exact widening cast is never at fault: what it widens is (triage27 b0239f15cc: the
        # float32 cast after XLA's autocast attention, whose bf16 logits were the error, was named)
        w_ops, w_dtypes = node_signature(s.numeric, typed, widened)
        st = error_stats(observed[node], evaluate(s.numeric, inputs, rounded=False)[widened],
                         ideal_values(s.numeric, inputs)[widened], typed.values[widened].dtype)  # in its own dtype
        if not (st.nonfinite_mismatch or st.ratio >= 1.0):
            notes.append(f"{s.name}: {finding.message} ({widened}, seen at its exact widening cast {node}, is within "
                         f"its {typed.values[widened].dtype} bound)")
            return None
        cls = ErrorClass.NONFINITE if st.nonfinite_mismatch else ErrorClass.BOUND
        what = (f"{st.nonfinite_mismatch} non-finite value(s) where the reference is finite" if st.nonfinite_mismatch
                else f"max error {st.max_abs:.4g} ({st.max_ulp:.1f} ULP) is {st.ratio:.3g}x the allowed error")
        return replace(finding, ops=w_ops, dtypes=w_dtypes, node=widened, error_class=cls, ratio=st.ratio,
                       max_ulp=st.max_ulp, details={**details, "seen_at": node},
                       message=f"{widened} ({w_ops[0]}, {w_dtypes[0]}), seen at its exact widening cast {node} "
                               f"({dtypes[0]}): {what}, as the backend computes them together")
    if st.nonfinite_mismatch:
        msg = (f"{node} ({ops[0]}, {dtypes[0]}): {st.nonfinite_mismatch} non-finite value(s) where the reference "
               f"is finite (or the reverse), on its own operands")
    else:
        own = ("fused with its float16/bfloat16 producers, which the backend kept in float32 (excess precision)"
               if v.excess else "on its own operands")
        msg = (f"{node} ({ops[0]}, {dtypes[0]}): max error {st.max_abs:.4g} ({st.max_ulp:.1f} ULP) is "
               f"{st.ratio:.3g}x the allowed error, {own}")
        dropped = update_dropped(s.numeric, node, env)
        if dropped is not None:  # an optimizer step that leaves parameters where they were: say so, not a ratio
            msg += f"; it leaves {dropped:.0%} of the parameters its exact step moves unchanged (the update is lost)"
            details = {**details, "update_dropped": dropped}
    if "relax-one-formula" in OPS[ops[0]].tags and declared in LOW_PRECISION:  # one formula in every dtype (tanh,
        # the causal mask) or this dtype's own rounding (sample30 b1ca6657d9: fp16 scores and softmax inside TVM's
        # attention, merged with its dtype-independent causal mask as "(any dtype)"): the op alone in float32 says
        details = {**details, "wrong_in_float32": wrong_when_widened(run, s.numeric, node, env, "float32")}
    return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=cls, message=msg, ratio=st.ratio,
                   max_ulp=st.max_ulp, details=details)


def update_dropped(graph: Graph, node: str, env: Values) -> float | None:
    """For an optimizer step (op family optim), the share of the parameters its exact step moves that the backend
    left exactly as they were, where that is most of them (None otherwise; triage30 b04c1a9e27: TVM's bf16 Adam,
    whose bias correction rounds to 0, and b0bb55f730: PyTorch's fused SGD storing no whole 16-element block, were
    titled "27.4x" and "5.95x less accurate")."""
    op = graph.node(node)
    if getattr(OPS.get(op.op), "family", "") != "optim" or not isinstance(op.inputs[0], str) or node not in env:
        return None
    sub = node_graph(graph, node)
    if any(i.name not in env for i in sub.inputs):
        return None
    param = np.asarray(env[op.inputs[0]], dtype=np.float64)
    got = np.asarray(env[node], dtype=np.float64)
    with np.errstate(all="ignore"):
        exact = np.asarray(evaluate(sub, {i.name: env[i.name] for i in sub.inputs}, rounded=True)[node], np.float64)
    if got.shape != param.shape or exact.shape != param.shape:
        return None
    moving = np.isfinite(exact) & (exact != param)
    if not moving.any():
        return None
    share = float(np.mean(got[moving] == param[moving]))
    return share if share >= 0.5 else None

def fp8_decode(graph: Graph, typed: Any, node: str, env: Values, run: Run) -> tuple[str, str, float, float] | None:
    """(operand, format, what the backend gives, the value) for the first float8 operand of `node` whose conversion
    to float32 alone, on the backend, is not exact (every float8 value is a float32 value); None where all are."""
    from fuzzer.ir import Input, Node

    n = graph.node(node)
    if is_cast(n.op):
        return None  # a cast is judged as itself (cast_semantics)
    for operand in dict.fromkeys(o for o in n.inputs if isinstance(o, str)):
        fmt = typed.values[operand].dtype
        if fmt not in FP8 or operand not in env or typed.values[operand].kind == "scalar":
            continue
        probe_graph = Graph((Input("x", typed.values[operand].shape, fmt),),
                            (Node("x32", "astype", ("x",), {"dtype": "float32"}),), ("x32",))
        value = np.asarray(env[operand], dtype=np.float64)
        out = run(probe_graph, {"x": value})
        if not out.ok or not out.outputs:
            continue
        got = np.asarray(out.outputs[0], dtype=np.float64).reshape(value.shape)
        wrong = ~((got == value) | (np.isnan(got) & np.isnan(value)))
        if wrong.any():
            k = int(np.flatnonzero(wrong.ravel())[0])
            return operand, fmt, float(got.ravel()[k]), float(value.ravel()[k])
    return None


def cast_alone_wrong(graph: Graph, typed: Any, node: str, operand: np.ndarray | None, run: Run) -> bool:
    """True when the cast `node`, run alone on the backend on `operand` (its operand as the probe saw it), does not
    return it exactly (issue 33: TVM's float8 -> float32 cast turns 0 into 0.0078125); False where it does or did
    not run."""
    from fuzzer.ir import Input, Node

    if operand is None:
        return False
    n = graph.node(node)
    src = typed.values[n.inputs[0]]
    value = np.asarray(operand, dtype=np.float64)
    out = run(Graph((Input("x", src.shape, src.dtype),), (Node("y", "astype", ("x",), {"dtype": typed.values[node].dtype}),),
                    ("y",)), {"x": value})
    if not out.ok or not out.outputs:
        return False
    got = np.asarray(out.outputs[0], dtype=np.float64).reshape(value.shape)
    return bool(np.any(~((got == value) | (np.isnan(got) & np.isnan(value)))))


def widened_from(graph: Graph, typed: Any, node: str) -> str | None:
    """The node a cast `node` widens exactly (every value of its operand's format is one of its own), else None."""
    n = graph.node(node)
    if not is_cast(n.op) or not n.inputs or not isinstance(n.inputs[0], str):
        return None
    src = n.inputs[0]
    if src not in {m.id for m in graph.nodes}:
        return None
    return src if holds_exactly(typed.values[src].dtype, typed.values[node].dtype) else None


def chain_graph(graph: Graph, ids: list[str]) -> Graph:
    """The nodes `ids` (in graph order) computing the last of them, every other operand an input of its own."""
    from fuzzer.ir import Input

    typed = infer(graph)
    made = set(ids)
    nodes = tuple(n for n in graph.nodes if n.id in made)
    inputs = []
    for operand in dict.fromkeys(o for n in nodes for o in n.inputs if isinstance(o, str) and o not in made):
        info = typed.values[operand]
        inputs.append(Input(operand, info.shape if info.kind != "scalar" else (), info.dtype,
                            kind="scalar" if info.kind == "scalar" else "tensor"))
    return Graph(tuple(inputs), nodes, (ids[-1],))


def _judged(sub: Graph, values: Values, run: Run) -> Any:
    """The last node of `sub` run on the backend and judged against its exact answer (None: it did not run)."""
    out = run(sub, values)
    if not out.ok or not out.outputs:
        return None
    name = sub.outputs[0]
    dtype = infer(sub).values[name].dtype
    if dtype not in FLOAT_FORMATS:
        return None
    exact = evaluate(sub, values, rounded=False)[name]
    return node_stats(sub.node(name).op, np.asarray(out.outputs[0], dtype=np.float64), exact,
                      ideal_values(sub, values)[name], dtype)


def fused_producer(s: Subject, node: str, inputs: Values, observed: dict[str, np.ndarray],
                   run: Run) -> tuple[str, Any] | None:
    """The producer to blame when `node` is out of bound only as the backend computes it with its producer.

    A backend may fuse an op into its consumer and compute it there otherwise than when its value is an output
    (torch_xla: a layer_norm whose statistics feed a following sum or mean in one fusion), so the probe sees the
    producer right and the consumer wrong (issue 33, triage21: six records named sum, mean or neg for a norm's
    fault). Where `node` alone, on the very operands the probe saw, is within its bound on the backend, each float
    producer of it is run with it (fed the producer's own operands, only `node` an output): the first for which
    `node` is out of bound is named, with that pair's stats. None: the node alone is out of bound (its own fault),
    or no pair shows it."""
    graph = s.numeric
    typed = infer(graph)
    env = {**rounded_inputs(graph, inputs), **{k: np.asarray(v, dtype=np.float64) for k, v in observed.items()}}
    alone = chain_graph(graph, [node])
    if any(i.name not in env for i in alone.inputs):
        return None
    st = _judged(alone, {i.name: env[i.name] for i in alone.inputs}, run)
    if st is None or st.ratio > 1.0:
        return None
    producers = {n.id for n in graph.nodes}
    for operand in dict.fromkeys(o for o in graph.node(node).inputs if isinstance(o, str)):
        if operand not in producers or typed.values[operand].kind == "scalar" or \
                typed.values[operand].dtype not in FLOAT_FORMATS:
            continue
        pair = chain_graph(graph, [operand, node])
        if any(i.name not in env for i in pair.inputs):
            continue
        st = _judged(pair, {i.name: env[i.name] for i in pair.inputs}, run)
        if st is not None and st.ratio > 1.0:
            return operand, st
    return None


def status(finding: Finding, s: Subject, inputs: Values, run: Run) -> Finding:
    """Name the first node whose prefix of the graph raises the same error (bisection over prefixes, each with
    every tensor node as an output, so a longer prefix keeps whatever a shorter one raised on)."""
    typed = infer(s.graph)
    nodes = list(s.graph.nodes)
    wanted = (finding.error_class, finding.details.get("error_key"))

    def raises(k: int) -> bool:
        outs = tuple(n.id for n in nodes[:k + 1] if typed.values[n.id].kind != "scalar")
        if not outs:
            return False
        o = run(Graph(forward_inputs(s.graph), tuple(nodes[:k + 1]), outs), inputs)
        return o.status in ("error", "unsupported") and (classify_error(o), message_key(o.message)) == wanted

    if not nodes or not raises(len(nodes) - 1):
        return finding  # the error needs the graph as it is (its outputs, a fusion): the whole graph stays
    lo, hi = 0, len(nodes) - 1  # hi raises
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if raises(mid) else (mid + 1, hi)
    departed = departure(s, typed, nodes[:hi], inputs, run)
    then = f"{nodes[hi].id} ({nodes[hi].op}) then raises: {finding.message}"
    if departed is not None and departed[0] == "shape":  # a consequence: an earlier node has another shape
        _, name, got = departed
        return shape_finding(finding, s, typed, name, got, then, whole_graph=False, raised_at=nodes[hi].id)
    if departed is not None:  # ... or returns another dtype than PyTorch's, which the raising node then meets
        _, name, got = departed
        op, want = s.graph.node(name).op, s.reported(typed.values[name].dtype)
        return replace(finding, oracle=Oracle.DTYPE_DIVERGENCE, error_class="dtype", ops=[op], node=name,
                       dtypes=[want, str(got)], against="eager",
                       message=f"{name} ({op}): {s.name} returns {got} where PyTorch returns {want}; {then}",
                       details={**finding.details, "localized": True, "whole_graph": False, "raised_at": nodes[hi].id})
    bare = bare_departure(s, nodes[:hi], nodes[hi], inputs, run)
    if bare is not None:  # the op's core result already has another dtype: its optional operand then meets it
        node, (slots, got, want) = nodes[hi], bare
        return replace(finding, oracle=Oracle.DTYPE_DIVERGENCE, error_class="dtype", ops=[node.op], node=node.id,
                       dtypes=[want, got], against="eager",
                       message=f"{node.id} ({node.op}): without its {', '.join(slots)} {s.name} returns {got} where "
                               f"PyTorch returns {want}; with it, it raises: {finding.message}",
                       details={**finding.details, "localized": True, "whole_graph": False, "raised_at": node.id})
    node = nodes[hi]
    return replace(finding, ops=[node.op], node=node.id,
                   dtypes=sorted({typed.values[o].dtype for o in node.inputs if isinstance(o, str)}
                                 | {typed.values[node.id].dtype}),
                   message=f"{node.id} ({node.op}): {finding.message}",
                   details={**finding.details, "localized": True, "whole_graph": False})

def shape_finding(finding: Finding, s: Subject, typed: Any, name: str, got: tuple[int, ...], then: str,
                  **details: Any) -> Finding:
    """`finding` as the consequence of node `name` returning shape `got` where PyTorch's is the declared one (`then`:
    what followed)."""
    op = s.graph.node(name).op
    return replace(finding, oracle=Oracle.ERROR_BOUND, ops=[op], node=name, error_class="shape",
                   dtypes=node_signature(s.graph, typed, name)[1], ratio=None, max_ulp=None,
                   message=f"{name} ({op}, {typed.values[name].dtype}) returns shape {list(got)} where PyTorch's is "
                           f"{list(typed.values[name].shape)}; {then}",
                   details={**finding.details, "localized": True, **details})


def bare_departure(s: Subject, prefix: list[Any], node: Any, inputs: Values,
                   run: Run) -> tuple[list[str], str, str] | None:
    """(optional slots dropped, dtype returned, PyTorch's) where `node` without its optional operands (a bias, an
    affine weight) runs on the backend and returns another dtype than PyTorch's: the error it raises with them is
    that dtype meeting them (tvm/frontend's float32 out_dtype of a 16-bit linear, then its 16-bit bias). One probe."""
    if not s.dtype_contract:
        return None
    slots = OPS[node.op].operands
    dropped = [k for k, slot in enumerate(slots) if slot.endswith("?") and k < len(node.inputs) and node.inputs[k] is not None]
    if not dropped:
        return None
    bare = replace(node, inputs=tuple(None if k in dropped else o for k, o in enumerate(node.inputs)))
    graph = Graph(forward_inputs(s.graph), (*prefix, bare), (node.id,))
    try:
        want = s.reported(infer(graph).values[node.id].dtype)
    except IRError:
        return None
    o = run(graph, inputs)
    if not o.ok or not o.dtypes or o.dtypes[0] == want:
        return None
    return [slots[k].rstrip("?") for k in dropped], str(o.dtypes[0]), want


def departure(s: Subject, typed: Any, prefix: list[Any], inputs: Values, run: Run) -> tuple[str, str, Any] | None:
    """The first node of `prefix` whose result on the backend has another shape than PyTorch's, else the first that
    reports another dtype (where the executor's dtypes are judged): ("shape" or "dtype", node, what it returned)."""
    outs = tuple(n.id for n in prefix if typed.values[n.id].kind != "scalar")
    if not outs:
        return None
    o = run(Graph(forward_inputs(s.graph), tuple(prefix), outs), inputs)
    if not o.ok or o.outputs is None:
        return None
    for name, value in zip(outs, o.outputs):
        got = tuple(np.shape(value))
        if got != tuple(typed.values[name].shape):
            return "shape", name, got
    if s.dtype_contract:
        for name, got in zip(outs, o.dtypes or []):
            if got != s.reported(typed.values[name].dtype):
                return "dtype", name, got
    return None


def downcast(finding: Finding, s: Subject, inputs: Values, run: Run) -> Finding:
    """Name the first mixed-dtype node whose own result is narrower than the promotion (one probe)."""
    seen = probe(s, inputs, run, finding.input_set)
    if seen is None:
        return finding
    _, _, reported = seen
    numeric = s.typed("numeric")
    for node_id, brk in s.typed().chain_breaks().items():
        got = reported.get(node_id)
        want = s.reported(numeric.values[node_id].dtype)
        if node_id in s.bridged or got is None or not semantics.narrower(got, want):
            continue
        op = s.graph.node(node_id).op
        return replace(finding, ops=[op], dtypes=[brk.activation_dtype, brk.param_dtype, got], node=node_id,
                       message=semantics.downcast_message(s.name, node_id, op, brk, got),
                       details={**finding.details, "localized": True})
    return finding

def dtype(finding: Finding, s: Subject, inputs: Values, run: Run, eager: Run | None) -> Finding:
    """Name the first node whose reported dtype differs from what eager reports for it (one probe each)."""
    seen = probe(s, inputs, run, finding.input_set)
    if seen is None or eager is None:
        return finding
    _, _, reported = seen
    names = tuple(reported)
    e = eager(Graph(forward_inputs(s.policy), s.policy.nodes, names), rounded_inputs(s.policy, inputs))
    if not e.ok:
        return finding
    values, typed = seen[0], infer(s.graph)
    for name, want in zip(names, e.dtypes or []):
        got = reported[name]
        shape = tuple(np.shape(values[name]))
        if shape != tuple(typed.values[name].shape):  # a node of another shape first: what follows is its doing
            return shape_finding(finding, s, typed, name, shape, f"then {finding.message}")
        if s.reported(want) != got:
            op = s.graph.node(name).op
            return replace(finding, ops=[op], dtypes=[s.reported(want), got], node=name,
                           message=f"{name} ({op}): {s.name} returns {got} where PyTorch eager on the CPU returns "
                                   f"{s.reported(want)} ({semantics.program_words(s.label)})",
                           details={**finding.details, "localized": True})
    return finding


EAGER_PAR = 2.0  # a backend within this factor of PyTorch eager's own error at the node is as accurate as PyTorch


# error classes a backend may share with eager at a node, and then eager's finding is the record: out of bound,
# non-finite, and subnormals flushed (triage26 sample #10: XLA's bf16 conv1d flushing subnormal inputs exactly as
# eager's oneDNN kernel does was filed as XLA's coverage gap)
SHARED_WITH_EAGER = (ErrorClass.BOUND, ErrorClass.NONFINITE, ErrorClass.UNDERFLOW)


def as_inaccurate_as_eager(findings: list[Finding], keys: dict[str, str], semantic: str | None,
                           notes: list[str], shadow: dict[str, list[Finding]] | None = None) -> list[Finding]:
    """Drop the accuracy findings of a backend that runs the policy eager runs and is (within EAGER_PAR) as far off
    at the same node as PyTorch eager itself: PyTorch's own finding is the record (triage8 b81f59e425: TVM's bf16
    batch_norm after DecomposeOpsForTraining was exactly as wrong as PyTorch's CPU bf16 batch_norm).

    `shadow`: policy key -> eager's own findings on that program where eager is not under test (a TVM-only
    campaign: triage13's float32 group_norm of 1e31, NaN in PyTorch too, was filed against TVM twice).
    """
    by_key: dict[str, dict[tuple[str, str, int], Finding]] = {}
    if semantic is not None and semantic in keys:
        by_key[keys[semantic]] = {(g.node, g.error_class, g.input_set): g for g in findings
                                  if g.executor == semantic and g.oracle == Oracle.ERROR_BOUND and g.node}
    for key, found in (shadow or {}).items():
        by_key.setdefault(key, {(g.node, g.error_class, g.input_set): g for g in found
                                if g.oracle == Oracle.ERROR_BOUND and g.node})
    if not by_key:
        return findings
    out = []
    for f in findings:
        g = by_key.get(keys.get(f.executor, ""), {}).get((f.node, f.error_class, f.input_set))
        if g is not None and g.executor not in keys and f.backend == g.backend:
            g = None  # eager is not under test and this is PyTorch itself (torch/autocast): its finding is the record
        if (g is not None and f.executor != semantic and f.oracle == Oracle.ERROR_BOUND
                and f.error_class in SHARED_WITH_EAGER
                and (f.error_class == ErrorClass.NONFINITE or (f.ratio is not None and g.ratio is not None
                                                      and f.ratio <= EAGER_PAR * g.ratio))):
            stands = ("PyTorch's finding stands for both" if g.executor in keys and keys[g.executor] == keys[f.executor]
                      else "not a backend bug (eager is not under test on this program)")
            notes.append(f"{f.executor}: {f.node} is as far off as PyTorch eager's own ({f.ratio or 0:.3g}x vs "
                         f"{g.ratio or 0:.3g}x the bound): {stands}")
            continue
        out.append(f)
    return out
