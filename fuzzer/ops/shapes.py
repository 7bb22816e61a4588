"""Layout ops: transpose and reshape (what attention's head split and k.transpose(-2, -1) need; values unchanged)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import intervals as iv
from .base import (
    INT,
    SHAPE,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    Typed,
    ValueInfo,
    example_input,
    norm_dim,
    tensor,
)


def _infer_transpose(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar or len(a.shape) < 2:
        raise IRError(f"transpose needs a tensor of rank >= 2, got shape {list(a.shape)}")
    d0, d1 = (norm_dim(int(attrs[k]), len(a.shape), k) for k in ("dim0", "dim1"))
    shape = list(a.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    return Typed(tensor(shape, a.dtype))


def _infer_reshape(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar:
        raise IRError("reshape needs a tensor, got a Python scalar")
    shape = tuple(int(s) for s in attrs["shape"])
    if math.prod(shape) != math.prod(a.shape):
        raise IRError(f"shape {list(shape)} does not hold the {math.prod(a.shape)} elements of {list(a.shape)}")
    return Typed(tensor(shape, a.dtype))


def transpose(a, dim0=0, dim1=1, **_: Any) -> np.ndarray:
    """Swap two dims (a view in PyTorch; the values are unchanged)."""
    return np.swapaxes(np.asarray(a), int(dim0), int(dim1))


def reshape(a, shape=None, **_: Any) -> np.ndarray:
    """The same values in another shape (row-major, as torch.reshape)."""
    return np.reshape(np.asarray(a), tuple(shape))


def _relax_transpose(c: RelaxCall) -> str:
    rank = len(c.x_shape)
    axes = list(range(rank))
    d0, d1 = int(c.attrs["dim0"]) % rank, int(c.attrs["dim1"]) % rank
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return f"R.op.permute_dims({c.arg(0)}, axes={axes})"


def _np_transpose(c: NumpyCall) -> str:
    return f"np.swapaxes({c.args[0]}, {int(c.attrs['dim0'])}, {int(c.attrs['dim1'])})"


_X = (example_input("x", [2, 3, 8]),)

OPS: list[OpSpec] = [
    OpSpec("transpose", "layout", ("a",), {"dim0": 0, "dim1": 1}, _infer_transpose, transpose,
           lambda c: f"torch.transpose({c.args[0]}, {int(c.attrs['dim0'])}, {int(c.attrs['dim1'])})",
           _relax_transpose, iv.unary_rule(lambda a: a), Example(_X, ("x",), {"dim0": -2, "dim1": -1}),
           attr_types={"dim0": INT, "dim1": INT}, numpy=_np_transpose),
    OpSpec("reshape", "layout", ("a",), {"shape": None}, _infer_reshape, reshape,
           lambda c: f"torch.reshape({c.args[0]}, {tuple(int(s) for s in c.attrs['shape'])!r})",
           lambda c: f"R.op.reshape({c.arg(0)}, {[int(s) for s in c.attrs['shape']]!r})", iv.unary_rule(lambda a: a),
           Example(_X, ("x",), {"shape": [6, 2, 4]}), attr_types={"shape": SHAPE},
           numpy=lambda c: f"np.reshape({c.args[0]}, {tuple(int(s) for s in c.attrs['shape'])!r})"),
]
