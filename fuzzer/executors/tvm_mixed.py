"""tvm/mixed-precision: the float32 version of a graph through Relax ToMixedPrecision, TVM's own AMP pass.

ToMixedPrecision (src/relax/transform/to_mixed_precision.cc) reads each Relax op's TMixedPrecisionPolicy:
kAlways ops (matmul, conv) take float16 operands and accumulate in `out_dtype`, and their result is stored in
float16; kFollow ops (elementwise, layer/group/rms norm, casts) run in float16 when every tensor operand is a
float16 value, else in float32; kNever ops (softmax, reductions, batch_norm, cumsum) run in float32. The
function's parameters and outputs stay float32.

The policy graph states that contract in the IR: the float32 graph where each op that runs in float16 gets
its operands cast to float16 and declares a float16 result. Its ideal is what the bound judges against: fp16
storage of each such op's inputs and result with float32 accumulation. TVM reports float32 for what the
policy declares float16 (the cast back happens before the function returns), so float16 is reported as
float32; its values must still be float16 numbers judged by the float16 bound.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..dtypes import is_float
from ..ir import Graph, Node, infer, redeclare
from ..ops import OPS, tagged
from .base import HarnessLimit
from .tvm_exec import TVMExecutor

# IR op -> TMixedPrecisionPolicy of the Relax op its lowering emits, read off the op records' tags (tests check
# them against TVM's registry): "always" (kAlways), "follow" (kFollow), else "never".
MIXED_PRECISION: dict[str, str] = {op: "always" if op in tagged(OPS, "amp-always") else
                                   "follow" if op in tagged(OPS, "amp-follow") else "never" for op in OPS}
WIDE = ("float16", "bfloat16", "float64")
UNMODELLED = tagged(OPS, "amp-unmodelled")  # ops whose ToMixedPrecision rewrite no policy graph states


def float32_version(graph: Graph) -> Graph:
    """The graph with every floating-point input, cast and constant declared float32 (what ToMixedPrecision expects)."""
    return redeclare(graph, WIDE, "float32")


def runs_in_float16(graph: Graph) -> set[str]:
    """Nodes of a float32 graph that ToMixedPrecision runs in float16 (see MIXED_PRECISION)."""
    typed = infer(graph)
    half: set[str] = set()
    for node in graph.nodes:
        rule = MIXED_PRECISION.get(node.op, "never")
        tensors = [o for o in node.inputs if isinstance(o, str) and typed.values[o].kind != "scalar"]
        if not is_float(typed.values[node.id].dtype):
            continue
        if rule == "always" or (rule == "follow" and tensors and all(o in half for o in tensors)):
            half.add(node.id)
    return half


def mixed_precision_graph(graph: Graph) -> Graph:
    """The policy graph: the float32 version with the float16 ops' operands cast to float16 (their results float16)."""
    graph = float32_version(graph)
    typed = infer(graph)
    half = runs_in_float16(graph)
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    nodes: list[Node] = []
    casts: dict[tuple[str, str], str] = {}

    def cast(value: str, dtype: str) -> str:
        if (value, dtype) not in casts:
            name, k = f"{value}__{dtype}", 1
            while name in taken:
                name, k = f"{value}__{dtype}_{k}", k + 1
            taken.add(name)
            casts[(value, dtype)] = name
            nodes.append(Node(name, "astype", (value,), {"dtype": dtype}))
        return casts[(value, dtype)]

    for node in graph.nodes:
        want = "float16" if node.id in half else "float32"
        operands: list[Any] = []
        for o in node.inputs:
            info = typed.values.get(o) if isinstance(o, str) else None
            if info is None or info.kind == "scalar" or not is_float(info.dtype):
                operands.append(o)
                continue
            have = "float16" if o in half else "float32"
            operands.append(o if have == want else cast(o, want))
        nodes.append(replace(node, inputs=tuple(operands)))
    return Graph(graph.inputs, tuple(nodes), graph.outputs)


class TVMMixedPrecisionExecutor(TVMExecutor):
    """The float32 version of the graph through Relax ToMixedPrecision (TVM's AMP), compiled for llvm."""

    def __init__(self, out_dtype: str = "float32", cache_size: int = 32) -> None:
        super().__init__("default", cache_size)
        self.out_dtype = out_dtype
        self.pipeline = "mixed-precision" if out_dtype == "float32" else f"mixed-precision-{out_dtype}-acc"
        self.name = f"tvm/{self.pipeline}"
        self.passes = (("ToMixedPrecision", {"out_dtype": out_dtype}),)
        self.description = (f"float32 graph through relax ToMixedPrecision(out_dtype={out_dtype}): matmul/conv in "
                            "float16, judged against fp16 storage with float32 accumulation")

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "program": "float32 version of the graph", "out_dtype": self.out_dtype}

    def program_graph(self, graph: Graph) -> Graph:
        return float32_version(graph)

    def policy_graph(self, graph: Graph) -> Graph:
        return mixed_precision_graph(graph)

    def reported_dtypes(self) -> dict[str, str]:
        return {"float16": "float32"}

    def bridged(self, graph: Graph) -> frozenset[str]:
        return frozenset()

    def prepare(self, graph: Graph) -> Any:
        unmodelled = sorted({n.op for n in graph.nodes} & UNMODELLED)
        if unmodelled:
            raise HarnessLimit(f"ToMixedPrecision's rewrite of {', '.join(unmodelled)} has no policy in the IR")
        return super().prepare(float32_version(graph))

    def repro_parts(self, graph: Graph) -> Any:
        return replace(super().repro_parts(float32_version(graph)), graph=self.policy_graph(graph))


__all__ = ["MIXED_PRECISION", "TVMMixedPrecisionExecutor", "float32_version", "mixed_precision_graph",
           "runs_in_float16"]
