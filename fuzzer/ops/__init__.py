"""The op registry: one explicit list built from the family tables."""

from __future__ import annotations

from . import elementwise, linalg, norms, reductions
from .base import ChainBreak, IRError, OpSpec, Typed, ValueInfo, tensor

OPS: dict[str, OpSpec] = {op.name: op for family in (elementwise, reductions, norms, linalg) for op in family.OPS}

__all__ = ["OPS", "ChainBreak", "IRError", "OpSpec", "Typed", "ValueInfo", "tensor"]
