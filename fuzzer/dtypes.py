"""Dtype names, numpy mapping, rounding and units in the last place."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """Binary floating-point format parameters."""

    name: str
    mantissa_bits: int  # explicit fraction bits
    min_exponent: int  # exponent of the smallest normal number
    max_value: float

    @property
    def smallest_normal(self) -> float:
        """The smallest positive normal number (below it: subnormal, flushed by FTZ/DAZ hardware)."""
        return 2.0 ** self.min_exponent

    @property
    def smallest_subnormal(self) -> float:
        """The smallest positive subnormal number (half of it rounds to 0)."""
        return 2.0 ** (self.min_exponent - self.mantissa_bits)


FLOAT_FORMATS: dict[str, FloatFormat] = {
    "float16": FloatFormat("float16", 10, -14, 65504.0),
    "bfloat16": FloatFormat("bfloat16", 7, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "float32": FloatFormat("float32", 23, -126, float(np.finfo(np.float32).max)),
    "float64": FloatFormat("float64", 52, -1022, float(np.finfo(np.float64).max)),
    # fp8 (storage and casts; PyTorch's CPU kernels are few): e4m3fn has no inf, out of range is NaN
    "float8_e4m3fn": FloatFormat("float8_e4m3fn", 3, -6, 448.0),
    "float8_e5m2": FloatFormat("float8_e5m2", 2, -14, 57344.0),
}
FLOAT_DTYPES: tuple[str, ...] = tuple(FLOAT_FORMATS)
FLOAT32_TINY = FLOAT_FORMATS["float32"].smallest_normal
FLOAT32_SQUARE_MAX = float(np.sqrt(FLOAT_FORMATS["float32"].max_value))  # ~1.8e19: past it a value's square is inf
INT_DTYPES: tuple[str, ...] = ("int32", "int64")
BOOL = "bool"  # masks: comparisons, where, attention masks
EXACT_DTYPES: tuple[str, ...] = INT_DTYPES + (BOOL,)  # dtypes whose values are never rounded, only truncated
DTYPES: tuple[str, ...] = FLOAT_DTYPES + EXACT_DTYPES
LOW_PRECISION: tuple[str, ...] = ("float16", "bfloat16")
FP8: tuple[str, ...] = ("float8_e4m3fn", "float8_e5m2")
# Where PyTorch's cast to fp8 leaves the range (on the float32 magnitude, as torch converts through float32):
# float8_e4m3fn has no inf and gives NaN past 464 (464 itself ties to 448); float8_e5m2 gives inf from 61440
# (the tie rounds to 2**16). Measured on torch 2.9.1 and ml_dtypes, which agree.
FP8_NAN_PAST = 464.0
FP8_INF_FROM = 61440.0

_NUMPY = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}


def is_float(dtype: str) -> bool:
    """True for floating-point dtype names."""
    return dtype in FLOAT_FORMATS


def is_exact(dtype: str) -> bool:
    """True for int and bool dtypes (values kept as they are: no float rounding, no float32 arithmetic)."""
    return dtype in EXACT_DTYPES


def check_dtype(dtype: object) -> str:
    """Return the dtype name or raise ValueError naming the known ones."""
    if dtype not in _NUMPY:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    return str(dtype)


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy (or ml_dtypes) dtype for a dtype name."""
    return _NUMPY[check_dtype(dtype)]


CAST_EDGE = 2.0**-6  # relative: a backend's own rounding of a cast's operand near an int type's end may cross it


def cast_undefined(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """Where casting float `values` to the int `dtype` is implementation-defined (C, C++ and PyTorch leave it
    undefined): NaN, infinities and values outside the int type's range, or within CAST_EDGE of its ends."""
    arr = np.asarray(values, dtype=np.float64)
    if is_float(dtype) or dtype == BOOL:  # x != 0 is defined for every float, NaN included
        return np.zeros(arr.shape, dtype=bool)
    info = np.iinfo(numpy_dtype(dtype))
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(arr) | (np.abs(arr) >= float(info.max) * (1.0 - CAST_EDGE))


def past_fp8_range(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """Mask of the values a cast to fp8 `dtype` turns into NaN or inf (none for other dtypes; NaN stays NaN)."""
    mag = np.abs(np.asarray(values, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        mag = mag.astype(np.float32)
        if dtype == "float8_e4m3fn":
            return mag > FP8_NAN_PAST
        if dtype == "float8_e5m2":
            return mag >= FP8_INF_FROM
    return np.zeros(mag.shape, dtype=bool)


def round_to(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """Round values to `dtype` (one rounding, RNE) and return them as float64 (int64 for ints, bool for bool).

    fp8 follows PyTorch's cast: a float64 value goes through float32 first (as torch's conversion does), then
    RNE; beyond the range NaN for float8_e4m3fn (no inf), inf for float8_e5m2; NaN stays NaN.
    """
    arr = np.asarray(values, dtype=np.float64)
    if dtype == BOOL:
        return arr != 0
    if not is_float(dtype):
        return np.asarray(np.trunc(arr), dtype=np.int64) if np.all(np.isfinite(arr)) else arr
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype in FP8:
            arr = arr.astype(np.float32)
        return arr.astype(numpy_dtype(dtype)).astype(np.float64)


def flush(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """`values` with every number below the smallest normal of `dtype` set to zero (what FTZ/DAZ hardware does)."""
    v = np.asarray(values, dtype=np.float64)
    if dtype not in FLOAT_FORMATS:
        return v
    return np.where(np.abs(v) < FLOAT_FORMATS[dtype].smallest_normal, 0.0, v)


def cast_results(values: np.ndarray | float, dtype: str) -> list[np.ndarray]:
    """What a cast of float64 `values` to `dtype` may return: the correctly rounded value, and for a 16-bit format
    PyTorch's CPU conversion too, which rounds a float64 value through float32 first (measured on 2.9.1: 1 + 2**-11 +
    2**-40 -> float16 is 1.0, not 1 + 2**-10); fp8 is through float32 already (round_to)."""
    out = [round_to(values, dtype)]
    if dtype in LOW_PRECISION:
        with np.errstate(over="ignore"):
            out.append(round_to(np.asarray(values, dtype=np.float64).astype(np.float32), dtype))
    return out


def computed_floor(magnitude: np.ndarray, dtype: str) -> np.ndarray:
    """A magnitude an op passes through, computed in float32 (float64 for a float64 result), as a floor of the error
    scale of a `dtype` result: an ULP of `dtype` at the floor is an ULP of the computing format at the magnitude."""
    compute = 52 if dtype == "float64" else 23
    mantissa = FLOAT_FORMATS[dtype].mantissa_bits if dtype in FLOAT_FORMATS else compute
    return np.abs(np.asarray(magnitude, dtype=np.float64)) * 2.0 ** (min(mantissa, compute) - compute)


def holds_exactly(narrow: str, wide: str) -> bool:
    """True when every `narrow` float value is a `wide` float value (a cast from `narrow` to `wide` is exact)."""
    if narrow not in FLOAT_FORMATS or wide not in FLOAT_FORMATS:
        return False
    a, b = FLOAT_FORMATS[narrow], FLOAT_FORMATS[wide]
    return (a.mantissa_bits <= b.mantissa_bits and a.max_value <= b.max_value
            and a.smallest_subnormal >= b.smallest_subnormal)
