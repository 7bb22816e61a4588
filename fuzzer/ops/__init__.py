"""The op registry: one explicit list built from the family tables; each op is one record (fuzzer.ops.base.OpSpec)."""

from __future__ import annotations

from . import (
    attention,
    constants,
    elementwise,
    indexing,
    linalg,
    masks,
    norms,
    optim,
    pooling,
    reductions,
    resample,
    scaled,
    shapes,
)
from .base import TAGS, ChainBreak, IRError, OpSpec, Typed, ValueInfo, tagged, tensor

FAMILIES = (elementwise, masks, constants, reductions, norms, linalg, shapes, indexing, pooling, resample, attention,
            scaled, optim)
OPS: dict[str, OpSpec] = {op.name: op for family in FAMILIES for op in family.OPS}


def is_cast(op: str) -> bool:
    """True for the explicit cast op (its `dtype` attribute is the target): policies write and rewrite casts."""
    return OPS[op].family == "cast"


def has_training_mode(op: str) -> bool:
    """True for ops with a `training` attribute (batch statistics instead of running ones)."""
    return "training" in OPS[op].attrs

__all__ = ["OPS", "TAGS", "ChainBreak", "IRError", "OpSpec", "Typed", "ValueInfo", "has_training_mode", "is_cast",
           "tagged", "tensor"]
