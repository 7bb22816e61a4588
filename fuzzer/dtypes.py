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


FLOAT_FORMATS: dict[str, FloatFormat] = {
    "float16": FloatFormat("float16", 10, -14, 65504.0),
    "bfloat16": FloatFormat("bfloat16", 7, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "float32": FloatFormat("float32", 23, -126, float(np.finfo(np.float32).max)),
    "float64": FloatFormat("float64", 52, -1022, float(np.finfo(np.float64).max)),
}
FLOAT_DTYPES: tuple[str, ...] = tuple(FLOAT_FORMATS)
INT_DTYPES: tuple[str, ...] = ("int32", "int64")
BOOL = "bool"  # masks: comparisons, where, attention masks
EXACT_DTYPES: tuple[str, ...] = INT_DTYPES + (BOOL,)  # dtypes whose values are never rounded, only truncated
DTYPES: tuple[str, ...] = FLOAT_DTYPES + EXACT_DTYPES
LOW_PRECISION: tuple[str, ...] = ("float16", "bfloat16")

_NUMPY = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
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


def round_to(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """Round values to `dtype` (one rounding, RNE) and return them as float64 (int64 for ints, bool for bool)."""
    arr = np.asarray(values, dtype=np.float64)
    if dtype == BOOL:
        return arr != 0
    if not is_float(dtype):
        return np.asarray(np.trunc(arr), dtype=np.int64) if np.all(np.isfinite(arr)) else arr
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(numpy_dtype(dtype)).astype(np.float64)


