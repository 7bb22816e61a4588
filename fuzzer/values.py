"""Input value distributions, each one numpy expression shared by the executors and the exported scripts."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .dtypes import FLOAT_FORMATS, is_float, round_to

# name -> (numpy expression over rng, np, shape and the parameters, default parameters).
# The same text is evaluated here and pasted into repro scripts, so a script regenerates the exact inputs.
DISTRIBUTIONS: dict[str, tuple[str, dict[str, float]]] = {
    "normal": ("rng.normal({mean!r}, {std!r}, size=shape)", {"mean": 0.0, "std": 1.0}),
    "uniform": ("rng.uniform({low!r}, {high!r}, size=shape)", {"low": -1.0, "high": 1.0}),
    "constant": ("np.full(shape, {value!r})", {"value": 1.0}),
    "alternating": ("np.resize(np.array([-{value!r}, {value!r}]), shape)", {"value": 0.25}),
    "offset": ("{mean!r} + rng.normal(0.0, {std!r}, size=shape)", {"mean": 1000.0, "std": 0.01}),
    "wide": ("rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform({lo!r}, {hi!r}, size=shape)", {"lo": -6.0, "hi": 4.0}),
    "linspace": ("np.linspace({start!r}, {stop!r}, math.prod(shape)).reshape(shape)", {"start": -1.0, "stop": 1.0}),
    "randint": ("rng.integers({low!r}, {high!r}, size=shape).astype(np.float64)", {"low": 0, "high": 1000}),
    "loguniform": ("10.0 ** rng.uniform({lo!r}, {hi!r}, size=shape)", {"lo": -3.0, "hi": 3.0}),
}


class ValueSpecError(ValueError):
    """A value spec that cannot be evaluated."""


# What each distribution's parameters must satisfy beyond being finite numbers (numpy raises otherwise).
CONSTRAINTS: dict[str, tuple[tuple[Callable[[dict[str, Any]], bool], str], ...]] = {
    "normal": ((lambda p: _nonnegative(p["std"]), "std must be >= 0 (and not -0.0)"),),
    "offset": ((lambda p: _nonnegative(p["std"]), "std must be >= 0 (and not -0.0)"),),
    "uniform": ((lambda p: 0 <= p["high"] - p["low"] < math.inf, "high - low must be a finite number >= 0"),),
    "wide": ((lambda p: 0 <= p["hi"] - p["lo"] < math.inf, "hi - lo must be a finite number >= 0"),),
    "loguniform": ((lambda p: 0 <= p["hi"] - p["lo"] < math.inf, "hi - lo must be a finite number >= 0"),),
    "linspace": ((lambda p: math.isfinite(p["stop"] - p["start"]), "stop - start must be a finite number"),),
    "randint": ((lambda p: all(float(p[k]).is_integer() and abs(p[k]) <= 2**53 for k in ("low", "high")),
                 "low and high must be integers of magnitude <= 2**53"),
                (lambda p: p["low"] < p["high"], "low must be < high")),
}
MAX_SEED = 2**63 - 1


def _number(val: Any) -> bool:
    """A finite float, or an int numpy takes as int64 and float64 exactly (not a bool)."""
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        return False
    if isinstance(val, int):
        return abs(val) <= 2**53  # numpy turns larger Python ints into object arrays
    return math.isfinite(val)


def _nonnegative(val: float) -> bool:
    """>= 0 as numpy checks a scale: -0.0 is negative there (its sign bit)."""
    return val >= 0 and math.copysign(1.0, val) > 0


def expression(spec: dict[str, Any]) -> str:
    """The numpy expression (over `rng`, `np`, `math`, `shape`) that makes the values of `spec`."""
    dist = spec.get("dist")
    if not isinstance(dist, str) or dist not in DISTRIBUTIONS:
        raise ValueSpecError(f"unknown distribution {str(dist)[:40]!r} (known: {', '.join(DISTRIBUTIONS)})")
    template, defaults = DISTRIBUTIONS[dist]
    params = {**defaults, **{k: v for k, v in spec.items() if k not in ("dist", "seed")}}
    for key, val in params.items():
        if key not in defaults:
            raise ValueSpecError(f"distribution {dist!r} has no parameter {str(key)[:40]!r}")
        if not _number(val):
            raise ValueSpecError(f"parameter {key!r} of {dist!r} must be a finite number (ints of magnitude <= 2**53), "
                                 f"got {str(val)[:40]!r}")
    for ok, message in CONSTRAINTS.get(dist, ()):
        if not ok(params):
            raise ValueSpecError(f"distribution {dist!r}: {message}")
    return template.format(**params)


def _all_numbers(values: Any) -> bool:
    """True when every leaf of a nested list is an int or float (bool and str are not numbers here)."""
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, np.ndarray):
            if v.dtype.kind not in "iuf":
                return False
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            return False
    return True


PACKED = "packed"  # inline values as base64 of little-endian float64 (a real model's weights: JSON lists are slow)


def pack(values: np.ndarray) -> dict[str, Any]:
    """A value spec holding `values` packed (base64 of float64): 40x faster to write and read than a JSON list."""
    import base64

    arr = np.ascontiguousarray(np.asarray(values, dtype="<f8"))
    return {PACKED: base64.b64encode(arr.tobytes()).decode("ascii"), "shape": list(arr.shape)}


def has_inline(spec: Any) -> bool:
    """True for a spec holding its values (a list, or packed)."""
    return isinstance(spec, dict) and ("values" in spec or PACKED in spec)


def inline(spec: dict[str, Any]) -> np.ndarray:
    """The inline values of a spec (a list, or packed) as float64; ValueSpecError where they are not numbers."""
    if PACKED not in spec:
        return inline_values(spec["values"])
    import base64
    import binascii

    text, shape = spec[PACKED], spec.get("shape")
    if not isinstance(text, str) or not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueSpecError("packed values need a base64 string and a shape (a list of ints >= 0)")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueSpecError("packed values are not base64") from None
    if len(data) != 8 * math.prod(shape):
        raise ValueSpecError(f"packed values hold {len(data) // 8} numbers, not the {math.prod(shape)} of shape {shape}")
    raw = np.frombuffer(data, dtype="<f8").astype(np.float64).reshape(shape)
    if not np.all(np.isfinite(raw)):
        raise ValueSpecError("inline values must be finite numbers")
    return raw


LISTED = 4096  # inline values a script writes as a list literal; more are written packed (base64 of float64)


def inline_expr(spec: dict[str, Any], shape: tuple[int, ...]) -> str:
    """The numpy expression a script makes a spec's inline values with: a list literal, or for more than LISTED
    values (a real model's weights) the packed bytes decoded (a list of millions of numbers is slow to parse)."""
    raw = inline(spec)
    if raw.size <= LISTED:
        return f"np.broadcast_to(np.array({raw.tolist()!r}), {tuple(shape)!r})"
    packed = pack(raw)[PACKED]
    made = f"np.frombuffer(__import__('base64').b64decode({packed!r}), '<f8').reshape({list(raw.shape)!r})"
    return made if raw.shape == tuple(shape) else f"np.broadcast_to({made}, {tuple(shape)!r})"


def inline_values(values: Any) -> np.ndarray:
    """Inline values as a float64 array; ValueSpecError unless they are finite numbers in a regular nested list."""
    if not _all_numbers(values):
        raise ValueSpecError("inline values must be numbers (not strings or booleans) in a regular nested list")
    try:
        raw = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueSpecError("inline values must be a number or a regular nested list of numbers") from None
    if not np.all(np.isfinite(raw)):
        raise ValueSpecError("inline values must be finite numbers")
    return raw


def check_spec(spec: Any, shape: tuple[int, ...] | None = None) -> None:
    """Raise ValueSpecError unless `spec` is an inline-values or distribution spec (inline values fitting `shape`)."""
    if not isinstance(spec, dict):
        raise ValueSpecError(f"value spec must be an object, got {type(spec).__name__}")
    if has_inline(spec):
        raw = inline(spec)
        if shape is not None and not _broadcasts(raw.shape, tuple(shape)):
            raise ValueSpecError(f"inline values of shape {list(raw.shape)} do not fit shape {list(shape)}")
        return
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueSpecError(f"seed must be an integer in 0..2**63-1, got {repr(seed)[:40]}")
    expression(spec)


def _broadcasts(raw: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    try:
        return tuple(np.broadcast_shapes(raw, shape)) == shape
    except ValueError:
        return False


def make_values(spec: dict[str, Any], shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values of one input, rounded to `dtype` and returned as float64 (the exact inputs every executor sees)."""
    if has_inline(spec):
        raw = inline(spec)
        if raw.shape != tuple(shape):
            try:
                raw = np.broadcast_to(raw, shape).copy()
            except ValueError:
                raise ValueSpecError(f"inline values of shape {list(raw.shape)} do not fit shape {list(shape)}") from None
    else:
        rng = np.random.default_rng(int(spec.get("seed", 0)))
        raw = np.asarray(eval(expression(spec), {"rng": rng, "np": np, "math": math, "shape": tuple(shape)}), dtype=np.float64)  # noqa: S307 - our own template
        raw = np.broadcast_to(raw, shape).copy()
    if is_float(dtype):
        # keep values finite in the declared dtype: clip to its range before rounding
        top = FLOAT_FORMATS[dtype].max_value
        raw = np.clip(raw, -top, top)
    else:
        if has_inline(spec):
            check_exact_ints(spec["values"] if "values" in spec else raw, dtype)
        check_int_range(raw, dtype)
    return round_to(raw, dtype).reshape(shape)


MAX_EXACT_INT = 2**53  # values are held as float64: larger ints are not held exactly


def check_exact_ints(values: Any, dtype: str) -> None:
    """ValueSpecError when an inline int for an int `dtype` lies beyond +-2**53: held as float64 it would become
    another number (int64's 2**63 - 1 turned into 2**63 and was called out of range; -2**63 - 1 into -2**63)."""
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and abs(int(v)) > MAX_EXACT_INT:
            info = np.iinfo(np.dtype(dtype))
            if not info.min <= int(v) <= info.max:  # judged on the int itself, not its float64 (-2**63 - 1)
                raise ValueSpecError(f"values beyond {dtype}'s range {info.min}..{info.max} (got {int(v)})")
            raise ValueSpecError(f"{dtype} value {int(v)} is beyond +-2**53: precfuzz holds values as float64, which "
                                 f"would make it {float(v):.17g}; give values within +-{MAX_EXACT_INT}")


def check_int_range(raw: np.ndarray, dtype: str) -> None:
    """ValueSpecError when values given for an int `dtype` do not fit it (PyTorch would refuse or wrap them)."""
    if dtype not in ("int32", "int64") or raw.size == 0:
        return
    info = np.iinfo(np.dtype(dtype))
    with np.errstate(invalid="ignore"):
        whole = np.trunc(raw)
        bad = ~np.isfinite(whole) | (whole < float(info.min)) | (whole >= -float(info.min))
    if np.any(bad):
        first = raw.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
        raise ValueSpecError(f"values beyond {dtype}'s range {info.min}..{info.max} (got {first:.17g})")
