"""Convolutions and matrix products: conv1d/2d/3d, conv_transpose1d/2d/3d, linear, matmul, bmm."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..dtypes import LOW_PRECISION
from ..promotion import promote_types
from . import aten as A
from . import intervals as iv
from .base import (
    POSITIVE_INT,
    AtenCall,
    AtenSkip,
    ChainBreak,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    example_input,
    int_or_ints,
    param_dtype_rule,
    require_float,
    tensor,
)


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
            low = 0 if a.dtype != dtype else 1  # the other operand's own dtype is the "parameter" side (fp16 @ bf16:
            # bfloat16, not the float32 they promote to; triage29 bf46a13882 said "float32 parameters")
            return Typed(tensor(shape, dtype), ChainBreak(low, (a, b)[low].dtype, (a, b)[1 - low].dtype), dtype)
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
    terms = n * out_c * int(np.prod(out_sp)) * (c // groups) * int(np.prod(kernel))
    if x.dtype == np.float32 and terms <= SEQUENTIAL_LIMIT:  # float32 ideal: one running sum per output
        products = np.einsum(f"ngc{o}{k},gmc{k}->ngm{o}c{k}", win, w)
        y = seq_sum(products.reshape(*products.shape[:3 + nd], -1)).reshape(n, out_c, *out_sp)
    else:
        y = np.einsum(f"ngc{o}{k},gmc{k}->ngm{o}", win, w, optimize=True).reshape(n, out_c, *out_sp)
    if bias is not None:
        y = y + np.reshape(bias, (1, out_c) + (1,) * nd)
    return y


SEQUENTIAL_LIMIT = 1 << 22  # products a float32 ideal accumulates one by one; beyond this, numpy's blocked sums


def seq_sum(products):
    """Sum over the last axis one term after another in float32 (the least accurate common order)."""
    return np.cumsum(products, axis=-1, dtype=np.float32)[..., -1]


def linear(x, weight, bias=None, **_: Any) -> np.ndarray:
    """x @ weight.T + bias (float32 values accumulate one term after another)."""
    if np.asarray(x).dtype == np.float32 and x.size * weight.shape[0] <= SEQUENTIAL_LIMIT:
        y = seq_sum(x[..., None, :] * weight)
    else:
        y = np.matmul(x, np.swapaxes(weight, 0, 1))
    return y if bias is None else y + bias


def matmul(a, b, **_: Any) -> np.ndarray:
    """Batched matrix product (float32 values accumulate one term after another)."""
    if np.asarray(a).dtype == np.float32 and a.size * b.shape[-1] <= SEQUENTIAL_LIMIT:
        return seq_sum(np.swapaxes(a[..., :, :, None] * b[..., None, :, :], -1, -2))
    return np.matmul(a, b)


def accumulated_magnitude(reference: Callable[..., np.ndarray], operands: list[Any], attrs: dict[str, Any]) -> np.ndarray:
    """sqrt(K) * (sum_k |a_k b_k| + |bias|) per output element of a contraction (bilinear in its first two operands).

    The magnitude a float32 accumulation of K products passes through: in an order other than the ideals' (a SIMD
    kernel's lanes, a blocked GEMM), its error is about sqrt(K) ULPs of float32 at sum |a b| (Higham & Mary's
    probabilistic bound, lambda sqrt(K) u sum |a_k b_k|), whatever the result. Where the terms cancel, the sequential
    ideal may be lucky (alternating +-1 weights over nonnegative inputs keep its partial sums small, while each lane of
    a vectorized kernel sums one sign only): triage21's ba9d9ac554, a float32 1024-term linear with 4 u sum|x w| of
    error, was filed as PyTorch's bug.
    """
    a, b, *bias = (None if o is None else np.abs(np.asarray(o, dtype=np.float64)) for o in operands)
    with np.errstate(all="ignore"):
        terms = np.asarray(reference(a, b, *bias, **attrs), dtype=np.float64)  # the bias broadcast as the op does
        count = np.asarray(reference(np.ones_like(a), np.ones_like(b), **attrs), dtype=np.float64)
        return np.sqrt(np.maximum(count, 1.0)) * terms


def transpose_attrs(nd: int, attrs: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    """Normalized (stride, padding, output_padding, dilation) of a transposed conv node, and (groups,)."""
    stride, padding, dilation, groups = conv_attrs(nd, attrs)
    out_pad = _tuple(attrs.get("output_padding", 0), nd, "output_padding")
    if min(out_pad) < 0 or any(o >= max(s, d) for o, s, d in zip(out_pad, stride, dilation)):
        raise IRError("output_padding must be >= 0 and smaller than stride or dilation")
    return stride, padding, out_pad, dilation, (groups,)


def _infer_conv_transpose(nd: int):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        x, w, b = ops
        assert x is not None and w is not None
        if x.is_scalar or len(x.shape) != nd + 2 or w.is_scalar or len(w.shape) != nd + 2:
            raise IRError(f"input and weight must have rank {nd + 2}, got {list(x.shape)} and {list(w.shape)}")
        require_float(x, "input")
        stride, padding, out_pad, dilation, (groups,) = transpose_attrs(nd, attrs)
        if x.shape[1] != w.shape[0] or w.shape[0] % groups:
            raise IRError(f"input has {x.shape[1]} channels, weight {list(w.shape)} is [in, out / groups, k...] "
                          f"with {groups} groups")
        out_c = w.shape[1] * groups
        if b is not None and (b.is_scalar or b.shape != (out_c,)):
            raise IRError(f"bias must have shape [{out_c}], got {list(b.shape)}")
        spatial = [(size - 1) * s - 2 * p + d * (k - 1) + o + 1
                   for size, k, s, p, o, d in zip(x.shape[2:], w.shape[2:], stride, padding, out_pad, dilation)]
        if min(spatial) < 1:
            raise IRError(f"padding {list(padding)} leaves no output")
        dtype, brk = param_dtype_rule(x, [p for p in (w, b) if p is not None])
        return Typed(tensor((x.shape[0], out_c, *spatial), dtype), brk, dtype if brk else None)

    return infer


def conv_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1,
                   **_: Any) -> np.ndarray:
    """N-d transposed convolution (PyTorch's conv_transposeNd): the input spread out by the stride, padded by
    dilation * (k - 1) - padding (cropped where negative), convolved with the flipped kernel."""
    nd = x.ndim - 2
    stride, padding, output_padding, dilation = (
        [v] * nd if isinstance(v, int) else list(v) for v in (stride, padding, output_padding, dilation))
    spread = np.zeros(x.shape[:2] + tuple((n - 1) * s + 1 for n, s in zip(x.shape[2:], stride)), dtype=x.dtype)
    spread[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = x
    kernel = weight.shape[2:]
    for axis, (k, p, o, d) in enumerate(zip(kernel, padding, output_padding, dilation), start=2):
        before, after = d * (k - 1) - p, d * (k - 1) - p + o
        spread = np.moveaxis(spread, axis, -1)
        spread = np.pad(spread, [(0, 0)] * (spread.ndim - 1) + [(max(before, 0), max(after, 0))])
        spread = spread[..., max(-before, 0): spread.shape[-1] - max(-after, 0)]
        spread = np.moveaxis(spread, -1, axis)
    c_in, per_group = weight.shape[:2]
    w = weight.reshape(groups, c_in // groups, per_group, *kernel)
    w = np.swapaxes(w, 1, 2).reshape(groups * per_group, c_in // groups, *kernel)
    w = np.flip(w, axis=tuple(range(2, 2 + nd)))
    return conv(spread, w, bias, 1, 0, dilation, groups)


# ---------------------------------------------------------------- lowerings


def accumulate_dtype(c: RelaxCall) -> str:
    """float32 for low-precision operands (out_dtype, as TVM's PyTorch frontend emits them), else the compute dtype."""
    return "float32" if c.dtype in LOW_PRECISION else c.dtype


def _relax_product(c: RelaxCall) -> str:
    """Conv, linear, matmul: low-precision operands accumulate in float32 (out_dtype); the result is cast back."""
    acc = accumulate_dtype(c)
    out_dtype = "" if acc == c.dtype else f", out_dtype={c.low.dt(acc)}"
    a, b = c.arg(0), c.arg(1)
    op = c.node.op
    bias = None if c.slot(2) is None else c.arg(2, acc)
    if op == "linear":
        return f"R.op.linear({a}, {b}{'' if bias is None else ', ' + bias}{out_dtype})"
    if op in ("matmul", "bmm"):
        return f"R.op.matmul({a}, {b}{out_dtype})"
    stride, padding, dilation, groups = conv_attrs(int(op[4]), c.attrs)
    conv = (f"R.op.nn.{op}({a}, {b}, strides={list(stride)}, padding={list(padding)}, "
            f"dilation={list(dilation)}, groups={groups}{out_dtype})")
    if bias is None:
        return conv
    hint = c.low.name_of(c.node.id)
    conv = c.low.emit(conv, f"{hint}_conv")
    shaped = c.low.emit(f"R.op.reshape({bias}, {[1, -1] + [1] * (len(c.x_shape) - 2)})", f"{hint}_bias")
    return f"R.op.add({conv}, {shaped})"


def _torch_conv(c: TorchCall, op: str) -> str:
    kw = ", ".join(f"{k}={c.attrs[k]!r}" for k in ("stride", "padding", "dilation", "groups"))
    return f"F.{op}({c.args[0]}, {c.args[1]}, {c.args[2]}, {kw})"


def _conv_example(nd: int) -> Example:
    return Example((example_input("x", [1, 4] + [6] * nd), example_input("w", [6, 2] + [3] * nd, "param"),
                    example_input("b", [6], "param")), ("x", "w", "b"),
                   {"stride": 1, "padding": 1, "dilation": 1, "groups": 2})


def _conv_op(nd: int) -> OpSpec:
    name = f"conv{nd}d"
    return OpSpec(name, "conv", ("x", "weight", "bias?"), dict(_CONV_ATTRS), _infer_conv(nd), conv,
                  lambda c: _torch_conv(c, name), _relax_product, iv.dot_rule(iv.conv_fan), _conv_example(nd),
                  params=(1, 2), attr_types=_CONV_TYPES, tags=_CONTRACTION | {"bias-add-splits", "row-per-output"},
                  relax_dtype=accumulate_dtype, aten=A.overloads(f"{name}.default", _aten_conv(nd))
                  | ({"convolution.default": _aten_convolution} if nd == 2 else {}))


def _relax_conv_transpose(c: RelaxCall) -> str:
    nd = len(c.x_shape) - 2
    acc = accumulate_dtype(c)
    out_dtype = "" if acc == c.dtype else f", out_dtype={c.low.dt(acc)}"
    stride, padding, out_pad, dilation, (groups,) = transpose_attrs(nd, c.attrs)
    conv = (f"R.op.nn.conv{nd}d_transpose({c.arg(0)}, {c.arg(1)}, strides={list(stride)}, padding={list(padding)}, "
            f"output_padding={list(out_pad)}, dilation={list(dilation)}, groups={groups}{out_dtype})")
    if c.slot(2) is None:
        return conv
    hint = c.low.name_of(c.node.id)
    conv = c.low.emit(conv, f"{hint}_conv")
    shaped = c.low.emit(f"R.op.reshape({c.arg(2, acc)}, {[1, -1] + [1] * nd})", f"{hint}_bias")
    return f"R.op.add({conv}, {shaped})"


def _torch_conv_transpose(c: TorchCall, op: str) -> str:
    kw = ", ".join(f"{k}={c.attrs[k]!r}" for k in ("stride", "padding", "output_padding", "groups", "dilation"))
    return f"F.{op}({c.args[0]}, {c.args[1]}, {c.args[2]}, {kw})"


def _conv_transpose_op(nd: int) -> OpSpec:
    name = f"conv_transpose{nd}d"
    example = Example((example_input("x", [1, 4] + [5] * nd), example_input("w", [4, 3] + [3] * nd, "param"),
                       example_input("b", [6], "param")), ("x", "w", "b"),
                      {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 1, "groups": 2})
    return OpSpec(name, "conv_transpose", ("x", "weight", "bias?"), {**_CONV_ATTRS, "output_padding": 0},
                  _infer_conv_transpose(nd), conv_transpose, lambda c: _torch_conv_transpose(c, name),
                  _relax_conv_transpose, iv.dot_rule(iv.conv_transpose_fan), example, params=(1, 2),
                  attr_types={**_CONV_TYPES, "output_padding": int_or_ints(0)}, tags=_CONTRACTION,
                  relax_dtype=accumulate_dtype,
                  aten=A.overloads(f"{name}.{'default' if nd == 1 else 'input'}", _aten_conv_transpose(nd)))


def _aten_conv(nd: int) -> A.AtenFn:
    def tr(c: AtenCall) -> str:
        padding = c.arg(4, "padding", 0)
        if isinstance(padding, str):
            raise AtenSkip(f"padding={padding!r}")
        attrs = {"stride": A.one_or_many(c.arg(3, "stride"), 1), "padding": A.one_or_many(padding, 0),
                 "dilation": A.one_or_many(c.arg(5, "dilation"), 1), "groups": int(c.arg(6, "groups", 1) or 1)}
        return c.emit(f"conv{nd}d", [c.arg(0, "input"), c.arg(1, "weight"), c.arg(2, "bias")], attrs)

    return tr


def _aten_conv_transpose(nd: int) -> A.AtenFn:
    """conv_transposeNd.input(input, weight, bias, stride, padding, output_padding, groups, dilation)."""
    def tr(c: AtenCall) -> str:
        attrs = {"stride": A.one_or_many(c.arg(3, "stride"), 1), "padding": A.one_or_many(c.arg(4, "padding"), 0),
                 "output_padding": A.one_or_many(c.arg(5, "output_padding"), 0),
                 "groups": int(c.arg(6, "groups", 1) or 1), "dilation": A.one_or_many(c.arg(7, "dilation"), 1)}
        return c.emit(f"conv_transpose{nd}d", [c.arg(0, "input"), c.arg(1, "weight"), c.arg(2, "bias")], attrs)

    return tr


def _aten_convolution(c: AtenCall) -> str:
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = (list(c.args) + [None] * 9)[:9]
    nd = len(c.shape or ()) - 2
    attrs = {"stride": A.one_or_many(stride, 1), "padding": A.one_or_many(padding, 0),
             "dilation": A.one_or_many(dilation, 1), "groups": int(groups or 1)}
    if transposed:
        return c.emit(f"conv_transpose{nd}d", [x, w, b], {**attrs, "output_padding": A.one_or_many(out_pad, 0)})
    return c.emit(f"conv{nd}d", [x, w, b], attrs)


def _aten_addmm(c: AtenCall) -> str:
    """addmm(bias, a, b, beta=1, alpha=1): a @ b, then + bias (GPT-2's Conv1D)."""
    if c.arg(3, "beta", 1) != 1 or c.arg(4, "alpha", 1) != 1:
        raise AtenSkip("addmm with beta or alpha")
    product = c.emit("matmul", [c.arg(1, "mat1"), c.arg(2, "mat2")], {})
    return c.emit("add", [c.arg(0, "self"), product], {})


def _np_linear(c: NumpyCall) -> str:
    y = f"({c.args[0]} @ {c.args[1]}.T)"
    return y if c.args[2] == "None" else f"({y} + {c.args[2]})"


_CONV_ATTRS = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}
_CONV_TYPES = {"stride": int_or_ints(1), "padding": int_or_ints(0), "dilation": int_or_ints(1), "groups": POSITIVE_INT}
_CONTRACTION = frozenset({"contraction", "autocast-lower", "amp-always"})
_INNER = iv.dot_rule(lambda infos, a: infos[0].shape[-1])  # type: ignore[union-attr]
_MATMUL_EXAMPLE = Example((example_input("x", [2, 3, 8]), example_input("y", [2, 8, 4])), ("x", "y"))

OPS: list[OpSpec] = [
    _conv_op(1),
    _conv_op(2),
    _conv_op(3),
    _conv_transpose_op(1),
    _conv_transpose_op(2),
    _conv_transpose_op(3),
    OpSpec("linear", "linear", ("x", "weight", "bias?"), {}, _infer_linear, linear,
           lambda c: f"F.linear({c.args[0]}, {c.args[1]}, {c.args[2]})", _relax_product, _INNER,
           Example((example_input("x", [2, 3, 8]), example_input("w", [5, 8], "param"), example_input("b", [5], "param")),
                   ("x", "w", "b")),
           params=(1, 2), tags=_CONTRACTION | {"bias-add-splits", "row-per-output"}, relax_dtype=accumulate_dtype,
           numpy=_np_linear,
           aten=A.overloads("linear.default", lambda c: c.emit("linear", [c.arg(0, "input"), c.arg(1, "weight"), c.arg(2, "bias")], {}))),
    OpSpec("matmul", "matmul", ("a", "b"), {}, _infer_matmul(False), matmul,
           lambda c: f"torch.matmul({c.args[0]}, {c.args[1]})", _relax_product, _INNER, _MATMUL_EXAMPLE,
           tags=_CONTRACTION, relax_dtype=accumulate_dtype,
           numpy=lambda c: f"({c.args[0]} @ {c.args[1]})",
           aten=A.overloads("matmul.default mm.default", lambda c: c.emit("matmul", [c.arg(0, "self"), c.arg(1, "other")], {})) | {"addmm.default": _aten_addmm}),
    OpSpec("bmm", "matmul", ("a", "b"), {}, _infer_matmul(True), matmul,
           lambda c: f"torch.bmm({c.args[0]}, {c.args[1]})", _relax_product, _INNER, _MATMUL_EXAMPLE,
           tags=_CONTRACTION, relax_dtype=accumulate_dtype,
           numpy=lambda c: f"({c.args[0]} @ {c.args[1]})",
           aten=A.overloads("bmm.default", lambda c: c.emit("bmm", [c.arg(0, "self"), c.arg(1, "mat2")], {}))),
]
