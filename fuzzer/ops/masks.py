"""Masks: comparisons (a bool result), where, logical not/and/or; what causal and padding masks are built from.

PyTorch compares in the promoted dtype, and a Python-number operand is first converted to it
(`bf16(0.1) == 0.1` is True): these records set `round_scalars`, so the exact reference rounds such
literals too. Results are exact: a backend's comparison must agree with the reference on its own operands.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..promotion import result_type
from . import aten as A
from .base import (
    AtenCall,
    AtenSkip,
    Example,
    IRError,
    OpSpec,
    RelaxCall,
    Typed,
    ValueInfo,
    broadcast_shapes,
    example_input,
    tensor,
)

_BOOL01 = (0.0, 1.0)


def _infer_compare(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    a, b = ops
    assert a is not None and b is not None
    if a.is_scalar and b.is_scalar:
        raise IRError("a comparison needs a tensor operand")
    shape = broadcast_shapes([x.shape for x in (a, b) if not x.is_scalar])
    return Typed(tensor(shape, "bool"), compute_dtype=result_type(a.operand(), b.operand()))


def _infer_where(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    cond, a, b = ops
    assert cond is not None and a is not None and b is not None
    if cond.is_scalar or cond.dtype != "bool":
        raise IRError(f"where's condition must be a bool tensor, got {cond.dtype}")
    dtype = result_type(a.operand(), b.operand())
    shape = broadcast_shapes([x.shape for x in (cond, a, b) if not x.is_scalar])
    return Typed(tensor(shape, dtype), compute_dtype=dtype)


def _infer_logical(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    tensors = [o for o in ops if o is not None]
    if any(o.is_scalar for o in tensors):
        raise IRError("logical ops take tensors")
    return Typed(tensor(broadcast_shapes([o.shape for o in tensors]), "bool"))


def eq(a, b, **_: Any) -> np.ndarray:
    """a == b."""
    return np.equal(a, b)


def ne(a, b, **_: Any) -> np.ndarray:
    """a != b."""
    return np.not_equal(a, b)


def lt(a, b, **_: Any) -> np.ndarray:
    """a < b."""
    return np.less(a, b)


def le(a, b, **_: Any) -> np.ndarray:
    """a <= b."""
    return np.less_equal(a, b)


def gt(a, b, **_: Any) -> np.ndarray:
    """a > b."""
    return np.greater(a, b)


def ge(a, b, **_: Any) -> np.ndarray:
    """a >= b."""
    return np.greater_equal(a, b)


def where(cond, a, b, **_: Any) -> np.ndarray:
    """a where cond holds, else b."""
    return np.where(np.asarray(cond) != 0, a, b)


def logical_not(a, **_: Any) -> np.ndarray:
    """not a (nonzero is true)."""
    return np.logical_not(np.asarray(a) != 0)


def logical_and(a, b, **_: Any) -> np.ndarray:
    """a and b."""
    return np.logical_and(np.asarray(a) != 0, np.asarray(b) != 0)


def logical_or(a, b, **_: Any) -> np.ndarray:
    """a or b."""
    return np.logical_or(np.asarray(a) != 0, np.asarray(b) != 0)


# ---------------------------------------------------------------- lowerings

_COMPARE = {"eq": ("==", "equal"), "ne": ("!=", "not_equal"), "lt": ("<", "less"), "le": ("<=", "less_equal"),
            "gt": (">", "greater"), "ge": (">=", "greater_equal")}


def _relax_bool(c: RelaxCall, i: int) -> str:
    """Operand i as a bool tensor."""
    return c.low.operand(c.slot(i), "bool")


def _aten_compare(op: str) -> A.AtenFn:
    return lambda c: c.emit(op, [c.arg(0, "self"), c.arg(1, "other")], {})


def _aten_logical(op: str, bitwise: bool = False) -> A.AtenFn:
    def tr(c: AtenCall) -> str:
        operands = [c.arg(0, "self")] + ([] if op == "logical_not" else [c.arg(1, "other")])
        if bitwise and any(not isinstance(o, str) or c.info(o).dtype != "bool" for o in operands):
            raise AtenSkip("bitwise ops on integers")
        return c.emit(op, operands, {})

    return tr


def _aten_where(c: AtenCall) -> str:
    return c.emit("where", [c.arg(0, "condition"), c.arg(1, "self"), c.arg(2, "other")], {})


def _aten_masked_fill(c: AtenCall) -> str:
    """masked_fill(self, mask, value): where(mask, value, self); an infinite value becomes a 0-dim full."""
    x, mask, value = c.arg(0, "self"), c.arg(1, "mask"), c.arg(2, "value")
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            raise AtenSkip("masked_fill with nan")
        value = c.emit("full", [], {"shape": [], "value": "inf" if value > 0 else "-inf", "dtype": c.info(x).dtype})
    elif isinstance(value, bool):
        value = int(value)
    return c.emit("where", [mask, value, x], {})


def _compare_op(name: str) -> OpSpec:
    symbol, relax = _COMPARE[name]
    return OpSpec(name, "compare", ("a", "b"), {}, _infer_compare, globals()[name],
                  lambda c: f"({c.args[0]} {symbol} {c.args[1]})",
                  lambda c: f"R.op.{relax}({c.arg(0)}, {c.arg(1)})", lambda ivs, infos, attrs, out: _BOOL01,
                  Example((example_input("x", [2, 3, 8]), example_input("y", [3, 8])), ("x", "y")),
                  scalars_ok=True, round_scalars=True, relax_dtype=lambda c: "bool",
                  numpy=lambda c: f"({c.args[0]} {symbol} {c.args[1]})",
                  aten=A.overloads(f"{name}.Tensor {name}.Scalar", _aten_compare(name)))


def _logical(name: str, arity: int, render: Callable[[list[str]], str]) -> OpSpec:
    operands = ("a", "b")[:arity]
    fn = globals()[name]
    aten = A.overloads(f"{name}.default {name}_.default", _aten_logical(name))
    bitwise = {"logical_not": "bitwise_not.default", "logical_and": "bitwise_and.Tensor __and__.Tensor",
               "logical_or": "bitwise_or.Tensor __or__.Tensor"}[name]
    return OpSpec(name, "compare", operands, {}, _infer_logical, fn, lambda c: render(c.args),
                  lambda c: f"R.op.{name}({', '.join(_relax_bool(c, i) for i in range(arity))})",
                  lambda ivs, infos, attrs, out: _BOOL01,
                  Example(tuple(example_input(n, [3, 8], init={"dist": "randint", "low": 0, "high": 2, "seed": k},
                                              dtype="bool") for k, n in enumerate(("x", "y")[:arity])),
                          ("x", "y")[:arity]),
                  relax_dtype=lambda c: "bool",
                  numpy=lambda c: f"np.{name}({', '.join(a + ' != 0' for a in c.args[:arity])})",
                  aten=aten | A.overloads(bitwise, _aten_logical(name, bitwise=True)))


OPS: list[OpSpec] = [_compare_op(n) for n in _COMPARE] + [
    OpSpec("where", "compare", ("cond", "a", "b"), {}, _infer_where, where,
           lambda c: f"torch.where({c.args[0]}, {c.args[1]}, {c.args[2]})",
           lambda c: f"R.op.where({_relax_bool(c, 0)}, {c.arg(1)}, {c.arg(2)})",
           lambda ivs, infos, attrs, out: (min(ivs[1][0], ivs[2][0]), max(ivs[1][1], ivs[2][1])),  # type: ignore[index]
           Example((example_input("m", [3, 8], init={"dist": "randint", "low": 0, "high": 2, "seed": 3}, dtype="bool"),
                    example_input("x", [2, 3, 8]), example_input("y", [3, 8])), ("m", "x", "y")),
           scalars_ok=True,
           numpy=lambda c: f"np.where({c.args[0]} != 0, {c.args[1]}, {c.args[2]})",
           aten=A.overloads("where.self where.ScalarOther where.ScalarSelf where.Scalar", _aten_where)
           | A.overloads("masked_fill.Scalar masked_fill_.Scalar masked_fill.Tensor masked_fill_.Tensor", _aten_masked_fill)),
    _logical("logical_not", 1, lambda a: f"torch.logical_not({a[0]})"),
    _logical("logical_and", 2, lambda a: f"torch.logical_and({a[0]}, {a[1]})"),
    _logical("logical_or", 2, lambda a: f"torch.logical_or({a[0]}, {a[1]})"),
]
