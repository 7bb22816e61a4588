"""Input value specs that stress precision, per purpose (activations, weights, norm stats, schedules), and intervals."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, is_float
from fuzzer.values import has_inline, inline

from .draw import DrawSource
from .ranges import Interval, rounded, union

Spec = dict[str, Any]
SpecMaker = Callable[[DrawSource, str], Spec]

F32_BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))  # 1 - 2**-24
F32_ABOVE_ZERO = float(np.finfo(np.float32).smallest_normal)
TINY_STD = {"float16": 1e-6, "bfloat16": 1e-39, "float32": 1e-40, "float64": 1e-310,  # mostly subnormal
            "float8_e4m3fn": 4e-3, "float8_e5m2": 2e-5}
WIDE_EXPONENTS = {"float16": (-7.0, 4.0), "bfloat16": (-30.0, 30.0), "float32": (-30.0, 30.0), "float64": (-30.0, 30.0),
                  "float8_e4m3fn": (-3.0, 2.6), "float8_e5m2": (-5.0, 4.7)}


def _max(dtype: str) -> float:
    return FLOAT_FORMATS[dtype].max_value if is_float(dtype) else 1e6


def _seeded(draw: DrawSource, spec: Spec) -> Spec:
    return {**spec, "seed": draw.seed()}


# ---- activations: (name, weight, maker). The first entry is the plainest (Hypothesis shrinks to it).
ACTIVATION: list[tuple[str, int, SpecMaker]] = [
    ("normal", 30, lambda d, dt: _seeded(d, {"dist": "normal", "mean": 0.0, "std": d.choice([1.0, 0.1, 3.0, 10.0])})),
    ("uniform", 8, lambda d, dt: _seeded(d, {"dist": "uniform", "low": -1.0, "high": d.choice([1.0, 2.0, 8.0])})),
    ("constant", 5, lambda d, dt: {"dist": "constant", "value": d.choice([1.0, 0.0, -2.5, 0.1, 3.0])}),
    ("alternating", 10, lambda d, dt: {"dist": "alternating", "value": d.choice([0.25, 1.0, 0.1, 3.0, 100.0])}),
    ("offset", 10, lambda d, dt: _seeded(d, {"dist": "offset", "mean": d.choice([1000.0, 100.0, 10.0, -500.0]),
                                              "std": d.choice([0.01, 0.1, 1.0])})),
    ("wide", 8, lambda d, dt: _seeded(d, {"dist": "wide", "lo": WIDE_EXPONENTS[dt][0], "hi": WIDE_EXPONENTS[dt][1]})),
    ("tiny", 5, lambda d, dt: _seeded(d, {"dist": "normal", "mean": 0.0, "std": TINY_STD[dt]})),
    ("near_max", 5, lambda d, dt: _seeded(d, {"dist": "uniform", "low": -_max(dt), "high": _max(dt)})
     if d.chance(0.5) else {"dist": "constant", "value": d.choice([0.9, -0.5, 0.99]) * _max(dt)}),
    ("linspace", 4, lambda d, dt: {"dist": "linspace", "start": -d.choice([1.0, 4.0, 100.0]),
                                   "stop": d.choice([1.0, 4.0, 100.0])}),
    ("randint", 3, lambda d, dt: _seeded(d, {"dist": "randint", "low": -d.choice([0, 8, 1000]),
                                             "high": d.choice([8, 1000, 4097])})),
]
ACTIVATION_TABLE = [(name, weight) for name, weight, _ in ACTIVATION]
_ACTIVATION_MAKERS = {name: maker for name, _, maker in ACTIVATION}
LONG_REDUCTION = ("alternating", "offset")  # the value kinds that stall a long low-precision accumulator


def activation_spec(draw: DrawSource, dtype: str, kind: str | None = None) -> Spec:
    """One stress spec for an activation input (kind: a name from ACTIVATION, or drawn)."""
    kind = kind or draw.weighted(ACTIVATION_TABLE)
    dt = dtype if is_float(dtype) else "float32"
    return _ACTIVATION_MAKERS[kind](draw, dt)


def long_reduction_spec(draw: DrawSource) -> Spec:
    """Alternating or offset values: the accumulator-stalling inputs of the TVM layer_norm seed."""
    if draw.chance(0.6):
        return {"dist": "alternating", "value": draw.choice([0.25, 0.5, 1.0, 0.1, 2.0, 100.0])}
    return _seeded(draw, {"dist": "offset", "mean": draw.choice([100.0, 1000.0, 10.0, 30000.0]),
                          "std": draw.choice([0.01, 0.1, 1.0])})


def weight_spec(draw: DrawSource, fan_in: int) -> Spec:
    """Initializer-like weights (kaiming-uniform bound), sometimes plain normal, constant or alternating."""
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    kind = draw.weighted([("kaiming", 14), ("normal", 3), ("constant", 1), ("alternating", 1)])
    if kind == "kaiming":
        return _seeded(draw, {"dist": "uniform", "low": -bound, "high": bound})
    if kind == "normal":
        return _seeded(draw, {"dist": "normal", "mean": 0.0, "std": draw.choice([1.0, 0.02])})
    if kind == "constant":
        return {"dist": "constant", "value": draw.choice([bound, 1.0])}
    return {"dist": "alternating", "value": bound}


def bias_spec(draw: DrawSource, fan_in: int) -> Spec:
    """Small biases, sometimes zero."""
    if draw.chance(0.25):
        return {"dist": "constant", "value": 0.0}
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return _seeded(draw, {"dist": "uniform", "low": -bound, "high": bound})


def gamma_spec(draw: DrawSource) -> Spec:
    """Norm scale: ones (fresh init) or trained-looking."""
    if draw.chance(0.5):
        return {"dist": "constant", "value": 1.0}
    return _seeded(draw, {"dist": "normal", "mean": 1.0, "std": draw.choice([0.1, 0.5])})


def beta_spec(draw: DrawSource) -> Spec:
    """Norm shift: zeros or small."""
    if draw.chance(0.5):
        return {"dist": "constant", "value": 0.0}
    return _seeded(draw, {"dist": "normal", "mean": 0.0, "std": 0.1})


def running_mean_spec(draw: DrawSource) -> Spec:
    """Batch-norm running mean."""
    if draw.chance(0.3):
        return {"dist": "constant", "value": 0.0}
    return _seeded(draw, {"dist": "normal", "mean": 0.0, "std": draw.choice([0.5, 10.0])})


def positive_spec(draw: DrawSource) -> Spec:
    """Strictly positive values over a wide range (running variances, sqrt/log operands)."""
    kind = draw.weighted([("uniform", 4), ("loguniform", 3), ("constant", 1)])
    if kind == "uniform":
        return _seeded(draw, {"dist": "uniform", "low": draw.choice([0.5, 0.01]), "high": 2.0})
    if kind == "loguniform":
        return _seeded(draw, {"dist": "loguniform", "lo": draw.choice([-3.0, -4.0]), "hi": draw.choice([1.0, 3.0])})
    return {"dist": "constant", "value": draw.choice([1.0, 1e-3, 100.0])}


SIGMA_EDGES = (0.0, 1.0, F32_BELOW_ONE, F32_ABOVE_ZERO, 0.5, 1e-3, 0.999)


def unit_spec(draw: DrawSource, edges: bool, low: float = 0.0) -> Spec:
    """A schedule value in [low, 1] (sigma, alpha-bar); with edges, mostly 0, 1 and their neighbours."""
    if edges or draw.chance(0.4):
        return {"dist": "constant", "value": max(low, draw.choice(SIGMA_EDGES))}
    return _seeded(draw, {"dist": "uniform", "low": low, "high": 1.0})


def timestep_spec(draw: DrawSource, steps: int, edges: bool, last: int | None = None) -> Spec:
    """An integer timestep in [0, last] (last defaults to steps); with edges: 0, 1, last-1, last."""
    last = steps if last is None else last
    if edges or draw.chance(0.3):
        return {"dist": "constant", "value": float(draw.choice([0, last, last - 1, 1, steps // 2]))}
    return _seeded(draw, {"dist": "randint", "low": 0, "high": last + 1})


def spec_sets(draw: DrawSource, n_sets: int, first: Spec, variant: Callable[[], Spec] | None,
              p_vary: float = 0.5) -> list[Spec]:
    """The spec of one input in each input set: the first, then reseeded or varied ones."""
    specs = [first]
    for _ in range(1, n_sets):
        if variant is not None and draw.chance(p_vary):
            specs.append(variant())
        elif "seed" in first and draw.chance(p_vary):
            specs.append({**first, "seed": draw.seed()})
        else:
            specs.append(first)
    return specs


def spec_interval(spec: Spec, dtype: str) -> Interval:
    """An interval holding every value the spec makes after rounding to dtype."""
    if has_inline(spec):
        raw = inline(spec)
        iv = (float(raw.min()), float(raw.max()))
    else:
        dist = spec["dist"]
        if dist in ("normal", "offset"):
            defaults = (0.0, 1.0) if dist == "normal" else (1000.0, 0.01)
            mean, std = spec.get("mean", defaults[0]), spec.get("std", defaults[1])
            iv = (mean - 9 * std, mean + 9 * std)
        elif dist == "uniform":
            iv = (spec.get("low", -1.0), spec.get("high", 1.0))
        elif dist == "constant":
            iv = (spec.get("value", 1.0),) * 2
        elif dist == "alternating":
            v = abs(spec.get("value", 0.25))
            iv = (-v, v)
        elif dist == "wide":
            iv = (-(10.0 ** spec.get("hi", 4.0)), 10.0 ** spec.get("hi", 4.0))
        elif dist == "linspace":
            a, b = spec.get("start", -1.0), spec.get("stop", 1.0)
            iv = (min(a, b), max(a, b))
        elif dist == "randint":
            iv = (spec.get("low", 0), spec.get("high", 1000) - 1)
        elif dist == "loguniform":
            iv = (10.0 ** spec.get("lo", -3.0), 10.0 ** spec.get("hi", 3.0))
        else:
            raise ValueError(f"no interval for distribution {dist!r}")
    lo, hi = float(iv[0]), float(iv[1])
    if is_float(dtype):
        top = FLOAT_FORMATS[dtype].max_value
        lo, hi = min(max(lo, -top), top), min(max(hi, -top), top)
    return rounded((lo, hi), dtype)


def specs_interval(specs: list[Spec], dtype: str) -> Interval:
    """Union of the intervals of one input's specs over all input sets."""
    return union([spec_interval(s, dtype) for s in specs])
