"""Reduction and softmax generators: sum/mean/var over dims (long fp16 sums included), softmax and log_softmax."""

from __future__ import annotations

import math
from typing import Any

from .builder import GraphBuilder, Val
from .elementwise import bounded
from .norms import long_norm_input
from .shapes import layout_shape
from .sources import activation_dtype, activation_input

REDUCTIONS = [("sum", 3), ("mean", 3), ("var", 3), ("cumsum", 2)]
SOFTMAXES = [("softmax", 3), ("log_softmax", 2)]


def _dims(b: GraphBuilder, x: Val) -> list[int] | None:
    kind = b.draw.weighted([("last", 4), ("all", 2), ("some", 2)])
    if kind == "all" or x.rank == 1:
        return None if kind == "all" or b.draw.chance(0.5) else [-1]
    if kind == "last":
        return [b.draw.choice([-1, x.rank - 1])]
    picked = sorted({b.draw.integer(0, x.rank - 1) for _ in range(b.draw.integer(1, x.rank))})
    return picked


def reduce_stage(b: GraphBuilder, x: Val, op: str | None = None, keepdim: bool | None = None) -> Val:
    """sum, mean or var over some dims of x."""
    op = op or b.draw.weighted(REDUCTIONS)
    if op == "cumsum":  # a running sum along one dim (keeps the shape)
        return b.op(op, [x], dim=b.draw.choice([-1, b.draw.integer(0, x.rank - 1)]) if x.rank > 1 else -1)
    dims = _dims(b, x)
    attrs: dict[str, Any] = {"dims": dims}
    keep = b.draw.chance(0.4) if keepdim is None else keepdim
    if keep:
        attrs["keepdim"] = True
    if op == "var":
        count = math.prod(x.shape[d] for d in ({d % x.rank for d in dims} if dims else range(x.rank)))
        correction = b.draw.choice([1, 0])
        if count <= correction:
            correction = 0
        if correction != 1:
            attrs["correction"] = correction
    return b.op(op, [x], **attrs)


def softmax_stage(b: GraphBuilder, x: Val, op: str | None = None) -> Val:
    """softmax or log_softmax along a dim of x."""
    op = op or b.draw.weighted(SOFTMAXES)
    dim = b.draw.choice([-1, b.draw.integer(0, x.rank - 1)]) if x.rank > 1 else -1
    return b.op(op, [x], dim=dim)


def reduction_family(b: GraphBuilder) -> list[Val]:
    """A reduction of a stress input; a long low-precision sum or variance in a quarter of cases."""
    if b.draw.chance(0.25):
        x, _ = long_norm_input(b, b.draw.choice(["float16", "bfloat16"]))
        return [reduce_stage(b, x, keepdim=b.draw.chance(0.3))]
    x = activation_input(b, layout_shape(b.draw), activation_dtype(b))
    if b.draw.chance(0.2):
        x = b.op("mul", [x, x], stem="sq")  # sum of squares
    y = reduce_stage(b, x)
    if y.rank >= 1 and b.draw.chance(0.2):
        y = reduce_stage(b, y)
    return [y]


def softmax_family(b: GraphBuilder) -> list[Val]:
    """softmax/log_softmax of large, offset or alternating logits, sometimes exp'd back or reduced."""
    x = activation_input(b, layout_shape(b.draw), activation_dtype(b))
    if b.draw.chance(0.3):
        x = b.op("mul", [x, b.draw.choice([0.125, 8.0, 1.0 / 0.07])], stem="logits")  # temperature
    y = softmax_stage(b, x)
    follow = b.draw.weighted([("none", 4), ("exp", 1), ("sum", 1)])
    if follow == "exp" and y.rank >= 1:
        y = b.op("exp", [bounded(b, y)])
    elif follow == "sum":
        y = reduce_stage(b, y, op="sum")
    return [y]
