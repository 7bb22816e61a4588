"""PyTorch source for a graph: the function an executor runs is the text its repro script contains."""

from __future__ import annotations

from typing import Any

from ..identifiers import literal, reserved_names, sanitize, value_identifiers
from ..ir import Graph, Node, infer, op_attrs

TORCH_DTYPE = {
    "float16": "torch.float16", "bfloat16": "torch.bfloat16", "float32": "torch.float32",
    "float64": "torch.float64", "int32": "torch.int32", "int64": "torch.int64",
}
_MATH = {"exp": "math.exp", "log": "math.log", "sqrt": "math.sqrt", "sin": "math.sin", "cos": "math.cos"}
_UNARY = {"exp": "torch.exp", "log": "torch.log", "sqrt": "torch.sqrt", "rsqrt": "torch.rsqrt",
          "sin": "torch.sin", "cos": "torch.cos", "tanh": "torch.tanh", "silu": "F.silu"}
_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


ident = sanitize  # one name at a time, not injective: render with value_identifiers(graph)
__all__ = ["TORCH_DTYPE", "ident", "node_expr", "render_function", "reserved_names"]


def _arg(operand: Any, names: dict[str, str]) -> str:
    if operand is None:
        return "None"
    if isinstance(operand, str):
        return names[operand]
    return literal(operand)


def node_expr(node: Node, scalar_operands: set[str], names: dict[str, str]) -> str:
    """The PyTorch expression for one node (`names`: value_identifiers of its graph)."""
    a = [_arg(x, names) for x in node.inputs]
    attrs = op_attrs(node)
    op = node.op
    if op in _BINARY:
        return f"{a[0]} {_BINARY[op]} {a[1]}"
    is_scalar = bool(node.inputs) and (not isinstance(node.inputs[0], str) or node.inputs[0] in scalar_operands)
    if op == "neg":
        return f"-{a[0]}"
    if op in _MATH and is_scalar:
        return f"{_MATH[op]}({a[0]})"
    if op in _UNARY:
        return f"{_UNARY[op]}({a[0]})"
    if op == "gelu":
        return f"F.gelu({a[0]}, approximate={attrs['approximate']!r})"
    if op == "astype":
        return f"{a[0]}.to({TORCH_DTYPE[attrs['dtype']]})"
    if op in ("sum", "mean"):
        dims = attrs["dims"]
        return f"torch.{op}({a[0]}, dim={list(dims)!r}, keepdim={bool(attrs['keepdim'])})" if dims is not None else f"torch.{op}({a[0]})"
    if op == "var":
        dims = None if attrs["dims"] is None else list(attrs["dims"])
        return f"torch.var({a[0]}, dim={dims!r}, correction={attrs['correction']!r}, keepdim={bool(attrs['keepdim'])})"
    if op in ("softmax", "log_softmax"):
        return f"torch.{op}({a[0]}, dim={attrs['dim']!r})"
    a += ["None"] * 5
    if op == "layer_norm":
        return f"F.layer_norm({a[0]}, {list(attrs['normalized_shape'])!r}, {a[1]}, {a[2]}, eps={attrs['eps']!r})"
    if op == "rms_norm":
        return f"F.rms_norm({a[0]}, {list(attrs['normalized_shape'])!r}, {a[1]}, eps={attrs['eps']!r})"
    if op == "group_norm":
        return f"F.group_norm({a[0]}, {attrs['num_groups']!r}, {a[1]}, {a[2]}, eps={attrs['eps']!r})"
    if op == "batch_norm":
        if attrs["training"]:  # training mode updates the running statistics in place: give it copies
            return (f"F.batch_norm({a[0]}, {a[1]}.clone(), {a[2]}.clone(), {a[3]}, {a[4]}, training=True, "
                    f"eps={attrs['eps']!r})")
        return f"F.batch_norm({a[0]}, {a[1]}, {a[2]}, {a[3]}, {a[4]}, training=False, eps={attrs['eps']!r})"
    if op == "instance_norm":
        return f"F.instance_norm({a[0]}, weight={a[1]}, bias={a[2]}, eps={attrs['eps']!r})"
    if op in ("conv1d", "conv2d", "conv3d"):
        kw = ", ".join(f"{k}={attrs[k]!r}" for k in ("stride", "padding", "dilation", "groups"))
        return f"F.{op}({a[0]}, {a[1]}, {a[2]}, {kw})"
    if op == "linear":
        return f"F.linear({a[0]}, {a[1]}, {a[2]})"
    if op in ("matmul", "bmm"):
        return f"torch.{op}({a[0]}, {a[1]})"
    raise NotImplementedError(f"no PyTorch lowering for op {op!r}")


def render_function(graph: Graph, name: str = "graph") -> str:
    """`def graph(<inputs>):` computing the outputs with torch ops, one line per node."""
    typed = infer(graph)
    names = value_identifiers(graph)
    scalars = {k for k, v in typed.values.items() if v.kind == "scalar"}
    lines = [f"def {name}({', '.join(names[i.name] for i in graph.inputs)}):"]
    for node in graph.nodes:
        lines.append(f"    {names[node.id]} = {node_expr(node, scalars, names)}")
    outs = ", ".join(names[o] for o in graph.outputs)
    lines.append(f"    return ({outs},)" if len(graph.outputs) == 1 else f"    return ({outs})")
    return "\n".join(lines) + "\n"
