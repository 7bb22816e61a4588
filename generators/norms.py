"""Norm generators: layer/rms/group/batch/instance norm; eps, affine on/off, mixed dtypes, long fp16 reductions."""

from __future__ import annotations

import math

from . import distributions as dist
from .builder import GraphBuilder, Val
from .elementwise import activation_stage
from .shapes import LONG_LENGTHS, MAX_ELEMENTS, divisors, layout_shape
from .sources import activation_dtype, activation_input, param_input

NORMS = [("layer_norm", 5), ("rms_norm", 3), ("group_norm", 3), ("batch_norm", 2), ("instance_norm", 2)]
MIN_RANK = {"layer_norm": 1, "rms_norm": 1, "group_norm": 2, "batch_norm": 2, "instance_norm": 3}
EPS = [(1e-5, 6), (1e-6, 3), (1e-12, 1), (1e-3, 1), (0.1, 1)]
AFFINE = [("both", 5), ("none", 3), ("weight", 2)]  # rms_norm has no bias: "both" means weight there


def norm_params(b: GraphBuilder, x: Val, shape: tuple[int, ...], bias_ok: bool = True,
                affine: str | None = None, dtype: str | None = None) -> tuple[Val | None, Val | None]:
    """Optional weight and bias of a norm, in the activation's dtype or another."""
    affine = affine or b.draw.weighted(AFFINE)
    if affine == "none":
        return None, None
    dtype = dtype or b.param_dtype(x.dtype, p_same=0.75)
    weight = param_input(b, "gamma", shape, dtype, lambda: dist.gamma_spec(b.draw))
    if affine != "both" or not bias_ok:
        return weight, None
    bias = param_input(b, "beta", shape, dtype, lambda: dist.beta_spec(b.draw))
    return weight, bias


def _fits(op: str, shape: tuple[int, ...]) -> bool:
    """PyTorch's "more than 1 value per channel" rules for group_norm and instance_norm."""
    if op == "instance_norm":
        return math.prod(shape[2:]) > 1
    if op == "group_norm":
        return shape[0] * math.prod(shape[2:]) > 1 or shape[1] > 1
    return True


def norm_stage(b: GraphBuilder, x: Val, op: str | None = None, affine: str | None = None,
               param_dtype: str | None = None) -> Val:
    """One norm over x (op drawn among those x's rank allows)."""
    op = op or b.draw.weighted([(n, w) for n, w in NORMS if x.rank >= MIN_RANK[n] and _fits(n, x.shape)])
    eps = b.draw.weighted(EPS)
    if op in ("layer_norm", "rms_norm"):
        k = 1 if x.rank == 1 or b.draw.chance(0.8) else 2
        shape = x.shape[-k:]
        if math.prod(shape) > MAX_ELEMENTS:
            shape = x.shape[-1:]
        w, bias = norm_params(b, x, shape, bias_ok=op == "layer_norm", affine=affine, dtype=param_dtype)
        operands = [x, w, bias] if op == "layer_norm" else [x, w]
        attrs = {"normalized_shape": list(shape)}
        if op == "rms_norm" and eps == 1e-5:
            eps = 1e-6
        return b.op(op, operands, **attrs, eps=eps)
    channels = x.shape[1]
    if op == "group_norm":
        spread = x.shape[0] * math.prod(x.shape[2:])  # PyTorch wants more than one value per group
        options = [g for g in divisors(channels)[:6] + [channels] if spread * (channels // g) > 1]
        if not options:  # one value per group however it is grouped (e.g. [1, 1, 1, 1]): PyTorch would raise
            return norm_stage(b, x, op="layer_norm", affine=affine, param_dtype=param_dtype)
        groups = b.draw.choice(options)
        w, bias = norm_params(b, x, (channels,), affine=affine, dtype=param_dtype)
        return b.op(op, [x, w, bias], num_groups=groups, eps=eps)
    if op == "batch_norm":
        dtype = param_dtype or b.param_dtype(x.dtype, p_same=0.75)
        mean = param_input(b, "running_mean", (channels,), dtype, lambda: dist.running_mean_spec(b.draw))
        var = param_input(b, "running_var", (channels,), dtype, lambda: dist.positive_spec(b.draw))
        w, bias = norm_params(b, x, (channels,), affine=affine, dtype=dtype)
        return b.op(op, [x, mean, var, w, bias], eps=eps)
    w, bias = norm_params(b, x, (channels,), affine=affine, dtype=param_dtype)
    return b.op("instance_norm", [x, w, bias], eps=eps)


def long_norm_input(b: GraphBuilder, dtype: str = "float16") -> tuple[Val, str]:
    """A [B, L] (or [N, C, L]) low-precision input of accumulator-stalling values and the norm to apply."""
    op = b.draw.weighted([("layer_norm", 14), ("rms_norm", 3), ("group_norm", 2), ("instance_norm", 1)])
    length = b.draw.choice(LONG_LENGTHS)
    rows = 1 if length > 8192 else b.draw.weighted([(1, 3), (2, 2), (4, 1)])
    if op in ("group_norm", "instance_norm"):
        channels = b.draw.choice([1, 2, 4])
        if op == "instance_norm":
            channels = max(1, min(channels, 32768 // length))
        shape: tuple[int, ...] = (rows, channels, length // channels if op == "group_norm" else length)
        shape = (1, *shape[1:]) if math.prod(shape) > 4 * 8192 else shape
    else:
        shape = (rows, length)
    first = dist.long_reduction_spec(b.draw)
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.long_reduction_spec(b.draw), p_vary=0.7)
    x = b.input("x", shape, dtype, specs)
    return x, op


def long_norm(b: GraphBuilder, dtype: str = "float16") -> Val:
    """The TVM seed's corner: a norm over thousands of fp16 values whose sum of squares stalls the accumulator."""
    x, op = long_norm_input(b, dtype)
    if op == "group_norm":
        return b.op(op, [x, *norm_params(b, x, (x.shape[1],))], num_groups=1, eps=b.draw.weighted(EPS))
    return norm_stage(b, x, op=op)


def norm_family(b: GraphBuilder) -> list[Val]:
    """A norm over a stress input (a long fp16 reduction in half the cases), maybe followed by an activation."""
    if b.draw.chance(0.5):
        y = long_norm(b, "float16" if b.draw.chance(0.85) else "bfloat16")
        b.notes["long_norm"] = True
    else:
        x = activation_input(b, layout_shape(b.draw), activation_dtype(b))
        y = norm_stage(b, x)
    if b.draw.chance(0.25):
        y = activation_stage(b, y)
    return [y]
