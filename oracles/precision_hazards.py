"""Precision hazards: a precision policy that loses the model's own precision, on every backend and in eager too.

A timestep embedding or a RoPE table computed in bfloat16 (t * freq at t = 999, positions in the thousands)
returns garbage from any implementation: the 16-bit rounding the policy asks for destroys the value, not the
backend. The yardstick is the ideal implementation of the policy's dtypes (exact math, each result rounded
once to its declared dtype: every op within its own bound by construction) against the exact answer of the
model as declared in float32. Past PRECISION_LOSS (relative RMS error of an output), the policy is a model
hazard of error class `precision`; the value it names is the one whose 16-bit rounding costs most, found by
recomputing the ideal with that value and the 16-bit values it is made from in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.dtypes import FLOAT32_TINY, LOW_PRECISION
from fuzzer.interpret import evaluate
from fuzzer.ir import Graph, Node, infer, op_attrs
from fuzzer.ops import OPS, is_cast, tagged
from fuzzer.policy import Policy

from .evidence import policy_evidence
from .findings import Finding
from .vocabulary import ErrorClass, Kind, Oracle

Values = dict[str, np.ndarray]
PRECISION_LOSS = 2.0**-4  # an output whose relative RMS error passes this has lost more than 4 of bfloat16's 8 bits
FIX_GAIN = 2.0  # the named value must at least halve the loss when kept in float32 (else no single value is at fault)
MOVES = ("layout", "index")  # op families that move values without rounding them again
MAX_CANDIDATES = 48  # values tried, the latest first (the loss is usually made just before the outputs)


@dataclass(frozen=True)
class PrecisionLoss:
    """What the policy loses, where, and what keeping one value in float32 gives back."""

    loss: float  # worst relative RMS error of an output: the policy's ideal against the float32 model's exact answer
    output: str
    culprit: str  # the node or input whose 16-bit rounding costs most
    culprit_is_input: bool
    dtype: str  # the culprit's 16-bit dtype
    with_fix: float  # the loss with the culprit alone kept in float32
    start: str = ""  # where the culprit's rounding was made: past layout ops (a cat moves rounded values)
    origin: str = ""  # an earlier value of the culprit's cone whose rounding alone loses the output (the loss starts)
    origin_loss: float = 0.0  # the loss with only `origin` rounded


def relative_rms(value: np.ndarray, exact: np.ndarray, floor: float = 0.0) -> float:
    """sqrt(mean((value - exact)^2)) / max(sqrt(mean(exact^2)), floor) over the elements where the exact answer is
    finite."""
    v = np.asarray(value, dtype=np.float64).ravel()
    e = np.asarray(exact, dtype=np.float64).ravel()
    keep = np.isfinite(e)
    if not keep.any():
        return 0.0
    scale = max(_scale(e), floor)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(v[keep] - e[keep])
    if not np.all(np.isfinite(err)):
        return float("inf")
    rms = float(np.sqrt(np.mean(err**2)))
    return rms / scale if scale > 0 else (0.0 if rms == 0 else float("inf"))


def _scale(exact: np.ndarray) -> float:
    """The RMS magnitude of the finite elements of `exact` (0 where none is)."""
    e = np.asarray(exact, dtype=np.float64).ravel()
    e = e[np.isfinite(e)]
    return float(np.sqrt(np.mean(e**2))) if e.size else 0.0


def _loss(ideal: Values, exact: Values, outputs: tuple[str, ...], floors: dict[str, float] | None = None
          ) -> tuple[float, str]:
    floors = floors or {}
    return max((relative_rms(ideal[o], exact[o], floors.get(o, 0.0)), o) for o in outputs)


def terms_scale(graph: Graph, output: str, exact: Values) -> float:
    """The RMS magnitude of the terms an output sums (0: its op does not sum terms): a sum or mean of |operand|, a
    contraction of |a| and |b|. The 16-bit roundings a sum's terms carry are judged at the terms' size, not at what
    is left where they cancel (triage26 sample #8: the harness's scalar loss sum(attn * upstream), its terms
    cancelling 4000-fold, lost 0.2 of its value to attn's bf16 rounding, and was filed as a precision hazard)."""
    node = next((n for n in graph.nodes if n.id == output), None)
    if node is None or node.op not in tagged(OPS, "linear-reduction") | tagged(OPS, "contraction"):
        return 0.0
    args = [np.abs(np.asarray(exact[o], dtype=np.float64)) if isinstance(o, str) else o for o in node.inputs]
    if any(isinstance(a, np.ndarray) and not np.all(np.isfinite(a)) for a in args):
        return 0.0
    with np.errstate(all="ignore"):
        terms = np.asarray(OPS[node.op].reference(*args, **op_attrs(node)), dtype=np.float64)
    return _scale(terms)


def _cone(graph: Graph, value: str, low: set[str]) -> set[str]:
    """`value` and every 16-bit value it is computed from."""
    producers = {n.id: n for n in graph.nodes}
    out, todo = set(), [value]
    while todo:
        v = todo.pop()
        if v in out or v not in low:
            continue
        out.add(v)
        if v in producers:
            todo += [o for o in producers[v].inputs if isinstance(o, str)]
    return out


def judge(policy: Graph, model32: Graph, policy_inputs: Values, model_inputs: Values) -> PrecisionLoss | None:
    """The precision the policy graph loses against the float32 model (None: within PRECISION_LOSS, or no value
    whose float32 computation gives at least half of it back).

    The value named is the first (in graph order) whose computation in float32, with the 16-bit values it is made
    from, brings the loss under PRECISION_LOSS; where none does, the one giving back most. `policy_inputs` are
    rounded as the policy declares its inputs, `model_inputs` as the float32 model does; both graphs name their
    values alike.
    """
    typed = infer(policy)
    with np.errstate(all="ignore"):
        exact = evaluate(model32, model_inputs, rounded=False)
        floors = {o: terms_scale(model32, o, exact) for o in policy.outputs}
        loss, output = _loss(evaluate(policy, policy_inputs, rounded=True), exact, policy.outputs, floors)
    if not loss > PRECISION_LOSS or not np.isfinite(loss):  # inf: the policy overflows a range, a precision it is not
        return None
    if _scale(exact[output]) < FLOAT32_TINY:  # the model's own answer is subnormal in float32: no format keeps
        return None  # relative precision there, and backends flush it (triage16 b0f7dbdfbf: a bf16 silu of 4e-39)
    with np.errstate(all="ignore"):
        in_float32 = relative_rms(evaluate(model32, model_inputs, rounded=True, arithmetic="float32")[output],
                                  exact[output])
    if not in_float32 <= PRECISION_LOSS:  # an output float32 loses too (an exact zero made of cancelling terms):
        return None  # keeping values in float32 does not give it back, the precision is not the policy's to lose
    inputs = {i.name for i in policy.inputs if i.kind == "tensor" and i.dtype in LOW_PRECISION}
    nodes = [n.id for n in policy.nodes if typed.values[n.id].dtype in LOW_PRECISION and typed.values[n.id].kind != "scalar"]
    low = inputs | set(nodes)
    best: tuple[float, str] | None = None
    for value in ([i.name for i in policy.inputs if i.name in inputs] + nodes)[:MAX_CANDIDATES]:
        cone = _cone(policy, value, low)
        fed = {**policy_inputs, **{v: model_inputs[v] for v in cone & inputs}}
        with np.errstate(all="ignore"):
            fixed, _ = _loss(evaluate(policy, fed, rounded=True, widen=frozenset(cone - inputs)), exact, policy.outputs,
                             floors)
        if best is None or fixed < best[0]:
            best = (fixed, value)
        if fixed <= PRECISION_LOSS:
            break
    if best is None or not best[0] * FIX_GAIN <= loss:
        return None
    fixed, culprit = best
    cone = _cone(policy, culprit, low)
    origin, alone = _origin(policy, policy_inputs, model_inputs, exact, inputs, low,
                            [v for v in [i.name for i in policy.inputs if i.name in inputs] + nodes
                             if v in cone and v != culprit], floors)
    return PrecisionLoss(loss, output, culprit, culprit in inputs, typed.values[culprit].dtype, fixed,
                         rounded_at(policy, culprit, low), origin, alone)


def _origin(policy: Graph, policy_inputs: Values, model_inputs: Values, exact: Values, inputs: set[str], low: set[str],
            upstream: list[str], floors: dict[str, float]) -> tuple[str, float]:
    """The first of `upstream` (graph order) whose 16-bit rounding alone, every other value kept in float32, loses
    more than PRECISION_LOSS: where the loss starts when the culprit only carries it further (triage17 a964cfb769:
    a float16 x of -500 +- 0.1 loses 0.63 on its own before the bfloat16 conv3d named as the culprit); ("", 0)."""
    nodes = frozenset(low - inputs)
    for value in upstream[:MAX_CANDIDATES]:
        fed = {**policy_inputs, **{v: model_inputs[v] for v in inputs if v != value}}
        with np.errstate(all="ignore"):
            alone, _ = _loss(evaluate(policy, fed, rounded=True, widen=nodes - {value}), exact, policy.outputs, floors)
        if alone > PRECISION_LOSS:
            return value, alone
    return "", 0.0


def rounded_at(graph: Graph, value: str, low: set[str]) -> str:
    """Where `value`'s 16-bit rounding was made: past layout and index ops (cat, reshape, slice, gather), which move
    values already rounded; their first 16-bit operand's maker (triage14 3aba8c8efd: a RoPE hazard named the `emb`
    cat of the float16 `angles` product, which is where positions near 4057 lose their fraction)."""
    producers = {n.id: n for n in graph.nodes}
    while value in producers and getattr(OPS.get(producers[value].op), "family", "") in MOVES:
        moved = next((o for o in producers[value].inputs if isinstance(o, str) and o in low), None)
        if moved is None:
            break
        value = moved
    return value


def consumer_op(graph: Graph, value: str) -> str:
    """The op that uses `value`'s rounding: the first node reading it, past the casts a policy writes and the layout
    ops that only move values (an input's first use; a cast's reader); else the op making it."""
    made = next((n for n in graph.nodes if n.id == value), None)
    if made is not None and not is_cast(made.op):
        return made.op
    seen = value
    while True:
        reader = next((n for n in graph.nodes if seen in n.inputs), None)
        if reader is None:
            return made.op if made is not None else "?"
        if not _passes(reader.op):
            return reader.op
        seen = reader.id


def reader(graph: Graph, value: str) -> Node | None:
    """The first node computing with `value`, past the casts and layout ops that carry it: the op that must read it in
    float32 for a float32 `value` to help (triage25 sample #2, #7, #9: "compute conv1 in float32 and cast after it"
    rounds again before group_norm1, and loses as much; the loss given back was measured with the reader reading the
    float32 value, its own result rounded once)."""
    seen = value
    while True:
        node = next((n for n in graph.nodes if seen in n.inputs), None)
        if node is None or not _passes(node.op):
            return node
        seen = node.id


def _passes(op: str) -> bool:
    """Casts and layout/index ops: they carry a rounding made before them."""
    return is_cast(op) or getattr(OPS.get(op), "family", "") in MOVES


def finding(executor: str, policy: Policy, graph: Graph, lost: PrecisionLoss, input_set: int) -> Finding:
    """The model-hazard finding of a precision loss (error class `precision`)."""
    op = consumer_op(graph, lost.culprit)
    start = lost.start or lost.culprit
    start_op = consumer_op(graph, start)
    inputs = {i.name for i in graph.inputs}
    what = f"input `{lost.culprit}`" if lost.culprit_is_input else f"`{lost.culprit}` ({op})"
    after = reader(graph, lost.culprit)
    fix = (f"pass `{lost.culprit}` as float32" if lost.culprit_is_input
           else f"compute `{lost.culprit}` ({op}) and the {lost.dtype} values it is made from in float32, and return it "
                f"as float32 (the output's own {lost.dtype} rounding loses it again)" if lost.culprit in graph.outputs
           else f"compute `{lost.culprit}` ({op}) and the {lost.dtype} values it is made from in float32, and cast to "
                f"{lost.dtype} after it" if after is None
           else f"compute `{lost.culprit}` ({op}), the {lost.dtype} values it is made from and `{after.id}` "
                f"({after.op}), which reads it, in float32, and cast to {lost.dtype} after `{after.id}`")
    if lost.origin:  # the loss starts upstream: name that value, and the fix keeps both
        carrier = lost.start or lost.culprit  # where the culprit's rounding is made (past layout ops)
        what = f"input `{carrier}`" if carrier in inputs else f"`{carrier}` ({consumer_op(graph, carrier)})"
        start = lost.origin
        start_op = consumer_op(graph, start)
        dtype = infer(graph).values[start].dtype
        made = next((n for n in graph.nodes if n.id == start), None)
        first = (f"input `{start}`" if start in inputs else f"`{start}` (a cast)" if made is not None and
                 is_cast(made.op) else f"`{start}` ({start_op})")
        where = (f"the loss starts at the {dtype} rounding of {first} ({lost.origin_loss:.3g} with only it rounded), and "
                 f"the {lost.dtype} rounding of {what} carries it ({lost.with_fix:.3g} with both in float32)")
        if start in inputs and not lost.culprit_is_input:
            fix = f"pass `{start}` as float32, and {fix}"
    elif start == lost.culprit:
        where = f"the {lost.dtype} rounding of {what} costs most ({lost.with_fix:.3g} with it in float32)"
    else:
        first = f"input `{start}`" if start in inputs else f"`{start}` ({start_op})"
        where = (f"the {lost.dtype} rounding of {first}, which {what} carries, costs most ({lost.with_fix:.3g} with "
                 f"`{lost.culprit}` in float32)")
    message = (f"under {policy}, output {lost.output} loses {lost.loss:.3g} of its value (relative RMS error against the "
               f"float32 model) with every op within its bound: {where}; fix: {fix}")
    return Finding(Oracle.MODEL_HAZARD, executor, [start_op], [lost.dtype], ErrorClass.PRECISION, message, kind=Kind.MODEL_HAZARD,
                   ratio=lost.loss / PRECISION_LOSS, input_set=input_set, output=lost.output, node=start,
                   details={**policy_evidence(policy), "loss": lost.loss, "with_fix": lost.with_fix, "culprit": lost.culprit,
                            "start": start,
                            "culprit_is_input": lost.culprit_is_input, "fix": fix})
