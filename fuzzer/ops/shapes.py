"""Layout ops: transpose, permute, reshape, expand, cat, slice, select, constant pad (values unchanged, only moved).

What attention's head split, RoPE's rotate-half, skip concatenation and padding are made of. None of them
rounds: their fp64 reference is exact and a backend must return exactly the operand's values.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..promotion import Operand, result_type
from . import aten as A
from . import intervals as iv
from .base import (
    INT,
    SHAPE,
    AtenCall,
    AtenSkip,
    AttrType,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    example_input,
    norm_dim,
    one_of,
    tensor,
)

CAT_SLOTS = 16  # cat takes 1..16 tensors (UNet skips, RoPE halves and timestep sin/cos take two)


def _infer_transpose(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar or len(a.shape) < 2:
        raise IRError(f"transpose needs a tensor of rank >= 2, got shape {list(a.shape)}")
    d0, d1 = (norm_dim(int(attrs[k]), len(a.shape), k) for k in ("dim0", "dim1"))
    shape = list(a.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    return Typed(tensor(shape, a.dtype))


def _infer_permute(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    rank = len(a.shape)
    dims = [norm_dim(int(d), rank) for d in attrs["dims"]]
    if a.is_scalar or sorted(dims) != list(range(rank)):
        raise IRError(f"dims {list(attrs['dims'])} are not a permutation of the {rank} dims of {list(a.shape)}")
    return Typed(tensor([a.shape[d] for d in dims], a.dtype))


def _infer_reshape(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar:
        raise IRError("reshape needs a tensor, got a Python scalar")
    shape = tuple(int(s) for s in attrs["shape"])
    if math.prod(shape) != math.prod(a.shape):
        raise IRError(f"shape {list(shape)} does not hold the {math.prod(a.shape)} elements of {list(a.shape)}")
    return Typed(tensor(shape, a.dtype))


def _infer_expand(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    shape = tuple(int(s) for s in attrs["shape"])
    lead = len(shape) - len(a.shape)
    if a.is_scalar or lead < 0 or any(s not in (1, t) for s, t in zip(a.shape, shape[lead:])):
        raise IRError(f"shape {list(a.shape)} does not expand to {list(shape)} (only size-1 dims grow)")
    return Typed(tensor(shape, a.dtype))


def _infer_cat(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    parts = [o for o in ops if o is not None]
    if any(p.is_scalar or not p.shape for p in parts):
        raise IRError("cat needs tensors of rank >= 1")
    rank = len(parts[0].shape)
    dim = norm_dim(int(attrs["dim"]), rank)
    for p in parts[1:]:
        if len(p.shape) != rank or any(s != t for k, (s, t) in enumerate(zip(p.shape, parts[0].shape)) if k != dim):
            raise IRError(f"cat along dim {dim}: shapes {', '.join(str(list(q.shape)) for q in parts)} differ elsewhere")
    shape = list(parts[0].shape)
    shape[dim] = sum(p.shape[dim] for p in parts)
    return Typed(tensor(shape, result_type(*(Operand(p.dtype, "tensor") for p in parts))))


def slice_bounds(size: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """Python's slice(start, end, step) on `size` elements, normalized: (start, end, count)."""
    begin, stop, _ = slice(start, end, step).indices(size)
    return begin, stop, max(0, -(-(stop - begin) // step))


def _infer_slice(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar or not a.shape:
        raise IRError("slice needs a tensor of rank >= 1")
    dim = norm_dim(int(attrs["dim"]), len(a.shape))
    _, _, count = slice_bounds(a.shape[dim], int(attrs["start"]), int(attrs["end"]), int(attrs["step"]))
    if count < 1:
        raise IRError(f"slice {attrs['start']}:{attrs['end']}:{attrs['step']} of dim {dim} (size {a.shape[dim]}) is empty")
    shape = list(a.shape)
    shape[dim] = count
    return Typed(tensor(shape, a.dtype))


def _infer_slice_scatter(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    base, src = ops
    assert base is not None and src is not None
    sliced = _infer_slice([base], attrs).value
    if src.is_scalar or src.shape != sliced.shape:
        raise IRError(f"src {list(src.shape)} must have the slice's shape {list(sliced.shape)}")
    if src.dtype != base.dtype:
        raise IRError(f"src ({src.dtype}) and the tensor ({base.dtype}) must share a dtype (PyTorch raises)")
    return Typed(tensor(base.shape, base.dtype))


def _infer_select(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar or not a.shape:
        raise IRError("select needs a tensor of rank >= 1")
    dim = norm_dim(int(attrs["dim"]), len(a.shape))
    if not -a.shape[dim] <= int(attrs["index"]) < a.shape[dim]:
        raise IRError(f"index {attrs['index']} is out of range for dim {dim} of size {a.shape[dim]}")
    return Typed(tensor(a.shape[:dim] + a.shape[dim + 1:], a.dtype))


def _infer_pad(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    pads = [int(p) for p in attrs["pads"]]
    if a.is_scalar or len(pads) % 2 or len(pads) // 2 > len(a.shape):
        raise IRError(f"pads {pads} must be (before, after) pairs for at most the {len(a.shape)} dims of {list(a.shape)}")
    mode = attrs.get("mode", "constant")
    if mode != "constant":  # PyTorch's reflection, replication and circular pads: 1-3 trailing dims of a 2-5 dim input
        dims = len(pads) // 2
        if not 1 <= dims <= 3 or len(a.shape) not in (dims + 1, dims + 2):
            raise IRError(f"{mode} padding pads the last 1-3 dims of a 2-5 dim tensor, not {dims} of {list(a.shape)}")
        for k in range(dims):
            size, before, after = a.shape[-1 - k], pads[2 * k], pads[2 * k + 1]
            if min(before, after) < 0 or (mode == "reflect" and max(before, after) >= size) \
                    or (mode == "circular" and max(before, after) > size) or size == 0:
                raise IRError(f"{mode} padding of {before}, {after} does not fit a dim of {size}")
    shape = list(a.shape)
    for k in range(len(pads) // 2):
        shape[-1 - k] += pads[2 * k] + pads[2 * k + 1]
    return Typed(tensor(shape, a.dtype))


def transpose(a, dim0=0, dim1=1, **_: Any) -> np.ndarray:
    """Swap two dims (a view in PyTorch; the values are unchanged)."""
    return np.swapaxes(np.asarray(a), int(dim0), int(dim1))


def permute(a, dims=(), **_: Any) -> np.ndarray:
    """Reorder the dims."""
    return np.transpose(np.asarray(a), [int(d) for d in dims])


def reshape(a, shape=None, **_: Any) -> np.ndarray:
    """The same values in another shape (row-major, as torch.reshape)."""
    return np.reshape(np.asarray(a), tuple(shape))


def expand(a, shape=None, **_: Any) -> np.ndarray:
    """Size-1 dims repeated to `shape` (a broadcast view in PyTorch)."""
    return np.broadcast_to(np.asarray(a), tuple(shape))


def cat(*parts, dim=0, **_: Any) -> np.ndarray:
    """Concatenation along dim of the tensors given (absent slots are None)."""
    arrays = [np.asarray(p) for p in parts if p is not None]
    kind = np.result_type(*arrays)
    return np.concatenate([a.astype(kind) for a in arrays], axis=int(dim))


def slice_(a, dim=0, start=0, end=None, step=1, **_: Any) -> np.ndarray:
    """a[..., start:end:step, ...] along dim."""
    a = np.asarray(a)
    index = [slice(None)] * a.ndim
    index[int(dim)] = slice(int(start), int(end), int(step))
    return a[tuple(index)]


def slice_scatter(a, src, dim=0, start=0, end=None, step=1, **_: Any) -> np.ndarray:
    """a with a[..., start:end:step, ...] along dim replaced by src."""
    out = np.array(a, copy=True)
    index = [slice(None)] * out.ndim
    index[int(dim)] = slice(int(start), int(end), int(step))
    out[tuple(index)] = src
    return out


def select(a, dim=0, index=0, **_: Any) -> np.ndarray:
    """a[..., index, ...] along dim (the dim goes away)."""
    return np.take(np.asarray(a), int(index), axis=int(dim))


PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}  # torch -> numpy


def constant_pad(a, pads=(), value=0.0, mode="constant", **_: Any) -> np.ndarray:
    """F.pad(a, pads, mode, value): pads are (before, after) pairs from the last dim backwards; a non-constant mode
    copies values of `a` (mirrored without the edge, the edge repeated, or wrapped around)."""
    a = np.asarray(a)
    width = [(0, 0)] * a.ndim
    for k in range(len(pads) // 2):
        width[a.ndim - 1 - k] = (int(pads[2 * k]), int(pads[2 * k + 1]))
    if mode != "constant":
        return np.pad(a, width, mode=PAD_MODES[mode])
    return np.pad(a, width, constant_values=value)


# ---------------------------------------------------------------- lowerings


def _relax_transpose(c: RelaxCall) -> str:
    rank = len(c.x_shape)
    axes = list(range(rank))
    d0, d1 = int(c.attrs["dim0"]) % rank, int(c.attrs["dim1"]) % rank
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return f"R.op.permute_dims({c.arg(0)}, axes={axes})"


def _relax_cat(c: RelaxCall) -> str:
    parts = [c.arg(i) for i, o in enumerate(c.node.inputs) if o is not None]
    return f"R.op.concat([{', '.join(parts)}], axis={int(c.attrs['dim']) % len(c.x_shape)})"


def _relax_slice(c: RelaxCall) -> str:
    dim = int(c.attrs["dim"]) % len(c.x_shape)
    begin, stop, count = slice_bounds(c.x_shape[dim], int(c.attrs["start"]), int(c.attrs["end"]), int(c.attrs["step"]))
    step = int(c.attrs["step"])
    return (f"R.op.strided_slice({c.arg(0)}, axes=[{dim}], begin=[{begin}], end=[{begin + (count - 1) * step + 1}], "
            f"strides=[{step}])")


def _relax_slice_scatter(c: RelaxCall) -> str:
    dim = int(c.attrs["dim"]) % len(c.x_shape)
    begin, _, count = slice_bounds(c.x_shape[dim], int(c.attrs["start"]), int(c.attrs["end"]), int(c.attrs["step"]))
    step = int(c.attrs["step"])
    return (f"R.op.slice_scatter({c.arg(0)}, {c.arg(1)}, {begin}, {begin + (count - 1) * step + 1}, {step}, "
            f"axis={dim})")


def _aten_slice_scatter(c: AtenCall) -> str:
    """slice_scatter(self, src, dim, start, end, step)."""
    x = c.arg(0, "self")
    size = c.info(x).shape[int(c.arg(2, "dim", 0)) % len(c.info(x).shape)]
    start = c.arg(3, "start", 0) or 0
    start = max(int(start), -size) if int(start) < 0 else min(int(start), size)
    attrs = {"dim": int(c.arg(2, "dim", 0)), "start": start, "end": _clamp_end(c.arg(4, "end"), size),
             "step": int(c.arg(5, "step", 1) or 1)}
    return c.emit("slice_scatter", [x, c.arg(1, "src")], attrs)


def _relax_select(c: RelaxCall) -> str:
    dim = int(c.attrs["dim"]) % len(c.x_shape)
    index = int(c.attrs["index"]) % c.x_shape[dim]
    part = c.low.emit(f"R.op.strided_slice({c.arg(0)}, axes=[{dim}], begin=[{index}], end=[{index + 1}])",
                      f"{c.low.name_of(c.node.id)}_slice")
    return f"R.op.squeeze({part}, axis=[{dim}])"


def _relax_pad(c: RelaxCall) -> str:
    rank, pads = len(c.x_shape), [int(p) for p in c.attrs["pads"]]
    width = [0] * (2 * rank)
    for k in range(len(pads) // 2):
        width[2 * (rank - 1 - k)], width[2 * (rank - 1 - k) + 1] = pads[2 * k], pads[2 * k + 1]
    mode = c.attrs.get("mode", "constant")
    if mode != "constant":
        return f"R.op.nn.pad({c.arg(0)}, pad_width={width}, pad_mode={mode!r})"
    return f"R.op.nn.pad({c.arg(0)}, pad_width={width}, pad_value={float(c.attrs['value'])!r})"


def _torch_pad(c: TorchCall) -> str:
    pads, mode = [int(p) for p in c.attrs["pads"]], c.attrs.get("mode", "constant")
    if mode != "constant":
        return f"F.pad({c.args[0]}, {pads!r}, mode={mode!r})"
    return f"F.pad({c.args[0]}, {pads!r}, value={float(c.attrs['value'])!r})"


def _torch_slice(c: TorchCall) -> str:
    """x[:, a:b:s] for dim 1, x[..., a:b:s, :] for dim -2 (numpy indexes alike)."""
    dim, start, end, step = (int(c.attrs[k]) for k in ("dim", "start", "end", "step"))
    if dim >= 0:
        return f"{c.args[0]}[{':, ' * dim}{start}:{end}:{step}]"
    return f"{c.args[0]}[..., {start}:{end}:{step}{', :' * (-dim - 1)}]"


def _np_slice(c: NumpyCall) -> str:
    return _torch_slice(TorchCall(c.args, c.attrs, False))


def _index_src(c: NumpyCall) -> str:
    """The index expression (a tuple of slices) of a slice along one dim, as numpy source."""
    dim, start, end, step = (int(c.attrs[k]) for k in ("dim", "start", "end", "step"))
    rank = len(c.shapes[0] or ())
    parts = ["slice(None)"] * rank
    parts[dim % rank] = f"slice({start}, {end}, {step})"
    return f"({', '.join(parts)},)"


def _np_pad(c: NumpyCall) -> str:
    rank, pads = len(c.shapes[0] or ()), [int(p) for p in c.attrs["pads"]]
    width = [(0, 0)] * rank
    for k in range(len(pads) // 2):
        width[rank - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    mode = c.attrs.get("mode", "constant")
    if mode != "constant":
        return f"np.pad({c.args[0]}, {width}, mode={PAD_MODES[mode]!r})"
    return f"np.pad({c.args[0]}, {width}, constant_values={float(c.attrs['value'])!r})"


def _cat_args(args: list[str]) -> str:
    return "[" + ", ".join(a for a in args if a != "None") + "]"


# ---------------------------------------------------------------- ATen


def _aten_reshape(c: AtenCall) -> str:
    """view, reshape, flatten, unflatten, squeeze, unsqueeze: the exported output shape says it all."""
    assert c.shape is not None
    x = c.arg(0, "self")
    return x if c.info(x).shape == c.shape else c.emit("reshape", [x], {"shape": list(c.shape)})


def _aten_t(c: AtenCall) -> str:
    x = c.arg(0, "self")
    return c.emit("transpose", [x], {"dim0": 0, "dim1": 1}) if len(c.info(x).shape) == 2 else x


def _aten_expand(c: AtenCall) -> str:
    assert c.shape is not None
    return c.emit("expand", [c.arg(0, "self")], {"shape": list(c.shape)})


def _aten_repeat(c: AtenCall) -> str:
    """repeat(self, repeats): a tile, as reshape (a 1 before every dim) -> expand -> reshape (values only moved)."""
    x = c.arg(0, "self")
    reps = A.ints(c.arg(1, "repeats"))
    shape = [1] * (len(reps) - len(c.info(x).shape)) + list(c.info(x).shape)
    if all(r == 1 for r in reps):
        return x if list(c.info(x).shape) == shape else c.emit("reshape", [x], {"shape": shape})
    if min(reps) < 1:
        raise AtenSkip(f"repeat {reps} (an empty tile)")
    spread = c.emit("reshape", [x], {"shape": [d for s in shape for d in (1, s)]})
    tiled = c.emit("expand", [spread], {"shape": [d for r, s in zip(reps, shape) for d in (r, s)]})
    return c.emit("reshape", [tiled], {"shape": [r * s for r, s in zip(reps, shape)]})


def _aten_roll(c: AtenCall) -> str:
    """roll(self, shifts, dims): per dim, the last `shift` entries moved to the front (two slices and a cat)."""
    x = c.arg(0, "self")
    shape = list(c.info(x).shape)
    shifts, dims = A.ints(c.arg(1, "shifts")), A.ints(c.arg(2, "dims", []) or [])
    flat = not dims
    if flat:
        if len(shifts) != 1:
            raise AtenSkip(f"roll of a flattened tensor by {shifts}")
        x, dims, size = c.emit("reshape", [x], {"shape": [math.prod(shape)]}), [0], math.prod(shape)
    for shift, dim in zip(shifts, dims):
        n = size if flat else shape[dim % len(shape)]
        k = int(shift) % n if n else 0
        if k == 0:
            continue
        head = c.emit("slice", [x], {"dim": dim, "start": n - k, "end": n, "step": 1})
        tail = c.emit("slice", [x], {"dim": dim, "start": 0, "end": n - k, "step": 1})
        x = c.emit("cat", [head, tail], {"dim": dim})
    return c.emit("reshape", [x], {"shape": shape}) if flat else x


def _aten_cat(c: AtenCall) -> str:
    parts = [p for p in c.arg(0, "tensors") if math.prod(c.info(p).shape) != 0]  # empty parts add nothing
    if not 1 <= len(parts) <= CAT_SLOTS:
        raise AtenSkip(f"cat of {len(parts)} tensors (1..{CAT_SLOTS})")
    out = c.emit("cat", parts, {"dim": int(c.arg(1, "dim", 0))}) if len(parts) > 1 else parts[0]
    if c.dtype is not None and c.info(out).dtype != c.dtype:  # an empty part still took part in the promotion
        out = c.emit("astype", [out], {"dtype": c.dtype})
    return out


def _clamp_end(end: Any, size: int) -> int:
    return size if end is None or int(end) > size else max(int(end), -size)


def _aten_slice(c: AtenCall) -> str:
    """slice.Tensor(self, dim, start, end, step) and narrow(self, dim, start, length); a full slice is no node."""
    x = c.arg(0, "self")
    shape = c.info(x).shape
    dim = int(c.arg(1, "dim", 0)) % len(shape)
    start = c.arg(2, "start", 0) or 0
    if c.target.startswith("narrow"):
        end, step = int(start) + int(c.arg(3, "length")), 1
    else:
        end, step = c.arg(3, "end"), int(c.arg(4, "step", 1) or 1)
    start, end = max(int(start), -shape[dim]) if int(start) < 0 else min(int(start), shape[dim]), _clamp_end(end, shape[dim])
    if slice_bounds(shape[dim], start, end, step) == (0, shape[dim], shape[dim]) and step == 1:
        return x
    return c.emit("slice", [x], {"dim": dim, "start": start, "end": end, "step": step})


def _aten_select(c: AtenCall) -> str:
    return c.emit("select", [c.arg(0, "self")], {"dim": int(c.arg(1, "dim")), "index": int(c.arg(2, "index"))})


def _aten_split(c: AtenCall) -> list[str]:
    """split / split_with_sizes / chunk / unbind: one slice (or select) node per part."""
    x = c.arg(0, "self")
    shape = c.info(x).shape
    if c.target.startswith("unbind"):
        dim = int(c.arg(1, "dim", 0)) % len(shape)
        return [c.emit("select", [x], {"dim": dim, "index": k}) for k in range(shape[dim])]
    dim = int(c.arg(2, "dim", 0)) % len(shape)
    sizes = [s[dim] for s in c.shapes]
    out, start = [], 0
    for size in sizes:
        out.append(c.emit("slice", [x], {"dim": dim, "start": start, "end": start + size, "step": 1})
                   if size != shape[dim] else x)
        start += size
    return out


def _aten_pad(c: AtenCall) -> str:
    """pad(self, pad, mode, value), constant_pad_nd(self, pad, value) and reflection_/replication_padNd(self, pad)."""
    if c.target.startswith("constant_pad_nd"):
        value = c.arg(2, "value", 0.0)
    else:
        mode = ("reflect" if c.target.startswith("reflection_pad") else "replicate"
                if c.target.startswith("replication_pad") else c.arg(2, "mode", "constant"))
        if mode not in PAD_MODES:
            raise AtenSkip(f"pad mode {mode!r}")
        value = c.arg(3, "value", 0.0)
        if mode != "constant":
            pads = A.ints(c.arg(1, "pad"))
            if min(pads) < 0:
                raise AtenSkip("negative padding (cropping)")
            return c.emit("pad", [c.arg(0, "self")], {"pads": pads, "value": 0.0, "mode": mode})
    pads = A.ints(c.arg(1, "pad"))
    if min(pads) < 0:
        raise AtenSkip("negative padding (cropping)")
    if value is not None and not math.isfinite(float(value)):
        raise AtenSkip(f"padding with {value}")
    return c.emit("pad", [c.arg(0, "self")], {"pads": pads, "value": float(value or 0.0)})


_X = (example_input("x", [2, 3, 8]),)
PADS = AttrType("an even-length list of ints >= 0", lambda v: isinstance(v, list) and len(v) % 2 == 0 and len(v) > 0
                and all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 1 << 16 for p in v))
FINITE = AttrType("a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
DIMS_LIST = AttrType("a list of ints", lambda v: isinstance(v, list) and all(INT.accepts(d) for d in v))
SHAPE_OR_SCALAR = AttrType("a list of ints >= 1 ([] for a 0-dim tensor)", lambda v: isinstance(v, list)
                           and all(INT.accepts(s) and s >= 1 for s in v))
_SAME = iv.unary_rule(lambda a: a)

OPS: list[OpSpec] = [
    OpSpec("transpose", "layout", ("a",), {"dim0": 0, "dim1": 1}, _infer_transpose, transpose,
           lambda c: f"torch.transpose({c.args[0]}, {int(c.attrs['dim0'])}, {int(c.attrs['dim1'])})",
           _relax_transpose, _SAME, Example(_X, ("x",), {"dim0": -2, "dim1": -1}),
           attr_types={"dim0": INT, "dim1": INT},
           numpy=lambda c: f"np.swapaxes({c.args[0]}, {int(c.attrs['dim0'])}, {int(c.attrs['dim1'])})",
           aten={"transpose.int": lambda c: c.emit("transpose", [c.arg(0, "self")],
                                                    {"dim0": int(c.arg(1, "dim0")), "dim1": int(c.arg(2, "dim1"))}),
                 "t.default": _aten_t}),
    OpSpec("permute", "layout", ("a",), {"dims": None}, _infer_permute, permute,
           lambda c: f"{c.args[0]}.permute({', '.join(str(int(d)) for d in c.attrs['dims'])})",
           lambda c: f"R.op.permute_dims({c.arg(0)}, axes={[int(d) % len(c.x_shape) for d in c.attrs['dims']]})",
           _SAME, Example(_X, ("x",), {"dims": [2, 0, 1]}), attr_types={"dims": DIMS_LIST},
           numpy=lambda c: f"np.transpose({c.args[0]}, {[int(d) for d in c.attrs['dims']]})",
           aten={"permute.default": lambda c: c.emit("permute", [c.arg(0, "self")], {"dims": A.ints(c.arg(1, "dims"))})}),
    OpSpec("reshape", "layout", ("a",), {"shape": None}, _infer_reshape, reshape,
           lambda c: f"torch.reshape({c.args[0]}, {tuple(int(s) for s in c.attrs['shape'])!r})",
           lambda c: f"R.op.reshape({c.arg(0)}, {[int(s) for s in c.attrs['shape']]!r})", _SAME,
           Example(_X, ("x",), {"shape": [6, 2, 4]}), attr_types={"shape": SHAPE_OR_SCALAR},
           numpy=lambda c: f"np.reshape({c.args[0]}, {tuple(int(s) for s in c.attrs['shape'])!r})",
           aten=A.overloads("view.default reshape.default _unsafe_view.default flatten.using_ints unflatten.int "
                            "unsqueeze.default squeeze.dim squeeze.dims squeeze.default view_as.default", _aten_reshape)),
    OpSpec("expand", "layout", ("a",), {"shape": None}, _infer_expand, expand,
           lambda c: f"{c.args[0]}.expand{tuple(int(s) for s in c.attrs['shape'])!r}",
           lambda c: f"R.op.broadcast_to({c.arg(0)}, {[int(s) for s in c.attrs['shape']]!r})", _SAME,
           Example((example_input("x", [2, 1, 8]),), ("x",), {"shape": [3, 2, 4, 8]}), attr_types={"shape": SHAPE},
           numpy=lambda c: f"np.broadcast_to({c.args[0]}, {tuple(int(s) for s in c.attrs['shape'])!r})",
           aten=A.overloads("expand.default expand_as.default broadcast_to.default", _aten_expand)
           | {"repeat.default": _aten_repeat}),
    OpSpec("cat", "layout", ("t0",) + tuple(f"t{k}?" for k in range(1, CAT_SLOTS)), {"dim": 0}, _infer_cat, cat,
           lambda c: f"torch.cat({_cat_args(c.args)}, dim={int(c.attrs['dim'])})", _relax_cat,
           lambda ivs, infos, attrs, out: iv.union([i for i in ivs if i is not None]),
           Example((example_input("x", [2, 3, 8]), example_input("y", [2, 5, 8])), ("x", "y"), {"dim": 1}),
           attr_types={"dim": INT},
           numpy=lambda c: f"np.concatenate({_cat_args(c.args)}, axis={int(c.attrs['dim'])})",
           aten=A.overloads("cat.default concat.default", _aten_cat) | {"roll.default": _aten_roll}),
    OpSpec("slice", "layout", ("a",), {"dim": 0, "start": 0, "end": 1, "step": 1}, _infer_slice, slice_,
           _torch_slice, _relax_slice, _SAME, Example(_X, ("x",), {"dim": -1, "start": 1, "end": 7, "step": 2}),
           attr_types={"dim": INT, "start": INT, "end": INT, "step": AttrType("an int >= 1", lambda v: INT.accepts(v) and v >= 1)},
           numpy=_np_slice,
           aten=A.overloads("slice.Tensor narrow.default", _aten_slice)
           | A.overloads("split.Tensor split_with_sizes.default chunk.default unbind.int", _aten_split)),
    OpSpec("slice_scatter", "layout", ("a", "src"), {"dim": 0, "start": 0, "end": 1, "step": 1}, _infer_slice_scatter,
           slice_scatter,
           lambda c: (f"torch.slice_scatter({c.args[0]}, {c.args[1]}, {int(c.attrs['dim'])}, {int(c.attrs['start'])}, "
                      f"{int(c.attrs['end'])}, {int(c.attrs['step'])})"),
           _relax_slice_scatter, lambda ivs, infos, attrs, out: iv.union([ivs[0], ivs[1]]),
           Example((example_input("x", [2, 3, 8]), example_input("s", [2, 3, 4])), ("x", "s"),
                   {"dim": -1, "start": 1, "end": 8, "step": 2}),
           attr_types={"dim": INT, "start": INT, "end": INT, "step": AttrType("an int >= 1", lambda v: INT.accepts(v) and v >= 1)},
           numpy=lambda c: (f"(lambda out: (out.__setitem__({_index_src(c)}, {c.args[1]}), out)[1])"
                            f"(np.array({c.args[0]}, copy=True))"),
           aten={"slice_scatter.default": _aten_slice_scatter}),
    OpSpec("select", "layout", ("a",), {"dim": 0, "index": 0}, _infer_select, select,
           lambda c: f"torch.select({c.args[0]}, {int(c.attrs['dim'])}, {int(c.attrs['index'])})", _relax_select, _SAME,
           Example(_X, ("x",), {"dim": 1, "index": -1}), attr_types={"dim": INT, "index": INT},
           numpy=lambda c: f"np.take({c.args[0]}, {int(c.attrs['index'])}, axis={int(c.attrs['dim'])})",
           aten={"select.int": _aten_select}),
    OpSpec("pad", "layout", ("a",), {"pads": None, "value": 0.0, "mode": "constant"}, _infer_pad, constant_pad,
           _torch_pad, _relax_pad,
           lambda ivs, infos, attrs, out: ivs[0] if attrs.get("mode", "constant") != "constant" else
           iv.union([ivs[0], (float(attrs["value"]), float(attrs["value"]))]),
           Example(_X, ("x",), {"pads": [1, 2, 0, 1], "value": 0.5}),
           attr_types={"pads": PADS, "value": FINITE, "mode": one_of(*PAD_MODES)},
           numpy=_np_pad,
           aten=A.overloads("pad.default constant_pad_nd.default reflection_pad1d.default reflection_pad2d.default "
                            "reflection_pad3d.default replication_pad1d.default replication_pad2d.default "
                            "replication_pad3d.default", _aten_pad)),
]

# TVM ToMixedPrecision keeps the Relax op these lower to in float16 when its operand is float16 (kFollow; nn.pad is
# kNever; tests/test_tvm_depth.py checks it against TVM's registry).
_AMP_FOLLOW = ("transpose", "permute", "reshape", "expand", "cat", "slice", "select")
OPS = [replace(s, tags=s.tags | {"amp-follow"}) if s.name in _AMP_FOLLOW else s for s in OPS]
