"""Principled error bounds: an executor may lose a multiple of what the ideal rounded implementation loses.

The exact answer is the fp64 reference on the dtype-rounded inputs. The `emulated` executor rounds each
op's result to its declared dtype: its error is what any correct mixed-precision implementation must be
allowed. PyTorch's accuracy checker (torch/_dynamo/utils.py::same) uses the same idea with a multiplier
of 2-3 on RMSE; we bound elementwise, scaling by the larger of the ideal's error at that element and its
RMS error over the tensor (so one lucky element does not make the bound zero), plus a few ULPs of the
output dtype for reordering and fused rounding. The functions `ulp` and `allowed_error` are self-contained:
repro scripts paste their source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MULTIPLIER = 3.0
SLACK_ULPS = 2.0


def ulp(values, dtype):
    """Spacing of `dtype` at each value (subnormal spacing at zero), as float64."""
    mantissa, emin = {"float16": (10, -14), "bfloat16": (7, -126), "float32": (23, -126), "float64": (52, -1022)}[dtype]
    mag = np.abs(np.asarray(values, dtype=np.float64))
    finite = np.isfinite(mag) & (mag > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log2(np.where(finite, mag, 1.0)))
    exp = np.maximum(np.where(finite, exp, emin), emin)
    return np.ldexp(1.0, (exp - mantissa).astype(np.int64))


def allowed_error(expected, ideal, dtype, multiplier=3.0, slack_ulps=2.0):
    """Elementwise allowed |actual - expected|: multiplier x the ideal's error (at least its RMS) + slack ULPs.

    `ideal` is one ideal implementation's values or a list of several (their worst error counts).
    """
    expected = np.asarray(expected, dtype=np.float64)
    ideals = ideal if isinstance(ideal, (list, tuple)) else [ideal]
    ideal_err = np.zeros(expected.shape)
    for one in ideals:
        err = np.abs(np.asarray(one, dtype=np.float64).reshape(expected.shape) - expected)
        ideal_err = np.maximum(ideal_err, np.where(np.isfinite(err), err, 0.0))
    rms = float(np.sqrt(np.mean(ideal_err**2))) if ideal_err.size else 0.0
    return multiplier * np.maximum(ideal_err, rms) + slack_ulps * ulp(expected, dtype)


@dataclass(frozen=True)
class ErrorStats:
    """How far one output is from the reference, and against the bound."""

    max_abs: float
    max_ulp: float
    ratio: float  # max over elements of |actual - expected| / allowed (> 1 is a finding)
    worst_index: int
    nonfinite_mismatch: int  # elements non-finite in actual but not in both reference and ideal, or the reverse
    allowed_at_worst: float


def error_stats(actual: np.ndarray, expected: np.ndarray, ideal: np.ndarray | list[np.ndarray], dtype: str,
                multiplier: float = MULTIPLIER, slack_ulps: float = SLACK_ULPS) -> ErrorStats:
    """Compare an executor's output with the reference under the bound; dtype is the declared output dtype.

    `ideal`: the ideal implementation's values (first: exact math rounded per op), or a list of several
    ideal implementations (e.g. also one computing in float32 arithmetic), whose worst error is allowed.
    """
    actual = np.asarray(actual, dtype=np.float64).ravel()
    expected = np.asarray(expected, dtype=np.float64).ravel()
    ideals = [np.asarray(i, dtype=np.float64).ravel() for i in (ideal if isinstance(ideal, (list, tuple)) else [ideal])]
    ideal = ideals[0]
    if actual.shape != expected.shape:
        return ErrorStats(float("inf"), float("inf"), float("inf"), -1, 0, 0.0)
    fin_a, fin_e, fin_i = np.isfinite(actual), np.isfinite(expected), np.isfinite(ideal)
    # Non-finite where reference and ideal are finite, or finite where the reference is not: a finding.
    # Where only the ideal overflows (the declared dtype's range), any answer is acceptable.
    mismatch = (fin_e & fin_i & ~fin_a) | (~fin_e & fin_a)
    compared = fin_e & fin_i & fin_a
    out_dtype = dtype if dtype in ("float16", "bfloat16", "float32", "float64") else "float32"
    safe_e = np.where(compared, expected, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(compared, np.abs(actual - expected), 0.0)
        allowed = allowed_error(safe_e, [np.where(compared, i, 0.0) for i in ideals], out_dtype, multiplier, slack_ulps)
        ulps = err / ulp(safe_e, out_dtype)
        ratio = np.where(compared, err / allowed, 0.0)
    worst = int(np.argmax(ratio)) if ratio.size else 0
    n_mis = int(np.count_nonzero(mismatch))
    return ErrorStats(
        max_abs=float(err.max()) if err.size else 0.0,
        max_ulp=float(ulps.max()) if ulps.size else 0.0,
        ratio=float("inf") if n_mis else (float(ratio[worst]) if ratio.size else 0.0),
        worst_index=worst,
        nonfinite_mismatch=n_mis,
        allowed_at_worst=float(allowed[worst]) if allowed.size else 0.0,
    )
