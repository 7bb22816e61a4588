"""Identifier mapping (issue 11, item 5): injective per graph, ASCII only, shadows nothing; colliding names compute
the same numbers as plain ones on the reference, torch and TVM, where they used to compute another graph."""

from __future__ import annotations

import keyword
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzer.check import Checker
from fuzzer.executors import create
from fuzzer.identifiers import reserved_names, value_identifiers
from fuzzer.interpret import evaluate, outputs
from fuzzer.ir import Case, Graph, Input, Node, input_values
from fuzzer.isolation import ExecutorPool


def chain(names: list[str]) -> Graph:
    """Inputs names[0], names[1] (different values), then one node per further name, each using the last two."""
    inputs = tuple(Input(n, (4,), "float32", init={"dist": "normal", "seed": k + 1}) for k, n in enumerate(names[:2]))
    nodes = []
    for k, n in enumerate(names[2:], 2):
        nodes.append(Node(n, ["add", "mul", "sub"][k % 3], (names[k - 1], names[k - 2])))
    return Graph(inputs, tuple(nodes), (names[-1],))


def plain(graph: Graph) -> Graph:
    """The same graph with names v0, v1, ..."""
    order = [i.name for i in graph.inputs] + [n.id for n in graph.nodes]
    new = {n: f"v{k}" for k, n in enumerate(order)}
    return Graph(tuple(replace(i, name=new[i.name]) for i in graph.inputs),
                 tuple(replace(n, id=new[n.id], inputs=tuple(new.get(o, o) if isinstance(o, str) else o for o in n.inputs))
                       for n in graph.nodes),
                 tuple(new[o] for o in graph.outputs))


COLLIDING = {
    "dot-vs-underscore": ["a.", "a_", "a__2", "a_2"],
    "builtin-vs-prefixed": ["list", "v_list", "v_list_2", "out"],
    "dash-vs-underscore": ["a-b", "a_b", "c", "d"],
    "bold-torch": ["𝐭𝐨𝐫𝐜𝐡", "np", "ｍａｔｈ", "F"],
    "reserved-helpers": ["inputs", "rnd", "reference", "round_to"],
    "digits-and-empty-ish": ["1", "_1", "v_1", "-"],
}


@pytest.mark.parametrize("names", COLLIDING.values(), ids=COLLIDING.keys())
def test_colliding_names_compute_what_plain_names_compute(names: list[str]) -> None:
    graph = chain(names)
    case, ref = Case(graph), Case(plain(graph))
    got = outputs(graph, evaluate(graph, input_values(case, 0), rounded=False))
    want = outputs(ref.graph, evaluate(ref.graph, input_values(ref, 0), rounded=False))
    np.testing.assert_array_equal(got[0], want[0])
    ids = value_identifiers(graph)
    assert len(set(ids.values())) == len(ids)


@pytest.mark.parametrize("executor", ["torch/eager", "tvm/default"])
def test_backends_agree_with_plain_names_on_colliding_ones(executor: str) -> None:
    ex = create(executor)
    for names in COLLIDING.values():
        graph = chain(names)
        case, ref = Case(graph), Case(plain(graph))
        (got,) = ex.run_case(graph, [input_values(case, 0)])
        (want,) = ex.run_case(ref.graph, [input_values(ref, 0)])
        assert got.status == "ok" == want.status, (names, got.summary())
        np.testing.assert_array_equal(got.outputs[0], want.outputs[0])


def test_dash_and_underscore_inputs_give_no_false_and_no_hidden_verdict() -> None:
    graph = chain(["a-b", "a_b", "c"])
    with ExecutorPool(["torch/eager"], timeout=120) as pool:
        result = Checker(pool).check(Case(graph))
    assert result.outcomes["torch/eager"][0].status == "ok" and result.findings == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=12, unique=True))
def test_mapping_is_injective_ascii_and_shadows_nothing(names: list[str]) -> None:
    graph = Graph(tuple(Input(n, (1,), "float32") for n in names), (), (names[0],))
    ids = value_identifiers(graph)
    assert set(ids) == set(names) and len(set(ids.values())) == len(names)
    for ident in ids.values():
        assert ident.isascii() and ident.isidentifier() and not keyword.iskeyword(ident)
        assert ident not in reserved_names()


def test_longest_allowed_names_survive_policy_rewrites_and_workers() -> None:
    """autocast adds `<name>_to_bfloat16` casts: past the 256-character limit on outside names, still a valid graph."""
    x, w = "x" * 256, "w" * 256
    graph = Graph((Input(x, (2, 8), "float32", init={"dist": "normal", "seed": 1}),
                   Input(w, (4, 8), "float32", "param", init={"dist": "normal", "seed": 2})),
                  (Node("y" * 256, "linear", (x, w)),), ("y" * 256,))
    with ExecutorPool(["torch/autocast"], timeout=120) as pool:
        result = Checker(pool).check(Case(graph))
    assert result.outcomes["torch/autocast"][0].status == "ok"
