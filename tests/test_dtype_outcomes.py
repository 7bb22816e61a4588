"""The dtype-outcome oracle: pure checks on hand-made outcomes, then the seed bug through real workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fuzzer import outcome as oc
from fuzzer.executors.torch_exec import AUTOCAST_LOWER, CPU_AUTOCAST_FP32, autocast_graph, recast_inputs
from fuzzer.interpret import evaluate
from fuzzer.ir import Case, Graph, Input, Node, infer, input_values, load_case
from fuzzer.isolation import ExecutorPool
from oracles import dtype_outcomes as d
from op_examples import example


@pytest.fixture(scope="module")
def seed(seeds_dir: Path) -> Case:
    return load_case(seeds_dir / "xla-bf16-schedule-upcast.json")


def by_oracle(found, oracle: str, executor: str | None = None):
    return [f for f in found if f.oracle == oracle and (executor is None or f.executor == executor)]


MISMATCH = "Input type (float) and bias type (c10::BFloat16) should be the same"


# ---------------------------------------------------------------- error classes


@pytest.mark.parametrize("message,cls", [
    (MISMATCH, "dtype-mismatch"),
    ("expected m1 and m2 to have the same dtype, but got: c10::Half != float", "dtype-mismatch"),
    ("mixed dtype (CPU): expect parameter to have scalar type of Float", "dtype-mismatch"),
    ("during context [hlo verifier]: Seen floating point types of different precisions in %batch-norm", "compiler-error"),
    ("[NCC_INLA001] the number of activation tables must be <= 8", "compiler-error"),
    ('"addmm_impl_cpu_" not implemented for \'Half\'', "unsupported"),
    ("index out of range", "runtime-error"),
])
def test_classify_error(message: str, cls: str) -> None:
    assert d.classify_error(oc.error("run", "RuntimeError", message)) == cls


def test_classify_other_statuses() -> None:
    assert d.classify_error(oc.crash(11)) == "crash" and d.classify_error(oc.timeout(5.0)) == "timeout"
    assert d.classify_error(oc.error("compile", "RuntimeError", "boom")) == "compiler-error"
    assert d.classify_error(oc.error("run", "NotImplementedError", "no")) == "unsupported"


# ---------------------------------------------------------------- promotion trace-back


def test_trace_finds_sigma_behind_the_seed_conv(seed: Case) -> None:
    typed = infer(seed.graph)
    assert set(typed.chain_breaks()) == {"out"}
    trace = d.trace_promotion(seed.graph, typed, "noisy", "float32")
    assert trace.culprits == ("sigma",)
    assert set(trace.promoted_at) == {"signal", "scaled_noise"}
    assert {"noisy", "signal", "keep", "scaled_noise", "sigma"} <= set(trace.path)


def _conv_after(nodes: list[Node], x: Input, extra: tuple[Input, ...] = ()) -> Graph:
    w = Input("w", (4, 2, 3), "bfloat16", role="param")
    conv = Node("out", "conv1d", (nodes[-1].id, "w", None))
    return Graph((x, *extra, w), (*nodes, conv), ("out",))


def test_trace_ends_at_a_scalar_literal_or_an_explicit_cast() -> None:
    ints = Input("ids", (1, 2, 5), "int32", init={"dist": "randint", "low": 0, "high": 9})
    g = _conv_after([Node("h", "mul", ("ids", 0.5))], ints)  # int tensor * Python float -> float32
    typed = infer(g)
    assert typed.values["h"].dtype == "float32" and "out" in typed.chain_breaks()
    assert d.trace_promotion(g, typed, "h", "float32").culprits == ("0.5",)
    x = Input("x", (1, 2, 5), "bfloat16")
    g2 = _conv_after([Node("up", "astype", ("x",), {"dtype": "float32"}), Node("h", "gelu", ("up",))], x)
    assert d.trace_promotion(g2, infer(g2), "h", "float32").culprits == ("up",)


# ---------------------------------------------------------------- hand-made outcomes


def _ok(dtypes: list[str], values=None, **info) -> oc.Outcome:
    return oc.ok(values if values is not None else [np.zeros(1)], dtypes, info=dict(info))


def test_status_divergence_and_chain_break_classes(seed: Case) -> None:
    g = seed.graph
    policies = {"x/declared": g, "x/autocast": autocast_graph(g, AUTOCAST_LOWER, CPU_AUTOCAST_FP32),
                "x/lenient": g, "x/fp32-model": recast_inputs(g, "param", "float32")}
    outcomes = {
        "x/declared": [oc.error("run", "RuntimeError", MISMATCH)] * 2,
        "x/autocast": [_ok(["bfloat16"])] * 2,
        "x/lenient": [_ok(["float32"])] * 2,  # runs although its policy graph breaks the chain
        "x/fp32-model": [_ok(["float32"])] * 2,
    }
    found = d.judge(g, infer(g), outcomes, policies)
    (div,) = by_oracle(found, "status-divergence")
    assert (div.executor, div.against, div.error_class, div.ops) == ("x/declared", "x/autocast", "dtype-mismatch", ["conv3d"])
    assert div.details["predicted_by_ir"] and div.node == "out"
    (chain,) = by_oracle(found, "dtype-chain")  # one per break, naming every executor's reaction
    assert (chain.executor, chain.error_class) == ("x/declared", "raised")
    assert chain.details["reactions"] == {"raised": ["x/declared"], "hidden": ["x/autocast", "x/fp32-model"],
                                          "accepted": ["x/lenient"]}
    assert chain.ops == ["conv3d"] and chain.dtypes == ["float32", "bfloat16"] and chain.details["culprits"] == ["sigma"]
    assert "sigma" in chain.message and chain.node == "out"
    assert "root cause: out (conv3d)" in div.message and "sigma" in div.message


def test_unsupported_is_a_limitation_not_a_divergence(seed: Case) -> None:
    outcomes = {"x/a": [oc.unsupported("compile", "no conv3d")], "x/b": [_ok(["bfloat16"])]}
    assert not by_oracle(d.judge(seed.graph, infer(seed.graph), outcomes, {}), "status-divergence")


def test_dtype_divergence_against_policy_and_between_same_policy() -> None:
    case = example("layer_norm", "bfloat16")
    g = case.graph
    outcomes = {"x/one": [_ok(["bfloat16"])], "x/two": [_ok(["float32"])], "x/three": [_ok(["bfloat16"])]}
    labels = {"x/one": "declared", "x/two": "declared", "x/three": "other"}
    found = d.dtype_divergence(g, outcomes, {n: g for n in outcomes}, labels)
    contract = [f for f in found if f.error_class == "reported-vs-policy"]
    same = [f for f in found if f.error_class == "same-policy"]
    assert [(f.executor, f.dtypes) for f in contract] == [("x/two", ["bfloat16", "float32"])]
    assert same == []  # x/two strays from its policy: the reported-vs-policy finding says so, once
    agree = {"x/one": [_ok(["float32"])], "x/two": [_ok(["bfloat16"])]}
    policies = {"x/one": recast_inputs(recast_inputs(g, "input", "float32"), "param", "float32"),
                "x/two": g}  # both keep their own contract, yet share a label
    (same,) = d.dtype_divergence(g, agree, policies, {"x/one": "declared", "x/two": "declared"})
    assert (same.executor, same.against, same.error_class) == ("x/two", "x/one", "same-policy")
    # without labels the outcomes' own descriptions group them (settings.policy)
    desc = {"describe": {"settings": {"policy": "declared"}}}
    outcomes = {"x/one": [_ok(["bfloat16"], **desc)], "x/two": [_ok(["float32"], **desc)]}
    assert [f.against for f in d.dtype_divergence(g, outcomes, {}) if f.error_class == "same-policy"] == ["x/one"]


def _f32_graph() -> Case:
    x = Input("x", (64,), "float32", init={"dist": "normal", "seed": 5})
    y = Input("y", (64,), "float32", init={"dist": "normal", "seed": 6})
    g = Graph((x, y), (Node("p", "mul", ("x", "y")), Node("out", "add", ("p", "x"))), ("out",))
    return Case(g)


def test_effective_precision_names_the_narrower_dtype() -> None:
    case = _f32_graph()
    g = case.graph
    raw = input_values(case, 0)
    expected = [evaluate(g, raw, rounded=False)]
    narrowed = d.narrow(g, ("float32",), "bfloat16")
    as_bf16 = evaluate(narrowed, d._inputs_for(narrowed, raw), rounded=True)["out"]
    as_f32 = evaluate(g, raw, rounded=True)["out"]
    outcomes = {"x/legacy": [_ok(["float32"], [as_bf16], device_dtypes=["bfloat16"])],
                "x/honest": [_ok(["float32"], [as_f32])],
                "x/garbage": [_ok(["float32"], [as_f32 + 1.0])]}
    found = d.effective_precision(g, outcomes, {n: g for n in outcomes}, expected)
    (f,) = found
    assert (f.executor, f.error_class, f.dtypes) == ("x/legacy", "float32-carries-bfloat16", ["float32", "bfloat16"])
    assert f.ratio > 100 and f.details["candidates"]["bfloat16"]["ratio"] <= 1.0
    assert f.details["candidates"]["float16"]["ratio"] > 1.0 and "device holds bfloat16" in f.message


def test_finding_dicts_carry_the_signature_parts(seed: Case) -> None:
    outcomes = {"x/a": [oc.error("run", "RuntimeError", MISMATCH)], "x/b": [_ok(["bfloat16"])]}
    rec = d.finding_dicts(by_oracle(d.judge(seed.graph, infer(seed.graph), outcomes, {}), "status-divergence"))[0]
    for key in ("oracle", "executor", "against", "signature", "message", "details", "ops", "dtypes", "error_class"):
        assert key in rec
    assert rec["signature_parts"] == {"oracle": "status-divergence", "executor": "x/a", "ops": ["conv3d"],
                                      "dtypes": ["float32->bfloat16"], "error_class": "dtype-mismatch"}


# ---------------------------------------------------------------- real executors

EXECUTORS = ["torch/eager", "torch/autocast", "xla/native", "xla/bf16-model", "xla/autocast", "xla/legacy-bf16"]


@pytest.fixture(scope="module")
def pool():
    with ExecutorPool(EXECUTORS, timeout=300.0) as p:
        yield p


def judge_case(pool: ExecutorPool, case: Case, names: list[str]):
    sets = [input_values(case, k) for k in range(len(case.input_sets))]
    outcomes = {n: pool.run(n, case.graph, sets) for n in names}
    policies = {n: infer(pool.executors[n].policy_graph(case.graph)) for n in names}  # as fuzzer.check passes them
    expected = [evaluate(case.graph, s, rounded=False) for s in sets]
    return d.judge(case.graph, infer(case.graph), outcomes, policies, expected)


def test_seed_findings_on_real_executors(pool: ExecutorPool, seed: Case) -> None:
    found = judge_case(pool, seed, EXECUTORS)
    diverged = {f.executor: f for f in by_oracle(found, "status-divergence")}
    assert set(diverged) == {"torch/eager", "xla/native", "xla/bf16-model"}
    assert diverged["xla/native"].error_class == "dtype-mismatch" and diverged["xla/native"].ops == ["conv3d"]
    assert diverged["xla/native"].against in ("xla/autocast", "xla/legacy-bf16")
    (chain,) = by_oracle(found, "dtype-chain")
    assert chain.node == "out" and chain.ops == ["conv3d"] and chain.details["culprits"] == ["sigma"]
    assert chain.executor == "torch/eager" and chain.error_class == "raised"
    assert chain.details["reactions"] == {"raised": ["torch/eager", "xla/native", "xla/bf16-model"],
                                          "hidden": ["torch/autocast", "xla/autocast", "xla/legacy-bf16"]}
    (eff,) = by_oracle(found, "effective-precision")
    assert eff.executor == "xla/legacy-bf16" and eff.error_class == "float32-carries-bfloat16"
    assert eff.details["device_dtype"] == "bfloat16" and eff.ratio > 1e3
    assert not by_oracle(found, "dtype-divergence")  # the policies that run agree on what they report
    assert all(f.details.get("describe", {}).get("name") == f.executor for f in found)


def test_mixed_precision_norm_reports_float32_on_xla(pool: ExecutorPool) -> None:
    """bf16 activations with float32 norm parameters: PyTorch's CPU kernel keeps bf16, XLA returns float32."""
    base = example("layer_norm", "bfloat16")
    g = recast_inputs(base.graph, "param", "float32")
    found = judge_case(pool, base.with_graph(g), ["torch/eager", "xla/native"])
    div = by_oracle(found, "dtype-divergence", "xla/native")
    (contract,) = div  # the same-policy divergence with torch/eager says nothing more: not reported twice
    assert contract.error_class == "reported-vs-policy" and contract.ops == ["layer_norm"]
    assert contract.dtypes == ["bfloat16", "float32"]


def test_regression_chain_breaks_bridged_by_our_own_lowering_are_not_reported() -> None:
    """TVM's Relax lowering casts the activation itself (Relax has no promotion): that is not the backend's doing."""
    from fuzzer.ir import Graph, Input, Node, infer
    from fuzzer.outcome import ok
    from oracles.dtype_outcomes import chain_breaks

    x = Input("x", (1, 2, 4), "float32")
    w = Input("w", (3, 2, 2), "bfloat16", "param")
    graph = Graph((x, w), (Node("y", "conv1d", ("x", "w")),), ("y",))
    typed = infer(graph)
    bridged = ok([np.zeros((1, 3, 3))], ["bfloat16"], info={"bridged_chain_breaks": ["y"]})
    accepted = ok([np.zeros((1, 3, 3))], ["bfloat16"])
    found = chain_breaks(graph, typed, {"tvm/default": [bridged], "xla/other": [accepted]}, {})
    assert [(f.executor, f.error_class) for f in found] == [("xla/other", "accepted")]
