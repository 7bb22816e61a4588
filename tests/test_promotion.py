"""The dtype the IR infers equals what torch produces, over many dtype and operand-kind combinations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzer.executors.torch_exec import TorchExecutor
from fuzzer.ir import Case, Graph, Input, Node, infer, input_values

DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def operand(draw, name: str) -> Input:
    kind = draw(st.sampled_from(["tensor", "zerodim", "scalar"]))
    dtype = draw(st.sampled_from(DTYPES))
    if kind == "scalar":
        dtype = "float64" if dtype.startswith(("float", "bfloat")) else "int64"
        return Input(name, (), dtype, kind="scalar", init={"dist": "uniform", "low": 1, "high": 3, "seed": 1})
    shape = () if kind == "zerodim" else (2, 3)
    return Input(name, shape, dtype, init={"dist": "uniform", "low": 1, "high": 3, "seed": 2})


@st.composite
def binary_graphs(draw) -> Graph:
    a, b = operand(draw, "a"), operand(draw, "b")
    if a.kind == "scalar" and b.kind == "scalar":
        b = Input("b", (2, 3), draw(st.sampled_from(DTYPES)), init=b.init)
    op = draw(st.sampled_from(["add", "sub", "mul", "div"]))
    nodes = [Node("r", op, ("a", "b"))]
    if draw(st.booleans()):
        unary = draw(st.sampled_from(["exp", "neg", "sqrt", "sin"]))
        nodes.append(Node("u", unary, ("r",)))
    return Graph((a, b), tuple(nodes), (nodes[-1].id,))


def torch_dtypes(graph: Graph) -> list[str]:
    ex = TorchExecutor()
    fn = ex.prepare(graph)
    inputs = input_values(Case(graph), 0)
    args = [ex.make_input(i, inputs[i.name]) for i in graph.inputs]
    return [str(o.dtype).replace("torch.", "") for o in fn(*args)]


@settings(max_examples=300, deadline=None)
@given(binary_graphs())
def test_inferred_dtype_matches_torch_for_promoting_ops(graph: Graph) -> None:
    typed = infer(graph)
    assert [typed.values[o].dtype for o in graph.outputs] == torch_dtypes(graph)


@st.composite
def parametrized_graphs(draw) -> Graph:
    act = draw(st.sampled_from(FLOATS))
    par = draw(st.sampled_from(FLOATS))
    op = draw(st.sampled_from(["linear", "conv1d", "layer_norm", "group_norm", "rms_norm", "batch_norm"]))
    init = {"dist": "uniform", "low": 0.5, "high": 1.5, "seed": 3}
    if op == "linear":
        x, params, attrs = (2, 4), [("w", (3, 4)), ("b", (3,))], {}
    elif op == "conv1d":
        x, params, attrs = (1, 4, 5), [("w", (2, 4, 3)), ("b", (2,))], {}
    elif op == "layer_norm":
        x, params, attrs = (2, 4), [("w", (4,)), ("b", (4,))], {"normalized_shape": [4], "eps": 1e-5}
    elif op == "rms_norm":
        x, params, attrs = (2, 4), [("w", (4,))], {"normalized_shape": [4], "eps": 1e-5}
    elif op == "group_norm":
        x, params, attrs = (2, 4, 3), [("w", (4,)), ("b", (4,))], {"num_groups": 2, "eps": 1e-5}
    else:
        x, params, attrs = (2, 4, 3), [("m", (4,)), ("v", (4,))], {"eps": 1e-5}
    inputs = [Input("x", x, act, init=init)] + [Input(n, s, par, "param", init=init) for n, s in params]
    return Graph(tuple(inputs), (Node("y", op, tuple(i.name for i in inputs), attrs),), ("y",))


@settings(max_examples=150, deadline=None)
@given(parametrized_graphs())
def test_chain_breaks_are_exactly_where_torch_raises(graph: Graph) -> None:
    typed = infer(graph)
    try:
        got = torch_dtypes(graph)
    except RuntimeError as exc:
        assert "y" in typed.chain_breaks(), f"torch raised but the IR sees no chain break: {exc}"
        return
    assert "y" not in typed.chain_breaks(), "the IR predicts a chain break but torch ran"
    assert got == [typed.values["y"].dtype]


@pytest.mark.parametrize("kind, shape, expect", [("tensor", (1,), "float32"), ("tensor", (), "bfloat16"),
                                                 ("scalar", (), "bfloat16")])
def test_schedule_sigma_promotes_only_as_a_dim_tensor(kind: str, shape: tuple, expect: str) -> None:
    sigma = Input("sigma", shape, "float32" if kind == "tensor" else "float64", kind=kind,
                  init={"dist": "constant", "value": 0.5})
    lat = Input("lat", (1, 4, 2), "bfloat16")
    graph = Graph((sigma, lat), (Node("k", "sub", (1, "sigma")), Node("y", "mul", ("k", "lat"))), ("y",))
    assert infer(graph).values["y"].dtype == expect == torch_dtypes(graph)[0]


def test_regression_zero_dim_inputs_stay_zero_dim_in_the_torch_executor() -> None:
    """Found by the property test: np.ascontiguousarray made 0-dim inputs shape [1], so they promoted."""
    a = Input("a", (2, 3), "float16")
    b = Input("b", (), "float32")
    graph = Graph((a, b), (Node("r", "add", ("a", "b")),), ("r",))
    assert infer(graph).values["r"].dtype == "float16" == torch_dtypes(graph)[0]


def test_regression_rms_norm_keeps_input_dtype_with_any_weight_dtype() -> None:
    """Found by the property test: rms_norm neither raises nor promotes on a weight of another dtype."""
    x = Input("x", (2, 4), "float16")
    w = Input("w", (4,), "bfloat16", "param")
    graph = Graph((x, w), (Node("y", "rms_norm", ("x", "w"), {"normalized_shape": [4], "eps": 1e-5}),), ("y",))
    assert not infer(graph).chain_breaks()
    assert infer(graph).values["y"].dtype == "float16" == torch_dtypes(graph)[0]


@pytest.mark.parametrize("op, shape, attrs", [("group_norm", (1, 5), {"num_groups": 5, "eps": 1e-5}),
                                              ("instance_norm", (2, 3, 1), {"eps": 1e-5})])
def test_regression_norms_over_a_single_value_are_invalid_as_in_torch(op: str, shape: tuple, attrs: dict) -> None:
    """Found by a smoke run: torch raises 'Expected more than 1 value per channel'; the IR now rejects it too."""
    from fuzzer.ir import IRError

    graph = Graph((Input("x", shape, "float32"),), (Node("y", op, ("x",), attrs),), ("y",))
    with pytest.raises(IRError, match="more than 1"):
        infer(graph)
    with pytest.raises((ValueError, RuntimeError), match="more than 1"):
        torch_dtypes(graph)
