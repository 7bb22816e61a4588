"""Deterministic tiny case streams for campaign tests (no dependence on the real generators)."""

from __future__ import annotations

from fuzzer.ir import Case, Graph, Input, Node


def fault_stream(seed: int, index: int) -> Case:
    """Case `index`: every 3rd returns wrong values on debug/faults, every 7th segfaults it, the rest are clean."""
    fault = 1.0 if index % 7 == 6 else (5.0 if index % 3 == 2 else 0.0)
    x = Input("x", (4,), "float32", init={"dist": "normal", "seed": seed * 1000 + index})
    f = Input("fault", (1,), "float32", init={"dist": "constant", "value": fault})
    op = ["exp", "neg"][index % 2]
    graph = Graph((x, f), (Node("m", "mul", ("x", "fault")), Node("y", op, ("m",))), ("y",))
    return Case(graph, ({},), {"generator": "fault_stream", "seed": seed, "index": index, "family": "faults"})


def twin_stream(seed: int, index: int) -> Case:
    """Cases 0 and 1 return wrong values on debug/faults for float16 and bfloat16 inputs: two findings (two
    signatures) of one bug (one key: the class float16/bfloat16); the rest are clean."""
    dtype = {0: "float16", 1: "bfloat16"}.get(index, "float32")
    x = Input("x", (4,), dtype, init={"dist": "normal", "seed": seed * 1000 + index})
    f = Input("fault", (1,), "float32", init={"dist": "constant", "value": 5.0 if index < 2 else 0.0})
    graph = Graph((x, f), (Node("y", "mul", ("x", "fault")),), ("y",))
    return Case(graph, ({},), {"generator": "twin_stream", "seed": seed, "index": index, "family": "faults"})


def hang_stream(seed: int, index: int) -> Case:
    """Case 0 hangs debug/faults (a timeout finding); the rest are clean."""
    x = Input("x", (4,), "float32", init={"dist": "normal", "seed": seed * 1000 + index})
    f = Input("fault", (1,), "float32", init={"dist": "constant", "value": 2.0 if index == 0 else 0.0})
    graph = Graph((x, f), (Node("m", "mul", ("x", "fault")), Node("y", "neg", ("m",))), ("y",))
    return Case(graph, ({},), {"generator": "hang_stream", "seed": seed, "index": index, "family": "faults"})
