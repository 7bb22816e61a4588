"""Elementwise ops: binary arithmetic with PyTorch promotion, unary math and activations, casts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import check_dtype
from ..promotion import float_result, result_type
from .base import DTYPE, IRError, OpSpec, Typed, ValueInfo, broadcast_shapes, one_of, require_float, tensor


def _binary(true_div: bool = False):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        a, b = ops  # type: ignore[misc]
        dtype = result_type(a.operand(), b.operand())
        if true_div:
            dtype = float_result(dtype)
        if a.is_scalar and b.is_scalar:
            return Typed(ValueInfo((), "float64" if dtype.startswith(("float", "bfloat")) else "int64", "scalar"))
        shape = broadcast_shapes([x.shape for x in (a, b) if not x.is_scalar])
        return Typed(tensor(shape, dtype))

    return infer


def _unary(float_valued: bool = True, tensor_only: bool = False):
    def infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        (a,) = ops
        assert a is not None
        if a.is_scalar:
            if tensor_only:
                raise IRError("operand must be a tensor, got a Python scalar")
            return Typed(ValueInfo((), "float64" if float_valued else a.dtype, "scalar"))
        dtype = float_result(a.dtype) if float_valued else a.dtype
        return Typed(tensor(a.shape, dtype))

    return infer


def _infer_astype(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    try:
        dtype = check_dtype(attrs["dtype"])
    except ValueError as exc:
        raise IRError(str(exc)) from None
    if a.is_scalar:
        raise IRError("astype needs a tensor, got a Python scalar")
    return Typed(tensor(a.shape, dtype))


def _infer_activation(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    (a,) = ops
    assert a is not None
    if a.is_scalar:
        raise IRError("operand must be a tensor, got a Python scalar")
    require_float(a, "input")
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise IRError(f"gelu approximate must be 'none' or 'tanh', got {attrs.get('approximate')!r}")
    return Typed(tensor(a.shape, a.dtype))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def add(a, b, **_: Any) -> np.ndarray:
    """a + b."""
    return np.add(a, b)


def sub(a, b, **_: Any) -> np.ndarray:
    """a - b."""
    return np.subtract(a, b)


def mul(a, b, **_: Any) -> np.ndarray:
    """a * b."""
    return np.multiply(a, b)


def div(a, b, **_: Any) -> np.ndarray:
    """a / b (true division)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


def neg(a, **_: Any) -> np.ndarray:
    """-a."""
    return np.negative(a)


def exp(a, **_: Any) -> np.ndarray:
    """e**a."""
    with np.errstate(over="ignore"):
        return np.exp(a)


def log(a, **_: Any) -> np.ndarray:
    """Natural log."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(a)


def sqrt(a, **_: Any) -> np.ndarray:
    """Square root."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(a)


def rsqrt(a, **_: Any) -> np.ndarray:
    """1 / sqrt(a)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(a)


def sin(a, **_: Any) -> np.ndarray:
    """Sine."""
    return np.sin(a)


def cos(a, **_: Any) -> np.ndarray:
    """Cosine."""
    return np.cos(a)


def tanh(a, **_: Any) -> np.ndarray:
    """Hyperbolic tangent."""
    return np.tanh(a)


def gelu(a, approximate: str = "none", **_: Any) -> np.ndarray:
    """GELU, exact (erf) or tanh-approximated."""
    a = np.asarray(a, dtype=np.float64)
    if approximate == "tanh":
        return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a**3)))
    return 0.5 * a * (1.0 + _erf(a / math.sqrt(2.0)))


def silu(a, **_: Any) -> np.ndarray:
    """x * sigmoid(x)."""
    with np.errstate(over="ignore"):
        return a / (1.0 + np.exp(-np.asarray(a, dtype=np.float64)))


def astype(a, **_: Any) -> np.ndarray:
    """Cast (the rounding itself is applied by the executor)."""
    return np.asarray(a, dtype=np.float64)


OPS: list[OpSpec] = [
    OpSpec("add", "elementwise", ("a", "b"), {}, _binary(), add, scalars_ok=True),
    OpSpec("sub", "elementwise", ("a", "b"), {}, _binary(), sub, scalars_ok=True),
    OpSpec("mul", "elementwise", ("a", "b"), {}, _binary(), mul, scalars_ok=True),
    OpSpec("div", "elementwise", ("a", "b"), {}, _binary(true_div=True), div, scalars_ok=True),
    OpSpec("neg", "elementwise", ("a",), {}, _unary(float_valued=False), neg, scalars_ok=True),
    OpSpec("exp", "elementwise", ("a",), {}, _unary(), exp, scalars_ok=True),
    OpSpec("log", "elementwise", ("a",), {}, _unary(), log, scalars_ok=True),
    OpSpec("sqrt", "elementwise", ("a",), {}, _unary(), sqrt, scalars_ok=True),
    OpSpec("rsqrt", "elementwise", ("a",), {}, _unary(tensor_only=True), rsqrt),
    OpSpec("sin", "elementwise", ("a",), {}, _unary(), sin, scalars_ok=True),
    OpSpec("cos", "elementwise", ("a",), {}, _unary(), cos, scalars_ok=True),
    OpSpec("tanh", "elementwise", ("a",), {}, _unary(tensor_only=True), tanh),
    OpSpec("gelu", "activation", ("a",), {"approximate": "none"}, _infer_activation, gelu,
           attr_types={"approximate": one_of("none", "tanh")}),
    OpSpec("silu", "activation", ("a",), {}, _infer_activation, silu),
    OpSpec("astype", "cast", ("a",), {"dtype": None}, _infer_astype, astype, attr_types={"dtype": DTYPE}),
]
