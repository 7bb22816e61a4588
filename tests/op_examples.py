"""One small, valid single-op case per op of the IR (for per-op tests across executors)."""

from __future__ import annotations

from typing import Any

from fuzzer.ir import Case, Graph, Input, Node

N = {"dist": "normal", "seed": 1}
POS = {"dist": "uniform", "low": 0.5, "high": 2.0, "seed": 2}


def _inp(name: str, shape: list[int], dtype: str, role: str = "input", init: dict | None = None) -> Input:
    return Input(name, tuple(shape), dtype, role, "tensor", dict(init or {**N, "seed": len(name) + sum(shape)}))


def example(op: str, dtype: str = "float32") -> Case:
    """A single-node case exercising `op` in `dtype`."""
    x = _inp("x", [2, 3, 8], dtype)
    attrs: dict[str, Any] = {}
    extra: list[Input] = []
    operands: list[Any] = ["x"]
    if op in ("add", "sub", "mul", "div"):
        extra = [_inp("y", [3, 8], dtype, init=POS if op == "div" else None)]
        operands = ["x", "y"]
    elif op in ("log", "sqrt", "rsqrt"):
        x = _inp("x", [2, 3, 8], dtype, init=POS)
    elif op == "astype":
        attrs = {"dtype": "float16" if dtype != "float16" else "float32"}
    elif op in ("sum", "mean", "var"):
        attrs = {"dims": [-1], "keepdim": op == "mean"}
    elif op in ("softmax", "log_softmax"):
        attrs = {"dim": -1}
    elif op == "layer_norm":
        extra = [_inp("w", [8], dtype, "param"), _inp("b", [8], dtype, "param")]
        operands, attrs = ["x", "w", "b"], {"normalized_shape": [8], "eps": 1e-5}
    elif op == "rms_norm":
        extra = [_inp("w", [8], dtype, "param")]
        operands, attrs = ["x", "w"], {"normalized_shape": [8], "eps": 1e-6}
    elif op in ("group_norm", "instance_norm", "batch_norm"):
        x = _inp("x", [2, 4, 6], dtype)
        if op == "batch_norm":
            extra = [_inp("rm", [4], dtype, "param"), _inp("rv", [4], dtype, "param", POS),
                     _inp("w", [4], dtype, "param"), _inp("b", [4], dtype, "param")]
            operands, attrs = ["x", "rm", "rv", "w", "b"], {"eps": 1e-5}
        else:
            extra = [_inp("w", [4], dtype, "param"), _inp("b", [4], dtype, "param")]
            operands = ["x", "w", "b"]
            attrs = {"num_groups": 2, "eps": 1e-5} if op == "group_norm" else {"eps": 1e-5}
    elif op.startswith("conv"):
        nd = int(op[4])
        x = _inp("x", [1, 4] + [6] * nd, dtype)
        extra = [_inp("w", [6, 2] + [3] * nd, dtype, "param"), _inp("b", [6], dtype, "param")]
        operands, attrs = ["x", "w", "b"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 2}
    elif op == "linear":
        extra = [_inp("w", [5, 8], dtype, "param"), _inp("b", [5], dtype, "param")]
        operands = ["x", "w", "b"]
    elif op in ("matmul", "bmm"):
        extra = [_inp("y", [2, 8, 4], dtype)]
        operands = ["x", "y"]
    elif op == "gelu":
        attrs = {"approximate": "tanh"}
    graph = Graph((x, *extra), (Node("out", op, tuple(operands), attrs),), ("out",))
    return Case(graph, ({},), {"example": op})
