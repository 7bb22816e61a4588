"""PyTorch source for a graph: the function an executor runs is the text its repro script contains."""

from __future__ import annotations

from typing import Any

from ..identifiers import literal, value_identifiers
from ..ir import Graph, Node, infer, op_attrs
from ..ops import OPS
from ..ops.base import TorchCall

TORCH_DTYPE = {
    "float16": "torch.float16", "bfloat16": "torch.bfloat16", "float32": "torch.float32",
    "float64": "torch.float64", "int32": "torch.int32", "int64": "torch.int64", "bool": "torch.bool",
    "float8_e4m3fn": "torch.float8_e4m3fn", "float8_e5m2": "torch.float8_e5m2",
}
__all__ = ["TORCH_DTYPE", "node_expr", "render_function"]


def _arg(operand: Any, names: dict[str, str]) -> str:
    if operand is None:
        return "None"
    if isinstance(operand, str):
        return names[operand]
    return literal(operand)


def node_expr(node: Node, scalar_operands: set[str], names: dict[str, str]) -> str:
    """The PyTorch expression for one node (`names`: value_identifiers of its graph), from the op's record."""
    spec = OPS[node.op]
    args = [_arg(x, names) for x in node.inputs] + ["None"] * (len(spec.operands) - len(node.inputs))
    scalar = bool(node.inputs) and (not isinstance(node.inputs[0], str) or node.inputs[0] in scalar_operands)
    return spec.torch(TorchCall(args, op_attrs(node), scalar))


def render_function(graph: Graph, name: str = "graph") -> str:
    """`def graph(<inputs>):` computing the outputs with torch ops, one line per node."""
    typed = infer(graph)
    names = value_identifiers(graph)
    scalars = {k for k, v in typed.values.items() if v.kind == "scalar"}
    lines = [f"def {name}({', '.join(names[i.name] for i in graph.inputs)}):"]
    first = next((i for i in graph.inputs if i.kind == "tensor"), None)
    if any(not OPS[n.op].operands for n in graph.nodes):
        lines.append(f"    device = {names[first.name]}.device  # constants are made where the inputs are" if first is not None
                     else '    device = globals().get("device", "cpu")  # no input: the backend\'s device, else the CPU')
    for node in graph.nodes:
        lines.append(f"    {names[node.id]} = {node_expr(node, scalars, names)}")
    outs = ", ".join(names[o] for o in graph.outputs)
    lines.append(f"    return ({outs},)" if len(graph.outputs) == 1 else f"    return ({outs})")
    return "\n".join(lines) + "\n"
