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


def combined(ops: list[str], dtype: str = "float32") -> tuple[Case, dict[str, str]]:
    """One case holding every op's example side by side (names prefixed `<op>__`), and output name -> op.

    One compile serves every op (what keeps the per-op backend tests quick); a failure points at an op only
    when its own example is run alone.
    """
    inputs: list[Input] = []
    nodes: list[Node] = []
    outputs: dict[str, str] = {}
    for op in ops:
        graph = example(op, dtype).graph
        rename = {i.name: f"{op}__{i.name}" for i in graph.inputs} | {n.id: f"{op}__{n.id}" for n in graph.nodes}
        inputs += [Input(rename[i.name], i.shape, i.dtype, i.role, i.kind, i.init) for i in graph.inputs]
        nodes += [Node(rename[n.id], n.op, tuple(rename.get(o, o) if isinstance(o, str) else o for o in n.inputs),
                       dict(n.attrs)) for n in graph.nodes]
        outputs.update({rename[o]: op for o in graph.outputs})
    return Case(Graph(tuple(inputs), tuple(nodes), tuple(outputs)), ({},), {"example": "combined"}), outputs
