"""Constants made in the graph: full (zeros, ones, finfo.min and -inf masks) and arange (positions, timesteps).

They take no operand; their value is their attributes. A `full` value may be a number or one of
"inf", "-inf", "min", "max" (the dtype's finfo/iinfo ends), as attention masks are built.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import FLOAT_FORMATS, is_float
from . import aten as A
from .base import (
    DTYPE,
    SAME_DTYPE,
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
    tensor,
)

# the largest finite value of each dtype (finfo.max / iinfo.max), for "min" and "max" fills
DTYPE_MAX = tuple((d, FLOAT_FORMATS[d].max_value) for d in FLOAT_FORMATS) + (("int32", 2.0**31 - 1),
                                                                             ("int64", 2.0**63 - 1), ("bool", 1.0))
SPECIAL = ("inf", "-inf", "min", "max")
MAX_ARANGE = 1 << 20  # elements an arange may make


def fill_value(value, dtype):
    """The number a `full` of `dtype` holds: a number as given, or inf, -inf, the dtype's lowest or largest value."""
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    top = dict(DTYPE_MAX)[dtype]
    if value == "max":
        return top
    if value == "min":
        return 0.0 if dtype == "bool" else -top - (1.0 if dtype in ("int32", "int64") else 0.0)
    return float(value)


def _infer_full(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    dtype, value = attrs["dtype"], attrs["value"]
    if value in ("inf", "-inf") and not is_float(dtype):
        raise IRError(f"a {dtype} tensor cannot hold {value}")
    if not is_float(dtype) and isinstance(value, (int, float)) and abs(value) > 2**63:
        raise IRError(f"a {dtype} tensor cannot hold {value!r}")
    return Typed(tensor(attrs["shape"], dtype))


def arange_length(start: float, end: float, step: float) -> int:
    """Elements of arange(start, end, step), as PyTorch counts them (ceil((end - start) / step))."""
    return max(0, math.ceil((end - start) / step))


def _infer_arange(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    start, end, step = (attrs[k] for k in ("start", "end", "step"))
    if step == 0:
        raise IRError("arange step must not be 0")
    n = arange_length(start, end, step)
    if not 1 <= n <= MAX_ARANGE:
        raise IRError(f"arange({start}, {end}, {step}) has {n} elements (1..{MAX_ARANGE})")
    if attrs["dtype"] == "bool":
        raise IRError("arange cannot make bool")
    return Typed(tensor((n,), attrs["dtype"]))


def full(shape=(), value=0.0, dtype="float32", **_: Any) -> np.ndarray:
    """A tensor of `shape` holding one value (see fill_value); bool as numpy bool, as comparisons return."""
    return np.full(tuple(shape), fill_value(value, dtype), dtype=bool if dtype == "bool" else np.float64)


def arange(start=0, end=1, step=1, **_: Any) -> np.ndarray:
    """start, start + step, ... below end (exact: each value is start + k * step)."""
    n = max(0, math.ceil((end - start) / step))
    return start + step * np.arange(n, dtype=np.float64)


# ---------------------------------------------------------------- lowerings


def _torch_value(value: Any, dtype: str) -> str:
    if value in ("min", "max"):
        kind = "finfo" if is_float(dtype) else "iinfo"
        return "True" if dtype == "bool" and value == "max" else "False" if dtype == "bool" else \
            f"torch.{kind}(torch.{dtype}).{value}"
    if value in ("inf", "-inf"):
        return f"float({value!r})"
    return repr(bool(value)) if dtype == "bool" else repr(float(value) if is_float(dtype) else int(value))


def _torch_full(c: TorchCall) -> str:
    d = c.attrs["dtype"]
    return (f"torch.full({tuple(int(s) for s in c.attrs['shape'])!r}, {_torch_value(c.attrs['value'], d)}, "
            f"dtype=torch.{d}, device=device)")


def _relax_const(c: RelaxCall) -> str:
    d = c.attrs["dtype"]
    value = fill_value(c.attrs["value"], d)
    number = bool(value) if d == "bool" else (value if is_float(d) else int(value))
    return f"R.const({'float(' + repr(str(value)) + ')' if not math.isfinite(value) else repr(number)}, {c.low.dt(d)})"


def _relax_full(c: RelaxCall) -> str:
    """R.op.full, or the constant itself for a 0-dim tensor (R.op.full takes no empty shape)."""
    if not c.attrs["shape"]:
        return _relax_const(c)
    return f"R.op.full({[int(s) for s in c.attrs['shape']]!r}, {_relax_const(c)}, {c.low.dt(c.attrs['dtype'])})"


def _np_full(c: NumpyCall) -> str:
    value = fill_value(c.attrs["value"], c.attrs["dtype"])
    text = repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    return f"np.full({tuple(int(s) for s in c.attrs['shape'])!r}, {text})"


def _number(value: Any, dtype: str) -> str:
    return repr(float(value)) if is_float(dtype) else repr(int(value))


def _torch_arange(c: TorchCall) -> str:
    d = c.attrs["dtype"]
    return (f"torch.arange({_number(c.attrs['start'], d)}, {_number(c.attrs['end'], d)}, {_number(c.attrs['step'], d)}, "
            f"dtype=torch.{d}, device=device)")


def _relax_arange(c: RelaxCall) -> str:
    d = c.attrs["dtype"]
    return (f"R.op.arange({_number(c.attrs['start'], d)}, {_number(c.attrs['end'], d)}, {_number(c.attrs['step'], d)}, "
            f"dtype={c.low.dt(d)})")


def _np_arange(c: NumpyCall) -> str:
    start, end, step = (c.attrs[k] for k in ("start", "end", "step"))
    return f"({start!r} + {step!r} * np.arange({arange_length(start, end, step)}, dtype=np.float64))"


def _full_interval(ivs: Any, infos: Any, attrs: dict[str, Any], out: ValueInfo) -> tuple[float, float]:
    v = fill_value(attrs["value"], attrs["dtype"])
    return (v, v) if math.isfinite(v) else (-math.inf, math.inf)


def _arange_interval(ivs: Any, infos: Any, attrs: dict[str, Any], out: ValueInfo) -> tuple[float, float]:
    start, step, n = attrs["start"], attrs["step"], out.shape[0]
    last = start + step * (n - 1)
    return (min(start, last), max(start, last))


# ---------------------------------------------------------------- ATen


def _out_dtype(c: AtenCall, default: str | None) -> str:
    dtype = A.dtype_of(c.kwargs.get("dtype")) or c.dtype or default
    if dtype is None:
        raise AtenSkip("a constant of unknown dtype")
    return dtype


def _fill(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        raise AtenSkip("a nan fill")
    return value


def _aten_full(c: AtenCall) -> str:
    """full(size, value), zeros, ones, *_like, new_*, scalar_tensor, empty*: the exported shape and dtype say it."""
    name = c.target.split(".")[0]
    if name in ("zeros", "zeros_like", "new_zeros"):
        value: Any = 0
    elif name in ("ones", "ones_like", "new_ones"):
        value = 1
    elif name in ("full", "new_full", "full_like"):
        value = c.arg(2 if name == "new_full" else 1, "fill_value")
    elif name.startswith(("empty", "new_empty")):
        value = 0  # uninitialized memory a model overwrites before it reads (Wan's rotary `out = empty_like(x)`)
    else:  # scalar_tensor
        value = c.arg(0, "s")
    assert c.shape is not None
    return c.emit("full", [], {"shape": list(c.shape), "value": _fill(value), "dtype": _out_dtype(c, None)})


def _aten_arange(c: AtenCall) -> str:
    if c.target == "arange.default":
        start, end, step = 0, c.arg(0, "end"), 1
    else:
        start, end, step = c.arg(0, "start"), c.arg(1, "end"), c.arg(2, "step", 1)
    if any(isinstance(v, str) for v in (start, end, step)):
        raise AtenSkip("arange with tensor bounds")
    return c.emit("arange", [], {"start": start, "end": end, "step": step, "dtype": _out_dtype(c, "int64")})


VALUE = AttrType(f"a finite number or one of {', '.join(map(repr, SPECIAL))}",
                 lambda v: (v in SPECIAL) if isinstance(v, str) else (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                     and math.isfinite(v)
                                                                     and (isinstance(v, float) or abs(v) <= 2**63)))
# (a float may be as large as a format's limit: a bfloat16 "min" written as its number, -3.39e38, when a reference
# widens the fill; triage27's internal error on a widened attention mask)
NUMBER = AttrType("a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                  and abs(v) <= 2**53)
SHAPE_OR_SCALAR = AttrType("a list of ints >= 1 ([] for a 0-dim tensor)", lambda v: isinstance(v, list) and all(
    isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 1 << 20 for s in v))

OPS: list[OpSpec] = [
    OpSpec("full", "constant", (), {"shape": None, "value": 0.0, "dtype": "float32"}, _infer_full, full,
           _torch_full, _relax_full, _full_interval, Example((), (), {"shape": [2, 3], "value": "min", "dtype": SAME_DTYPE}),
           attr_types={"shape": SHAPE_OR_SCALAR, "value": VALUE, "dtype": DTYPE}, numpy=_np_full,
           aten=A.overloads("full.default zeros.default ones.default zeros_like.default ones_like.default "
                            "full_like.default new_zeros.default new_ones.default new_full.default "
                            "scalar_tensor.default empty.memory_format empty_like.default empty_permuted.default "
                            "new_empty.default", _aten_full),
           tags=frozenset({"dtype-limit-value"})),  # its value may name its dtype's limits ("min", "max")
    OpSpec("arange", "constant", (), {"start": 0, "end": 1, "step": 1, "dtype": "int64"}, _infer_arange, arange,
           _torch_arange, _relax_arange, _arange_interval,
           Example((), (), {"start": -3, "end": 9, "step": 2, "dtype": SAME_DTYPE}),
           attr_types={"start": NUMBER, "end": NUMBER, "step": NUMBER, "dtype": DTYPE}, numpy=_np_arange,
           aten=A.overloads("arange.default arange.start arange.start_step", _aten_arange)),
]
