"""Lookups by integer index: embedding, index_select, gather (token embeddings, position tables, top-k picks).

Values are copied, never computed: a backend must return exactly the rows the indices name. Indices are
int32/int64 tensors; an index out of range is an error in PyTorch and undefined elsewhere, so generators
keep them in range and the reference clips (it never reads outside the table).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import INT_DTYPES
from . import aten as A
from .base import (
    INT,
    AtenCall,
    AtenSkip,
    Example,
    IRError,
    OpSpec,
    RelaxCall,
    Typed,
    ValueInfo,
    broadcast_shapes,
    example_input,
    norm_dim,
    tensor,
)


def _index(info: ValueInfo, what: str) -> None:
    if info.is_scalar or info.dtype not in INT_DTYPES:
        raise IRError(f"{what} must be an int32/int64 tensor, got {'a Python number' if info.is_scalar else info.dtype}")


def _infer_embedding(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    weight, ids = ops
    assert weight is not None and ids is not None
    if weight.is_scalar or len(weight.shape) != 2:
        raise IRError(f"embedding weight must be [num, dim], got {list(weight.shape)}")
    _index(ids, "embedding indices")
    return Typed(tensor(ids.shape + weight.shape[1:], weight.dtype))


def _infer_index_select(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x, index = ops
    assert x is not None and index is not None
    if x.is_scalar or not x.shape:
        raise IRError("index_select needs a tensor of rank >= 1")
    _index(index, "index")
    if len(index.shape) > 1:
        raise IRError(f"index must be 1-D, got {list(index.shape)}")
    dim = norm_dim(int(attrs["dim"]), len(x.shape))
    shape = list(x.shape)
    shape[dim] = index.shape[0] if index.shape else 1
    return Typed(tensor(shape, x.dtype))


def _infer_gather(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x, index = ops
    assert x is not None and index is not None
    _index(index, "index")
    dim = norm_dim(int(attrs["dim"]), len(x.shape))
    if x.is_scalar or len(index.shape) != len(x.shape) or any(
            i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != dim):
        raise IRError(f"gather index {list(index.shape)} must have the rank of {list(x.shape)} and fit it off dim {dim}")
    return Typed(tensor(index.shape, x.dtype))


def _infer_index(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    x, *idx = ops
    assert x is not None
    given = [i for i in idx if i is not None]
    if x.is_scalar or len(given) > len(x.shape) or any(i is None for i in idx[:len(given)]):
        raise IRError(f"index takes 1 to {len(x.shape)} index tensors for the leading dims of {list(x.shape)}")
    for i in given:
        _index(i, "an index")
    return Typed(tensor(broadcast_shapes([i.shape for i in given]) + x.shape[len(given):], x.dtype))


def _ids(index, size):
    """Integer indices (negative ones counted from the end), clipped into 0..size-1."""
    ids = np.asarray(index).astype(np.int64)
    return np.clip(np.where(ids < 0, ids + size, ids), 0, size - 1)


def embedding(weight, ids, **_: Any) -> np.ndarray:
    """weight[ids]: one row per index."""
    weight = np.asarray(weight)
    return weight[_ids(ids, weight.shape[0])]


def index_select(a, index, dim=0, **_: Any) -> np.ndarray:
    """The slices of `a` along dim that `index` names, in its order."""
    a = np.asarray(a)
    return np.take(a, _ids(index, a.shape[int(dim)]), axis=int(dim))


def index(a, *indices, **_: Any) -> np.ndarray:
    """a[i0, i1, ...]: advanced indexing of the leading dims by broadcast integer tensors (absent slots are None)."""
    a = np.asarray(a)
    given = [i for i in indices if i is not None]
    return a[tuple(_ids(i, a.shape[d]) for d, i in enumerate(given))]


def gather(a, index, dim=0, **_: Any) -> np.ndarray:
    """out[i][j][k] = a[i][index[i][j][k]][k] for dim 1 (PyTorch's gather)."""
    a = np.asarray(a)
    index = _ids(index, a.shape[int(dim)])
    window = a[tuple(slice(0, s) if k != int(dim) % a.ndim else slice(None) for k, s in enumerate(index.shape))]
    return np.take_along_axis(window, index, axis=int(dim))


def _relax_ids(c: RelaxCall, slot: int, size: int) -> str:
    """The index operand in `slot`, negative indices counted from the end of a dim of `size` (PyTorch's rule;
    Relax's take and index_tensor read a negative index out of bounds)."""
    dtype = c.low.typed.values[c.slot(slot)].dtype
    ids = c.low.operand(c.slot(slot), dtype)
    hint = f"{c.low.name_of(c.node.id)}_ids{slot}"
    negative = c.low.emit(f"R.op.less({ids}, R.const(0, {c.low.dt(dtype)}))", f"{hint}_neg")
    wrapped = c.low.emit(f"R.op.add({ids}, R.const({size}, {c.low.dt(dtype)}))", f"{hint}_wrapped")
    return c.low.emit(f"R.op.where({negative}, {wrapped}, {ids})", hint)


def _relax_gather(c: RelaxCall) -> str:
    """gather_elements on the part of the input the index covers (PyTorch's index may be smaller off dim)."""
    dim = int(c.attrs["dim"]) % len(c.x_shape)
    index_shape = c.low.typed.values[c.slot(1)].shape
    x = c.arg(0)
    cut = [(k, s) for k, s in enumerate(index_shape) if k != dim and s != c.x_shape[k]]
    if cut:
        x = c.low.emit(f"R.op.strided_slice({x}, axes={[k for k, _ in cut]}, begin={[0] * len(cut)}, "
                       f"end={[s for _, s in cut]})", f"{c.low.name_of(c.node.id)}_window")
    return f"R.op.gather_elements({x}, {_relax_ids(c, 1, c.x_shape[dim])}, axis={dim})"


def _aten_index(c: AtenCall) -> str:
    """x[i0, i1, ...] (index.Tensor): integer index tensors on the leading dims are the `index` op; one index tensor
    on another dim (the others taken whole) is index_select of the flattened index, reshaped to the exported
    shape. Boolean masks (data-dependent shapes) and index tensors with gaps are not taken."""
    x, indices = c.arg(0, "self"), c.arg(1, "indices")
    given = [(d, t) for d, t in enumerate(indices) if t is not None]
    if not given or any(not isinstance(t, str) or c.info(t).dtype not in INT_DTYPES for _, t in given):
        raise AtenSkip("indexing with a boolean mask")
    if [d for d, _ in given] == list(range(len(given))):
        return c.emit("index", [x, *(t for _, t in given)], {})
    if len(given) != 1:
        raise AtenSkip("index tensors with gaps between them")
    dim, idx = given[0]
    flat = idx if len(c.info(idx).shape) == 1 else c.emit("reshape", [idx], {"shape": [max(1, math.prod(c.info(idx).shape))]})
    picked = c.emit("index_select", [x, flat], {"dim": dim})
    assert c.shape is not None
    return picked if c.info(picked).shape == c.shape else c.emit("reshape", [picked], {"shape": list(c.shape)})


def _aten_embedding(c: AtenCall) -> str:
    return c.emit("embedding", [c.arg(0, "weight"), c.arg(1, "indices")], {})


_TABLE = example_input("w", [10, 8], "param")
_IDS = example_input("i", [2, 5], init={"dist": "randint", "low": 0, "high": 10, "seed": 4}, dtype="int64")

OPS: list[OpSpec] = [
    OpSpec("embedding", "index", ("weight", "indices"), {}, _infer_embedding, embedding,
           lambda c: f"F.embedding({c.args[1]}, {c.args[0]})",
           lambda c: f"R.op.take({c.arg(0)}, {_relax_ids(c, 1, c.x_shape[0])}, axis=0)", lambda ivs, infos, attrs, out: ivs[0],
           Example((_TABLE, _IDS), ("w", "i")), params=(0,), tags=frozenset({"row-lookup"}),
           numpy=lambda c: f"{c.args[0]}[{c.args[1]}.astype(int)]",
           aten=A.overloads("embedding.default", _aten_embedding)),
    OpSpec("index_select", "index", ("a", "index"), {"dim": 0}, _infer_index_select, index_select,
           lambda c: f"torch.index_select({c.args[0]}, {int(c.attrs['dim'])}, {c.args[1]})",
           lambda c: (f"R.op.take({c.arg(0)}, {_relax_ids(c, 1, c.x_shape[int(c.attrs['dim']) % len(c.x_shape)])}, "
                      f"axis={int(c.attrs['dim']) % len(c.x_shape)})"),
           lambda ivs, infos, attrs, out: ivs[0],
           Example((example_input("x", [2, 3, 8]),
                    example_input("i", [5], init={"dist": "randint", "low": 0, "high": 8, "seed": 5}, dtype="int64")),
                   ("x", "i"), {"dim": -1}),
           attr_types={"dim": INT},
           numpy=lambda c: f"np.take({c.args[0]}, {c.args[1]}.astype(int), axis={int(c.attrs['dim'])})",
           aten={"index_select.default": lambda c: c.emit("index_select", [c.arg(0, "self"), c.arg(2, "index")],
                                                          {"dim": int(c.arg(1, "dim"))}),
                 "index.Tensor": _aten_index}),
    OpSpec("index", "index", ("a", "i0", "i1?", "i2?", "i3?"), {}, _infer_index, index,
           lambda c: f"{c.args[0]}[{', '.join(a for a in c.args[1:] if a != 'None')}]",
           lambda c: (f"R.op.index_tensor({c.arg(0)}, "
                      f"[{', '.join(_relax_ids(c, k, c.x_shape[k - 1]) for k in range(1, 5) if c.slot(k) is not None)}])"),
           lambda ivs, infos, attrs, out: ivs[0],
           Example((example_input("x", [4, 6, 3]),
                    example_input("i", [2, 1], init={"dist": "randint", "low": 0, "high": 4, "seed": 8}, dtype="int64"),
                    example_input("j", [1, 5], init={"dist": "randint", "low": -6, "high": 6, "seed": 9}, dtype="int64")),
                   ("x", "i", "j")),
           numpy=lambda c: f"{c.args[0]}[{', '.join(a + '.astype(int)' for a in c.args[1:] if a != 'None')}]",
           aten={}),
    OpSpec("gather", "index", ("a", "index"), {"dim": 0}, _infer_gather, gather,
           lambda c: f"torch.gather({c.args[0]}, {int(c.attrs['dim'])}, {c.args[1]})", _relax_gather,
           lambda ivs, infos, attrs, out: ivs[0],
           Example((example_input("x", [2, 3, 8]),
                    example_input("i", [2, 3, 4], init={"dist": "randint", "low": 0, "high": 8, "seed": 6}, dtype="int64")),
                   ("x", "i"), {"dim": 2}),
           attr_types={"dim": INT},
           numpy=lambda c: f"np.take_along_axis({c.args[0]}, {c.args[1]}.astype(int), axis={int(c.attrs['dim'])})",
           aten={"gather.default": lambda c: c.emit("gather", [c.arg(0, "self"), c.arg(2, "index")],
                                                    {"dim": int(c.arg(1, "dim"))})}),
]
