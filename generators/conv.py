"""Convolution generators: conv1d/2d/3d with stride, padding, dilation, groups, optional bias, long dot products."""

from __future__ import annotations

import math
from typing import Any

from . import distributions as dist
from .builder import GraphBuilder, Val
from .elementwise import activation_stage
from .norms import norm_stage
from .shapes import CHANNELS, MAX_ELEMENTS, divisors, image_shape
from .sources import activation_dtype, activation_input, param_input

KERNELS = (1, 3, 2, 5, 7)
STRIDES = [(1, 6), (2, 3), (3, 1)]
LONG_CHANNELS = [((128, 1024), 1)]  # dot products of thousands of terms
OUT_CHANNELS = [((1, 8), 4), ((9, 64), 3), ((65, 256), 1)]
WINDOW_ELEMENTS = 3_000_000  # the reference's sliding-window copy: input elements x kernel elements
MACS = 20_000_000  # multiply-adds of the reference conv


def _window(b: GraphBuilder, size: int, volume: int) -> tuple[int, int, int, int]:
    """(kernel, dilation, padding, stride) for one spatial dim that leaves an output of at least 1."""
    k = b.draw.choice([k for k in KERNELS if k <= min(size, volume)] or [1])
    d = b.draw.choice([d for d in (1, 2, 3) if d * (k - 1) + 1 <= size]) if k > 1 and b.draw.chance(0.25) else 1
    p = b.draw.integer(0, (d * (k - 1) + 1) // 2)
    s = b.draw.weighted(STRIDES)
    return k, d, p, s


def _attr(values: tuple[int, ...], as_int: bool) -> Any:
    return values[0] if as_int and len(set(values)) == 1 else list(values)


def _groups(b: GraphBuilder, channels: int) -> int:
    kind = b.draw.weighted([("one", 6), ("divisor", 2), ("depthwise", 1)])
    if kind == "one":
        return 1
    return channels if kind == "depthwise" else b.draw.choice(divisors(channels))


def conv_stage(b: GraphBuilder, x: Val, param_dtype: str | None = None, bias: bool | None = None) -> Val:
    """A conv{1,2,3}d over an [N, C, spatial...] activation, sized to the element budget."""
    nd = x.rank - 2
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    groups = _groups(b, c)
    volume = max(1, min(MAX_ELEMENTS // (c // groups), WINDOW_ELEMENTS // x.numel))  # kernel elements allowed
    windows = []
    for size in spatial:
        windows.append(_window(b, size, volume))
        volume = max(1, volume // windows[-1][0])
    ks, ds, ps, ss = (tuple(w[i] for w in windows) for i in range(4))
    out_sp = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, d, p, s in zip(spatial, ks, ds, ps, ss)]
    fan_in = c // groups * math.prod(ks)
    positions = n * math.prod(out_sp)
    room = min(MAX_ELEMENTS // positions, MAX_ELEMENTS // fan_in, MACS // (positions * fan_in))
    if room < groups:
        groups, fan_in = 1, c * math.prod(ks)
        room = min(MAX_ELEMENTS // positions, MAX_ELEMENTS // fan_in, MACS // (positions * fan_in))
    _, hi = b.draw.weighted(OUT_CHANNELS)
    per_group = b.draw.integer(1, max(1, min(hi, room) // groups))
    if groups == c and per_group > 2:
        per_group = b.draw.integer(1, 2)
    out_c = groups * per_group
    dtype = param_dtype or b.param_dtype(x.dtype)
    weight = param_input(b, "w", (out_c, c // groups, *ks), dtype, lambda: dist.weight_spec(b.draw, fan_in))
    use_bias = b.draw.chance(0.6) if bias is None else bias
    bias_val = param_input(b, "bias", (out_c,), dtype, lambda: dist.bias_spec(b.draw, fan_in)) if use_bias else None
    as_int = b.draw.chance(0.5)
    attrs: dict[str, Any] = {}
    for name, values, default in (("stride", ss, 1), ("padding", ps, 0), ("dilation", ds, 1)):
        if any(v != default for v in values) or b.draw.chance(0.2):
            attrs[name] = _attr(values, as_int)
    if groups != 1:
        attrs["groups"] = groups
    return b.op(f"conv{nd}d", [x, weight, bias_val], stem="conv", **attrs)


def conv_input(b: GraphBuilder, rank: int | None = None, dtype: str | None = None) -> Val:
    """An image activation for a conv, with long channel counts in about a sixth of cases."""
    rank = rank or b.draw.weighted([(4, 3), (3, 2), (5, 2)])
    channels = LONG_CHANNELS if b.draw.chance(0.15) else CHANNELS
    return activation_input(b, image_shape(b.draw, rank, channels), dtype or activation_dtype(b))


def conv_family(b: GraphBuilder) -> list[Val]:
    """A conv, sometimes followed by an activation and a second conv or a norm."""
    y = conv_stage(b, conv_input(b))
    follow = b.draw.weighted([("none", 3), ("act", 2), ("act_conv", 2), ("norm", 2)])
    if follow in ("act", "act_conv"):
        y = activation_stage(b, y)
    if follow == "act_conv":
        y = conv_stage(b, y)
    if follow == "norm":
        y = norm_stage(b, y)
    return [y]
