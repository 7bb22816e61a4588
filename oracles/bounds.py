"""Principled error bounds: an executor may lose a multiple of what an ideal implementation loses.

The exact answer is the fp64 reference on the dtype-rounded inputs. An ideal implementation of the
declared dtypes computes each op with float32-or-better accumulation and rounds its result to the op's
declared dtype; we run three (exact math; float32 arithmetic with sequential summation, the least
accurate common order, and the scale-and-shift form of norm kernels; exact math on operands perturbed
backward-stably at float32 level), and the worst of them sets the scale of what is allowed. PyTorch's accuracy
checker (torch/_dynamo/utils.py::same) uses the same idea on RMSE with a multiplier of 2-3.

Errors are measured in ULPs of the output dtype at each element's magnitude, floored at the tensor's RMS
magnitude (a result that cancels to ~0 is judged at the scale of its tensor, not by its own tiny ULP).
The bound compares worst with worst and RMS with RMS, so it does not hinge on one element where the
ideal happened to be exact:

    ratio = max( max_err / (multiplier * max_ideal_err + slack),  rms_err / (multiplier * rms_ideal_err + slack) )

and ratio > 1 is a finding. A cast is no arithmetic: its ideal is one rounding, so `rounding_ratio` holds it to
half an ULP of its target format against the correctly rounded value (error_stats' `rounded`).
`ulp`, `bound_ratio` and `rounding_ratio` are self-contained: repro scripts paste their source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, computed_floor  # noqa: F401 - re-exported for the oracles

MULTIPLIER = 3.0
SLACK_ULPS = 2.0
FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")


def ulp(values, dtype):
    """Spacing of `dtype` at each value (subnormal spacing at zero), as float64."""
    mantissa, emin = {"float16": (10, -14), "bfloat16": (7, -126), "float32": (23, -126), "float64": (52, -1022),
                      "float8_e4m3fn": (3, -6), "float8_e5m2": (2, -14)}[dtype]
    mag = np.abs(np.asarray(values, dtype=np.float64))
    finite = np.isfinite(mag) & (mag > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log2(np.where(finite, mag, 1.0)))
    exp = np.maximum(np.where(finite, exp, emin), emin)
    return np.ldexp(1.0, (exp - mantissa).astype(np.int64))


def bound_ratio(actual, expected, ideals, dtype, multiplier=3.0, slack_ulps=2.0, floor=None):
    """(ratio, max error in ULPs, index of the worst element, non-finite mismatches) of `actual` against the bound.

    `ideals` lists the outputs of ideal implementations of the declared dtypes. Elements where the
    reference or an ideal is not finite (the dtype's own overflow) are not compared; non-finite values
    where all of them are finite, or finite values where the reference is not, are mismatches.
    """
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    ideals = [np.asarray(i, dtype=np.float64).ravel() for i in ideals]
    if a.shape != e.shape:
        return float("inf"), float("inf"), -1, a.size
    fin_e, fin_a = np.isfinite(e), np.isfinite(a)
    fin_i = np.logical_and.reduce([np.isfinite(i) for i in ideals]) if ideals else fin_e
    mismatch = int(np.count_nonzero((fin_e & fin_i & ~fin_a) | (~fin_e & fin_a)))
    compared = fin_e & fin_i & fin_a
    if not compared.any():
        return (float("inf") if mismatch else 0.0), 0.0, 0, mismatch
    scale = np.maximum(np.abs(e), np.sqrt(np.mean(e[compared] ** 2)))
    if floor is not None:  # an op's own magnitude scale (a gated activation is judged at its operand's magnitude)
        scale = np.maximum(scale, np.nan_to_num(np.abs(np.broadcast_to(floor, np.shape(expected)).ravel())))
    unit = ulp(np.where(compared, scale, 1.0), dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(compared, np.abs(a - e) / unit, 0.0)
        ideal_err = np.zeros_like(err)
        for i in ideals:
            ideal_err = np.maximum(ideal_err, np.where(compared, np.abs(i - e) / unit, 0.0))
    worst = int(np.argmax(err))
    rms = lambda x: float(np.sqrt(np.mean(x[compared] ** 2)))  # noqa: E731
    ratio = max(float(err[worst]) / (multiplier * float(ideal_err.max()) + slack_ulps),
                rms(err) / (multiplier * rms(ideal_err) + slack_ulps))
    return (float("inf") if mismatch else ratio), float(err[worst]), worst, mismatch


def rounding_ratio(actual, rounded, dtype, allowed_ulps=0.5):
    """(ratio, max error in ULPs, index of the worst element, non-finite mismatches) of `actual` against a single
    rounding: `rounded` is the correctly rounded exact answer, and half an ULP of `dtype` is allowed.

    A cast's ideal is one rounding, so any result past half an ULP of the target format (its subnormal spacing
    near zero) is wrong. The ULP is taken at the smaller magnitude of the two values, so the neighbour below a
    power of two is one whole ULP off, not half of the wider one.
    """
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(rounded, dtype=np.float64).ravel()
    if a.shape != e.shape:
        return float("inf"), float("inf"), -1, a.size
    fin_e, fin_a = np.isfinite(e), np.isfinite(a)
    mismatch = int(np.count_nonzero(fin_e != fin_a))
    compared = fin_e & fin_a
    if not compared.any():
        return (float("inf") if mismatch else 0.0), 0.0, 0, mismatch
    unit = ulp(np.where(compared, np.minimum(np.abs(a), np.abs(e)), 1.0), dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(compared, np.abs(a - e) / unit, 0.0)
    worst = int(np.argmax(err))
    return (float("inf") if mismatch else float(err[worst]) / allowed_ulps), float(err[worst]), worst, mismatch


def nearest(actual: np.ndarray, candidates: np.ndarray | list[np.ndarray]) -> np.ndarray:
    """Per element, the candidate reference nearest to `actual` (one array: itself); NaN candidates count as far."""
    if not isinstance(candidates, (list, tuple)):
        return np.asarray(candidates, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    best = np.asarray(candidates[0], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        for c in candidates[1:]:
            c = np.asarray(c, dtype=np.float64)
            closer = np.nan_to_num(np.abs(a - c), nan=np.inf) < np.nan_to_num(np.abs(a - best), nan=np.inf)
            best = np.where(closer | (np.isnan(a) & np.isnan(c)), c, best)
    return best


def slack_ulps(dtype: str, budget: float = 0.0) -> float:
    """The bound's slack in ULPs of `dtype`, plus a relative error budget (documented approximate math) in those ULPs.

    The one place the slack is formed: the checker's per-node judging, the output judging and the repro scripts'
    restated bound all call it."""
    if not budget or dtype not in FLOAT_FORMATS:
        return SLACK_ULPS
    return SLACK_ULPS + budget * 2.0 ** (FLOAT_FORMATS[dtype].mantissa_bits + 1)


@dataclass(frozen=True)
class ErrorStats:
    """How far one output is from the reference, and against the bound."""

    max_abs: float
    max_ulp: float  # in ULPs of the output dtype at the element's magnitude (floored at the tensor's RMS)
    ratio: float  # > 1 is a finding; inf for non-finite mismatches
    worst_index: int
    nonfinite_mismatch: int


def error_stats(actual: np.ndarray, expected: np.ndarray, ideal: np.ndarray | list[np.ndarray], dtype: str,
                multiplier: float = MULTIPLIER, slack_ulps: float = SLACK_ULPS,
                floor: np.ndarray | None = None,
                rounded: np.ndarray | list[np.ndarray] | None = None) -> ErrorStats:
    """Compare an executor's output with the reference under the bound; dtype is the declared output dtype.

    `ideal`: one ideal implementation's values or a list of several (their worst error sets the scale).
    `rounded`: where the value's ideal is a single rounding (a cast), its correctly rounded value (or the values a cast
    may return, fuzzer.dtypes.cast_results: the nearest counts): then that is the reference and half an ULP of a float
    `dtype` is allowed (`rounding_ratio`), whatever the ideals lose.
    """
    ideals = list(ideal) if isinstance(ideal, (list, tuple)) else [ideal]
    out_dtype = dtype if dtype in FLOAT_NAMES else "float32"
    if rounded is not None and dtype in FLOAT_NAMES:
        expected = nearest(actual, rounded)
        ratio, max_ulp, worst, mismatch = rounding_ratio(actual, expected, dtype)
    else:
        ratio, max_ulp, worst, mismatch = bound_ratio(actual, expected, ideals, out_dtype, multiplier, slack_ulps,
                                                      floor)
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - e) if a.shape == e.shape else np.array([np.inf])
    finite = diff[np.isfinite(diff)]
    return ErrorStats(float(finite.max()) if finite.size else 0.0, max_ulp, ratio, worst, mismatch)


def allowed_abs(expected: np.ndarray, ideals: list[np.ndarray], dtype: str, multiplier: float = MULTIPLIER,
                slack_ulps: float = SLACK_ULPS) -> float:
    """The bound as one absolute number: multiplier x the worst ideal's max error + slack ULP at the largest value.

    What a short repro script checks against (max abs error), restating the bound without its machinery.
    """
    e = np.asarray(expected, dtype=np.float64).ravel()
    fin = np.isfinite(e)
    for i in ideals:
        fin &= np.isfinite(np.asarray(i, dtype=np.float64).ravel())
    if not fin.any():
        return 0.0
    worst = max(float(np.max(np.abs(np.asarray(i, dtype=np.float64).ravel()[fin] - e[fin]))) for i in ideals) if ideals else 0.0
    out_dtype = dtype if dtype in FLOAT_NAMES else "float32"
    return multiplier * worst + slack_ulps * float(ulp(np.max(np.abs(e[fin])), out_dtype))


def allowed_ulps(expected: np.ndarray, ideals: list[np.ndarray], dtype: str, multiplier: float = MULTIPLIER,
                 slack_ulps: float = SLACK_ULPS, floor: float = 0.0) -> tuple[float, float]:
    """The two denominators of `bound_ratio` (allowed max and RMS error, in ULPs of `dtype` at each element's
    magnitude floored at the RMS), so that a short repro script restates the oracle's verdict exactly:
    ratio = max(max_err_ulps / allowed[0], rms_err_ulps / allowed[1])."""
    e = np.asarray(expected, dtype=np.float64).ravel()
    ideals = [np.asarray(i, dtype=np.float64).ravel() for i in ideals]
    fin = np.isfinite(e)
    for i in ideals:
        fin &= np.isfinite(i)
    if not fin.any():
        return slack_ulps, slack_ulps
    out_dtype = dtype if dtype in FLOAT_NAMES else "float32"
    scale = np.maximum(np.maximum(np.abs(e), np.sqrt(np.mean(e[fin] ** 2))), floor)
    unit = ulp(np.where(fin, scale, 1.0), out_dtype)
    ideal_err = np.zeros_like(e)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in ideals:
            ideal_err = np.maximum(ideal_err, np.where(fin, np.abs(i - e) / unit, 0.0))
    return (multiplier * float(ideal_err.max()) + slack_ulps,
            multiplier * float(np.sqrt(np.mean(ideal_err[fin] ** 2))) + slack_ulps)
