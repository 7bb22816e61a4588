"""Input value distributions, each one numpy expression shared by the executors and the exported scripts."""

from __future__ import annotations

import math
from typing import Any

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


def expression(spec: dict[str, Any]) -> str:
    """The numpy expression (over `rng`, `np`, `math`, `shape`) that makes the values of `spec`."""
    dist = spec.get("dist")
    if dist not in DISTRIBUTIONS:
        raise ValueSpecError(f"unknown distribution {dist!r} (known: {', '.join(DISTRIBUTIONS)})")
    template, defaults = DISTRIBUTIONS[dist]
    params = {**defaults, **{k: v for k, v in spec.items() if k not in ("dist", "seed")}}
    for key, val in params.items():
        if key not in defaults:
            raise ValueSpecError(f"distribution {dist!r} has no parameter {key!r}")
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
            raise ValueSpecError(f"parameter {key!r} of {dist!r} must be a finite number, got {val!r}")
    return template.format(**params)


def check_spec(spec: Any) -> None:
    """Raise ValueSpecError unless `spec` is an inline-values or distribution spec."""
    if not isinstance(spec, dict):
        raise ValueSpecError(f"value spec must be an object, got {type(spec).__name__}")
    if "values" in spec:
        np.asarray(spec["values"], dtype=np.float64)
        return
    if not isinstance(spec.get("seed", 0), int):
        raise ValueSpecError("seed must be an integer")
    expression(spec)


def make_values(spec: dict[str, Any], shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values of one input, rounded to `dtype` and returned as float64 (the exact inputs every executor sees)."""
    if "values" in spec:
        raw = np.asarray(spec["values"], dtype=np.float64)
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
    return round_to(raw, dtype).reshape(shape)
