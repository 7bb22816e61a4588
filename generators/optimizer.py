"""Optimizer-step cases (issue 36): one SGD / momentum SGD / Adam / AdamW step of a parameter tensor, as trainers run it.

What a step sees in a real run: weights at their init scale (std 0.02 for linear layers, near 1 for norm gains,
std 1 for embeddings), gradients spanning magnitudes (and exact zeros: embedding rows no token used), optimizer state
at step 1 (zeros) or later (moving averages of gradients of that scale), the learning rates and epsilons of common
recipes, torch.optim's three implementations. The gradient may come from micro-batches accumulated in its dtype, or
from an fp16 loss-scaled backward unscaled in float32 (GradScaler's unscale_ kernel, its step skipped where the
gradient holds inf/NaN, and its scale update after the step), and a 16-bit
model may keep float32 master weights (the step in float32, a 16-bit copy for the forward): the fix the hazards name,
drawn as often as the hazard so the pair shows it.
"""

from __future__ import annotations

import math

from fuzzer.dtypes import LOW_PRECISION

from . import distributions as dist
from .builder import GraphBuilder, Val

PARAM_DTYPES = [("bfloat16", 6), ("float16", 3), ("float32", 2)]
OPTIMIZERS = [("adamw", 5), ("adam", 3), ("sgd", 2), ("momentum", 3)]
IMPLS = [("single", 3), ("foreach", 2), ("fused", 2)]
WEIGHTS = [("linear", 5), ("gain", 3), ("embedding", 2)]  # init scale: std 0.02, 1 + 0.01 * noise, std 1
GRAD_SCALES = [(1e-2, 3), (1e-4, 3), (1e-6, 2), (1.0, 1)]
LRS = {"adamw": [1e-3, 3e-4, 1e-4, 1e-2], "adam": [1e-3, 1e-4, 1e-2], "sgd": [0.1, 0.01, 1e-3],
       "momentum": [0.1, 0.01, 1e-3]}
EPS = [(1e-8, 5), (1e-6, 1), (1e-4, 1)]
STEPS = [(1, 4), (2, 1), (10, 2), (1000, 2)]
SOURCES = [("direct", 5), ("sparse", 2), ("accumulated", 2), ("unscaled", 2)]


def _weights(b: GraphBuilder, shape: tuple[int, ...], dtype: str, kind: str) -> Val:
    first = {"linear": {"dist": "normal", "mean": 0.0, "std": 0.02},
             "gain": {"dist": "normal", "mean": 1.0, "std": 0.01},
             "embedding": {"dist": "normal", "mean": 0.0, "std": 1.0}}[kind]
    return b.input("weight", shape, dtype, dist.spec_sets(b.draw, b.n_sets, {**first, "seed": b.draw.seed()}, None),
                   role="param")


def _normal(b: GraphBuilder, stem: str, shape: tuple[int, ...], dtype: str, std: float, role: str = "param") -> Val:
    first = {"dist": "normal", "mean": 0.0, "std": std, "seed": b.draw.seed()}
    return b.input(stem, shape, dtype, dist.spec_sets(b.draw, b.n_sets, first, None), role=role)


def _gradient(b: GraphBuilder, shape: tuple[int, ...], dtype: str, scale: float, source: str) -> Val:
    """The step's gradient in `dtype`: drawn, sparse, accumulated over micro-batches, or unscaled from fp16."""
    if source == "sparse":  # rows no token used: exact zeros among the gradient
        g = _normal(b, "grad_dense", shape, dtype, scale)
        mask = b.input("used", shape, dtype, [{"dist": "randint", "low": 0, "high": 2, "seed": b.draw.seed()}
                                               for _ in range(b.n_sets)], role="param")
        return b.op("mul", [g, mask], stem="grad")
    if source == "accumulated":  # loss.backward() per micro-batch adds into .grad in its dtype; then / micro-batches
        k = b.draw.choice([2, 4, 8])
        g = _normal(b, "micro_grad", shape, dtype, scale * k)
        for _ in range(k - 1):
            g = b.op("add", [g, _normal(b, "micro_grad", shape, dtype, scale * k)], stem="grad_sum")
        return b.op("div", [g, k], stem="grad")
    if source == "unscaled" and dtype == "float32":  # GradScaler: an fp16 backward of loss * S, unscaled in float32
        s = 2.0 ** b.draw.choice([16, 8, 24])
        scaled = _normal(b, "scaled_grad", shape, "float16", min(scale * s, 6e4))
        return b.op("amp_unscale", [b.op("astype", [scaled], dtype="float32", stem="grad_fp32")], inv_scale=1.0 / s,
                    stem="grad")
    return _normal(b, "grad", shape, dtype, scale)


def _state(b: GraphBuilder, kind: str, shape: tuple[int, ...], dtype: str, scale: float, step: int) -> list[Val]:
    """The optimizer state before step `step`: zeros at the first step, else moving averages at the gradient's scale."""
    def zeros(stem: str) -> Val:
        return b.input(stem, shape, dtype, [{"dist": "constant", "value": 0.0}] * b.n_sets, role="param")
    if kind in ("sgd",):
        return []
    if kind == "momentum":
        return [zeros("momentum_buffer") if step == 1 else _normal(b, "momentum_buffer", shape, dtype, scale)]
    if step == 1:
        return [zeros("exp_avg"), zeros("exp_avg_sq")]
    m = _normal(b, "exp_avg", shape, dtype, scale * 0.5)
    lo = 2 * math.log10(scale) - 1
    v = b.input("exp_avg_sq", shape, dtype, [{"dist": "loguniform", "lo": lo, "hi": lo + 1.5, "seed": b.draw.seed()}
                                             for _ in range(b.n_sets)], role="param")
    return [m, v]


def optimizer_family(b: GraphBuilder) -> list[Val]:
    """One optimizer step of one parameter tensor, in its dtype or in float32 master weights; the new parameter."""
    model_dtype = b.draw.weighted(PARAM_DTYPES)
    master = model_dtype in LOW_PRECISION and b.draw.chance(0.3)
    dtype = "float32" if master else model_dtype
    kind = b.draw.weighted(OPTIMIZERS)
    rows, cols = b.draw.choice([1, 4, 16]), b.draw.choice([8, 64, 256])
    shape = (cols,) if rows == 1 else (rows, cols)
    weight = _weights(b, shape, dtype, b.draw.weighted(WEIGHTS))
    scale = b.draw.weighted(GRAD_SCALES)
    source = b.draw.weighted(SOURCES)
    if master:  # the 16-bit model's gradient, cast to the float32 master's dtype before the step
        grad = b.op("astype", [_gradient(b, shape, model_dtype, scale, source if source != "unscaled" else "direct")],
                    dtype="float32", stem="grad_master")
    else:
        grad = _gradient(b, shape, dtype, scale, source)
    step = b.draw.weighted(STEPS)
    state = _state(b, kind, shape, dtype, scale, step)
    impl = b.draw.weighted(IMPLS)
    lr = b.draw.choice(LRS[kind])
    decay = b.draw.choice([0.0, 0.0, 0.01, 0.1])
    if kind in ("sgd", "momentum"):
        momentum = 0.0 if kind == "sgd" else b.draw.choice([0.9, 0.99])
        nesterov = kind == "momentum" and b.draw.chance(0.3)
        new = b.op("sgd_step", [weight, grad, *state], stem="weight_new", lr=lr, momentum=momentum, dampening=0.0,
                   weight_decay=decay, nesterov=nesterov, impl=impl)
    else:
        new = b.op("adam_step", [weight, grad, *state], stem="weight_new", lr=lr, beta1=0.9,
                   beta2=b.draw.choice([0.999, 0.999, 0.95]), eps=b.draw.weighted(EPS), weight_decay=decay,
                   decoupled=kind == "adamw", step=step, impl=impl)
    extra: list[Val] = []
    if source == "unscaled" and not master and dtype == "float32":  # GradScaler.step: no step on inf/NaN grads
        found_inf = b.op("amp_found_inf", [grad], stem="found_inf")
        new = b.op("where", [b.op("gt", [found_inf, 0.0], stem="skip"), weight, new], stem="weight_stepped")
        extra.append(_scale_update(b, found_inf))
    b.notes["optimizer"] = {"kind": kind, "master": master, "source": source, "step": step}
    if master:
        return [new, b.op("astype", [new], dtype=model_dtype, stem="weight_model")]
    return [new, *extra]


SCALE_STATES = [(65536.0, 3), (2.0**24, 1), (2.0**127, 2), (1.0, 1)]  # GradScaler's init, a grown one, one growth
# from float32's range (PyTorch's kernel keeps a scale whose growth is inf), one backed off to 1


def _scale_update(b: GraphBuilder, found_inf: Val) -> Val:
    """GradScaler.update after the step: the new loss scale from the scale, its growth tracker and found_inf (grown
    on the growth_interval-th successful step in a row, backed off on inf/NaN gradients)."""
    interval = b.draw.choice([2000, 2000, 100, 1])
    shape = b.draw.choice([(1,), ()])  # GradScaler keeps shape [1]; torch_xla's lowering once took only shape []
    scale = b.input("loss_scale", shape, "float32", [{"dist": "constant", "value": b.draw.weighted(SCALE_STATES)}
                                                     for _ in range(b.n_sets)], role="param")
    due = b.draw.chance(0.7)  # the tracker one short of the interval: this step grows the scale
    tracker = b.input("growth_tracker", shape, "int32",
                      [{"dist": "constant", "value": interval - 1 if due else b.draw.choice([0, interval // 2])}
                       for _ in range(b.n_sets)], role="param")
    return b.op("amp_update_scale", [scale, tracker, found_inf], stem="loss_scale_new", growth_factor=2.0,
                backoff_factor=0.5, growth_interval=interval)
