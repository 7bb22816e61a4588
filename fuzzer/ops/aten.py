"""Translator builders for the op records' ATen mappings (OpSpec.aten): plain values in, IR nodes out, no torch.

fuzzer.audit.translate hands each exported call to the translator its overload names (AtenCall: tensor
arguments as IR value names, dtypes as AtenDtype, numbers as numbers); a call the record cannot express
faithfully raises AtenSkip with the reason, and the audit lists it with its source line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dtypes import DTYPES
from .base import AtenCall, AtenFn, AtenSkip


@dataclass(frozen=True)
class AtenDtype:
    """A torch.dtype argument, by name ("float16", "bool"; names the IR lacks are kept for the message)."""

    name: str


def dtype_of(value: Any) -> str | None:
    """The IR dtype an ATen dtype argument names (None for None); AtenSkip for a dtype the IR lacks."""
    if value is None:
        return None
    name = value.name if isinstance(value, AtenDtype) else str(value).replace("torch.", "")
    if name not in DTYPES:
        raise AtenSkip(f"dtype {name}")
    return name


def ints(value: Any) -> list[int]:
    """An int or a list of ints as a list."""
    return [int(x) for x in (value if isinstance(value, (list, tuple)) else [value])]


def one_or_many(value: Any, default: int) -> int | list[int]:
    """An attribute as the IR takes it: one int (a 1-list broadcasts in PyTorch) or one per dim."""
    vals = ints(default if value is None else value)
    return vals[0] if len(vals) == 1 else vals


def unary(op: str, **fixed: Any) -> AtenFn:
    """`op(x)`, with `fixed` attributes."""
    return lambda c: c.emit(op, [c.arg(0, "self")], dict(fixed))


def binary(op: str, swap: bool = False) -> AtenFn:
    """`op(a, b)` (`op(b, a)` for rsub); alpha != 1 and rounding modes are not the IR's op."""
    def tr(c: AtenCall) -> str:
        if c.arg(2, "alpha", 1) != 1 or c.kwargs.get("rounding_mode"):
            raise AtenSkip("alpha or rounding_mode")
        a, b = c.arg(0, "self"), c.arg(1, "other")
        return c.emit(op, [b, a] if swap else [a, b], {})

    return tr


def skip(why: str) -> AtenFn:
    """A translator that refuses, naming why (a documented gap of a record)."""
    def tr(c: AtenCall) -> str:
        raise AtenSkip(why)

    return tr


def overloads(names: str, fn: AtenFn) -> dict[str, AtenFn]:
    """{overload: fn} for a space-separated list of overload names."""
    return {name: fn for name in names.split()}
