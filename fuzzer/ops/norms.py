"""Normalizations: layer_norm, rms_norm, group_norm, batch_norm (inference or training statistics), instance_norm."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..dtypes import LOW_PRECISION
from ..promotion import promote_types
from . import aten as A
from . import intervals as iv
from .base import (
    BOOL,
    EPS,
    POSITIVE,
    POSITIVE_INT,
    SHAPE,
    AtenCall,
    AtenSkip,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    acc_mean,
    acc_moments,
    example_input,
    param_dtype_rule,
    require_float,
    tensor,
)


def _eps(attrs: dict[str, Any]) -> float:
    eps = attrs.get("eps")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps < 0:
        raise IRError(f"eps must be a non-negative number, got {eps!r}")
    return float(eps)


def _mixed_ok(x: ValueInfo, params: list[ValueInfo]) -> bool:
    """PyTorch's CPU kernels accept reduced-precision activations with float32 parameters ("mixed type")."""
    return x.dtype in LOW_PRECISION and bool(params) and all(p.dtype == "float32" for p in params)


def _norm_dtype(x: ValueInfo, params: list[ValueInfo]) -> Typed:
    if _mixed_ok(x, params):
        return Typed(tensor(x.shape, x.dtype), compute_dtype="float32")
    dtype, brk = param_dtype_rule(x, params)
    return Typed(tensor(x.shape, dtype), brk, compute_dtype=dtype if brk else None)


def _check_param(p: ValueInfo | None, shape: tuple[int, ...], what: str) -> None:
    if p is not None and (p.is_scalar or p.shape != shape):
        raise IRError(f"{what} must have shape {list(shape)}, got {list(p.shape)}")
    if p is not None:
        require_float(p, what)


def _tensor_input(x: ValueInfo | None, rank_min: int) -> ValueInfo:
    assert x is not None
    if x.is_scalar or len(x.shape) < rank_min:
        raise IRError(f"input must be a tensor of rank >= {rank_min}, got shape {list(x.shape)}")
    require_float(x, "input")
    return x


def _normalized_shape(x: ValueInfo, attrs: dict[str, Any]) -> tuple[int, ...]:
    """The normalized_shape attribute, checked against x's trailing dims (and eps checked too)."""
    shape = tuple(int(s) for s in attrs.get("normalized_shape") or ())
    if not shape or x.shape[-len(shape):] != shape:
        raise IRError(f"normalized_shape {list(shape)} does not match the trailing dims of {list(x.shape)}")
    _eps(attrs)
    return shape


def _infer_layer_norm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x = _tensor_input(ops[0], 1)
    shape = _normalized_shape(x, attrs)
    for p, what in zip(ops[1:], ("weight", "bias")):
        _check_param(p, shape, what)
    return _norm_dtype(x, [p for p in ops[1:] if p is not None])


def _infer_rms_norm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x = _tensor_input(ops[0], 1)
    shape = _normalized_shape(x, attrs)
    w = ops[1]
    _check_param(w, shape, "weight")
    # torch 2.9's rms_norm accepts any weight dtype and returns the input's dtype (checked by the property test)
    return Typed(tensor(x.shape, x.dtype))


def _channel_params(ops: list[ValueInfo | None], channels: int, names: tuple[str, ...]) -> list[ValueInfo]:
    for p, what in zip(ops, names):
        _check_param(p, (channels,), what)
    return [p for p in ops if p is not None]


def _infer_group_norm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x = _tensor_input(ops[0], 2)
    groups = attrs.get("num_groups")
    if not isinstance(groups, int) or groups < 1 or x.shape[1] % groups:
        raise IRError(f"num_groups {groups!r} must divide the {x.shape[1]} channels")
    if x.shape[0] * (x.shape[1] // groups) * int(np.prod(x.shape[2:])) == 1:  # PyTorch's _verify_batch_size
        raise IRError(f"group_norm needs more than 1 value per group (shape {list(x.shape)}, {groups} groups)")
    _eps(attrs)
    return _norm_dtype(x, _channel_params(ops[1:], x.shape[1], ("weight", "bias")))


def _infer_batch_norm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x = _tensor_input(ops[0], 2)
    _eps(attrs)
    # training mode over one value per channel is defined (mean x, variance 0); PyTorch refuses it, and then so
    # does its semantic oracle, but a pass that computes it (DecomposeOpsForTraining) is still judged by its numbers
    params = _channel_params(ops[1:], x.shape[1], ("running_mean", "running_var", "weight", "bias"))
    return _norm_dtype(x, params)


def _infer_instance_norm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x = _tensor_input(ops[0], 3)
    if int(np.prod(x.shape[2:])) == 1:  # PyTorch's _verify_spatial_size
        raise IRError(f"instance_norm needs more than 1 spatial value per channel, got shape {list(x.shape)}")
    _eps(attrs)
    return _norm_dtype(x, _channel_params(ops[1:], x.shape[1], ("weight", "bias")))


def _affine(y: np.ndarray, weight: Any, bias: Any, axis_shape: tuple[int, ...]) -> np.ndarray:
    if weight is not None:
        y = y * np.reshape(weight, axis_shape)
    if bias is not None:
        y = y + np.reshape(bias, axis_shape)
    return y


def normalize(x, mu, v, eps):
    """(x - mu) / sqrt(v + eps); in float32 arithmetic as norm kernels compute it: fma(x, rstd, -mu * rstd).

    The scale-and-shift form rounds -mu * rstd before the cancellation, so a kernel's error is relative to
    |mu| * rstd, not to the (possibly zero) result: an ideal float32 kernel must feel that too. (The product
    of two float32 numbers is exact in float64, so the fused multiply-add rounds once, as hardware does.)
    """
    if np.asarray(x).dtype != np.float32:
        return (x - mu) / np.sqrt(v + eps)
    rstd = np.float32(1.0) / np.sqrt(v + np.float32(eps))
    shift = -mu * rstd
    return (x.astype(np.float64) * rstd + shift).astype(np.float32)


def scale_shift_magnitude(op: str, operands: list[Any], attrs: dict[str, Any]) -> np.ndarray | None:
    """max(|x|, |mean|) * rstd * |weight| per output element (None: an op that does not center its operand).

    The size of the two terms a scale-and-shift kernel cancels (x * scale and mean * scale, its weight folded into
    the scale as PyTorch's CPU kernels do): its float32 rounding error is an ULP or so there, whatever the result
    (issue 33: a group_norm of one-element groups is exactly 0, and PyTorch's kernels leave an ULP of x * scale).
    """
    slot = lambda k: operands[k] if k < len(operands) else None  # noqa: E731
    if op not in ("layer_norm", "group_norm", "instance_norm", "batch_norm") or not operands:
        return None  # (a source op has no operand at all: triage21's internal error)
    x = np.asarray(operands[0], dtype=np.float64)
    eps, channel = float(attrs.get("eps", 1e-5)), (1, x.shape[1]) + (1,) * (x.ndim - 2) if x.ndim > 1 else ()
    if op == "layer_norm":
        shape = tuple(attrs["normalized_shape"])
        g, axes, weight = x, tuple(range(x.ndim - len(shape), x.ndim)), slot(1)
    elif op == "group_norm":
        g, axes, shape, weight = x.reshape(x.shape[0], int(attrs["num_groups"]), -1), (2,), channel, slot(1)
    elif op == "instance_norm":
        g, axes, shape, weight = x, tuple(range(2, x.ndim)), channel, slot(1)
    elif op == "batch_norm":
        g, shape, weight = x, channel, slot(3)
        axes = (0, *range(2, x.ndim)) if attrs.get("training") else ()
    else:
        return None
    if axes:
        mu, v = g.mean(axis=axes, keepdims=True), g.var(axis=axes, keepdims=True)
    else:  # running statistics
        mu, v = (np.reshape(np.asarray(slot(k), dtype=np.float64), shape) for k in (1, 2))
    with np.errstate(all="ignore"):
        m = (np.maximum(np.abs(g), np.abs(mu)) / np.sqrt(v + eps)).reshape(x.shape)
        if weight is not None:
            m = m * np.abs(np.reshape(np.asarray(weight, dtype=np.float64), shape))
    return np.broadcast_to(m, x.shape)


def layer_norm(x, weight=None, bias=None, normalized_shape=(), eps=1e-5, **_: Any) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over the trailing normalized_shape, then affine."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mu, v = acc_moments(x, axes)
    return _affine(normalize(x, mu, v, eps), weight, bias, tuple(normalized_shape))


def rms_norm(x, weight=None, normalized_shape=(), eps=1e-6, **_: Any) -> np.ndarray:
    """x / sqrt(mean(x**2) + eps) over the trailing normalized_shape, times weight."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = x / np.sqrt(acc_mean(x**2, axes, keepdims=True) + eps)
    return _affine(y, weight, None, tuple(normalized_shape))


def group_norm(x, weight=None, bias=None, num_groups=1, eps=1e-5, **_: Any) -> np.ndarray:
    """Normalize over (channels in a group, spatial dims), then per-channel affine."""
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1)
    mu, v = acc_moments(g, (g.ndim - 1,))
    y = normalize(g, mu, v, eps).reshape(x.shape)
    return _affine(y, weight, bias, (1, c) + (1,) * (x.ndim - 2))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, eps=1e-5, training=False, **_: Any) -> np.ndarray:
    """Batch norm: running statistics (inference), or the batch's own mean and biased variance (training)."""
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        mu, v = acc_moments(x, axes)
    else:
        mu, v = np.reshape(running_mean, shape), np.reshape(running_var, shape)
    return _affine(normalize(x, mu, v, eps), weight, bias, shape)


def instance_norm(x, weight=None, bias=None, eps=1e-5, **_: Any) -> np.ndarray:
    """Normalize each (sample, channel) over its spatial dims, then per-channel affine."""
    axes = tuple(range(2, x.ndim))
    mu, v = acc_moments(x, axes)
    return _affine(normalize(x, mu, v, eps), weight, bias, (1, x.shape[1]) + (1,) * (x.ndim - 2))


# ---------------------------------------------------------------- lowerings


def _torch_layer_norm(c: TorchCall) -> str:
    a = c.args
    return f"F.layer_norm({a[0]}, {list(c.attrs['normalized_shape'])!r}, {a[1]}, {a[2]}, eps={c.attrs['eps']!r})"


def _torch_rms_norm(c: TorchCall) -> str:
    return f"F.rms_norm({c.args[0]}, {list(c.attrs['normalized_shape'])!r}, {c.args[1]}, eps={c.attrs['eps']!r})"


def _torch_group_norm(c: TorchCall) -> str:
    a = c.args
    return f"F.group_norm({a[0]}, {c.attrs['num_groups']!r}, {a[1]}, {a[2]}, eps={c.attrs['eps']!r})"


def _torch_batch_norm(c: TorchCall) -> str:
    a, eps = c.args, c.attrs["eps"]
    if c.attrs["training"]:  # training mode updates the running statistics in place: give it copies
        return f"F.batch_norm({a[0]}, {a[1]}.clone(), {a[2]}.clone(), {a[3]}, {a[4]}, training=True, eps={eps!r})"
    return f"F.batch_norm({a[0]}, {a[1]}, {a[2]}, {a[3]}, {a[4]}, training=False, eps={eps!r})"


def _torch_instance_norm(c: TorchCall) -> str:
    return f"F.instance_norm({c.args[0]}, weight={c.args[1]}, bias={c.args[2]}, eps={c.attrs['eps']!r})"


def _weights(c: RelaxCall, first: int, shape: tuple[int, ...], names: tuple[str, ...] = ("weight", "bias"),
             dtype: str | None = None) -> list[str]:
    """Optional weight/bias slots as Relax values, ones/zeros of `shape` where absent (Relax norms need both)."""
    fills = {"weight": "ones", "bias": "zeros"}
    hint = c.low.name_of(c.node.id)
    return [c.low.param(c.slot(first + k), shape, dtype or c.dtype, fills[n], f"{hint}_{n}") for k, n in enumerate(names)]


def _relax_layer_norm(c: RelaxCall) -> str:
    shape = tuple(c.attrs["normalized_shape"])
    x = c.arg(0)
    w, b = _weights(c, 1, shape)
    return f"R.op.nn.layer_norm({x}, {w}, {b}, axes={list(range(-len(shape), 0))}, epsilon={c.attrs['eps']!r})"


def _rms_dtype(c: RelaxCall) -> str:
    """PyTorch's rms_norm computes with the weight in the promoted dtype (opmath) and returns it."""
    if c.slot(1) is None:
        return c.dtype
    return promote_types(c.low.typed.values[c.slot(0)].dtype, c.low.typed.values[c.slot(1)].dtype)


def _relax_rms_norm(c: RelaxCall) -> str:
    shape = tuple(c.attrs["normalized_shape"])
    dt = _rms_dtype(c)
    x = c.arg(0, dt)
    (w,) = _weights(c, 1, shape, ("weight",), dt)
    return f"R.op.nn.rms_norm({x}, {w}, axes={list(range(-len(shape), 0))}, epsilon={c.attrs['eps']!r})"


def _relax_group_norm(c: RelaxCall) -> str:
    x = c.arg(0)
    w, b = _weights(c, 1, (c.x_shape[1],))
    return (f"R.op.nn.group_norm({x}, {w}, {b}, num_groups={c.attrs['num_groups']}, channel_axis=1, "
            f"axes={list(range(2, len(c.x_shape)))}, epsilon={c.attrs['eps']!r})")


def _relax_batch_norm(c: RelaxCall) -> str:
    x = c.arg(0)
    w, b = _weights(c, 3, (c.x_shape[1],))
    m, v = c.arg(1), c.arg(2)
    bn = c.low.emit(f"R.op.nn.batch_norm({x}, {w}, {b}, {m}, {v}, axis=1, "
                    f"epsilon={c.attrs['eps']!r}, training={bool(c.attrs['training'])})", f"{c.low.name_of(c.node.id)}_bn")
    return f"R.TupleGetItem({bn}, 0)"


def _relax_instance_norm(c: RelaxCall) -> str:
    x = c.arg(0)
    w, b = _weights(c, 1, (c.x_shape[1],))
    return (f"R.op.nn.instance_norm({x}, {w}, {b}, channel_axis=1, axes={list(range(2, len(c.x_shape)))}, "
            f"epsilon={c.attrs['eps']!r})")


def _np_affine(c: NumpyCall, y: str, first: int, shape: str) -> str:
    w, b = (c.args + ["None"] * 5)[first:first + 2]
    y = y if w == "None" else f"{y} * {w}.reshape({shape})"
    return y if b == "None" else f"({y} + {b}.reshape({shape}))"


def _np_standardize(x: str, axes: str, eps: float) -> str:
    return f"(lambda v: (v - v.mean({axes}, keepdims=True)) / np.sqrt(v.var({axes}, keepdims=True) + {eps!r}))({x})"


def _np_layer_norm(c: NumpyCall) -> str:
    n = len(c.attrs["normalized_shape"])
    axes = repr(tuple(range(-n, 0)))
    return _np_affine(c, _np_standardize(c.args[0], axes, c.attrs["eps"]), 1, "-1" if n == 1 else repr(tuple(c.attrs["normalized_shape"])))


def _np_rms_norm(c: NumpyCall) -> str:
    n = len(c.attrs["normalized_shape"])
    x = c.args[0]
    y = f"({x} / np.sqrt(np.mean({x} ** 2, {tuple(range(-n, 0))!r}, keepdims=True) + {c.attrs['eps']!r}))"
    return y if c.args[1] == "None" else f"{y} * {c.args[1]}"


def _channel_shape(c: NumpyCall) -> str:
    rank = len(c.shapes[0] or ())
    return repr((1, -1) + (1,) * (rank - 2))


def _np_group_norm(c: NumpyCall) -> str:
    shape = c.shapes[0] or ()
    x, g = c.args[0], int(c.attrs["num_groups"])
    y = f"{_np_standardize(f'{x}.reshape({shape[0]}, {g}, -1)', '-1', c.attrs['eps'])}.reshape({tuple(shape)!r})"
    return _np_affine(c, y, 1, _channel_shape(c))


def _np_instance_norm(c: NumpyCall) -> str:
    axes = repr(tuple(range(2, len(c.shapes[0] or ()))))
    return _np_affine(c, _np_standardize(c.args[0], axes, c.attrs["eps"]), 1, _channel_shape(c))


def _np_batch_norm(c: NumpyCall) -> str:
    x, shape, eps = c.args[0], _channel_shape(c), c.attrs["eps"]
    if c.attrs["training"]:
        axes = repr((0,) + tuple(range(2, len(c.shapes[0] or ()))))
        return _np_affine(c, _np_standardize(x, axes, eps), 3, shape)
    y = f"(({x} - {c.args[1]}.reshape({shape})) / np.sqrt({c.args[2]}.reshape({shape}) + {eps!r}))"
    return _np_affine(c, y, 3, shape)


def _aten_layer_norm(c: AtenCall) -> str:
    eps = c.arg(4, "eps", 1e-5)
    return c.emit("layer_norm", [c.arg(0, "input"), c.arg(2, "weight"), c.arg(3, "bias")],
                  {"normalized_shape": A.ints(c.arg(1, "normalized_shape")), "eps": float(1e-5 if eps is None else eps)})


def _aten_rms_norm(c: AtenCall) -> str:
    eps = c.arg(3, "eps")
    if eps is None:
        raise AtenSkip("rms_norm without eps (the default depends on the dtype)")
    return c.emit("rms_norm", [c.arg(0, "input"), c.arg(2, "weight")],
                  {"normalized_shape": A.ints(c.arg(1, "normalized_shape")), "eps": float(eps)})


def _aten_group_norm(c: AtenCall) -> str:
    eps = c.arg(4, "eps", 1e-5)
    return c.emit("group_norm", [c.arg(0, "input"), c.arg(2, "weight"), c.arg(3, "bias")],
                  {"num_groups": int(c.arg(1, "num_groups")), "eps": float(1e-5 if eps is None else eps)})


def _aten_batch_norm(c: AtenCall) -> Any:
    """batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled), or
    _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps), which
    returns (out, mean, rstd): only its first output is translated."""
    x, w, b, mean, var = (c.arg(k, n) for k, n in enumerate(("input", "weight", "bias", "running_mean", "running_var")))
    if c.target.startswith("batch_norm"):
        training, eps = bool(c.arg(5, "training", False)), c.arg(7, "eps", 1e-5)
    else:
        training, eps = False, c.arg(6, "eps", 1e-5)
    if mean is None or var is None:
        raise AtenSkip("batch_norm without running statistics")
    out = c.emit("batch_norm", [x, mean, var, w, b], {"eps": float(eps), "training": training})
    return out if c.target.startswith("batch_norm") else [out, None, None]


def _aten_instance_norm(c: AtenCall) -> str:
    if c.arg(5, "use_input_stats", True) is False:
        raise AtenSkip("instance_norm with running statistics")
    return c.emit("instance_norm", [c.arg(0, "input"), c.arg(1, "weight"), c.arg(2, "bias")],
                  {"eps": float(c.arg(7, "eps", 1e-5))})


_SEQ = example_input("x", [2, 3, 8])
_CHANNELS = example_input("x", [2, 4, 6])
_AFFINE_8 = (example_input("w", [8], "param"), example_input("b", [8], "param"))
_AFFINE_4 = (example_input("w", [4], "param"), example_input("b", [4], "param"))

OPS: list[OpSpec] = [
    OpSpec("layer_norm", "norm", ("x", "weight?", "bias?"), {"normalized_shape": None, "eps": 1e-5},
           _infer_layer_norm, layer_norm, _torch_layer_norm, _relax_layer_norm,
           iv.norm_rule(lambda x, a: math.prod(a["normalized_shape"])),
           Example((_SEQ, *_AFFINE_8), ("x", "w", "b"), {"normalized_shape": [8], "eps": 1e-5}),
           params=(1, 2), attr_types={"normalized_shape": SHAPE, "eps": EPS},
           numpy=_np_layer_norm,
           aten=A.overloads("layer_norm.default", _aten_layer_norm)),
    OpSpec("rms_norm", "norm", ("x", "weight?"), {"normalized_shape": None, "eps": 1e-6},
           _infer_rms_norm, rms_norm, _torch_rms_norm, _relax_rms_norm,
           iv.norm_rule(lambda x, a: math.prod(a["normalized_shape"])),
           Example((_SEQ, _AFFINE_8[0]), ("x", "w"), {"normalized_shape": [8], "eps": 1e-6}),
           params=(1,), attr_types={"normalized_shape": SHAPE, "eps": EPS}, relax_dtype=_rms_dtype,
           numpy=_np_rms_norm,
           aten=A.overloads("rms_norm.default", _aten_rms_norm)),
    OpSpec("group_norm", "norm", ("x", "weight?", "bias?"), {"num_groups": 1, "eps": 1e-5},
           _infer_group_norm, group_norm, _torch_group_norm, _relax_group_norm,
           iv.norm_rule(lambda x, a: math.prod(x.shape[1:]) // a["num_groups"]),
           Example((_CHANNELS, *_AFFINE_4), ("x", "w", "b"), {"num_groups": 2, "eps": 1e-5}),
           params=(1, 2), attr_types={"num_groups": POSITIVE_INT, "eps": EPS},
           numpy=_np_group_norm,
           aten=A.overloads("group_norm.default", _aten_group_norm)),
    OpSpec("batch_norm", "norm", ("x", "running_mean", "running_var", "weight?", "bias?"), {"eps": 1e-5, "training": False},
           _infer_batch_norm, batch_norm, _torch_batch_norm, _relax_batch_norm, iv.batch_norm_rule,
           Example((_CHANNELS, example_input("rm", [4], "param"), example_input("rv", [4], "param", POSITIVE),
                    *_AFFINE_4), ("x", "rm", "rv", "w", "b"), {"eps": 1e-5}),
           params=(1, 2, 3, 4), attr_types={"eps": EPS, "training": BOOL},
           tags=frozenset({"autocast-fp32-xla"}),
           numpy=_np_batch_norm,
           aten=A.overloads("batch_norm.default _native_batch_norm_legit_no_training.default", _aten_batch_norm)),
    OpSpec("instance_norm", "norm", ("x", "weight?", "bias?"), {"eps": 1e-5},
           _infer_instance_norm, instance_norm, _torch_instance_norm, _relax_instance_norm,
           iv.norm_rule(lambda x, a: math.prod(x.shape[2:])),
           Example((_CHANNELS, *_AFFINE_4), ("x", "w", "b"), {"eps": 1e-5}),
           params=(1, 2), attr_types={"eps": EPS}, tags=frozenset({"autocast-fp32-xla"}),
           numpy=_np_instance_norm,
           aten=A.overloads("instance_norm.default", _aten_instance_norm)),
]

# TVM ToMixedPrecision runs the Relax op these lower to in float16 when all its tensor operands are float16
# (TMixedPrecisionPolicy kFollow; tests/test_tvm_depth.py checks it against TVM's registry).
_AMP_FOLLOW = ('layer_norm', 'rms_norm', 'group_norm', 'instance_norm')
OPS = [replace(s, tags=s.tags | {"amp-follow"}) if s.name in _AMP_FOLLOW else s for s in OPS]
# torch_xla lowers these to one HLO batch-norm-training (checked on 2.9.0: tests/test_xla_executors.py)
_XLA_BN_TRAINING = ('layer_norm', 'group_norm', 'instance_norm')
OPS = [replace(s, tags=s.tags | {"xla-batch-norm-training"}) if s.name in _XLA_BN_TRAINING else s for s in OPS]
# Relax DecomposeOpsForTraining expands these into R.mean / R.variance in their own dtype (checked on 0.27:
# tests/test_tvm_depth.py), so TVM's 16-bit sums show through the pass
OPS = [replace(s, tags=s.tags | {"autograd-needs-weight"}) if s.name == "group_norm" else s for s in OPS]
_RELAX_TRAINING_MEAN = ('layer_norm', 'batch_norm')
OPS = [replace(s, tags=s.tags | {"relax-training-mean"}) if s.name in _RELAX_TRAINING_MEAN else s for s in OPS]
# TVM's topi group_norm and instance_norm take the variance in one pass, E[x^2] - E[x]^2 in float32, in every dtype
# (its layer_norm takes two; checked on 0.27: tests/test_tvm_depth.py)
_RELAX_ONE_PASS_VARIANCE = ('group_norm', 'instance_norm')
OPS = [replace(s, tags=s.tags | {"relax-one-pass-variance"}) if s.name in _RELAX_ONE_PASS_VARIANCE else s
       for s in OPS]
