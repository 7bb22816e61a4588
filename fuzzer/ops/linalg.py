"""Convolutions and matrix products: conv1d/2d/3d, linear, matmul, bmm."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..promotion import promote_types
from .base import (POSITIVE_INT, ChainBreak, IRError, OpSpec, Typed, ValueInfo, int_or_ints, param_dtype_rule,
                   require_float, tensor)


def _tuple(value: Any, nd: int, what: str) -> tuple[int, ...]:
    vals = [value] * nd if isinstance(value, int) else list(value)
    if len(vals) != nd or not all(isinstance(v, int) for v in vals):
        raise IRError(f"{what} must be an int or {nd} ints, got {value!r}")
    return tuple(vals)


def conv_attrs(nd: int, attrs: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
    """Normalized (stride, padding, dilation, groups) of a conv node."""
    stride = _tuple(attrs.get("stride", 1), nd, "stride")
    padding = _tuple(attrs.get("padding", 0), nd, "padding")
    dilation = _tuple(attrs.get("dilation", 1), nd, "dilation")
    groups = attrs.get("groups", 1)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or not isinstance(groups, int) or groups < 1:
        raise IRError("stride/dilation/groups must be >= 1 and padding >= 0")
    return stride, padding, dilation, groups


def _infer_conv(nd: int):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        x, w, b = ops
        assert x is not None and w is not None
        if x.is_scalar or len(x.shape) != nd + 2:
            raise IRError(f"input must have rank {nd + 2} (N, C, spatial...), got shape {list(x.shape)}")
        if w.is_scalar or len(w.shape) != nd + 2:
            raise IRError(f"weight must have rank {nd + 2}, got shape {list(w.shape)}")
        require_float(x, "input")
        stride, padding, dilation, groups = conv_attrs(nd, attrs)
        out_c, in_per_group = w.shape[:2]
        if x.shape[1] != in_per_group * groups or out_c % groups:
            raise IRError(f"input has {x.shape[1]} channels, weight {list(w.shape)} expects {in_per_group} x {groups} groups")
        if b is not None and (b.is_scalar or b.shape != (out_c,)):
            raise IRError(f"bias must have shape [{out_c}], got {list(b.shape)}")
        spatial = []
        for size, k, s, p, d in zip(x.shape[2:], w.shape[2:], stride, padding, dilation):
            out = (size + 2 * p - d * (k - 1) - 1) // s + 1
            if out < 1:
                raise IRError(f"kernel {list(w.shape[2:])} does not fit input {list(x.shape[2:])}")
            spatial.append(out)
        dtype, brk = param_dtype_rule(x, [p for p in (w, b) if p is not None])
        return Typed(tensor((x.shape[0], out_c, *spatial), dtype), brk, dtype if brk else None)

    return infer


def _infer_linear(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x, w, b = ops
    assert x is not None and w is not None
    if x.is_scalar or not x.shape or w.is_scalar or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise IRError(f"input {list(x.shape)} and weight {list(w.shape)} do not fit (weight is [out, in])")
    require_float(x, "input")
    if b is not None and (b.is_scalar or b.shape != (w.shape[0],)):
        raise IRError(f"bias must have shape [{w.shape[0]}], got {list(b.shape)}")
    dtype, brk = param_dtype_rule(x, [p for p in (w, b) if p is not None])
    return Typed(tensor((*x.shape[:-1], w.shape[0]), dtype), brk, dtype if brk else None)


def _infer_matmul(batched: bool):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        a, b = ops
        assert a is not None and b is not None
        if a.is_scalar or b.is_scalar or len(a.shape) < 2 or len(b.shape) < 2:
            raise IRError(f"operands must have rank >= 2, got {list(a.shape)} and {list(b.shape)}")
        if batched and (len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0]):
            raise IRError(f"bmm needs [B, n, k] and [B, k, m], got {list(a.shape)} and {list(b.shape)}")
        if a.shape[-1] != b.shape[-2]:
            raise IRError(f"inner dims differ: {list(a.shape)} @ {list(b.shape)}")
        require_float(a, "a")
        require_float(b, "b")
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise IRError(f"batch dims do not broadcast: {list(a.shape)} @ {list(b.shape)}") from None
        shape = (*batch, a.shape[-2], b.shape[-1])
        if a.dtype != b.dtype:
            dtype = promote_types(a.dtype, b.dtype)
            low = 0 if a.dtype != dtype else 1
            return Typed(tensor(shape, dtype), ChainBreak(low, (a, b)[low].dtype, dtype), dtype)
        return Typed(tensor(shape, a.dtype))

    return infer


def conv(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, **_: Any) -> np.ndarray:
    """N-d grouped, strided, padded, dilated cross-correlation (PyTorch's convNd) in float64."""
    nd = x.ndim - 2
    stride, padding, dilation = ([v] * nd if isinstance(v, int) else list(v) for v in (stride, padding, dilation))
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = weight.shape[2:]
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    win = sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride) + tuple(slice(None, None, d) for d in dilation)
    win = win[index]  # N, C, out..., k...
    n, c = x.shape[:2]
    out_c = weight.shape[0]
    out_sp = win.shape[2:2 + nd]
    win = win.reshape(n, groups, c // groups, *out_sp, *kernel)
    w = weight.reshape(groups, out_c // groups, c // groups, *kernel)
    o, k = "xyz"[:nd], "ijk"[:nd]
    y = np.einsum(f"ngc{o}{k},gmc{k}->ngm{o}", win, w, optimize=True).reshape(n, out_c, *out_sp)
    if bias is not None:
        y = y + np.reshape(bias, (1, out_c) + (1,) * nd)
    return y


def linear(x, weight, bias=None, **_: Any) -> np.ndarray:
    """x @ weight.T + bias."""
    y = np.matmul(x, np.swapaxes(weight, 0, 1))
    return y if bias is None else y + bias


def matmul(a, b, **_: Any) -> np.ndarray:
    """Batched matrix product."""
    return np.matmul(a, b)


_CONV_ATTRS = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}
_CONV_TYPES = {"stride": int_or_ints(1), "padding": int_or_ints(0), "dilation": int_or_ints(1), "groups": POSITIVE_INT}

OPS: list[OpSpec] = [
    OpSpec("conv1d", "conv", ("x", "weight", "bias?"), dict(_CONV_ATTRS), _infer_conv(1), conv, params=(1, 2),
           attr_types=_CONV_TYPES),
    OpSpec("conv2d", "conv", ("x", "weight", "bias?"), dict(_CONV_ATTRS), _infer_conv(2), conv, params=(1, 2),
           attr_types=_CONV_TYPES),
    OpSpec("conv3d", "conv", ("x", "weight", "bias?"), dict(_CONV_ATTRS), _infer_conv(3), conv, params=(1, 2),
           attr_types=_CONV_TYPES),
    OpSpec("linear", "linear", ("x", "weight", "bias?"), {}, _infer_linear, linear, params=(1, 2)),
    OpSpec("matmul", "matmul", ("a", "b"), {}, _infer_matmul(False), matmul),
    OpSpec("bmm", "matmul", ("a", "b"), {}, _infer_matmul(True), matmul),
]
