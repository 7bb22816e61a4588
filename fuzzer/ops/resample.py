"""Resampling over 1, 2 or 3 spatial dims: nearest and (bi/tri)linear interpolation, PyTorch's index rules.

PyTorch maps an output index to a source coordinate with a float32 scale: in / out, or 1 / scale_factor
where the call gave one. Nearest takes floor(dst * scale) (clipped to the last index). Linear takes
(dst + 0.5) * scale - 0.5 clamped at 0 (align_corners=False), or dst * (in - 1) / (out - 1)
(align_corners=True), and blends the two neighbours of each dim with float32 weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    example_input,
    require_float,
    tensor,
)


def _infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (x,) = ops
    assert x is not None
    size, scales = list(attrs["size"]), attrs.get("scales")
    if x.is_scalar or not 3 <= len(x.shape) <= 5 or len(size) != len(x.shape) - 2:
        raise IRError(f"resampling needs an input of rank 3 to 5 and one size per spatial dim, got {list(x.shape)} "
                      f"and size {size}")
    if scales is not None and len(scales) != len(size):
        raise IRError("scales must give one factor per spatial dim")
    require_float(x, "input")
    return Typed(tensor(x.shape[:2] + tuple(int(s) for s in size), x.dtype))


def source_scale(n_in, n_out, align_corners, scale, kind):
    """PyTorch's area_pixel_compute_scale in its opmath type `kind` (float32 for 16/32-bit data, float64 for float64)."""
    if align_corners:
        return kind((n_in - 1) / (n_out - 1)) if n_out > 1 else kind(0.0)
    return kind(1.0 / scale) if scale else kind(n_in / n_out)


def _opmath(x):
    return np.float64 if np.asarray(x).dtype == np.float64 else np.float32


def nearest_index(n_in, n_out, scale, kind=np.float32):
    """Source index of each output index along one dim (floor(dst * scale) in opmath, clipped)."""
    s = source_scale(n_in, n_out, False, scale, kind)
    return np.minimum(np.floor(np.arange(n_out, dtype=kind) * s).astype(np.int64), n_in - 1)


def linear_weights(n_in, n_out, align_corners, scale, kind=np.float32):
    """(left index, right index, right weight) of each output index along one dim, in opmath `kind`."""
    s = source_scale(n_in, n_out, align_corners, scale, kind)
    dst = np.arange(n_out, dtype=kind)
    src = dst * s if align_corners else np.maximum((dst + kind(0.5)) * s - kind(0.5), kind(0.0))
    left = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    right = np.minimum(left + 1, n_in - 1)
    return left, right, src - left.astype(kind)


def interpolate_nearest(x, size=(), scales=None, **_: Any) -> np.ndarray:
    """F.interpolate(x, size, mode="nearest") (scale_factor given: scales)."""
    x = np.asarray(x)
    for axis, n_out in enumerate(size):
        scale = None if scales is None else scales[axis]
        x = np.take(x, nearest_index(x.shape[2 + axis], int(n_out), scale, _opmath(x)), axis=2 + axis)
    return x


def interpolate_linear(x, size=(), align_corners=False, scales=None, **_: Any) -> np.ndarray:
    """F.interpolate(x, size, mode="linear" / "bilinear" / "trilinear"): one blend per spatial dim."""
    x = np.asarray(x)
    for axis, n_out in enumerate(size):
        scale = None if scales is None else scales[axis]
        left, right, w = linear_weights(x.shape[2 + axis], int(n_out), align_corners, scale, _opmath(x))
        w = w.astype(x.dtype).reshape([-1 if a == 2 + axis else 1 for a in range(x.ndim)])
        one = x.dtype.type(1.0)
        x = np.take(x, left, axis=2 + axis) * (one - w) + np.take(x, right, axis=2 + axis) * w
    return x


# ---------------------------------------------------------------- lowerings

_MODE = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _torch(c: TorchCall, mode: str) -> str:
    rank = len(c.attrs["size"])
    mode = _MODE[rank] if mode == "linear" else mode
    corners = f", align_corners={bool(c.attrs['align_corners'])}" if mode != "nearest" else ""
    if c.attrs.get("scales") is not None:
        return f"F.interpolate({c.args[0]}, scale_factor={tuple(float(s) for s in c.attrs['scales'])!r}, mode={mode!r}{corners})"
    return f"F.interpolate({c.args[0]}, size={tuple(int(s) for s in c.attrs['size'])!r}, mode={mode!r}{corners})"


def _relax(c: RelaxCall, method: str) -> str:
    """image.resize2d / resize3d (a 1-D input runs as [N, C, 1, L])."""
    size = [int(s) for s in c.attrs["size"]]
    scales = c.attrs.get("scales")
    if scales is not None and any(float(s) != o / n for s, o, n in zip(scales, size, c.x_shape[2:])):
        raise NotImplementedError("Relax resize takes output sizes; a scale_factor that is not out / in has no form")
    if method == "nearest_neighbor":
        mode = "coordinate_transformation_mode='asymmetric', rounding_method='floor'"
    else:
        mode = f"coordinate_transformation_mode={'align_corners' if c.attrs['align_corners'] else 'half_pixel'!r}"
    x = c.arg(0)
    if len(size) == 1:
        hint = c.low.name_of(c.node.id)
        x = c.low.emit(f"R.op.reshape({x}, {list(c.x_shape[:2]) + [1, c.x_shape[2]]})", f"{hint}_2d")
        y = c.low.emit(f"R.op.image.resize2d({x}, {[1] + size}, method={method!r}, {mode})", f"{hint}_resized")
        return f"R.op.reshape({y}, {list(c.x_shape[:2]) + size})"
    return f"R.op.image.resize{len(size)}d({x}, {size}, method={method!r}, {mode})"


def _aten_resample(op: str) -> A.AtenFn:
    """upsample_*(self, output_size, [align_corners], scales...) and the .vec overloads (output_size, [align_corners],
    scale_factors): the exported output shape gives the size, the scale factors (if given) the index scale."""
    def tr(c: AtenCall) -> str:
        assert c.shape is not None
        x = c.arg(0, "input")
        rank = len(c.info(x).shape)
        attrs: dict[str, Any] = {"size": list(c.shape[2:])}
        if op == "interpolate_linear":
            attrs["align_corners"] = bool(c.arg(2, "align_corners", False))
        if c.target.endswith(".vec"):
            factors = c.arg(3 if op == "interpolate_linear" else 2, "scale_factors")
            if factors:
                attrs["scales"] = [float(f) for f in factors]
        else:
            extra = [v for v in c.args[3 if op == "interpolate_linear" else 2:] if v is not None]
            if extra:
                attrs["scales"] = [float(v) for v in extra][: rank - 2]
        if "scales" in attrs and len(attrs["scales"]) != rank - 2:
            raise AtenSkip("scale factors that do not name every spatial dim")
        return c.emit(op, [x], attrs)

    return tr


SIZES = AttrType("a list of 1 to 3 ints >= 1", lambda v: isinstance(v, list) and 1 <= len(v) <= 3 and all(
    isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in v))
SCALES = AttrType("null or a list of positive numbers", lambda v: v is None or (isinstance(v, list) and all(
    isinstance(s, (int, float)) and not isinstance(s, bool) and 0 < s < 1e6 for s in v)))
_SAME = iv.unary_rule(lambda a: a)
_AMP = frozenset({"amp-follow"})  # ToMixedPrecision keeps image.resize in float16 (kFollow)
_NEAREST = " ".join(f"upsample_nearest{n}d.default upsample_nearest{n}d.vec" for n in (1, 2, 3))
_LINEAR = "upsample_linear1d.default upsample_linear1d.vec upsample_bilinear2d.default upsample_bilinear2d.vec " \
          "upsample_trilinear3d.default upsample_trilinear3d.vec"

OPS: list[OpSpec] = [
    OpSpec("interpolate_nearest", "resample", ("x",), {"size": None, "scales": None}, _infer, interpolate_nearest,
           lambda c: _torch(c, "nearest"), lambda c: _relax(c, "nearest_neighbor"), _SAME,
           Example((example_input("x", [1, 3, 5, 4]),), ("x",), {"size": [10, 12]}),
           attr_types={"size": SIZES, "scales": SCALES}, tags=_AMP,
           aten=A.overloads(_NEAREST, _aten_resample("interpolate_nearest"))),
    OpSpec("interpolate_linear", "resample", ("x",), {"size": None, "align_corners": False, "scales": None}, _infer,
           interpolate_linear, lambda c: _torch(c, "linear"), lambda c: _relax(c, "linear"), _SAME,
           Example((example_input("x", [1, 3, 5, 4]),), ("x",), {"size": [9, 7], "align_corners": False}),
           attr_types={"size": SIZES, "align_corners": BOOL, "scales": SCALES}, tags=_AMP,
           aten=A.overloads(_LINEAR, _aten_resample("interpolate_linear"))),
]
