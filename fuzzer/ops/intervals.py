"""Conservative value intervals: the interval arithmetic and the rule builders op records use for `interval`.

A rule maps the operands' intervals (None for an absent optional operand), their static types, the node's
attributes and its output type to an interval that contains every value the fp64 reference can produce.
An interval with an infinite end means "may be inf or nan". The generators use them so that exp, log,
sqrt and div go only where the fp64 reference stays finite.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..dtypes import FP8, is_float, past_fp8_range, round_to
from .base import ValueInfo

Interval = tuple[float, float]
Ivs = list["Interval | None"]  # operand intervals (None: absent optional operand)
Infos = list["ValueInfo | None"]  # operand static types
Attrs = dict[str, Any]
Rule = Callable[[Ivs, Infos, Attrs, ValueInfo], Interval]

HUGE = 1e300  # beyond this an interval end counts as infinite
UNBOUNDED: Interval = (-math.inf, math.inf)


def clamp(iv: Interval) -> Interval:
    """Treat ends beyond HUGE (or nan) as infinite."""
    lo, hi = iv
    lo = -math.inf if not lo > -HUGE else lo
    hi = math.inf if not hi < HUGE else hi
    return (lo, hi)


def is_finite(iv: Interval) -> bool:
    """True when both ends are finite."""
    return math.isfinite(iv[0]) and math.isfinite(iv[1])


def magnitude(iv: Interval) -> float:
    """Largest absolute value in the interval."""
    return max(abs(iv[0]), abs(iv[1]))


def union(ivs: list[Interval]) -> Interval:
    """Smallest interval containing all of them."""
    return (min(i[0] for i in ivs), max(i[1] for i in ivs))


def rounded(iv: Interval, dtype: str) -> Interval:
    """The interval of values after rounding to dtype (rounding is monotone)."""
    if not is_float(dtype):
        return (float(math.trunc(iv[0])), float(math.trunc(iv[1]))) if is_finite(iv) else iv
    return (float(round_to(iv[0], dtype)), float(round_to(iv[1], dtype)))


def _prod(a: float, b: float) -> float:
    return 0.0 if a == 0.0 or b == 0.0 else a * b


def add(a: Interval, b: Interval) -> Interval:
    """a + b."""
    return clamp((a[0] + b[0], a[1] + b[1]))


def sub(a: Interval, b: Interval) -> Interval:
    """a - b."""
    return clamp((a[0] - b[1], a[1] - b[0]))


def mul(a: Interval, b: Interval) -> Interval:
    """a * b."""
    ps = [_prod(x, y) for x in a for y in b]
    return clamp((min(ps), max(ps)))


def square(a: Interval) -> Interval:
    """x * x for one x in a."""
    lo = 0.0 if a[0] <= 0.0 <= a[1] else min(a[0] * a[0], a[1] * a[1])
    return clamp((lo, max(a[0] * a[0], a[1] * a[1])))


def div(a: Interval, b: Interval) -> Interval:
    """a / b; unbounded when b may be 0."""
    if b[0] <= 0.0 <= b[1]:
        return UNBOUNDED
    return mul(a, (1.0 / b[1], 1.0 / b[0]))


def symmetric(bound: float) -> Interval:
    """[-bound, bound]."""
    return clamp((-bound, bound))


def exp_bound(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def unary_rule(fn: Callable[[Interval], Interval]) -> Rule:
    return lambda ivs, infos, attrs, out: clamp(fn(ivs[0]))  # type: ignore[arg-type]


def binary_rule(fn: Callable[[Interval, Interval], Interval]) -> Rule:
    return lambda ivs, infos, attrs, out: fn(ivs[0], ivs[1])  # type: ignore[arg-type]


def log(a: Interval) -> Interval:
    if a[0] < 0:
        return UNBOUNDED
    return (math.log(a[0]) if a[0] > 0 else -math.inf, math.log(a[1]) if a[1] > 0 else -math.inf)


def sqrt(a: Interval) -> Interval:
    return UNBOUNDED if a[0] < 0 else (math.sqrt(a[0]), math.sqrt(a[1]))


def rsqrt(a: Interval) -> Interval:
    if a[0] < 0:
        return UNBOUNDED
    return (1.0 / math.sqrt(a[1]) if a[1] > 0 else math.inf, 1.0 / math.sqrt(a[0]) if a[0] > 0 else math.inf)


def _count(info: ValueInfo, dims: Any) -> int:
    axes = range(len(info.shape)) if dims is None else [int(d) % len(info.shape) for d in dims]
    return math.prod(info.shape[d] for d in set(axes))


def reduce_rule(kind: str) -> Rule:
    def rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
        a = ivs[0]
        assert a is not None and infos[0] is not None
        n = _count(infos[0], attrs.get("dims"))
        if kind == "sum":
            return clamp((n * a[0], n * a[1]))
        if kind == "mean":
            return a
        correction = int(attrs.get("correction", 1))
        half = (a[1] - a[0]) / 2
        return clamp((0.0, half * half * n / (n - correction)))

    return rule


def softmax_rule(log: bool) -> Rule:
    def rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
        a = ivs[0]
        assert a is not None and infos[0] is not None
        n = infos[0].shape[int(attrs.get("dim", -1))]
        spread = a[1] - a[0]
        if log:
            return clamp((-spread - math.log(n), 0.0))
        return (exp_bound(-spread) / n if math.isfinite(spread) else 0.0, 1.0)

    return rule


def affine(z: Interval, weight: Interval | None, bias: Interval | None) -> Interval:
    if weight is not None:
        z = mul(z, weight)
    if bias is not None:
        z = add(z, bias)
    return z


def norm_rule(count: Callable[[ValueInfo, Attrs], int]) -> Rule:
    # |d_i| / sqrt(mean(d**2)) <= sqrt(n) for any deviations d, so this holds even when the fp64 mean is off
    def rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
        assert infos[0] is not None
        z = symmetric(math.sqrt(count(infos[0], attrs)))
        return affine(z, ivs[1] if len(ivs) > 1 else None, ivs[2] if len(ivs) > 2 else None)

    return rule


def batch_norm_rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
    if attrs.get("training"):  # batch statistics: bounded like every other norm
        assert infos[0] is not None
        n = infos[0].shape[0] * math.prod(infos[0].shape[2:])
        return affine(symmetric(math.sqrt(n)), *(list(ivs[3:]) + [None, None])[:2])
    x, mean, var = ivs[:3]
    assert x is not None and mean is not None and var is not None
    den = math.sqrt(max(var[0], 0.0) + float(attrs.get("eps", 1e-5)))
    if var[0] < 0 or den == 0.0:
        return UNBOUNDED
    z = symmetric(magnitude(sub(x, mean)) / den)
    weight, bias = (list(ivs[3:]) + [None, None])[:2]
    return affine(z, weight, bias)


def dot_rule(fan: Callable[[Infos, Attrs], int]) -> Rule:
    def rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
        a, b = ivs[0], ivs[1]
        assert a is not None and b is not None
        z = symmetric(fan(infos, attrs) * magnitude(a) * magnitude(b))
        bias = ivs[2] if len(ivs) > 2 else None
        return add(z, bias) if bias is not None else z

    return rule


def conv_fan(infos: Infos, attrs: Attrs) -> int:
    w = infos[1]
    assert w is not None
    return math.prod(w.shape[1:])


def conv_transpose_fan(infos: Infos, attrs: Attrs) -> int:
    w = infos[1]
    assert w is not None
    return w.shape[0] // int(attrs.get("groups", 1)) * math.prod(w.shape[2:])


def astype_rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
    a = ivs[0]
    assert a is not None
    if out.dtype in FP8 and past_fp8_range(magnitude(a), out.dtype):
        return UNBOUNDED  # PyTorch's cast gives NaN (e4m3fn) or inf (e5m2) there
    return a if is_float(out.dtype) else rounded(a, out.dtype)


def sigmoid(x: float) -> float:
    """The logistic function at one point (0 and 1 at the infinities)."""
    if x == -math.inf:
        return 0.0
    return 1.0 / (1.0 + exp_bound(-x))


def absolute(a: Interval) -> Interval:
    """|x| for x in a."""
    if a[0] >= 0:
        return a
    if a[1] <= 0:
        return (-a[1], -a[0])
    return (0.0, max(-a[0], a[1]))


def clamp_rule(ivs: Ivs, infos: Infos, attrs: Attrs, out: ValueInfo) -> Interval:
    lo, hi = ivs[0]  # type: ignore[misc]
    if attrs.get("min") is not None:
        lo, hi = max(lo, attrs["min"]), max(hi, attrs["min"])
    if attrs.get("max") is not None:
        lo, hi = min(lo, attrs["max"]), min(hi, attrs["max"])
    return (lo, hi)


def power(a: Interval, b: Interval) -> Interval:
    """a ** b: the extremes over the corners (and 0 inside a), where the power is real everywhere."""
    integral = b[0] == b[1] and float(b[0]).is_integer()
    if a[0] < 0 and not integral:
        return UNBOUNDED  # a fractional power of a negative number is nan
    if b[0] < 0 and a[0] <= 0.0 <= a[1]:
        return UNBOUNDED  # 1 / 0
    points = [a[0], a[1]] + ([0.0] if a[0] < 0 < a[1] else [])
    try:
        values = [math.pow(x, y) for x in points for y in (b[0], b[1])]
    except (OverflowError, ValueError):
        return UNBOUNDED
    if not integral and b[0] < b[1] and a[0] < 1 < a[1]:
        values.append(1.0)
    return clamp((min(values), max(values)))


def gelu_like(floor: float) -> Callable[[Interval], Interval]:
    return lambda a: (max(floor, min(a[0], 0.0)), max(a[1], 0.0))
