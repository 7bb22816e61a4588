"""Integer wraparound as PyTorch does it: int32 and int64 results are taken modulo 2**32 or 2**64 (two's complement)."""

from __future__ import annotations

import numpy as np

INT_BITS = ("int32", "int64")  # the int dtypes that wrap (bool does not)


def wrap_int(values, dtype):
    """`values` wrapped into `dtype`'s range as PyTorch's int arithmetic wraps (2**31-1 + 1 is -2**31 in int32), as
    int64; values of other dtypes, and non-finite floats (an undefined cast), unchanged."""
    bits = 32 if dtype == "int32" else 64 if dtype == "int64" else None  # (a script pastes this function alone)
    arr = np.asarray(values)
    if bits is None or arr.dtype == np.bool_:
        return values
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            return values
        arr = np.trunc(arr)
        if np.any(np.abs(arr) >= 2.0**63):  # exact for floats this large (all integers): fold into int64 first
            arr = np.fmod(arr, 2.0**64)
            arr = np.where(arr < 0, arr + 2.0**64, arr)
            arr = np.where(arr >= 2.0**63, arr - 2.0**64, arr)
        arr = arr.astype(np.int64)
    arr = arr.astype(np.int64)
    if bits == 32:
        arr = ((arr + 2**31) & (2**32 - 1)) - 2**31
    return arr
