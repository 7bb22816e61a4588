"""Effective precision: an output that reports one dtype but is stored or computed in a narrower one, with evidence.

Evidence is either what the device says it holds (torch_xla exposes the element type of a lazy tensor), or
the values themselves: results of a genuine float32 computation land on the bfloat16 grid with probability
2**-16 each, so an output whose every element is a bfloat16 (or float16) number, where the exact answer
is not, was rounded to that format somewhere. A mere error beyond the bound is not evidence of a format.
"""

from __future__ import annotations

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, round_to

MIN_ELEMENTS = 16  # fewer distinct values cannot tell a format apart from chance
ON_GRID = 0.99  # share of the actual values that must lie on the narrower grid
EXACT_OFF_GRID = 0.5  # share of the exact answer (rounded to the declared format) that must lie off it (else the
#                      data itself is on the grid)


def on_grid(values: np.ndarray, dtype: str) -> np.ndarray:
    """Mask of finite non-zero values exactly representable in `dtype`."""
    v = np.asarray(values, dtype=np.float64).ravel()
    ok = np.isfinite(v) & (v != 0)
    with np.errstate(over="ignore", invalid="ignore"):
        return ok & (round_to(np.where(ok, v, 0.0), dtype) == v)


def narrower_format(actual: np.ndarray, expected: np.ndarray, declared: str) -> str | None:
    """The narrowest float format (bfloat16, then float16) that all of `actual` lies on while `expected` does not."""
    if declared not in FLOAT_FORMATS:
        return None
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    useful = np.isfinite(a) & (a != 0)
    if len(np.unique(a[useful])) < MIN_ELEMENTS or a.shape != e.shape:
        return None  # a few distinct values lie on any grid by chance
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(np.isfinite(e), round_to(np.where(np.isfinite(e), e, 0.0), declared), e)
    for fmt in ("bfloat16", "float16"):
        if FLOAT_FORMATS[fmt].mantissa_bits >= FLOAT_FORMATS[declared].mantissa_bits:
            continue
        share = np.count_nonzero(on_grid(a, fmt)) / np.count_nonzero(useful)
        # the exact answer as the declared format holds it: float16 subnormals have few bits and lie on the
        # bfloat16 grid whatever computed them (triage12 bf6fef3f80, a float16 conv "computing in bfloat16")
        exact_useful = np.isfinite(e) & (e != 0)
        exact_share = np.count_nonzero(on_grid(e, fmt)) / max(1, np.count_nonzero(exact_useful))
        if share >= ON_GRID and exact_share <= EXACT_OFF_GRID:
            return fmt
    return None


def device_narrower(device: str | None, declared: str) -> bool:
    """True when the device reports a float element type narrower than the declared one."""
    return (device in FLOAT_FORMATS and declared in FLOAT_FORMATS
            and FLOAT_FORMATS[device].mantissa_bits < FLOAT_FORMATS[declared].mantissa_bits)
