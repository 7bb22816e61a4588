"""UNet and CNN blocks: conv + group_norm + silu, downsampling (strided conv, avg or max pool), upsampling (nearest,
bilinear, transposed conv) with skip concatenation; classifier heads with adaptive pooling over large windows.
"""

from __future__ import annotations

import math

from . import distributions as dist
from .builder import GraphBuilder, Val
from .linalg import linear_stage
from .norms import norm_params
from .shapes import MAX_ELEMENTS
from .sources import activation_dtype, activation_input, param_input

GROUPS = (1, 2, 4, 8, 32)


def _conv3x3(b: GraphBuilder, x: Val, out_c: int, stride: int = 1, dtype: str | None = None) -> Val:
    """A 3x3 (3-wide, 3x3x3) convolution with padding 1, as UNet resnet blocks use."""
    nd = x.rank - 2
    c = x.shape[1]
    dtype = dtype or x.dtype
    w = param_input(b, "w", (out_c, c, *([3] * nd)), dtype, lambda: dist.weight_spec(b.draw, c * 3**nd))
    bias = param_input(b, "bias", (out_c,), dtype, lambda: dist.bias_spec(b.draw, c * 3**nd))
    return b.op(f"conv{nd}d", [x, w, bias], stem="conv", stride=stride, padding=1)


def norm_act(b: GraphBuilder, x: Val, dtype: str | None = None) -> Val:
    """group_norm (a divisor of the channels as groups) then silu."""
    c = x.shape[1]
    groups = b.draw.choice([g for g in GROUPS if c % g == 0 and (c // g) * math.prod(x.shape[2:]) > 1] or [1])
    w, bias = norm_params(b, x, (c,), affine="both", dtype=dtype or x.dtype)
    y = b.op("group_norm", [x, w, bias], num_groups=groups, eps=b.draw.choice([1e-5, 1e-6]))
    return b.op("silu", [y])


def downsample(b: GraphBuilder, x: Val) -> Val:
    """Halve the spatial dims: a strided conv, an average or a max pool."""
    nd = x.rank - 2
    kind = b.draw.weighted([("conv", 2), ("avg", 2), ("max", 2)])
    if kind == "conv" or min(x.shape[2:]) < 2:
        return _conv3x3(b, x, x.shape[1], stride=2) if min(x.shape[2:]) >= 2 else x
    if kind == "avg":
        return b.op(f"avg_pool{nd}d", [x], kernel_size=2, stride=2, ceil_mode=b.draw.chance(0.3),
                    count_include_pad=b.draw.chance(0.5))
    return b.op(f"max_pool{nd}d", [x], kernel_size=b.draw.choice([2, 3]), stride=2, padding=b.draw.choice([0, 1]),
                ceil_mode=b.draw.chance(0.3))


def upsample(b: GraphBuilder, x: Val) -> Val:
    """Double the spatial dims: nearest (then a conv, as diffusers' Upsample2D), bilinear, or a transposed conv."""
    nd = x.rank - 2
    size = [2 * s for s in x.shape[2:]]
    kind = b.draw.weighted([("nearest", 3), ("linear", 2), ("transposed", 2)])
    if kind == "transposed":
        c = x.shape[1]
        w = param_input(b, "w_up", (c, c, *([2] * nd)), x.dtype, lambda: dist.weight_spec(b.draw, c * 2**nd))
        return b.op(f"conv_transpose{nd}d", [x, w], stride=2, stem="up")
    if kind == "nearest":
        up = b.op("interpolate_nearest", [x], size=size, scales=[2.0] * nd if b.draw.chance(0.5) else None, stem="up")
        return _conv3x3(b, up, x.shape[1]) if b.draw.chance(0.5) else up
    return b.op("interpolate_linear", [x], size=size, align_corners=b.draw.chance(0.3), stem="up")


def unet_family(b: GraphBuilder) -> list[Val]:
    """A down block and an up block with a skip concatenation (diffusers' UNet2DModel in small)."""
    dtype = activation_dtype(b)
    nd = b.draw.weighted([(2, 5), (1, 1), (3, 1)])
    c = b.draw.choice([4, 8, 16])
    side = {1: [8, 16, 32], 2: [4, 8, 16], 3: [4, 8]}[nd]
    spatial = [b.draw.choice(side)] * nd
    n = b.draw.choice([1, 2])
    while n * c * math.prod(spatial) * 4 > MAX_ELEMENTS and spatial[0] > 2:
        spatial = [s // 2 for s in spatial]
    x = activation_input(b, (n, c, *spatial), dtype, stem="sample")
    h = norm_act(b, _conv3x3(b, x, c))
    skip = h
    down = downsample(b, h)
    mid = norm_act(b, _conv3x3(b, down, c)) if b.draw.chance(0.6) else down
    up = upsample(b, mid)
    if up.shape[2:] != skip.shape[2:]:  # a pool with ceil_mode or padding rounds differently: resize to the skip's
        up = b.op("interpolate_nearest", [up], size=list(skip.shape[2:]), stem="fit")
    if up.dtype != skip.dtype:
        up = b.op("astype", [up], dtype=skip.dtype, stem="up_cast")
    joined = b.op("cat", [up, skip], dim=1, stem="skip_cat")
    return [_conv3x3(b, joined, c)]


def head_family(b: GraphBuilder) -> list[Val]:
    """A classifier head: adaptive average pooling over a large window (or a max pool), flatten, linear, log_softmax."""
    dtype = activation_dtype(b)
    nd = b.draw.weighted([(2, 4), (1, 1), (3, 1)])
    c = b.draw.choice([8, 16, 64, 256])
    side = {1: [64, 512, 4096], 2: [8, 32, 64], 3: [4, 8, 16]}[nd]
    spatial = [b.draw.choice(side)] * nd
    while c * math.prod(spatial) > 4 * MAX_ELEMENTS and max(spatial) > 2:
        spatial = [max(1, s // 2) for s in spatial]
    x = activation_input(b, (1, c, *spatial), dtype, stem="features")
    if b.draw.chance(0.3):
        x = b.op("relu", [x])
    out = b.draw.choice([1, 1, 1, 2, 7])
    pooled = b.op(f"adaptive_avg_pool{nd}d", [x], output_size=min(out, min(spatial)), stem="pool")
    flat = b.op("reshape", [pooled], shape=[1, math.prod(pooled.shape[1:])], stem="flat")
    logits = linear_stage(b, flat, param_dtype=dtype if b.draw.chance(0.85) else None)
    return [b.op("log_softmax", [logits], dim=-1) if b.draw.chance(0.6) else logits]
