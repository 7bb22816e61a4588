"""Training precision hazards (issue 36): an optimizer step whose update the policy's own dtypes lose, on any backend.

A step's output is the updated parameter, so the generic precision hazard (relative error of an output) cannot see a
lost update: bfloat16 weights near 1 that do not move by lr = 1e-3 are within 0.1% of the right answer. The yardstick
here is the update itself: the ideal step of the program's dtypes (the update rule as torch.optim writes it, each
elementary result rounded once to the parameter's dtype: fuzzer.ops.optim) against the exact update of the same
rounded inputs. Two hazards, each reported with the fix a trainer applies:

- update-nonfinite: the ideal step is inf/NaN where the exact one is finite (float16 Adam whose eps = 1e-8 rounds to 0
  in `denom.add_(eps)`, so a zero gradient gives 0/0); fix: eps representable in the dtype (>= 6e-8 in float16, 1e-4
  as fp16 recipes use), fused=True (float32 math inside), or float32 optimizer state.
- update-lost: at least UPDATE_LOSS of the update (RMS, relative) is lost. Either to the rounding of the parameter (an
  update below half an ULP of the weight rounds away; fix: float32 master weights, the step in float32 and a 16-bit
  copy for the forward, or on trn2 stochastic rounding, NEURON_RT_STOCHASTIC_ROUNDING_EN=1), or, where keeping the
  step's inside in float32 gives back at least half of it, to the 16-bit optimizer state (a second moment g^2 that
  underflows float16; fix: float32 state, fused=True).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fuzzer.dtypes import FLOAT32_SQUARE_MAX, FLOAT32_TINY, FLOAT_FORMATS, LOW_PRECISION, round_to
from fuzzer.interpret import evaluate, inner_name
from fuzzer.ir import Graph, infer, op_attrs
from fuzzer.ops import OPS
from fuzzer.policy import Policy

from .evidence import policy_evidence
from .findings import Finding
from .vocabulary import ErrorClass, Kind, Oracle

Values = dict[str, np.ndarray]
UPDATE_LOSS = 0.5  # half of the update's RMS gone: the model trains at half its learning rate, or not at all
FIX_LOST = ("keep float32 master weights (the parameter and optimizer state in float32, the step in float32, a "
            "16-bit copy for the forward), or on trn2 enable stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN=1)")


@dataclass(frozen=True)
class UpdateLoss:
    """What one optimizer step of the program loses of its update."""

    node: str
    op: str
    dtype: str
    kind: str  # update-lost | update-nonfinite
    lost: float  # relative RMS of the update lost (inf for update-nonfinite)
    frozen: float  # share of the elements with a non-zero exact update whose parameter did not move at all
    nonfinite: int  # elements inf/NaN in the ideal step where the exact one is finite
    cause: str  # what rounds away (eps in the dtype; the update below half an ULP), in words
    fix: str
    mechanism: str = "frozen"  # the cause as a word a bug key holds: eps | overflow | state | frozen | fraction


def steps(graph: Graph) -> list[str]:
    """The optimizer-step nodes of a graph whose parameter is 16-bit."""
    typed = infer(graph)
    return [n.id for n in graph.nodes if OPS[n.op].family == "optim" and typed.values[n.id].dtype in LOW_PRECISION]


def judge(graph: Graph, inputs: Values) -> list[UpdateLoss]:
    """The update each 16-bit optimizer step of `graph` loses on dtype-rounded `inputs` (exact vs ideal)."""
    wanted = steps(graph)
    if not wanted:
        return []
    with np.errstate(all="ignore"):  # every step widened at once: a step's variants do not depend on the others'
        exact = evaluate(graph, inputs, rounded=False)  # (an audit's 144 steps cost two evaluations, not 288)
        ideal = evaluate(graph, inputs, rounded=True)
        master = evaluate(graph, inputs, rounded=True, widen=frozenset(wanted))  # the steps in float32
        inside = evaluate(graph, inputs, rounded=True, widen=frozenset(inner_name(w) for w in wanted))  # state too
    nodes = {n.id: n for n in graph.nodes}
    out = []
    for name in wanted:
        node = nodes[name]
        dtype = infer(graph).values[name].dtype
        param = node.inputs[0]
        p_exact, p_ideal = np.asarray(exact[param], np.float64), np.asarray(ideal[param], np.float64)
        u = np.ravel(exact[name] - p_exact)
        got = np.ravel(ideal[name] - p_ideal)
        finite = np.isfinite(u)
        bad = int(np.count_nonzero(finite & ~np.isfinite(got)))
        if bad:
            eps = op_attrs(node).get("eps")
            cause = (f"eps={eps!r} rounds to {float(round_to(np.float64(eps), dtype))!r} in {dtype}, so "
                     "`denom.add_(eps)` leaves 0 where the second moment is 0 (a zero gradient gives 0/0)"
                     if eps is not None and float(round_to(np.float64(eps), dtype)) == 0 else
                     f"an intermediate of the update overflows or divides by zero in {dtype}")
            fix = ("use an eps the dtype represents (>= 6e-8 in float16; fp16 recipes use 1e-4), fused=True (float32 "
                   "math inside the step), or float32 optimizer state" if node.op == "adam_step" else FIX_LOST)
            mechanism = "eps" if cause.startswith("eps=") else "overflow"
            out.append(UpdateLoss(name, node.op, dtype, ErrorClass.UPDATE_NONFINITE, float("inf"), 0.0, bad, cause, fix,
                                  mechanism))
            continue
        lost, frozen = _lost(u, got)
        if not lost >= UPDATE_LOSS:
            continue
        # the step in float32 (master weights): a loss it shares is not the policy's
        if not _lost(u, np.ravel(master[name] - np.asarray(master[param], np.float64)))[0] < UPDATE_LOSS:
            continue  # (triage21 bd5c50f359: an SGD update of 8e-9 to weights of 1 is below float32's half ULP too)
        with_state, _ = _lost(u, np.ravel(inside[name] - np.asarray(inside[param], np.float64)))
        if with_state * 2 <= lost:  # the 16-bit state and intermediates lose it, not the weight's rounding
            cause = (f"the {dtype} optimizer state and intermediates distort it ({with_state:.0%} lost with them in "
                     f"float32, the weight still {dtype})")
            fix = ("keep the optimizer state in float32 (fused=True computes the step in float32; or float32 master "
                   "weights)")
            mechanism = "state"
        elif frozen >= 0.5:
            cause = (f"{frozen:.0%} of the weights do not move: their update is below half an ULP of {dtype} at the "
                     "weight's magnitude")
            fix, mechanism = FIX_LOST, "frozen"
        else:  # (triage21 b6ad04c2a7: an update of 0.58 ULP moved the weight by a whole ULP, 171% of it)
            cause = (f"the update is a fraction of an ULP of the {dtype} weight, which moves by whole ULPs: over- or "
                     f"undershooting ({frozen:.0%} of the weights do not move at all)")
            fix, mechanism = FIX_LOST, "fraction"
        out.append(UpdateLoss(name, node.op, dtype, ErrorClass.UPDATE_LOST, lost, frozen, 0, cause, fix, mechanism))
    return out


def _lost(u: np.ndarray, got: np.ndarray) -> tuple[float, float]:
    """(relative RMS of the exact update `u` lost in `got`, share of moving weights that did not move at all)."""
    keep = np.isfinite(u) & np.isfinite(got)
    norm = float(np.sqrt(np.mean(u[keep] ** 2))) if keep.any() else 0.0
    if norm == 0.0:
        return 0.0, 0.0
    moving = keep & (u != 0)
    frozen = float(np.mean(got[moving] == 0)) if moving.any() else 0.0
    return float(np.sqrt(np.mean((got[keep] - u[keep]) ** 2))) / norm, frozen


def finding(executor: str, policy: Policy, graph: Graph, loss: UpdateLoss, input_set: int) -> Finding:
    """The model-hazard finding of a lost or non-finite update."""
    what = ("gives inf/NaN updates" if loss.kind == ErrorClass.UPDATE_NONFINITE else
            f"loses {loss.lost:.0%} of its update (relative RMS against the exact step)" if loss.frozen >= 0.5 else
            f"gets its update {loss.lost:.0%} wrong (relative RMS against the exact step)")
    message = (f"under {policy}, the {loss.dtype} optimizer step `{loss.node}` ({loss.op}) {what} with every op "
               f"within its bound: {loss.cause}; fix: {loss.fix}")
    ratio = loss.lost / UPDATE_LOSS if np.isfinite(loss.lost) else float("inf")
    return Finding(Oracle.MODEL_HAZARD, executor, [loss.op], [loss.dtype], loss.kind, message, kind=Kind.MODEL_HAZARD,
                   ratio=ratio, input_set=input_set, output=loss.node, node=loss.node,
                   details={**policy_evidence(policy), "loss": loss.lost, "frozen": loss.frozen, "nonfinite": loss.nonfinite,
                            "fix": loss.fix, "cause": loss.mechanism})  # a word: the bug key holds it (triage31:
    # the sentence, "94% of the weights do not move", keyed one record per percentage)


# ---------------------------------------------------------------- gradients lost to 16-bit underflow: loss scaling

GRAD_LOSS = 0.5  # half of a gradient's RMS gone in the program's own 16-bit backward
SCALES = (2.0**16, 2.0**15, 2.0**12, 2.0**8, 2.0**4)  # GradScaler's init_scale first, then smaller where the scaled
# loss overflows (2^15: the largest a float16 loss's backward seed holds)


@dataclass(frozen=True)
class GradientLoss:
    """A gradient the program's own 16-bit backward loses to underflow, and what scaling the loss gives back."""

    wrt: str
    dtype: str  # the narrowest float dtype of the program (where the backward's values underflow)
    lost: float  # relative RMS of the exact gradient lost by the ideal 16-bit backward
    zeroed: float  # share of the gradient's non-zero elements the ideal backward returns as exactly 0
    scale: float  # the loss scale that gives it back (0: none of SCALES does)
    with_scale: float  # the loss left with that scale
    cause: str = "underflow"  # underflow | subnormal (activations a kernel reads as 0) | overflow (in the forward)
    obstacle: str = ""  # what no loss scale reaches, in words (cause subnormal / overflow)
    checked_on: str = ""  # the executor the scale was run on (empty: only the ideal model)


def scaled_loss(graph: Graph, scale: float) -> Graph:
    """The graph whose loss (first output) is multiplied by `scale` (GradScaler.scale(loss)), in the loss's dtype."""
    from fuzzer.identifiers import fresh_name
    from fuzzer.ir import Node

    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    name = fresh_name(f"{graph.outputs[0]}__scaled", taken)
    return Graph(graph.inputs, graph.nodes + (Node(name, "mul", (graph.outputs[0], scale), {}),),
                 (name,) + graph.outputs[1:])


def gradient_underflow(graph: Graph, values: Values, exact: list[np.ndarray],
                       ideal: list[np.ndarray], floors: list[float] | None = None) -> list[GradientLoss]:
    """The gradients of a 16-bit program that its own ideal backward (one rounding per op, fp32 accumulation) loses,
    mostly to values flushed to exactly 0, and the loss scale that gives each back (checked: the scaled program's
    ideal gradients, divided by the scale, against the exact ones). float32 programs have no such loss.

    `floors`: the magnitude of the terms each gradient sums (fuzzer.gradients.reference); an exact gradient below an
    ULP of float32 there is zero by cancellation, left by float64's own rounding, which no backward owes (triage22:
    d sum(group_norm(x)) / dx, 1e-16 in float64, was "100% lost to underflow")."""
    from fuzzer.gradients import reference

    typed = infer(graph)
    low = sorted({v.dtype for v in typed.values.values() if v.dtype in LOW_PRECISION},
                 key=lambda d: d != "float16")  # float16's narrow range underflows first
    if not low:
        return []
    found = []
    for k, (name, e, i) in enumerate(zip(graph.wrt, exact, ideal)):
        e, i = _uncancelled(e, i, floors[k] if floors else 0.0)
        lost, _ = _lost(e, i)
        moving = np.isfinite(e) & (e != 0)
        zeroed = float(np.mean(i[moving] == 0)) if moving.any() else 0.0
        if lost >= GRAD_LOSS and zeroed >= 0.5 and not beyond_float32(e[np.isfinite(e)], floors[k] if floors else 0.0):
            found.append([name, lost, zeroed])
    if not found:
        return []
    out = []
    best: dict[str, tuple[float, float]] = {}
    loss_dtype = typed.values[graph.outputs[0]].dtype
    with np.errstate(all="ignore"):
        loss_value = float(np.max(np.abs(evaluate(graph, values, rounded=True)[graph.outputs[0]]), initial=0.0))
    for scale in SCALES:  # one reference per scale, for every gradient at once
        if loss_dtype in FLOAT_FORMATS and max(scale, scale * loss_value) > FLOAT_FORMATS[loss_dtype].max_value:
            continue  # the scaled loss, or the scale itself as the backward's seed, overflows the loss's dtype (hz24
            # bcb6015512: 65536 is inf in float16, and every gradient NaN)
        with np.errstate(all="ignore"):
            _, ideals, _ = reference(scaled_loss(graph, scale), values)
        for name, lost, _ in found:
            k = graph.wrt.index(name)
            left = gradient_lost(exact[k], np.asarray(ideals[0][k], np.float64) / scale, floors[k] if floors else 0.0)
            if np.isfinite(left) and left < best.get(name, (0.0, lost))[1]:
                best[name] = (scale, left)
    for name, lost, zeroed in found:
        scale, left = best.get(name, (0.0, lost))
        if not left * 2 <= lost and out_of_reach(graph, name, exact[graph.wrt.index(name)]):
            continue
        out.append(GradientLoss(name, low[0], lost, zeroed, scale if left * 2 <= lost else 0.0, left))
    return out


def beyond_float32(exact: np.ndarray, floor: float) -> bool:
    """True when float32 training loses the gradient too, so no 16-bit policy is to blame: its RMS is subnormal in
    float32 (kernels that flush float32 subnormals lose it; triage26 b8162ac49a, bb32db210a: gradients near 3e-41 of
    inputs near 1e-38), or within twice the float32 program's own error of it (`floor` * 2^-24: the float32 program
    loses half of it; triage26 b75482af0f: a saturated softmax's 1.6e-7 beside a float32 error of 1.3e-7)."""
    rms = float(np.sqrt(np.mean(np.asarray(exact, np.float64) ** 2))) if np.size(exact) else 0.0
    return rms < FLOAT32_TINY or rms <= 2.0 * floor * 2.0**-24


def out_of_reach(graph: Graph, name: str, exact: np.ndarray) -> bool:
    """True when the exact gradient of input `name`, times the largest loss scale, is still below half the smallest
    subnormal of the input's dtype (the gradient's dtype): no backward and no scale can hold it, and an update that
    small is lost to any optimizer (SGD steps by lr * g; Adam by lr * g / eps at most), so losing it is no hazard
    (triage25 bc4c631c89, b46e9d491f: gradients near 1e-37 of float16 leaves, filed with a fix that cannot work)."""
    dtype = graph.input(name).dtype
    if dtype not in FLOAT_FORMATS:
        return False
    e = np.abs(np.asarray(exact, np.float64))
    e = e[np.isfinite(e)]
    return bool(e.size) and float(np.sqrt(np.mean(e ** 2))) * max(SCALES) < FLOAT_FORMATS[dtype].smallest_subnormal / 2


def _uncancelled(exact: np.ndarray, got: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Both gradients flat in float64, 0 where the exact one is below an ULP of float32 at the magnitude `floor` of
    the terms it sums: zero by cancellation, left by float64's own rounding, which no backward owes."""
    e, g = np.asarray(exact, np.float64).ravel(), np.asarray(got, np.float64).ravel()
    cancelled = np.abs(e) <= floor * 2.0**-24
    return np.where(cancelled, 0.0, e), np.where(cancelled, 0.0, g)


def gradient_lost(exact: np.ndarray, got: np.ndarray, floor: float = 0.0) -> float:
    """Relative RMS of the exact gradient that `got` loses (a backend's own, or a scaled one divided by its scale);
    inf where `got` is inf/NaN beside a finite exact gradient (hazards30 b466de186e: a scale of 32768 overflowed the
    backward's seed, every scaled gradient NaN, and the finite ones left, none, were "0% lost")."""
    exact, got = np.asarray(exact, np.float64), np.asarray(got, np.float64)
    if exact.shape == got.shape and np.any(np.isfinite(exact) & ~np.isfinite(got)):
        return float("inf")
    return _lost(*_uncancelled(exact, got, floor))[0]


def obstacle(graph: Graph, values: Values, wrt: str) -> tuple[str, str]:
    """What no loss scale reaches between input `wrt` and the loss, in the ideal forward: ("subnormal", words) where
    an operand of an op on that path has most of its non-zero values subnormal (CPU kernels read them as 0,
    denormals-are-zero: hz24 b8162ac49a, a bfloat16 linear's weight gradient from activations near 1e-39), or
    ("overflow", words) where one reaches past sqrt(float32's max), so that a norm's x * x is inf (hz24 b2457f0683, an
    rms_norm row near 3e38: its gradient is not underflow but the forward's overflow); ("", "") where neither."""
    from .gradients import downstream

    typed = infer(graph)
    with np.errstate(all="ignore"):
        forward = evaluate(graph, values, rounded=True)
    path = downstream(graph, wrt)
    seen: set[str] = set()
    for node in graph.nodes:
        for name in node.inputs if node.id in path else ():
            if not isinstance(name, str) or name in seen or name not in forward:
                continue
            seen.add(name)
            info = typed.values[name]
            if info.kind == "scalar" or info.dtype not in FLOAT_FORMATS:
                continue
            v = np.abs(np.asarray(forward[name], np.float64)).ravel()
            v = v[np.isfinite(v) & (v != 0)]
            tiny = FLOAT_FORMATS[info.dtype].smallest_normal
            if v.size and v.max() > FLOAT32_SQUARE_MAX:
                return "overflow", (f"`{name}` reaches {v.max():.3g}, whose square overflows float32 in {node.op}'s "
                                    "forward")
            if v.size and np.mean(v < tiny) >= 0.5:
                also = " (and in float32)" if info.dtype != "float32" and np.mean(v < FLOAT32_TINY) >= 0.5 else ""
                return "subnormal", (f"{np.mean(v < tiny):.0%} of `{name}`'s non-zero values are subnormal in "
                                     f"{info.dtype}{also} (below {tiny:.3g}), which a CPU kernel reads as 0")
    return "", ""


def on_backend(loss: GradientLoss, executor: str, own: float, scaled: float | None,
               blocked: Callable[[], tuple[str, str]]) -> GradientLoss | None:
    """The hazard as `executor` shows it, from what its own backward loses (`own`) and what it loses with the loss
    scaled by loss.scale (`scaled`, None when not run): None where its backward keeps the gradient; the scale kept
    only where it gives the gradient back there (hz24: a scale checked only on the ideal model was offered where a
    CPU kernel reads the activations as 0), else the `blocked` obstacle (oracles.training_hazards.obstacle)."""
    from dataclasses import replace

    if not own >= GRAD_LOSS:
        return None
    if loss.scale and scaled is not None and scaled * 2 <= own:
        return replace(loss, lost=own, with_scale=scaled, checked_on=executor)
    cause, words = blocked()
    if cause == "subnormal" and not loss.scale:  # the ideal backward keeps subnormals: they are no kernel's doing
        cause, words = "", ""  # (an ideal that no scale helps loses it by its own 16-bit arithmetic)
    return replace(loss, lost=own, scale=0.0, with_scale=own if scaled is None else scaled,
                   cause=cause or "underflow", obstacle=words, checked_on=executor)


def gradient_finding(executor: str, policy: Policy, graph: Graph, loss: GradientLoss, input_set: int) -> Finding:
    """The model-hazard finding of a gradient lost to 16-bit underflow (error class grad-underflow), or to an
    overflow of its forward (grad-overflow)."""
    from .precision_hazards import consumer_op

    op = consumer_op(graph, loss.wrt)
    on = f" on {loss.checked_on}" if loss.checked_on else ""
    if loss.scale:
        master = (", with float32 master weights: GradScaler refuses to unscale float16 gradients"
                  if graph.input(loss.wrt).dtype == "float16" else "")
        fix = (f"scale the loss by {loss.scale:g} before backward and unscale the gradients in float32 "
               f"(torch.amp.GradScaler(init_scale={loss.scale:g}){master}): {loss.with_scale:.0%} lost with it{on}")
    elif loss.cause == "subnormal":
        how = ("rescale them: they are subnormal in float32 too" if "(and in float32)" in loss.obstacle
               else "rescale them, or run this op in float32")  # (triage26: XLA flushes float32 subnormals as well)
        fix = (f"keep those activations out of the subnormal range ({how}): no loss scale reaches a value the forward "
               "already reads as 0")
    elif loss.cause == "overflow":
        fix = ("rescale the activations before this op (normalize or clip them): their square overflows even in "
               "float32, and no loss scale helps")
    else:
        fix = (f"compute the ops between `{loss.wrt}` and the loss in float32, forward and backward (no loss scale up "
               "to 65536 gives it back)")  # (hazards30 b466de186e: the forward had lost it already)
    why = (f"{loss.zeroed:.0%} of its non-zero elements underflow to 0 in an ideal {loss.dtype} backward"
           if loss.cause == "underflow" else loss.obstacle)
    message = (f"under {policy}, the gradient of `{loss.wrt}` loses {loss.lost:.0%} of its value{on} (relative RMS "
               f"against the exact gradient): {why}; fix: {fix}")
    error_class = ErrorClass.GRAD_OVERFLOW if loss.cause == "overflow" else ErrorClass.GRAD_UNDERFLOW
    return Finding(Oracle.MODEL_HAZARD, executor, [op], [loss.dtype], error_class, message, kind=Kind.MODEL_HAZARD,
                   ratio=loss.lost / GRAD_LOSS, input_set=input_set, output=loss.wrt, node=loss.wrt,
                   details={**policy_evidence(policy), "loss": loss.lost, "zeroed": loss.zeroed, "scale": loss.scale,
                            "with_scale": loss.with_scale, "fix": fix, "gradient": loss.wrt, "cause": loss.cause,
                            "checked_on": loss.checked_on})
