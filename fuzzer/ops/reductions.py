"""Reductions and softmax: sum, mean, var, softmax, log_softmax."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import is_float
from .base import (BOOL, DIMS, INT, NONNEGATIVE_INT, IRError, OpSpec, Typed, ValueInfo, acc_mean, acc_sum, norm_dim,
                   require_float, tensor)


def _dims(a: ValueInfo, attrs: dict[str, Any]) -> tuple[int, ...]:
    dims = attrs.get("dims")
    rank = len(a.shape)
    if dims is None:
        return tuple(range(rank))
    if not isinstance(dims, (list, tuple)) or not dims:
        raise IRError(f"dims must be a non-empty list or null, got {dims!r}")
    out = tuple(sorted({norm_dim(int(d), rank) for d in dims}))
    if len(out) != len(dims):
        raise IRError(f"dims {list(dims)} name a dim twice (PyTorch raises)")
    return out


def _infer_reduce(kind: str):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        (a,) = ops
        assert a is not None
        if a.is_scalar or not a.shape:
            raise IRError(f"{kind} needs a tensor of rank >= 1, got shape {list(a.shape)}")
        if kind != "sum":
            require_float(a, "input")
        dims = _dims(a, attrs)
        keep = bool(attrs.get("keepdim", False))
        shape = tuple((1 if i in dims else s) for i, s in enumerate(a.shape) if keep or i not in dims)
        dtype = a.dtype if is_float(a.dtype) else "int64"
        count = int(np.prod([a.shape[d] for d in dims]))
        if kind == "var" and count <= int(attrs.get("correction", 1)):
            raise IRError(f"var over {count} element(s) with correction {attrs.get('correction', 1)} is undefined")
        return Typed(tensor(shape, dtype))

    return infer


def _infer_softmax(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar or not a.shape:
        raise IRError(f"softmax needs a tensor of rank >= 1, got shape {list(a.shape)}")
    require_float(a, "input")
    norm_dim(int(attrs.get("dim", -1)), len(a.shape))
    return Typed(tensor(a.shape, a.dtype))


def _axis(a: np.ndarray, dims: Any) -> tuple[int, ...] | None:
    return None if dims is None else tuple(int(d) % a.ndim for d in dims)


def sum(a, dims=None, keepdim=False, **_: Any) -> np.ndarray:  # noqa: A001 - op name
    """Sum over dims."""
    return acc_sum(a, _axis(a, dims), keepdim)


def mean(a, dims=None, keepdim=False, **_: Any) -> np.ndarray:
    """Mean over dims."""
    return acc_mean(a, _axis(a, dims), keepdim)


def var(a, dims=None, keepdim=False, correction=1, **_: Any) -> np.ndarray:
    """Variance over dims with Bessel-style correction (two passes)."""
    axes = _axis(a, dims) or tuple(range(np.ndim(a)))
    count = int(np.prod([np.shape(a)[d] for d in axes]))
    centered = a - acc_mean(a, axes, keepdims=True)
    return acc_sum(centered * centered, axes, keepdim) / (count - int(correction))


def softmax(a, dim=-1, **_: Any) -> np.ndarray:
    """Softmax along dim (max-subtracted)."""
    m = np.max(a, axis=dim, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(a - m)
        return e / acc_sum(e, dim, keepdims=True)


def log_softmax(a, dim=-1, **_: Any) -> np.ndarray:
    """Log-softmax along dim."""
    m = np.max(a, axis=dim, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return a - m - np.log(acc_sum(np.exp(a - m), dim, keepdims=True))


_REDUCE_TYPES = {"dims": DIMS, "keepdim": BOOL}

OPS: list[OpSpec] = [
    OpSpec("sum", "reduction", ("a",), {"dims": None, "keepdim": False}, _infer_reduce("sum"), sum,
           attr_types=_REDUCE_TYPES),
    OpSpec("mean", "reduction", ("a",), {"dims": None, "keepdim": False}, _infer_reduce("mean"), mean,
           attr_types=_REDUCE_TYPES),
    OpSpec("var", "reduction", ("a",), {"dims": None, "keepdim": False, "correction": 1}, _infer_reduce("var"), var,
           attr_types={**_REDUCE_TYPES, "correction": NONNEGATIVE_INT}),
    OpSpec("softmax", "softmax", ("a",), {"dim": -1}, _infer_softmax, softmax, attr_types={"dim": INT}),
    OpSpec("log_softmax", "softmax", ("a",), {"dim": -1}, _infer_softmax, log_softmax, attr_types={"dim": INT}),
]
