"""Matrix-product generators: linear (bias on/off, long in_features), matmul with broadcast batches, bmm, attention."""

from __future__ import annotations

import math

from . import distributions as dist
from .builder import GraphBuilder, Val
from .elementwise import activation_stage
from .shapes import BATCH, LONG_LENGTHS, MAX_ELEMENTS, dim, seq_shape
from .sources import activation_dtype, activation_input, param_input

OUT_FEATURES = [((1, 16), 4), ((17, 128), 4), ((129, 512), 1)]
MACS = 20_000_000


def _out_features(b: GraphBuilder, x: Val, rhs_batch: int = 1) -> int:
    k = x.shape[-1]
    rows = x.numel // k
    cap = max(1, min(MAX_ELEMENTS // (k * rhs_batch), MAX_ELEMENTS // rows, MACS // (rows * k)))
    return dim(b.draw, OUT_FEATURES, cap)


def linear_stage(b: GraphBuilder, x: Val, param_dtype: str | None = None, bias: bool | None = None,
                 out_features: int | None = None) -> Val:
    """x @ W.T (+ bias) over x's last dim (out_features drawn unless given)."""
    k = x.shape[-1]
    out = out_features or _out_features(b, x)
    dtype = param_dtype or b.param_dtype(x.dtype)
    weight = param_input(b, "w", (out, k), dtype, lambda: dist.weight_spec(b.draw, k))
    use_bias = b.draw.chance(0.6) if bias is None else bias
    bias_val = param_input(b, "bias", (out,), dtype, lambda: dist.bias_spec(b.draw, k)) if use_bias else None
    return b.op("linear", [x, weight, bias_val], stem="linear")


def matmul_stage(b: GraphBuilder, x: Val) -> Val:
    """x @ B with B an input of [k, m] or with a batch dim that broadcasts."""
    k = x.shape[-1]
    batch: tuple[int, ...] = ()
    if x.rank >= 3 and b.draw.chance(0.4):
        batch = (1,) * (x.rank - 3) + (b.draw.choice([1, x.shape[-3]]),)
    m = _out_features(b, x, math.prod(batch))
    dtype = x.dtype if b.draw.chance(0.8) else b.draw.choice(["float32", "bfloat16", "float16"])
    rhs = activation_input(b, (*batch, k, m), dtype, stem="rhs", kind=b.draw.choice(["normal", "uniform", None]))
    return b.op("matmul", [x, rhs])


def bmm_stage(b: GraphBuilder, x: Val) -> Val:
    """bmm of a rank-3 x with a [B, k, m] input."""
    k = x.shape[-1]
    m = _out_features(b, x, x.shape[0])
    dtype = x.dtype if b.draw.chance(0.85) else b.draw.choice(["float32", "bfloat16", "float16"])
    rhs = activation_input(b, (x.shape[0], k, m), dtype, stem="rhs", kind=b.draw.choice(["normal", "uniform", None]))
    return b.op("bmm", [x, rhs])


def attention(b: GraphBuilder) -> Val:
    """softmax(q @ kT / sqrt(d)) @ v with k supplied transposed (the IR has no transpose)."""
    dtype = activation_dtype(b)
    n, t, d = dim(b.draw, BATCH), dim(b.draw, [((2, 32), 3), ((33, 128), 1)]), dim(b.draw, [((4, 64), 1)])
    t = min(t, max(2, int(math.sqrt(MAX_ELEMENTS // n))))
    q = activation_input(b, (n, t, d), dtype, stem="q")
    kt = activation_input(b, (n, d, t), dtype, stem="kt")
    v = activation_input(b, (n, t, d), dtype, stem="v")
    scores = b.op("bmm" if b.draw.chance(0.5) else "matmul", [q, kt], stem="scores")
    scaled = b.op("mul", [scores, 1.0 / math.sqrt(d)]) if b.draw.chance(0.5) else b.op("div", [scores, math.sqrt(d)])
    probs = b.op("softmax", [scaled], dim=-1)
    return b.op("bmm" if b.draw.chance(0.5) else "matmul", [probs, v], stem="attn")


def linalg_family(b: GraphBuilder) -> list[Val]:
    """linear (an MLP block sometimes, long dot products sometimes), matmul, bmm or attention."""
    kind = b.draw.weighted([("linear", 5), ("mlp", 2), ("matmul", 2), ("bmm", 2), ("attention", 2), ("long", 2)])
    if kind == "attention":
        return [attention(b)]
    dtype = activation_dtype(b)
    if kind == "long":  # dot products of thousands of low-precision terms
        shape = (dim(b.draw, BATCH[:2]), b.draw.choice(LONG_LENGTHS[:3]))
        x = activation_input(b, shape, b.draw.choice(["float16", "bfloat16"]))
        return [linear_stage(b, x)]
    x = activation_input(b, seq_shape(b.draw, 3 if kind == "bmm" else b.draw.choice([2, 3])), dtype)
    if kind == "matmul":
        return [matmul_stage(b, x)]
    if kind == "bmm":
        return [bmm_stage(b, x)]
    y = linear_stage(b, x)
    if kind == "mlp":
        y = linear_stage(b, activation_stage(b, y), param_dtype=y.dtype if y.dtype != x.dtype else None)
    return [y]
