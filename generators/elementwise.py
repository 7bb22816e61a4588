"""Elementwise generators: activations, unary math behind domain guards, binary promotion corners, casts."""

from __future__ import annotations

from .builder import GraphBuilder, Val
from .shapes import layout_shape
from .sources import activation_dtype, activation_input, positive_input

EXP_LIMIT = 80.0  # exp of at most this stays finite even in fp32
ACTIVATIONS = [("gelu", 4), ("silu", 4), ("tanh", 2)]
UNARY = [("tanh", 2), ("exp", 3), ("log", 2), ("sqrt", 2), ("rsqrt", 2), ("sin", 1), ("cos", 1), ("neg", 1)]
BINARY = [("mul", 4), ("add", 3), ("sub", 2), ("div", 2)]
# where the second operand of a binary op lives: the promotion rules differ for each
OTHER_KINDS = [("tensor", 3), ("row", 2), ("zerodim", 2), ("literal", 2), ("one", 2), ("scalar", 1)]
CAST_TARGETS = ("float32", "bfloat16", "float16")


def activation_stage(b: GraphBuilder, x: Val) -> Val:
    """gelu (exact or tanh), silu or tanh."""
    op = b.draw.weighted(ACTIVATIONS)
    if op == "gelu" and b.draw.chance(0.3):
        return b.op("gelu", [x], approximate="tanh")
    return b.op(op, [x])


def bounded(b: GraphBuilder, x: Val, limit: float = EXP_LIMIT) -> Val:
    """x, or x behind a guard (tanh, log_softmax, a scale) so that exp(x) stays finite."""
    if x.hi <= limit:
        return x
    guard = b.draw.weighted([("tanh", 2), ("log_softmax", 1), ("scale", 1)])
    if guard == "log_softmax" and x.rank >= 1:
        return b.op("log_softmax", [x], dim=-1)
    if guard == "scale":
        return b.op("mul", [x, float(limit / x.bound)])
    return b.op("tanh", [x])


def positive(b: GraphBuilder, x: Val, strict: bool = True) -> Val:
    """x, or a positive function of x (x*x + eps, exp) for log, sqrt and rsqrt."""
    if x.lo > 0 or (not strict and x.lo >= 0):
        return x
    if b.draw.chance(0.3):
        e = bounded(b, x)
        y = b.op("exp", [e])
        if y.lo > 0:
            return y
        x = e
    sq = b.op("mul", [x, x], stem="sq")
    return b.op("add", [sq, b.draw.choice([1e-5, 1e-6, 1.0, 1e-12])])


def unary_stage(b: GraphBuilder, x: Val) -> Val:
    """One unary math op, with the guard its domain needs."""
    op = b.draw.weighted(UNARY)
    if op == "exp":
        x = bounded(b, x)
    elif op in ("log", "rsqrt"):
        x = positive(b, x)
    elif op == "sqrt":
        x = positive(b, x, strict=False)
    return b.op(op, [x])


def cast_stage(b: GraphBuilder, x: Val, to: str | None = None) -> Val:
    """astype to another float dtype."""
    to = to or b.draw.choice([d for d in CAST_TARGETS if d != x.dtype])
    return b.op("astype", [x], dtype=to)


def other_operand(b: GraphBuilder, x: Val, divisor: bool) -> Val | float:
    """The second operand of a binary op: a tensor, a broadcast row, [1], 0-dim, Python scalar or literal."""
    kind = b.draw.weighted(OTHER_KINDS)
    if kind == "literal":
        return b.draw.choice([2.0, 0.5, 1e-3, 3, 1000.0, -1.0])
    shape = {"tensor": x.shape, "row": x.shape[-1:], "zerodim": (), "one": (1,), "scalar": ()}[kind]
    if kind == "scalar":
        dtype = "float64"
    elif kind in ("zerodim", "one"):
        dtype = b.draw.choice(["float32", "float64", x.dtype, "bfloat16", "float16"])
    else:
        dtype = x.dtype if b.draw.chance(0.6) else b.draw.choice(["float32", "bfloat16", "float16"])
    tensor_kind = "scalar" if kind == "scalar" else "tensor"
    if divisor and tensor_kind == "tensor":
        return positive_input(b, "d", shape, dtype)
    if tensor_kind == "scalar":
        value = b.draw.choice([3.0, 0.5, 1000.0] if divisor else [0.5, 2.0, 1e-4])
        specs = [{"dist": "constant", "value": value}] * b.n_sets
        return b.input("d" if divisor else "s", (), dtype, specs, kind="scalar")
    return activation_input(b, shape, dtype, stem="y")


def binary_stage(b: GraphBuilder, x: Val) -> Val:
    """x (op) other, where other's kind and dtype hit PyTorch's promotion rules."""
    op = b.draw.weighted(BINARY)
    other = other_operand(b, x, divisor=op == "div")
    if op == "div" and isinstance(other, (int, float)):
        other = other if other != 0 else 1.0
    operands = [x, other] if op == "div" or b.draw.chance(0.6) else [other, x]
    return b.op(op, operands)


STAGES = [("activation", 3, activation_stage), ("unary", 3, unary_stage), ("binary", 3, binary_stage),
          ("cast", 1, cast_stage)]


def elementwise_family(b: GraphBuilder) -> list[Val]:
    """An activation input through one to four elementwise stages."""
    x = activation_input(b, layout_shape(b.draw), activation_dtype(b))
    for _ in range(b.draw.integer(1, 4)):
        stage = b.draw.weighted([(fn, w) for _, w, fn in STAGES])
        x = stage(b, x)
    return [x]


def cast_family(b: GraphBuilder) -> list[Val]:
    """Round trips and narrowing casts between float dtypes, with an op in the narrow dtype."""
    x = activation_input(b, layout_shape(b.draw), b.draw.choice(["float32", "float16", "bfloat16"]))
    y = cast_stage(b, x)
    if b.draw.chance(0.5):
        y = b.draw.choice([activation_stage, binary_stage])(b, y)
    if b.draw.chance(0.6):
        y = cast_stage(b, y, to=x.dtype if b.draw.chance(0.5) else None)
    return [y]
