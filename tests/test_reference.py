"""The numpy fp64 reference of every op agrees with PyTorch in float64; the emulated ideal rounds per op."""

from __future__ import annotations

import numpy as np
import pytest
from op_examples import example

from fuzzer.dtypes import round_to
from fuzzer.executors import create
from fuzzer.interpret import evaluate
from fuzzer.ir import Case, Graph, Input, Node, input_values
from fuzzer.ops import OPS


@pytest.mark.parametrize("op", sorted(OPS))
def test_reference_matches_torch_float64(op: str) -> None:
    case = example(op, "float64")
    inputs = input_values(case, 0)
    ref = evaluate(case.graph, inputs, rounded=False)["out"]
    (torch_out,), dtypes, _ = create("torch/eager").execute(create("torch/eager").prepare(case.graph), case.graph, inputs)
    if op == "astype":
        ref = round_to(ref, "float16")  # torch really casts; the reference keeps the exact value
    np.testing.assert_allclose(torch_out, ref, rtol=1e-12, atol=1e-12)


def test_emulated_rounds_each_op_and_reference_does_not() -> None:
    x = Input("x", (4,), "float16", init={"values": [1.0, 2.0, 3.0, 2049.0]})
    graph = Graph((x,), (Node("a", "add", ("x", 0.25)), Node("b", "sub", ("a", "x"))), ("b",))
    inputs = input_values(Case(graph), 0)
    assert evaluate(graph, inputs, rounded=False)["b"].tolist() == [0.25] * 4
    # 2049 is not representable in fp16 (rounds to 2048); 2048.25 rounds to 2048 again
    assert inputs["x"].tolist() == [1.0, 2.0, 3.0, 2048.0]
    assert evaluate(graph, inputs, rounded=True)["b"].tolist() == [0.25, 0.25, 0.25, 0.0]


def test_layer_norm_seed_reference_values(seeds_dir) -> None:
    from fuzzer.ir import load_case

    case = load_case(seeds_dir / "tvm-decompose-layernorm-fp16.json")
    inputs = input_values(case, 0)
    ref = evaluate(case.graph, inputs, rounded=False)["y"]
    np.testing.assert_allclose(np.abs(ref), 0.25 / np.sqrt(0.0625 + 1e-5))
    assert set(np.abs(evaluate(case.graph, inputs, rounded=True)["y"]).ravel()) == {1.0}


def test_regression_value_names_that_shadow_reference_functions() -> None:
    """Reported by the generator work: a node called `conv` rendered `conv = conv(...)` (UnboundLocalError)."""
    x = Input("x", (1, 2, 5), "float32", init={"dist": "normal", "seed": 1})
    w = Input("sum", (3, 2, 2), "float32", "param", init={"dist": "normal", "seed": 2})
    graph = Graph((x, w), (Node("conv", "conv1d", ("x", "sum")), Node("float", "exp", ("conv",)),
                           Node("layer_norm", "neg", ("float",))), ("layer_norm",))
    inputs = input_values(Case(graph), 0)
    ref = evaluate(graph, inputs, rounded=False)["layer_norm"]
    ex = create("torch/eager")
    (out,), _, _ = ex.execute(ex.prepare(graph), graph, inputs)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_regression_cache_keys_hold_no_values() -> None:
    """UNet2DModel() at real size: the reference's compiled functions (256 kept) and TVM's programs (32 per pipeline)
    were keyed by the graph's text, which holds a block's weights (up to 85 MB each); the audit grew by gigabytes.
    Graphs that differ only in their values share a form (the reference's key) and have digests of fixed size."""
    from fuzzer.interpret import _compiled
    from fuzzer.ir import Graph, Input, Node
    from fuzzer.values import pack

    def graph(seed: int) -> Graph:
        w = np.random.default_rng(seed).normal(size=(64, 80))
        return Graph((Input("x", (2, 80), "float32"), Input("w", (64, 80), "float32", "param", init=pack(w))),
                     (Node("y", "linear", ("x", "w")),), ("y",))

    a, b = graph(1), graph(2)
    assert a.text != b.text and a.form == b.form and len(a.form) < 2000 and len(a.digest) == 64
    _compiled.cache_clear()
    for g in (a, b):
        evaluate(g, {"x": np.ones((2, 80)), "w": np.ones((64, 80))}, rounded=False)
    assert _compiled.cache_info().currsize == 1
