"""Elementwise ops: binary arithmetic with PyTorch promotion, unary math and activations, casts."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..dtypes import check_dtype, is_float
from ..promotion import float_result, result_type
from . import intervals as iv
from .base import (
    DTYPE,
    OTHER_FLOAT,
    POSITIVE,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    broadcast_shapes,
    example_input,
    one_of,
    require_float,
    tensor,
)


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
    """GELU, exact (erf) or tanh-approximated; float32 values in float32 arithmetic, as kernels compute it.

    0.5 * x * (1 + erf(x / sqrt(2))) cancels for large negative x: a float32 kernel returns 0 where the exact
    answer is a tiny negative number, and the float32 ideal must feel that too.
    """
    a = np.asarray(a)
    if a.dtype == np.float32:
        half, one = np.float32(0.5), np.float32(1.0)
        if approximate == "tanh":
            inner = np.float32(math.sqrt(2.0 / math.pi)) * (a + np.float32(0.044715) * a * a * a)
            return half * a * (one + np.tanh(inner))
        return half * a * (one + _erf(a.astype(np.float64) / math.sqrt(2.0)).astype(np.float32))
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


# ---------------------------------------------------------------- lowerings

_RELAX_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}
_RELAX_UNARY = {"neg": "negative", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
                "cos": "cos", "tanh": "tanh", "silu": "nn.silu"}


def _torch_binary(symbol: str) -> Callable[[TorchCall], str]:
    return lambda c: f"{c.args[0]} {symbol} {c.args[1]}"


def _torch_unary(fn: str, math_fn: str | None = None) -> Callable[[TorchCall], str]:
    """torch.<fn>(x), or math.<fn>(x) on a Python number where math has it."""
    return lambda c: f"{math_fn if c.scalar and math_fn else fn}({c.args[0]})"


def _relax_binary(op: str) -> Callable[[RelaxCall], str]:
    return lambda c: f"R.op.{_RELAX_BINARY[op]}({c.arg(0)}, {c.arg(1)})"


def _relax_unary(op: str) -> Callable[[RelaxCall], str]:
    return lambda c: f"R.op.{_RELAX_UNARY[op]}({c.arg(0)})"


def _relax_gelu(c: RelaxCall) -> str:
    return f"R.op.nn.{'gelu_tanh' if c.attrs['approximate'] == 'tanh' else 'gelu'}({c.arg(0)})"


def _relax_astype(c: RelaxCall) -> str:
    return f"R.op.astype({c.low.name_of(c.slot(0))}, {c.low.dt(c.dtype)})"


def _np_binary(symbol: str) -> Callable[[NumpyCall], str]:
    return lambda c: f"({c.args[0]} {symbol} {c.args[1]})"


def _np_unary(fn: str) -> Callable[[NumpyCall], str]:
    return lambda c: f"{fn}({c.args[0]})"


def _np_gelu(c: NumpyCall) -> str:
    x = c.args[0]
    if c.attrs["approximate"] == "tanh":
        return f"(0.5 * {x} * (1 + np.tanh(math.sqrt(2 / math.pi) * ({x} + 0.044715 * {x} ** 3))))"
    return f"(0.5 * {x} * (1 + np.vectorize(math.erf)({x} / math.sqrt(2))))"


def _np_astype(c: NumpyCall) -> str:
    return c.args[0] if is_float(c.dtype) else f"np.trunc({c.args[0]})"  # the exact answer: casts do not round


_XY = Example((example_input("x", [2, 3, 8]), example_input("y", [3, 8])), ("x", "y"))
_X = Example((example_input("x", [2, 3, 8]),), ("x",))
_X_POSITIVE = Example((example_input("x", [2, 3, 8], init=POSITIVE),), ("x",))
OPS: list[OpSpec] = [
    OpSpec("add", "elementwise", ("a", "b"), {}, _binary(), add, _torch_binary("+"), _relax_binary("add"),
           iv.binary_rule(iv.add), _XY, scalars_ok=True,
           numpy=_np_binary("+")),
    OpSpec("sub", "elementwise", ("a", "b"), {}, _binary(), sub, _torch_binary("-"), _relax_binary("sub"),
           iv.binary_rule(iv.sub), _XY, scalars_ok=True,
           numpy=_np_binary("-")),
    OpSpec("mul", "elementwise", ("a", "b"), {}, _binary(), mul, _torch_binary("*"), _relax_binary("mul"),
           iv.binary_rule(iv.mul), _XY, scalars_ok=True,
           numpy=_np_binary("*")),
    OpSpec("div", "elementwise", ("a", "b"), {}, _binary(true_div=True), div, _torch_binary("/"), _relax_binary("div"),
           iv.binary_rule(iv.div),
           Example((example_input("x", [2, 3, 8]), example_input("y", [3, 8], init=POSITIVE)), ("x", "y")),
           scalars_ok=True,
           numpy=_np_binary("/")),
    OpSpec("neg", "elementwise", ("a",), {}, _unary(float_valued=False), neg, lambda c: f"-{c.args[0]}",
           _relax_unary("neg"), iv.unary_rule(lambda a: (-a[1], -a[0])), _X, scalars_ok=True,
           numpy=lambda c: f"(-{c.args[0]})"),
    OpSpec("exp", "elementwise", ("a",), {}, _unary(), exp, _torch_unary("torch.exp", "math.exp"), _relax_unary("exp"),
           iv.unary_rule(lambda a: (iv.exp_bound(a[0]), iv.exp_bound(a[1]))), _X, scalars_ok=True,
           numpy=_np_unary("np.exp")),
    OpSpec("log", "elementwise", ("a",), {}, _unary(), log, _torch_unary("torch.log", "math.log"), _relax_unary("log"),
           iv.unary_rule(iv.log), _X_POSITIVE, scalars_ok=True,
           numpy=_np_unary("np.log")),
    OpSpec("sqrt", "elementwise", ("a",), {}, _unary(), sqrt, _torch_unary("torch.sqrt", "math.sqrt"),
           _relax_unary("sqrt"), iv.unary_rule(iv.sqrt), _X_POSITIVE, scalars_ok=True,
           numpy=_np_unary("np.sqrt")),
    OpSpec("rsqrt", "elementwise", ("a",), {}, _unary(tensor_only=True), rsqrt, _torch_unary("torch.rsqrt"),
           _relax_unary("rsqrt"), iv.unary_rule(iv.rsqrt), _X_POSITIVE,
           numpy=lambda c: f"(1 / np.sqrt({c.args[0]}))"),
    OpSpec("sin", "elementwise", ("a",), {}, _unary(), sin, _torch_unary("torch.sin", "math.sin"), _relax_unary("sin"),
           iv.unary_rule(lambda a: (-1.0, 1.0)), _X, scalars_ok=True,
           numpy=_np_unary("np.sin")),
    OpSpec("cos", "elementwise", ("a",), {}, _unary(), cos, _torch_unary("torch.cos", "math.cos"), _relax_unary("cos"),
           iv.unary_rule(lambda a: (-1.0, 1.0)), _X, scalars_ok=True,
           numpy=_np_unary("np.cos")),
    OpSpec("tanh", "elementwise", ("a",), {}, _unary(tensor_only=True), tanh, _torch_unary("torch.tanh"),
           _relax_unary("tanh"), iv.unary_rule(lambda a: (math.tanh(a[0]), math.tanh(a[1]))), _X,
           numpy=_np_unary("np.tanh")),
    OpSpec("gelu", "activation", ("a",), {"approximate": "none"}, _infer_activation, gelu,
           lambda c: f"F.gelu({c.args[0]}, approximate={c.attrs['approximate']!r})", _relax_gelu,
           iv.unary_rule(iv.gelu_like(-0.1701)), Example(_X.inputs, ("x",), {"approximate": "tanh"}),
           attr_types={"approximate": one_of("none", "tanh")},
           numpy=_np_gelu),
    OpSpec("silu", "activation", ("a",), {}, _infer_activation, silu, _torch_unary("F.silu"), _relax_unary("silu"),
           iv.unary_rule(iv.gelu_like(-0.2785)), _X,
           numpy=lambda c: f"({c.args[0]} / (1 + np.exp(-{c.args[0]})))"),
    OpSpec("astype", "cast", ("a",), {"dtype": None}, _infer_astype, astype,
           lambda c: f"{c.args[0]}.to(torch.{c.attrs['dtype']})", _relax_astype, iv.astype_rule,
           Example(_X.inputs, ("x",), {"dtype": OTHER_FLOAT}), attr_types={"dtype": DTYPE},
           numpy=_np_astype),
]

# TVM ToMixedPrecision runs the Relax op these lower to in float16 when all its tensor operands are float16
# (TMixedPrecisionPolicy kFollow; tests/test_tvm_depth.py checks it against TVM's registry).
_AMP_FOLLOW = ('add', 'sub', 'mul', 'div', 'neg', 'exp', 'log', 'sqrt', 'rsqrt', 'sin', 'cos', 'tanh', 'gelu', 'silu')
OPS = [replace(s, tags=s.tags | {"amp-follow"}) if s.name in _AMP_FOLLOW else s for s in OPS]
