"""Pooling over 1, 2 or 3 spatial dims: max, average and adaptive average (PyTorch's window and divisor rules).

Windows follow PyTorch exactly: out = floor_or_ceil((L + 2p - d(k - 1) - 1) / s) + 1, with ceil_mode's last
window dropped where it would start in the right padding; an average divides by the window's size
counting the padding (count_include_pad) but never the ceil-mode overhang, or by divisor_override.
Adaptive windows run from floor(i L / out) to ceil((i + 1) L / out). Float32 values sum one after another.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import aten as A
from . import intervals as iv
from .base import (
    BOOL,
    AtenCall,
    AtenSkip,
    AttrType,
    Example,
    IRError,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    acc_sum,
    example_input,
    int_or_ints,
    require_float,
    tensor,
)


def _per_dim(value: Any, nd: int, what: str) -> tuple[int, ...]:
    vals = [value] * nd if isinstance(value, int) else list(value)
    if len(vals) != nd:
        raise IRError(f"{what} must be an int or {nd} ints, got {value!r}")
    return tuple(int(v) for v in vals)


def window_attrs(nd: int, attrs: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, padding, dilation) of a pooling node, each one int per spatial dim (stride None: kernel)."""
    kernel = _per_dim(attrs["kernel_size"], nd, "kernel_size")
    stride = kernel if attrs.get("stride") is None else _per_dim(attrs["stride"], nd, "stride")
    padding = _per_dim(attrs.get("padding", 0), nd, "padding")
    dilation = _per_dim(attrs.get("dilation", 1), nd, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise IRError("kernel, stride and dilation must be >= 1 and padding >= 0")
    if any(p > (d * (k - 1) + 1) // 2 for p, k, d in zip(padding, kernel, dilation)):
        raise IRError(f"padding {list(padding)} must be at most half the kernel {list(kernel)}")
    return kernel, stride, padding, dilation


def pool_size(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """PyTorch's pooling_output_shape for one dim."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _spatial(x: ValueInfo, nd: int, what: str) -> None:
    if x.is_scalar or len(x.shape) != nd + 2:
        raise IRError(f"{what} needs an input of rank {nd + 2} (N, C, spatial...), got {list(x.shape)}")
    require_float(x, "input")


def _infer_pool(nd: int):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        (x,) = ops
        assert x is not None
        _spatial(x, nd, "pooling")
        kernel, stride, padding, dilation = window_attrs(nd, attrs)
        out = [pool_size(n, k, s, p, d, bool(attrs.get("ceil_mode"))) for n, k, s, p, d in
               zip(x.shape[2:], kernel, stride, padding, dilation)]
        if min(out) < 1:
            raise IRError(f"kernel {list(kernel)} does not fit input {list(x.shape[2:])}")
        return Typed(tensor(x.shape[:2] + tuple(out), x.dtype))

    return infer


def _infer_adaptive(nd: int):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        (x,) = ops
        assert x is not None
        _spatial(x, nd, "adaptive pooling")
        out = _per_dim(attrs["output_size"], nd, "output_size")
        if min(out) < 1:
            raise IRError("output_size must be >= 1")
        return Typed(tensor(x.shape[:2] + out, x.dtype))

    return infer


def _windows(x, kernel, stride, padding, dilation, ceil_mode, fill):
    """(sliding windows N, C, out..., k..., output sizes): x padded with `fill` (ceil-mode overhang included)."""
    nd = x.ndim - 2
    out = [pool_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)]
    right = [max(p, (o - 1) * s + d * (k - 1) + 1 - n - p) for n, o, k, s, p, d in
             zip(x.shape[2:], out, kernel, stride, padding, dilation)]
    x = np.pad(x, [(0, 0), (0, 0)] + list(zip(padding, right)), constant_values=fill)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    win = sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))
    index = ((slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, stride))
             + tuple(slice(None, None, d) for d in dilation))
    return win[index], out


def max_pool(x, kernel_size=1, stride=None, padding=0, dilation=1, ceil_mode=False, **_: Any) -> np.ndarray:
    """Max over each window (padding never wins; nan propagates)."""
    x = np.asarray(x)
    nd = x.ndim - 2
    kernel, stride, padding, dilation = window_attrs(nd, {"kernel_size": kernel_size, "stride": stride,
                                                          "padding": padding, "dilation": dilation})
    win, _ = _windows(x, kernel, stride, padding, dilation, ceil_mode, -np.inf)
    return np.max(win, axis=tuple(range(2 + nd, 2 + 2 * nd)))


def avg_pool(x, kernel_size=1, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None, **_: Any) -> np.ndarray:
    """Sum over each window divided by its size (see the module docstring)."""
    x = np.asarray(x)
    nd = x.ndim - 2
    kernel, stride, padding, _ = window_attrs(nd, {"kernel_size": kernel_size, "stride": stride, "padding": padding})
    win, out = _windows(x, kernel, stride, padding, (1,) * nd, ceil_mode, 0.0)
    total = acc_sum(win, tuple(range(2 + nd, 2 + 2 * nd)))
    if divisor_override:
        return total / x.dtype.type(divisor_override)
    divisor = np.ones(out, dtype=np.float64)
    for axis, (n, o, k, s, p) in enumerate(zip(x.shape[2:], out, kernel, stride, padding)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        size = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        divisor = divisor * size.reshape([-1 if a == axis else 1 for a in range(nd)])
    return total / divisor.astype(x.dtype)


def adaptive_avg_pool(x, output_size=1, **_: Any) -> np.ndarray:
    """The mean of each adaptive window (windows may overlap and differ in size)."""
    x = np.asarray(x)
    nd = x.ndim - 2
    out = [output_size] * nd if isinstance(output_size, int) else list(output_size)
    bounds = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)] for n, o in zip(x.shape[2:], out)]
    y = np.empty(x.shape[:2] + tuple(out), dtype=x.dtype)
    axes = tuple(range(2, 2 + nd))
    for pos in np.ndindex(*out):
        box = x[(slice(None), slice(None)) + tuple(slice(*bounds[a][i]) for a, i in enumerate(pos))]
        count = math.prod(b - a for a, b in (bounds[k][i] for k, i in enumerate(pos)))
        y[(slice(None), slice(None)) + pos] = acc_sum(box, axes) / x.dtype.type(count)
    return y


# ---------------------------------------------------------------- lowerings


def _relax_window(c: RelaxCall, nd: int, dilation: bool) -> str:
    kernel, stride, padding, dil = window_attrs(nd, c.attrs)
    out = f"pool_size={list(kernel)}, strides={list(stride)}, padding={list(padding) * 2}"
    return out + (f", dilation={list(dil)}" if dilation else "") + f", ceil_mode={bool(c.attrs.get('ceil_mode'))}"


def _relax_max(nd: int):
    return lambda c: f"R.op.nn.max_pool{nd}d({c.arg(0)}, {_relax_window(c, nd, True)})"


def _relax_avg(nd: int):
    def render(c: RelaxCall) -> str:
        if c.attrs.get("divisor_override"):
            raise NotImplementedError("Relax avg_pool has no divisor_override")
        return (f"R.op.nn.avg_pool{nd}d({c.arg(0)}, {_relax_window(c, nd, False)}, "
                f"count_include_pad={bool(c.attrs['count_include_pad'])})")

    return render


def _torch_window(c: TorchCall, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={c.attrs[k]!r}" for k in keys if c.attrs.get(k) is not None)


def _stride(value: Any) -> Any:
    return None if value in (None, [], ()) else A.one_or_many(value, 1)


def _aten_max(nd: int) -> A.AtenFn:
    """max_poolNd(self, kernel_size, stride, padding, dilation, ceil_mode); *_with_indices returns (out, indices)."""
    def tr(c: AtenCall) -> Any:
        attrs = {"kernel_size": A.one_or_many(c.arg(1, "kernel_size"), 1), "stride": _stride(c.arg(2, "stride")),
                 "padding": A.one_or_many(c.arg(3, "padding", 0), 0), "dilation": A.one_or_many(c.arg(4, "dilation", 1), 1),
                 "ceil_mode": bool(c.arg(5, "ceil_mode", False))}
        out = c.emit(f"max_pool{nd}d", [c.arg(0, "self")], attrs)
        return [out, None] if "with_indices" in c.target else out

    return tr


def _aten_avg(nd: int) -> A.AtenFn:
    """avg_poolNd(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)."""
    def tr(c: AtenCall) -> str:
        divisor = c.arg(6, "divisor_override")
        attrs = {"kernel_size": A.one_or_many(c.arg(1, "kernel_size"), 1), "stride": _stride(c.arg(2, "stride")),
                 "padding": A.one_or_many(c.arg(3, "padding", 0), 0), "ceil_mode": bool(c.arg(4, "ceil_mode", False)),
                 "count_include_pad": bool(c.arg(5, "count_include_pad", True)),
                 "divisor_override": None if divisor is None else int(divisor)}
        return c.emit(f"avg_pool{nd}d", [c.arg(0, "self")], attrs)

    return tr


def _aten_adaptive(nd: int) -> A.AtenFn:
    def tr(c: AtenCall) -> str:
        size = c.arg(1, "output_size")
        if size is None or (isinstance(size, (list, tuple)) and None in size):
            raise AtenSkip("adaptive pooling keeping an input size (None)")
        return c.emit(f"adaptive_avg_pool{nd}d", [c.arg(0, "self")], {"output_size": A.one_or_many(size, 1)})

    return tr


OPTIONAL_INTS = AttrType("null or an int >= 1 or a list of them",
                         lambda v: v is None or int_or_ints(1).accepts(v))
DIVISOR = AttrType("null or an int >= 1", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1))
_SAME = iv.unary_rule(lambda a: a)


def _example(nd: int, attrs: dict[str, Any]) -> Example:
    return Example((example_input("x", [2, 3] + [7] * nd),), ("x",), attrs)


# torch.autocast("cpu") runs the 3-d pools in float32; torch.autocast("xla") runs max_pool2d in bfloat16 (measured,
# tests/test_xla_executors.py); ToMixedPrecision keeps every Relax pool in float16 (kFollow)
_FP32_CPU = frozenset({"autocast-fp32-cpu", "amp-follow"})
_AUTOCAST = {1: frozenset({"amp-follow"}), 2: frozenset({"amp-follow"}), 3: _FP32_CPU}
_AUTOCAST_MAX = {1: frozenset({"amp-follow"}), 2: frozenset({"autocast-lower-xla", "amp-follow"}), 3: _FP32_CPU}


def _pool_ops(nd: int) -> list[OpSpec]:
    max_name, avg_name, ada_name = f"max_pool{nd}d", f"avg_pool{nd}d", f"adaptive_avg_pool{nd}d"
    window_types = {"kernel_size": int_or_ints(1), "stride": OPTIONAL_INTS, "padding": int_or_ints(0),
                    "ceil_mode": BOOL}
    return [
        OpSpec(max_name, "pool", ("x",), {"kernel_size": 2, "stride": None, "padding": 0, "dilation": 1,
                                          "ceil_mode": False},
               _infer_pool(nd), max_pool,
               lambda c: f"F.{max_name}({c.args[0]}, {_torch_window(c, ('kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode'))})",
               _relax_max(nd), _SAME, _example(nd, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
               attr_types={**window_types, "dilation": int_or_ints(1)}, tags=_AUTOCAST_MAX[nd],
               aten=A.overloads(f"{max_name}.default {max_name}_with_indices.default", _aten_max(nd))),
        OpSpec(avg_name, "pool", ("x",), {"kernel_size": 2, "stride": None, "padding": 0, "ceil_mode": False,
                                          "count_include_pad": True, "divisor_override": None},
               _infer_pool(nd), avg_pool,
               lambda c: (f"F.{avg_name}({c.args[0]}, "
                          f"{_torch_window(c, ('kernel_size', 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override'))})"),
               _relax_avg(nd), _SAME,
               _example(nd, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
               attr_types={**window_types, "count_include_pad": BOOL, "divisor_override": DIVISOR}, tags=_AUTOCAST[nd],
               aten=A.overloads(f"{avg_name}.default", _aten_avg(nd))),
        OpSpec(ada_name, "pool", ("x",), {"output_size": 1}, _infer_adaptive(nd), adaptive_avg_pool,
               lambda c: f"F.{ada_name}({c.args[0]}, {c.attrs['output_size']!r})",
               lambda c: f"R.op.nn.{ada_name}({c.arg(0)}, output_size={list(_per_dim(c.attrs['output_size'], nd, 'output_size'))})",
               _SAME, _example(nd, {"output_size": 3}), attr_types={"output_size": int_or_ints(1)}, tags=_AUTOCAST[nd],
               aten=A.overloads(f"{ada_name}.default" + ("" if nd == 1 else f" _{ada_name}.default"), _aten_adaptive(nd))),
    ]


OPS: list[OpSpec] = _pool_ops(1) + _pool_ops(2) + _pool_ops(3)
