"""One small, valid single-op case per op of the IR, built from the op's record (OpSpec.example)."""

from __future__ import annotations

from fuzzer.ir import Case, Graph, Input, Node
from fuzzer.ops import OPS
from fuzzer.ops.base import OTHER_FLOAT, SAME_DTYPE


def example(op: str, dtype: str = "float32") -> Case:
    """A single-node case exercising `op` in `dtype`."""
    ex = OPS[op].example
    inputs = tuple(Input(name, shape, fixed or dtype, role, "tensor", dict(init)) for name, shape, role, init, fixed in ex.inputs)
    other = "float32" if dtype == "float16" else "float16"
    attrs = {k: (other if v == OTHER_FLOAT else dtype if v == SAME_DTYPE else v) for k, v in ex.attrs.items()}
    graph = Graph(inputs, (Node("out", op, tuple(ex.operands), attrs),), ("out",))
    return Case(graph, ({},), {"example": op})
