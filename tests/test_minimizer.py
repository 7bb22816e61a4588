"""The minimizer: each shrink pass from a fixed starting case, the search under pure predicates, the signature
target, real minimizations on debug/faults, and the two seed bugs buried in larger graphs (slow)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fuzzer import cli
from fuzzer.check import Checker
from fuzzer.executors import create
from fuzzer.export import render_script
from fuzzer.ir import Case, Graph, Input, Node, case_to_json, input_values, load_case
from fuzzer.isolation import ExecutorPool
from fuzzer.minimize import PASSES, MinimizeError, Search, Target, minimize, size
from fuzzer.minimize.edit import prune, simplest_spec, substitute, valid
from fuzzer.minimize.graph_passes import (
    bypass_nodes,
    default_attrs,
    drop_optional_operands,
    drop_unused_inputs,
    fewer_outputs,
    rehead,
    replace_by_values,
    truncate,
)
from fuzzer.minimize.shape_passes import fewer_dims, smaller_dims
from fuzzer.minimize.size import digits, spec_cost
from fuzzer.minimize.target import promoted_breaks
from fuzzer.minimize.value_passes import (
    fewer_input_sets,
    simpler_dtypes,
    simpler_values,
)
from oracles.findings import Finding

SEEDS = Path(__file__).resolve().parent.parent / "corpus" / "seeds"


def start_case() -> Case:
    """The fixed starting point of the pass tests: every pass has something to offer here."""
    inputs = (
        Input("x", (2, 4), "float16", init={"dist": "normal", "seed": 3}),
        Input("w", (4,), "float32", init={"dist": "uniform", "low": -0.75, "high": 0.75, "seed": 1}),
        Input("g", (4,), "float32", "param", init={"dist": "constant", "value": 1.0}),
        Input("u", (3,), "float32", init={"dist": "normal", "seed": 5}),
        Input("k", (1, 4), "float32", init={"values": [[0.5, -0.5, 0.25, 2.0]]}),
    )
    nodes = (
        Node("a", "mul", ("x", "w")),
        Node("b", "exp", ("a",)),
        Node("c", "layer_norm", ("b", "g"), {"normalized_shape": [4], "eps": 1e-5}),
        Node("d", "add", ("c", "k")),
        Node("e", "sum", ("a",), {"dims": [1]}),
    )
    return Case(Graph(inputs, nodes, ("d", "e")), ({}, {"x": {"dist": "constant", "value": 0.5}}))


def training_start_case() -> Case:
    """start_case as a training case: loss = sum(d * up), gradients of x, w and g (what rehead has to offer on)."""
    base = start_case()
    inputs = tuple(replace(i, grad=i.name in ("x", "w", "g")) for i in base.graph.inputs)
    up = Input("up", (2, 4), "float32", init={"dist": "normal", "seed": 7})
    nodes = base.graph.nodes + (Node("p", "mul", ("d", "up")), Node("loss", "sum", ("p",)))
    return Case(Graph(inputs + (up,), nodes, ("loss", "e")), base.input_sets)


def start_for(shrink) -> Case:
    """The fixed start of a pass: the training one for the pass that moves a loss, else start_case."""
    return training_start_case() if shrink is rehead else start_case()


def labels(shrink, case: Case) -> list[str]:
    return [c.label for c in shrink(case)]


def by_label(shrink, case: Case, label: str) -> Case:
    return next(c.case for c in shrink(case) if c.label == label)


def node_ids(case: Case) -> list[str]:
    return [n.id for n in case.graph.nodes]


def input_names(case: Case) -> list[str]:
    return [i.name for i in case.graph.inputs]


# ---------------------------------------------------------------- every pass, from the fixed start


@pytest.mark.parametrize("shrink", PASSES, ids=lambda p: p.__name__)
def test_pass_is_deterministic_and_offers_only_valid_strictly_smaller_cases(shrink) -> None:
    from dataclasses import replace

    passes = ("CanonicalizeBindings", "ExpandMatmulOfSum")  # a Relax pass sequence for fewer_tvm_passes to shrink
    start = replace(start_for(shrink), tvm_passes=passes)
    first = [(c.label, c.case.id) for c in shrink(start)]
    again = [(c.label, c.case.id) for c in shrink(replace(start_for(shrink), tvm_passes=passes))]
    assert first and first == again
    assert len({cid for _, cid in first}) == len(first)  # never the same case twice
    for cand in shrink(start):
        assert valid(cand.case) and cand.case.graph.nodes
        assert size(cand.case) < size(start), cand.label


@pytest.mark.parametrize("shrink", PASSES, ids=lambda p: p.__name__)
def test_pass_without_progress_offers_nothing_again(shrink) -> None:
    """A pass's candidates are smaller than the case it was given, so applying one and asking again never offers it back."""
    start = start_for(shrink)
    for cand in list(shrink(start))[:3]:
        again = list(shrink(cand.case))
        assert all(size(c.case) < size(cand.case) for c in again)
        assert start.id not in {c.case.id for c in again}


def test_minimal_case_offers_nothing() -> None:
    x = Input("x", (), "float32", init={"dist": "constant", "value": 1.0})
    case = Case(Graph((x,), (Node("y", "exp", ("x",)),), ("y",)))
    assert all(list(p(case)) == [] for p in PASSES)


def test_fewer_outputs() -> None:
    start = start_case()
    assert labels(fewer_outputs, start) == ["keep only output d", "keep only output e"]
    only_e = by_label(fewer_outputs, start, "keep only output e")
    assert only_e.graph.outputs == ("e",) and node_ids(only_e) == ["a", "e"]
    assert input_names(only_e) == ["x", "w", "u"]  # g and k went with their nodes; u was unused before and stays


def test_truncate_smallest_first() -> None:
    start = start_case()
    assert labels(truncate, start) == ["truncate at a (mul)", "truncate at e (sum)", "truncate at b (exp)",
                                       "truncate at c (layer_norm)", "truncate at d (add)"]
    at_c = by_label(truncate, start, "truncate at c (layer_norm)")
    assert at_c.graph.outputs == ("c",) and node_ids(at_c) == ["a", "b", "c"]


def test_bypass_nodes() -> None:
    start = start_case()
    assert labels(bypass_nodes, start) == [
        "bypass a (mul) with x", "bypass b (exp) with a", "bypass c (layer_norm) with b", "bypass c (layer_norm) with g",
        "bypass d (add) with c", "bypass d (add) with k", "bypass e (sum) with a"]
    no_exp = by_label(bypass_nodes, start, "bypass b (exp) with a")
    assert no_exp.graph.node("c").inputs == ("a", "g")
    no_add = by_label(bypass_nodes, start, "bypass d (add) with c")
    assert no_add.graph.outputs == ("c", "e") and "k" not in input_names(no_add)


def test_replace_by_values_holds_the_reference_values_per_input_set() -> None:
    start = start_case()
    assert labels(replace_by_values, start)[0] == "replace d (add) by its values"
    case = by_label(replace_by_values, start, "replace a (mul) by its values")
    assert node_ids(case) == ["b", "c", "d", "e"] and "x" not in input_names(case) and "w" not in input_names(case)
    new = case.graph.input("a")
    assert (new.shape, new.dtype, new.kind) == ((2, 4), "float32", "tensor")
    for k in range(2):  # set 1 overrode x, so it gets its own recorded values of a
        old, got = input_values(start, k), input_values(case, k)
        assert np.array_equal(got["a"], np.float32(old["x"] * old["w"]).astype(np.float64))
    assert "a" in case.input_sets[1] and "a" not in case.input_sets[0]


def test_replace_by_values_skips_big_tensors() -> None:
    x = Input("x", (600,), "float32")
    nodes = (Node("a", "exp", ("x",)), Node("b", "sum", ("a",)), Node("c", "mul", ("b", 2.0)))
    case = Case(Graph((x,), nodes, ("c",)))
    assert labels(replace_by_values, case) == ["replace b (sum) by its values"]  # a is big; c would leave no node


def test_drop_optional_operands_and_unused_inputs() -> None:
    start = start_case()
    assert labels(drop_optional_operands, start) == ["drop weight of c (layer_norm)"]
    case = by_label(drop_optional_operands, start, "drop weight of c (layer_norm)")
    assert case.graph.node("c").inputs == ("b",) and "g" not in input_names(case)
    assert labels(drop_unused_inputs, start) == ["drop unused inputs"]
    assert "u" not in input_names(next(drop_unused_inputs(start)).case)


def test_fewer_input_sets() -> None:
    start = start_case()
    assert labels(fewer_input_sets, start) == ["keep only input set 0", "keep only input set 1", "input set 1: drop override of x"]
    lone = replace(start, input_sets=({"x": {"dist": "constant", "value": 0.5}},))
    folded = by_label(fewer_input_sets, lone, "fold the overrides into the inputs")
    assert folded.input_sets == ({},) and folded.graph.input("x").init == {"dist": "constant", "value": 0.5}


def test_smaller_dims_moves_tied_dims_and_shape_attributes_together() -> None:
    start = start_case()
    got = labels(smaller_dims, start)
    assert got[:4] == ["x dim 0: 2 -> 1", "x dim 1: 4 -> 1", "every dim 4 -> 1 (from x)", "every dim 4 -> 2 (from x)"]
    half = by_label(smaller_dims, start, "every dim 4 -> 2 (from x)")
    assert [i.shape for i in half.graph.inputs] == [(2, 2), (2,), (2,), (3,), (1, 2)]
    assert half.graph.node("c").attrs["normalized_shape"] == [2]
    assert half.graph.input("k").init == {"values": [[0.5, -0.5]]}  # inline values sliced with the dim
    assert "x dim 1: 4 -> 2" not in got  # alone it no longer broadcasts with w: never offered


def test_fewer_dims() -> None:
    start = start_case()
    assert labels(fewer_dims, start) == ["k: drop dim 0"]
    case = next(fewer_dims(start)).case
    assert case.graph.input("k").shape == (4,) and case.graph.input("k").init == {"values": [0.5, -0.5, 0.25, 2.0]}


def test_simpler_dtypes_merge_then_widen() -> None:
    start = start_case()
    assert labels(simpler_dtypes, start) == ["dtype float16 -> float32", "dtype float32 -> float16"]
    wide = next(simpler_dtypes(start)).case
    assert {i.dtype for i in wide.graph.inputs} == {"float32"}
    fp16 = Case(Graph((Input("x", (3,), "float16"),), (Node("y", "exp", ("x",)),), ("y",)))
    assert labels(simpler_dtypes, fp16) == ["dtype float16 -> float32"]


def test_simpler_values_constants_first_and_never_the_same_values_twice() -> None:
    start = start_case()
    got = labels(simpler_values, start)
    assert got[:2] == ["x: dist=constant, value=1.0", "x: dist=constant, value=0.0"]
    assert "x (set 1): dist=constant" not in got  # the default constant is 1.0, offered just before
    inline = by_label(simpler_values, start, "k: 4 inline values")
    assert inline.graph.input("k").init == {"values": [[0.5, -0.5, 0.2, 2.0]]}  # one significant digit


def test_default_attrs() -> None:
    assert labels(default_attrs, start_case()) == ["c (layer_norm): default eps", "e (sum): default dims"]


# ---------------------------------------------------------------- helpers and size


def test_prune_and_substitute() -> None:
    g = start_case().graph
    cut = prune(substitute(g, "d", "c"), g)
    assert node_ids(Case(cut)) == ["a", "b", "c", "e"] and cut.outputs == ("c", "e")
    assert "k" not in input_names(Case(cut)) and "u" in input_names(Case(cut))


def test_simplest_spec() -> None:
    assert simplest_spec(np.full((2, 2), 3.0)) == {"dist": "constant", "value": 3.0}
    assert simplest_spec(np.array([-0.25, 0.25, -0.25, 0.25])) == {"dist": "alternating", "value": 0.25}
    assert simplest_spec(np.array([1.0, 2.0])) == {"values": [1.0, 2.0]}


def test_size_orders_structure_before_values() -> None:
    assert [digits(v) for v in (0.0, 1.0, 0.5, 0.25, 0.999, 1e-05, 4096.0)] == [0, 0, 1, 2, 3, 1, 4]
    costs = [spec_cost(s) for s in ({"dist": "constant", "value": 1.0}, {"dist": "alternating", "value": 0.25},
                                    {"dist": "linspace"}, {"dist": "normal", "seed": 3}, {"values": [1.0, 2.0]})]
    assert costs == sorted(costs)
    start = start_case()
    assert size(next(truncate(start)).case) < size(next(simpler_values(start)).case)


# ---------------------------------------------------------------- the search under pure predicates


def has_exp_of_fp16(case: Case) -> bool:
    """A pure predicate: some exp node reads a float16 input directly."""
    fp16 = {i.name for i in case.graph.inputs if i.dtype == "float16"}
    return any(n.op == "exp" and n.inputs[0] in fp16 for n in case.graph.nodes)


def test_search_reaches_the_one_node_fixpoint_deterministically() -> None:
    runs = [Search(start_case(), has_exp_of_fp16).run() for _ in range(2)]
    final = runs[0].current
    assert final.id == runs[1].current.id and [s.label for s in runs[0].steps] == [s.label for s in runs[1].steps]
    assert [(n.op, n.inputs) for n in final.graph.nodes] == [("exp", ("x",))]
    assert final.graph.input("x").shape == () and final.graph.input("x").init == {"dist": "constant", "value": 1.0}
    assert final.input_sets == ({},)
    assert all(list(p(final)) == [] or not any(has_exp_of_fp16(c.case) for c in p(final)) for p in PASSES)
    sizes = [size(start_case())] + [s.size for s in runs[0].steps]
    assert all(b < a for a, b in zip(sizes, sizes[1:]))  # every accepted step made progress


def test_search_accepts_nothing_when_nothing_smaller_is_interesting() -> None:
    start = start_case()
    search = Search(start, lambda c: c.id == start.id).run()
    assert search.current is start and search.steps == [] and search.tried > 0


def test_search_stops_when_the_budget_is_spent() -> None:
    calls: list[int] = []
    search = Search(start_case(), lambda c: calls.append(1) is None, lambda: len(calls) >= 3).run()
    assert search.exhausted and len(calls) == 3 and len(search.steps) == 3


# ---------------------------------------------------------------- the target


def test_target_parse_round_trip_and_executors() -> None:
    sig = "status-divergence|torch/eager|conv3d|float32->bfloat16|dtype-mismatch"
    t = Target.parse(sig + "|vs:torch/autocast")
    assert t.signature == sig and t.executors == ["torch/eager", "torch/autocast"] and not t.whole_graph
    assert Target.parse("error-bound|tvm/decompose|layer_norm|float16,float16,float16->float16|bound").executors == ["tvm/decompose"]
    with pytest.raises(ValueError):
        Target.parse("error-bound|tvm/decompose")


def test_whole_graph_targets_match_shrinking_op_sets() -> None:
    graph = start_case().graph
    t = Target.parse("crash|debug/faults|add+exp+layer_norm+mul+sum|float16,float32|signal-11", graph)
    assert t.whole_graph
    assert t.matches(Finding("crash", "debug/faults", ["exp"], ["float32"], "signal-11", ""))
    assert not t.matches(Finding("crash", "debug/faults", ["exp", "tanh"], ["float32"], "signal-11", ""))
    assert not t.matches(Finding("crash", "debug/faults", ["exp"], ["float32"], "signal-6", ""))
    exact = Target.parse("error-bound|debug/faults|exp|float16->float16|bound", graph)
    assert not exact.whole_graph
    assert exact.matches(Finding("error-bound", "debug/faults", ["exp"], ["float16->float16"], "bound", ""))
    assert not exact.matches(Finding("error-bound", "debug/faults", ["exp"], ["float32->float32"], "bound", ""))


def test_promotion_target_rejects_an_activation_that_merely_arrives_in_fp32() -> None:
    seed = load_case(SEEDS / "xla-bf16-schedule-upcast.json")
    assert promoted_breaks(seed.graph) == {"out"}
    finding = Finding("dtype-chain", "torch/eager", ["conv3d"], ["float32", "bfloat16"], "raised", "", node="out")
    target = Target.of(finding, seed.graph)
    assert target.promotion and target.admits(seed.graph)
    noisy = Input("noisy", (1, 16, 1, 8, 8), "float32")
    direct = Graph(tuple(i for i in seed.graph.inputs if i.name in ("weight", "bias")) + (noisy,),
                   (seed.graph.node("out"),), ("out",))
    assert not target.admits(direct)


# ---------------------------------------------------------------- real minimizations on debug/faults


def faulty_case(fault: float) -> Case:
    x = Input("x", (4, 8), "float16", init={"dist": "normal", "seed": 3})
    w = Input("w", (4, 8), "float32", init={"dist": "uniform", "seed": 4})
    f = Input("fault", (1,), "float32", init={"dist": "constant", "value": fault})
    nodes = (Node("a", "exp", ("x",)), Node("b", "mul", ("a", "w")), Node("c", "add", ("b", "fault")),
             Node("d", "sum", ("c",), {"dims": [1]}), Node("e", "tanh", ("b",)))
    return Case(Graph((x, w, f), nodes, ("d", "e")), ({}, {"x": {"dist": "constant", "value": 0.5}}))


@pytest.fixture(scope="module")
def faults_pool():
    with ExecutorPool(["debug/faults"], timeout=20.0) as pool:
        yield pool


def test_minimize_error_bound_finding_on_faults(faults_pool) -> None:
    result = minimize(faulty_case(5.0), None, faults_pool)
    assert result.confirmed and result.finding is not None
    assert result.target.signature == "error-bound|debug/faults|exp|float16->float16|bound"
    assert result.finding.signature == result.target.signature
    assert [n.op for n in result.case.graph.nodes] == ["exp", "add"]  # the fault must stay wired in
    assert result.case.input_sets == ({},) and size(result.case) < size(faulty_case(5.0))
    s = result.summary()
    assert s["nodes"] == [5, 2] and s["ops_removed"] == ["mul", "sum", "tanh"] and s["accepted"] == len(s["steps"])
    assert s["tried"] >= s["accepted"] and s["checks"] <= s["tried"] + 1 and s["seconds"] > 0
    assert result.case.meta["minimized"]["from"] == faulty_case(5.0).id
    assert any(line.strip().startswith("nodes 5 -> 2") for line in result.lines())


def test_minimize_crash_finding_keeps_the_crash_and_shrinks_the_op_set(faults_pool) -> None:
    case = faulty_case(1.0)
    result = minimize(case, "crash|debug/faults|add+exp+mul+sum+tanh|float16,float32|signal-11", faults_pool)
    assert result.confirmed and result.finding.oracle == "crash"
    assert len(result.case.graph.nodes) == 1 and result.case.graph.input("fault").init["value"] == 1.0


def test_minimize_respects_the_check_budget(faults_pool) -> None:
    result = minimize(faulty_case(5.0), None, Checker(faults_pool), max_checks=4, fresh_recheck=False)
    assert result.exhausted and result.checks == 4 and result.confirmed


def test_minimize_without_a_finding_raises_and_a_foreign_signature_is_reported(faults_pool) -> None:
    with pytest.raises(MinimizeError):
        minimize(faulty_case(0.0), None, faults_pool)
    result = minimize(faulty_case(0.0), "error-bound|debug/faults|exp|float16->float16|bound", faults_pool)
    assert not result.confirmed and result.finding is None and "does not show" in result.note
    with pytest.raises(MinimizeError):
        minimize(faulty_case(5.0), "error-bound|torch/eager|exp|float16->float16|bound", faults_pool)


# ---------------------------------------------------------------- the seed bugs inside larger graphs (slow)


def layer_norm_in_a_larger_graph() -> Case:
    """The TVM fp16 layer_norm seed behind a mul by ones, with an unrelated exp branch and an extra output."""
    seed = load_case(SEEDS / "tvm-decompose-layernorm-fp16.json")
    one = Input("one", (4096,), "float16", init={"dist": "constant", "value": 1.0})
    t = Input("t", (3, 5), "float32", init={"dist": "normal", "seed": 7})
    nodes = (Node("m", "mul", ("x", "one")),
             Node("y", "layer_norm", ("m", "gamma", "beta"), {"normalized_shape": [4096], "eps": 1e-05}),
             Node("z", "tanh", ("y",)),
             Node("e", "exp", ("t",)),
             Node("s", "sum", ("e",), {"dims": [1]}))
    return Case(Graph(seed.graph.inputs + (one, t), nodes, ("z", "s")))


def schedule_upcast_in_a_larger_graph() -> Case:
    """The bf16 schedule-upcast seed with an activation after the conv, a pooled output and an unrelated branch."""
    seed = load_case(SEEDS / "xla-bf16-schedule-upcast.json")
    t = Input("t", (4,), "float32", init={"dist": "uniform", "seed": 9})
    nodes = seed.graph.nodes + (Node("act", "silu", ("out",)), Node("pooled", "mean", ("act",), {"dims": [1]}),
                                Node("u", "exp", ("t",)), Node("v", "sum", ("u",)))
    return replace(seed, graph=Graph(seed.graph.inputs + (t,), nodes, ("pooled", "v")))


def script_of(case: Case, executor: str) -> str:
    return render_script(case, create(executor).repro_parts(case.graph), "precfuzz minimize")


def inputs_section(script: str) -> str:
    return script.split("def make_inputs():")[1].split("return inputs")[0]


def check_script_reads_like_the_seed(minimized: Case, seed: Case, executor: str) -> None:
    ours, theirs = script_of(minimized, executor), script_of(seed, executor)
    assert len(ours.splitlines()) <= len(theirs.splitlines())
    assert "np.array([" not in inputs_section(ours)  # simplified values are distributions, not inline lists


@pytest.mark.slow
def test_tvm_layer_norm_bug_minimizes_to_the_layer_norm_alone() -> None:
    case = layer_norm_in_a_larger_graph()
    with ExecutorPool(["tvm/decompose"], timeout=300.0) as pool:
        t0 = time.monotonic()
        result = minimize(case, None, pool)
        seconds = time.monotonic() - t0
    assert result.target.signature == "error-bound|tvm/decompose|layer_norm|float16,float16,float16->float16|bound"
    assert result.confirmed and result.finding.signature == result.target.signature
    assert [n.op for n in result.case.graph.nodes] == ["layer_norm"]
    assert len(input_names(result.case)) == 3  # x (or the value that fed the layer_norm), gamma, beta
    (ln,) = result.case.graph.nodes  # fp16 accumulation shows on any row once the values make it round
    assert result.case.graph.input(ln.inputs[0]).dtype == "float16", result.lines()
    print(f"minimized in {seconds:.0f} s")  # make bench measures minimization time; no timing assertion here
    check_script_reads_like_the_seed(result.case, load_case(SEEDS / "tvm-decompose-layernorm-fp16.json"), "tvm/decompose")


def layer_norm_plus_an_unrelated_branch() -> Case:
    """out = tanh(layer_norm(x)) + exp(z): the bug op's only user also reads a branch that has nothing to do with it."""
    seed = load_case(SEEDS / "tvm-decompose-layernorm-fp16.json")
    z = Input("z", (4096,), "float16", init={"dist": "uniform", "low": -1.0, "high": 1.0, "seed": 11})
    nodes = (Node("y", "layer_norm", ("x", "gamma", "beta"), {"normalized_shape": [4096], "eps": 1e-05}),
             Node("f", "tanh", ("y",)), Node("g", "exp", ("z",)), Node("out", "add", ("f", "g")))
    return Case(Graph(seed.graph.inputs + (z,), nodes, ("out",)))


@pytest.mark.slow
def test_unrelated_branch_shrinks_to_the_bug_op_alone() -> None:
    with ExecutorPool(["tvm/decompose"], timeout=300.0) as pool:
        result = minimize(layer_norm_plus_an_unrelated_branch(), None, pool)
    assert result.target.signature == "error-bound|tvm/decompose|layer_norm|float16,float16,float16->float16|bound"
    assert result.confirmed and result.finding.signature == result.target.signature, result.lines()
    assert [n.op for n in result.case.graph.nodes] == ["layer_norm"], result.lines()
    assert "z" not in input_names(result.case)
    assert result.steps[0].pass_name == "isolate", result.lines()  # the blamed node alone, in one step
    assert result.checks <= 8, result.lines()


@pytest.mark.slow
def test_tvm_seed_minimizes_to_one_node_in_few_checks() -> None:
    seed = load_case(SEEDS / "tvm-decompose-layernorm-fp16.json")
    with ExecutorPool(["tvm/decompose"], timeout=300.0) as pool:
        result = minimize(seed, None, pool)
    assert result.confirmed and result.finding.signature == result.target.signature, result.lines()
    assert [n.op for n in result.case.graph.nodes] == ["layer_norm"]
    assert result.checks <= 8, result.lines()  # checks, not seconds: each one is a backend compile


def test_error_bound_target_refutes_a_candidate_without_its_node_statically() -> None:
    seed = load_case(SEEDS / "tvm-decompose-layernorm-fp16.json")
    target = Target.parse("error-bound|tvm/decompose|layer_norm|float16,float16,float16->float16|bound", seed.graph)
    assert target.node_shown(seed.graph) and target.needs_eager  # a backend's forward error: eager must not share it
    no_bias = replace(seed.graph, nodes=(replace(seed.graph.nodes[0], inputs=("x", "gamma")),))
    assert not target.node_shown(no_bias)  # layer_norm with two operands cannot be named float16,float16,float16
    hazard = Target.parse("model-hazard|torch/eager|conv3d|float32,bfloat16|raised")
    assert hazard.needs_eager and hazard.node_shown(no_bias)


def test_search_does_not_retry_a_refuted_edit_after_value_only_steps() -> None:
    case = start_case()
    asked: list[str] = []

    def interesting(c: Case) -> bool:
        asked.append(c.id)
        return len(c.graph.nodes) == len(case.graph.nodes)  # only value and attribute edits succeed

    search = Search(case, interesting).run()
    assert len(asked) == len(set(asked)) or search.steps  # terminates
    structural = [s for s in search.steps if s.pass_name in ("truncate", "bypass_nodes", "fewer_outputs")]
    assert not structural
    again = Search(search.current, interesting)
    again.refuted = set(search.refuted)
    n = len(asked)
    again.run()
    assert not again.steps and len(asked) == n  # nothing refuted before is asked again


@pytest.mark.slow
def test_bf16_schedule_upcast_minimizes_to_the_noise_arithmetic_and_the_conv() -> None:
    case = schedule_upcast_in_a_larger_graph()
    with ExecutorPool(["torch/eager", "torch/autocast"], timeout=300.0) as pool:
        t0 = time.monotonic()
        result = minimize(case, None, pool)
        seconds = time.monotonic() - t0
    assert result.target.signature == "model-hazard|torch/eager|conv3d|float32,bfloat16|raised"
    assert_upcast_minimized(result, seconds)
    check_script_reads_like_the_seed(result.case, load_case(SEEDS / "xla-bf16-schedule-upcast.json"), "torch/eager")


@pytest.mark.slow
def test_bf16_schedule_upcast_hazard_on_xla_native() -> None:
    case = schedule_upcast_in_a_larger_graph()
    with ExecutorPool(["xla/native"], timeout=300.0) as pool:
        t0 = time.monotonic()
        result = minimize(case, "model-hazard|xla/native|conv3d|float32,bfloat16|raised", pool)
        seconds = time.monotonic() - t0
    assert result.finding is not None and result.finding.oracle == "model-hazard"
    assert_upcast_minimized(result, seconds)


def assert_upcast_minimized(result, seconds: float) -> None:
    graph = result.case.graph
    assert result.confirmed and 2 <= len(graph.nodes) <= 6, result.lines()
    assert graph.nodes[-1].op == "conv3d" and all(n.op in ("add", "sub", "mul") for n in graph.nodes[:-1])
    sigma = graph.input("sigma")
    assert (sigma.shape, sigma.dtype) == ((1,), "float32")  # a 0-dim sigma would not promote: the bug needs it 1-dim
    assert any("sigma" in n.inputs for n in graph.nodes[:-1])
    assert promoted_breaks(graph) == {graph.nodes[-1].id}
    assert seconds < 120, result.lines()


@pytest.mark.slow
def test_cli_minimizes_the_seed_cases_to_their_size_or_smaller(tmp_path: Path, capsys) -> None:
    seeds = sorted(SEEDS.glob("*.json"))
    rc = cli.main(["minimize", *map(str, seeds), "--executors", "tvm/decompose,torch/eager,torch/autocast",
                   "--out", str(tmp_path), "--export", "--json", "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    summaries = _json_objects(text)
    assert len(summaries) == 2 and all(s["confirmed"] for s in summaries)
    for seed in seeds:
        out = tmp_path / (seed.stem + ".min.json")
        minimized, original = load_case(out), load_case(seed)
        assert size(minimized) <= size(original)
        assert (tmp_path / (seed.stem + ".min.py")).exists()
        assert json.loads(out.read_text())["meta"].get("minimized", {}).get("from") in (None, original.id)
    assert case_to_json(load_case(tmp_path / "xla-bf16-schedule-upcast.min.json"))["nodes"][-1]["op"] == "conv3d"


def test_regression_minimize_writes_nothing_for_a_signature_the_case_does_not_show(tmp_path: Path, capsys) -> None:
    """Adversarial #308: `--signature` the case does not show printed "NOT reproduced", exited 1, and still wrote --out
    (an unminimized copy of the input)."""
    out = tmp_path / "sig.json"
    rc = cli.main(["minimize", str(SEEDS / "tvm-decompose-layernorm-fp16.json"), "--executors", "torch/eager",
                   "--signature", "error-bound|torch/eager|softmax|float16|bound", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists()
    assert "not minimized: the original case does not show the signature" in err, err


def _json_objects(text: str) -> list[dict]:
    """The JSON objects printed one after another (indented) by --json."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    while (start := text.find("{", pos)) != -1:
        obj, pos = decoder.raw_decode(text, start)
        out.append(obj)
    return out


def test_regression_without_a_signature_the_most_valuable_finding_is_the_target() -> None:
    """Issue 20: `precfuzz minimize` took the case's first finding; on the TVM seed padded with elementwise ops that
    was xla/bf16-model's (a hazard or an effective-precision reading) and the result stayed 8 nodes after 113 s.
    Measured after the fix: the padded seed minimizes to the layer_norm alone in 36 s (8 checks)."""
    from fuzzer.minimize.engine import most_valuable
    from oracles.findings import Finding

    hazard = Finding("model-hazard", "xla/bf16-model", ["layer_norm"], ["float16", "bfloat16"], "raised", "m",
                     kind="model-hazard")
    narrow = Finding("effective-precision", "xla/bf16-model", ["layer_norm"], ["float16"], "p", "m", ratio=1.7)
    tvm = Finding("error-bound", "tvm/decompose", ["layer_norm"], ["float16"], "bound", "m", ratio=340.0)
    gap = Finding("coverage", "tvm/default", ["layer_norm"], ["bfloat16"], "unsupported", "m", kind="unsupported")
    assert most_valuable([hazard, narrow, gap, tvm]) is tvm
    assert most_valuable([gap, hazard]) is hazard
    inf = Finding("error-bound", "tvm/default", ["mean"], ["float16"], "nonfinite", "m", ratio=None)
    assert most_valuable([tvm, inf]) is inf


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_minimizer")


def test_regression_a_shape_departure_found_through_eager_is_minimized_with_eager() -> None:
    """triage12 bf3bf1182a (torch_xla amax left unreduced, then a dtype the eager run disagrees with): the minimizer
    checked error-bound targets without PyTorch eager, so the original case "did not show" its own finding and the
    bug stayed unminimized. Measured after the fix: 12 nodes -> the amax alone in 91 s."""
    assert Target.parse("error-bound|xla/native|amax|bfloat16->bfloat16|shape|vs:eager").needs_eager
    assert Target.parse("error-bound|xla/native|amax|bfloat16->bfloat16|shape").needs_eager
    assert not Target.parse("error-bound|torch/autocast|mul|float16->float16|bound").needs_eager


def test_regression_a_backends_forward_error_is_minimized_with_eager_beside_it() -> None:
    """triage31 b61e19a7b7: torch_xla's float32 attention error was minimized without eager into a case whose error
    PyTorch's own math path shares bit for bit (2.744e-05 both), filed as torch_xla's, its script exiting 1 though it
    printed eager's identical error. A backend's forward error target runs eager, so the minimized case keeps the
    backend worse than PyTorch."""
    assert Target.parse("error-bound|xla/native|mul|float16->float16|bound").needs_eager
    assert Target.parse("error-bound|tvm/default|tanh|float16->float16|nonfinite").needs_eager
    assert not Target.parse("error-bound|xla/native|conv1d|bfloat16->bfloat16|underflow").needs_eager


def test_regression_a_reduction_that_slips_to_a_much_smaller_ratio_is_another_bug() -> None:
    """triage15 baf9062a49: ToMixedPrecision dropping attention's mask and scale was 785x the bound; the minimizer
    kept reductions while the signature held and ended at an all-True mask and the default scale, 2.56x, float16
    attention's rounding alone. An out-of-bound finding now keeps at least a tenth of its original ratio (asked at
    most 10x)."""
    from fuzzer.minimize.target import Target
    from oracles.findings import Finding

    sig = "error-bound|tvm/mixed-precision|scaled_dot_product_attention|float16,float16,float16,bool->float16|bound"
    graph = Graph((Input("q", (1, 1, 2, 4), "float32"),), (Node("attn", "neg", ("q",)),), ("attn",))

    def found(ratio: float) -> Finding:
        return Finding("error-bound", "tvm/mixed-precision", ["scaled_dot_product_attention"],
                       ["float16,float16,float16,bool->float16"], "bound", "m", ratio=ratio, node="attn")

    target = Target.parse(sig, graph).refined(found(785.0), graph)
    assert target.min_ratio == 10.0
    assert target.matches(found(50.0)) and not target.matches(found(2.56))
    modest = Target.parse(sig, graph).refined(found(3.0), graph)
    assert modest.matches(found(1.2))  # a modest bug may shrink to any out-of-bound ratio


def test_rehead_moves_a_training_loss_up_the_graph_and_keeps_it_a_training_case() -> None:
    """issue 35: truncating a training case would leave no 0-dim loss; rehead puts sum(node * upstream) at a node."""
    start = training_start_case()
    at_c = by_label(rehead, start, "loss head at c (layer_norm)")
    assert [n.op for n in at_c.graph.nodes] == ["mul", "exp", "layer_norm", "mul", "sum"]
    assert at_c.graph.wrt == ("x", "w", "g") and at_c.graph.outputs == ("loss_1",) and valid(at_c)
    assert at_c.graph.inputs[-1].name == "upstream" and not at_c.graph.inputs[-1].grad
    assert not list(rehead(start_case()))  # a forward-only case has no loss to move


def test_regression_rehead_at_a_0_dim_value_makes_a_valid_loss() -> None:
    """triage19 b3e5187054 (and 8 more): rehead put sum(mean_logp * upstream) on a 0-dim value; sizing the candidate
    raised "sum needs a tensor of rank >= 1" and the minimizer failed. A 0-dim value's loss is value * upstream."""
    start = training_start_case()
    g = start.graph
    nodes = g.nodes[:-1] + (Node("m", "mean", ("p",)), Node("loss", "neg", ("m",)))
    case = Case(Graph(g.inputs, nodes, ("loss", "e")), start.input_sets)
    at_m = by_label(rehead, case, "loss head at m (mean)")
    assert valid(at_m) and at_m.graph.nodes[-1].op == "mul" and at_m.graph.wrt == ("x", "w", "g")


def test_regression_a_crash_of_one_error_class_may_widen_to_float32() -> None:
    """sample30 ba89e10fb7: TVM's rms_norm over every axis fails to compile in float32 too, but the minimizer kept
    bfloat16 (a localized status divergence matched its dtypes exactly) and the record was titled bfloat16. A status
    divergence with the same error message class matches in other dtypes; another error class does not."""
    def raises(dtype: str, key: str) -> Finding:
        return Finding("status-divergence", "tvm/default", ["rms_norm"], [dtype], "compiler-error", "m",
                       details={"error_key": key})

    graph = Graph((Input("x", (2, 3), "bfloat16"),), (Node("y", "rms_norm", ("x",), {"normalized_shape": [2, 3]}),),
                  ("y",))
    target = Target.parse("status-divergence|tvm/default|rms_norm|bfloat16|compiler-error", graph).refined(
        raises("bfloat16", "shape size indices size"), graph)  # a campaign's signature, refined by the first check
    assert target.matches(raises("float32", "shape size indices size"))
    assert not target.matches(raises("float32", "another message"))
    bound = Target.of(Finding("error-bound", "tvm/default", ["rms_norm"], ["bfloat16->bfloat16"], "bound", "m"), graph)
    assert not bound.matches(Finding("error-bound", "tvm/default", ["rms_norm"], ["float32->float32"], "bound", "m"))


@pytest.mark.slow
def test_regression_tvms_rms_norm_crash_minimizes_to_float32() -> None:
    """sample30 ba89e10fb7, end to end: the bfloat16 crash minimizes to float32 and its title names no dtype."""
    from oracles.bugs import title

    case = Case(Graph((Input("x", (2, 3), "bfloat16", init={"dist": "normal", "seed": 1}),),
                      (Node("y", "rms_norm", ("x",), {"normalized_shape": [2, 3]}),), ("y",)))
    with ExecutorPool(["torch/eager", "tvm/default"], timeout=120.0) as pool:
        checker = Checker(pool)
        (finding,) = [f for f in checker.check(case, ["torch/eager", "tvm/default"]).findings
                      if f.executor == "tvm/default"]
        result = minimize(case, finding, checker, budget_s=120.0)
        by_signature = minimize(case, finding.signature, checker, budget_s=120.0)  # as a campaign calls it (triage32)
    assert result.case.graph.inputs[0].dtype == "float32", result.case.graph
    assert by_signature.case.graph.inputs[0].dtype == "float32", by_signature.case.graph
    assert "bfloat16" not in title(result.finding), title(result.finding)
