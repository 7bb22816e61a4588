"""The oracles against PyTorch eager: pure checks on hand-made outcomes, then regression tests through real workers.

Each `test_regression_*` below is one of the eight false-alarm classes a triage of a 20-minute campaign found
(issue 9), from a small fixed case.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from op_examples import example

from fuzzer import outcome as oc
from fuzzer.analysis import trace_promotion
from fuzzer.check import Checker
from fuzzer.executors.torch_exec import (
    AUTOCAST_LOWER,
    CPU_AUTOCAST_FP32,
    autocast_graph,
    recast_inputs,
)
from fuzzer.executors.xla_exec import XLA_AUTOCAST_FP32
from fuzzer.interpret import evaluate, ideal_values
from fuzzer.ir import (
    Case,
    Graph,
    Input,
    Node,
    canonical,
    graph_to_json,
    infer,
    input_values,
    load_case,
)
from fuzzer.isolation import ExecutorPool
from fuzzer.ops.norms import scale_shift_magnitude
from oracles import semantics
from oracles.bounds import error_stats
from oracles.error_bounds import MARGIN, OutputJudgement, bound_findings, violates
from oracles.errors import classify_error
from oracles.nodes import judge_nodes, passed_through, rounded_inputs
from oracles.precision import narrower_format
from oracles.subjects import Subject


@pytest.fixture(scope="module")
def seed(seeds_dir: Path) -> Case:
    return load_case(seeds_dir / "xla-bf16-schedule-upcast.json")


MISMATCH = "Input type (float) and bias type (c10::BFloat16) should be the same"


# ---------------------------------------------------------------- error classes and promotion trace-back


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
    assert classify_error(oc.error("run", "RuntimeError", message)) == cls


def test_trace_finds_sigma_behind_the_seed_conv(seed: Case) -> None:
    typed = infer(seed.graph)
    assert set(typed.chain_breaks()) == {"out"}
    trace = trace_promotion(seed.graph, typed, "noisy", "float32")
    assert trace.culprits == ("sigma",)
    assert set(trace.promoted_at) == {"signal", "scaled_noise"}


def test_a_chain_break_computes_and_returns_the_promoted_dtype() -> None:
    """No PyTorch run defines it (PyTorch raises), so a backend that runs it is judged against a correct promotion."""
    x = Input("x", (1, 2, 5), "float32")
    w = Input("w", (4, 2, 3), "bfloat16", role="param")
    typed = infer(Graph((x, w), (Node("out", "conv1d", ("x", "w")),), ("out",)))
    assert typed.values["out"].dtype == "float32" and typed.nodes["out"].compute_dtype == "float32"
    assert typed.chain_breaks()["out"].param_dtype == "bfloat16"


# ---------------------------------------------------------------- the semantic oracle on hand-made outcomes


def _ok(dtypes: list[str], values=None, **info) -> oc.Outcome:
    return oc.ok(values if values is not None else [np.zeros(1)] * len(dtypes), dtypes, info=dict(info))


def _subject(name: str, graph: Graph, outs: list[oc.Outcome], policy: Graph | None = None, **kw) -> Subject:
    policy = policy or graph
    return Subject(name, graph, outs, policy, kw.pop("numeric", policy), **kw)


def _judge(graph: Graph, subjects: list[Subject], eager_by_name: dict[str, list[oc.Outcome]]):
    keys = {s.name: canonical(graph_to_json(s.policy)) for s in subjects}
    eager = {keys[n]: outs for n, outs in eager_by_name.items()}
    return semantics.judge(graph, subjects, eager, keys)


def test_regression_status_divergence_is_judged_against_eager(seed: Case) -> None:
    """Defect 1: the dtype mismatch eager raises too is a model hazard, not a backend divergence."""
    g = seed.graph
    raised = [oc.error("run", "RuntimeError", MISMATCH)] * 2
    subjects = [_subject("x/native", g, raised), _subject("x/lenient-autocast", g, [_ok(["bfloat16"])] * 2,
                                                         autocast_graph(g, AUTOCAST_LOWER, CPU_AUTOCAST_FP32))]
    found = _judge(g, subjects, {"x/native": raised, "x/lenient-autocast": [_ok(["bfloat16"])] * 2})
    assert [f.oracle for f in found] == ["model-hazard"]
    (hazard,) = found
    assert hazard.kind == "model-hazard" and hazard.ops == ["conv3d"] and hazard.node == "out"
    assert hazard.details["culprits"] == ["sigma"] and "sigma" in hazard.message
    assert hazard.details["fix"] == "noisy.to(torch.bfloat16) before out"
    assert hazard.details["reactions"] == {"raised": ["x/native"]}


def test_backend_raising_where_eager_runs_is_a_status_divergence(seed: Case) -> None:
    g = seed.graph
    auto = autocast_graph(g, AUTOCAST_LOWER, XLA_AUTOCAST_FP32)
    err = [oc.error("compile", "RuntimeError", "[hlo verifier] Seen floating point types of different precisions")] * 2
    (f,) = _judge(g, [_subject("x/autocast", g, err, auto)], {"x/autocast": [_ok(["bfloat16"])] * 2})
    assert (f.oracle, f.kind, f.error_class, f.against) == ("status-divergence", "backend-bug", "compiler-error", "eager")


def test_regression_a_correct_promotion_is_not_a_finding_a_downcast_is() -> None:
    """Defect 2: the output dtype of a mixed-dtype op was a precfuzz convention; now only a downcast is a finding."""
    x = Input("x", (2, 8), "float32")
    w = Input("w", (4, 8), "bfloat16", role="param")
    g = Graph((x, w), (Node("y", "linear", ("x", "w")),), ("y",))
    raised = [oc.error("run", "RuntimeError", "expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16")]
    promoted = _judge(g, [_subject("x/promotes", g, [_ok(["float32"])])], {"x/promotes": raised})
    assert [f.oracle for f in promoted] == ["model-hazard"]
    downcast = _judge(g, [_subject("x/downcasts", g, [_ok(["bfloat16"])])], {"x/downcasts": raised})
    (f,) = [f for f in downcast if f.kind == "backend-bug"]
    assert (f.oracle, f.ops, f.node) == ("silent-downcast", ["linear"], "y") and "float32 operand" in f.message
    bridged = _judge(g, [_subject("tvm/x", g, [_ok(["bfloat16"])], bridged=frozenset({"y"}))], {"tvm/x": raised})
    assert [f.oracle for f in bridged] == ["model-hazard"]  # our own lowering's cast proves nothing about TVM


def test_regression_autocast_op_lists_that_differ_between_devices_are_not_divergences() -> None:
    """Defect 3: each autocast policy is judged against eager on its own policy program, not against the other."""
    g = example("log_softmax", "float16").graph
    cpu = autocast_graph(g, AUTOCAST_LOWER, CPU_AUTOCAST_FP32)
    xla = autocast_graph(g, AUTOCAST_LOWER, XLA_AUTOCAST_FP32)
    subjects = [_subject("torch/autocast", g, [_ok(["float16"])], cpu), _subject("xla/autocast", g, [_ok(["float32"])], xla)]
    assert _judge(g, subjects, {"torch/autocast": [_ok(["float16"])], "xla/autocast": [_ok(["float32"])]}) == []
    (f,) = _judge(g, subjects[1:], {"xla/autocast": [_ok(["float16"])]})  # eager on XLA's program says float16
    assert (f.oracle, f.dtypes) == ("dtype-divergence", ["float16", "float32"])


def test_documented_relabelling_is_not_a_dtype_divergence() -> None:
    """XLA_USE_BF16 reports a bfloat16 tensor as float32: documented, mapped by the policy, not a finding."""
    g = example("exp", "bfloat16").graph
    s = _subject("xla/legacy", g, [_ok(["float32"])], report={"bfloat16": "float32"})
    assert _judge(g, [s], {"xla/legacy": [_ok(["bfloat16"])]}) == []


def test_unsupported_is_a_coverage_gap_not_a_divergence(seed: Case) -> None:
    g = example("conv3d", "bfloat16").graph
    (f,) = _judge(g, [_subject("x/a", g, [oc.unsupported("compile", "conv3d is not supported for bfloat16")])],
                  {"x/a": [_ok(["bfloat16"])]})
    assert (f.oracle, f.kind, f.ops) == ("coverage", "unsupported", ["conv3d"])


# ---------------------------------------------------------------- numbers: margin, effective precision, zero answers


def _judgement(k: int, ratio: float, nonfinite: int = 0) -> OutputJudgement:
    from oracles.bounds import ErrorStats

    return OutputJudgement(k, "out", "float16", ErrorStats(1e-3, 5.0, ratio, 0, nonfinite))


def test_regression_borderline_ratios_need_a_margin_or_a_second_input_set() -> None:
    """Defect 7: ratios of 1.02x and 1.25x from ordinary rounding are not findings; 2x, non-finite or twice are."""
    g = example("tanh", "float16").graph
    typed = infer(g)
    assert bound_findings("x", g, typed, [_judgement(0, 1.02), _judgement(1, 0.5)]) == []
    assert bound_findings("x", g, typed, [_judgement(0, 1.25)]) == []
    assert len(violates([_judgement(0, MARGIN)])) == 1
    assert len(violates([_judgement(0, 1.1, nonfinite=1)])) == 1
    (f,) = bound_findings("x", g, typed, [_judgement(0, 1.25), _judgement(1, 1.3)])
    assert f.details["violating_sets"] == [0, 1]


def test_regression_effective_precision_needs_evidence_and_names_the_op() -> None:
    """Defect 4: an error of a few fp16 ULP is an error-bound finding on its op, not "carries bfloat16" with op *."""
    rng = np.random.default_rng(0)
    exact = rng.normal(size=256)
    f16 = exact.astype(np.float16).astype(np.float64)
    noisy = f16 * (1 + 4e-3 * rng.uniform(-1, 1, size=256))  # a few fp16 ULP off, on no narrower grid
    assert narrower_format(np.float32(noisy).astype(np.float64), exact, "float16") is None
    bf16 = np.asarray(exact, dtype=np.float64).astype("float32").astype(np.float64)
    import ml_dtypes

    on_bf16 = exact.astype(ml_dtypes.bfloat16).astype(np.float64)
    assert narrower_format(on_bf16, exact, "float32") == "bfloat16"
    assert narrower_format(bf16, exact, "float32") is None
    assert narrower_format(np.resize([-1.4140625, 1.4140625], 256), exact, "float16") is None  # two values: chance


def test_regression_exact_zero_answers_allow_rounding_level_noise() -> None:
    """Defect 5: layer_norm over one element is exactly 0; a kernel's x * rstd - mean * rstd leaves ~1e-5 noise."""
    x = Input("x", (4, 1), "float32", init={"dist": "normal", "std": 3.0, "seed": 1})
    g = Graph((x,), (Node("y", "layer_norm", ("x",), {"normalized_shape": [1]}),), ("y",))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)["y"]
    assert not np.any(exact)
    noise = np.array([[5.7e-5], [-3.1e-5], [1.2e-5], [0.0]])  # what torch's CPU kernel returns on such data
    assert error_stats(noise, exact, ideal_values(g, inputs)["y"], "float32").ratio <= 1.0
    assert error_stats(np.full((4, 1), 0.3), exact, ideal_values(g, inputs)["y"], "float32").ratio > 100  # real error


def test_regression_underflow_class_belongs_to_the_node_not_the_case() -> None:
    """Defect 8: flushing one node's subnormal operand must not relabel an unrelated node's error as underflow."""
    tiny = Input("tiny", (8,), "float32", init={"dist": "constant", "value": 1e-39})  # a float32 subnormal
    big = Input("big", (8,), "float32", init={"dist": "normal", "seed": 2})
    g = Graph((tiny, big), (Node("scaled", "mul", ("tiny", 1e10)), Node("e", "exp", ("big",))), ("scaled", "e"))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)
    observed = {"scaled": np.zeros(8), "e": exact["e"] + 0.01}  # the subnormal flushed to zero; a real 0.01 error
    verdicts = {v.node: v for v in judge_nodes(g, inputs, observed)}
    assert verdicts["scaled"].underflow and verdicts["scaled"].stats.ratio > MARGIN
    assert not verdicts["e"].underflow and verdicts["e"].stats.ratio > MARGIN


def test_regression_a_long_sum_with_a_few_subnormal_terms_is_not_underflow() -> None:
    """An accumulation error in a long float16 sum is the sum's, even when some terms are subnormal."""
    x = Input("x", (4096,), "float16", init={"dist": "loguniform", "lo": -6.0, "hi": 0.0, "seed": 3})
    g = Graph((x,), (Node("y", "cumsum", ("x",), {"dim": -1}),), ("y",))
    inputs = input_values(Case(g), 0)
    assert np.any((inputs["x"] > 0) & (inputs["x"] < 2.0**-14))  # a few float16 subnormals among the terms
    fp16_running = np.cumsum(inputs["x"].astype(np.float16), dtype=np.float16).astype(np.float64)
    (v,) = judge_nodes(g, inputs, {"y": fp16_running})
    assert v.stats.ratio > MARGIN and not v.underflow


# ---------------------------------------------------------------- through real workers

EXECUTORS = ["torch/eager", "torch/autocast", "xla/native", "xla/bf16-model", "xla/autocast", "xla/legacy-bf16",
             "tvm/default", "tvm/decompose"]


@pytest.fixture(scope="module")
def checker():
    with ExecutorPool(EXECUTORS, timeout=300.0) as pool:
        yield Checker(pool)


def test_seed_schedule_upcast_is_one_model_hazard_naming_conv_and_sigma(checker: Checker, seed: Case) -> None:
    result = checker.check(seed)
    assert [f.oracle for f in result.findings] == ["model-hazard"]
    (hazard,) = result.findings
    assert hazard.ops == ["conv3d"] and hazard.details["culprits"] == ["sigma"] and hazard.kind == "model-hazard"
    reactions = hazard.details["reactions"]
    assert reactions["raised"] == ["torch/eager", "xla/native", "xla/bf16-model"]
    assert reactions["bridged"] == ["tvm/default", "tvm/decompose"]
    assert result.row("xla/legacy-bf16")["status"] == "ok"  # the pre-migration mode ran (in bf16, documented)


def test_seed_tvm_layer_norm_is_a_bound_finding_on_layer_norm(checker: Checker, seeds_dir: Path) -> None:
    result = checker.check(load_case(seeds_dir / "tvm-decompose-layernorm-fp16.json"), ["torch/eager", "tvm/default",
                                                                                      "tvm/decompose"])
    (f,) = result.findings
    assert (f.oracle, f.executor, f.ops, f.error_class) == ("error-bound", "tvm/decompose", ["layer_norm"], "bound")
    assert f.ratio > 100


@pytest.mark.parametrize("op,dtype", [("sum", "float16"), ("softmax", "float16"), ("var", "float16")])
def test_tvm_low_precision_accumulation_is_reported_on_its_own_op(checker: Checker, op: str, dtype: str) -> None:
    """TVM reduces fp16/bf16 in fp16/bf16: a long reduction is out of bound, and the finding names the reduction."""
    attrs = {"dim": -1} if op == "softmax" else {"dims": [-1]}
    x = Input("x", (2, 4096), dtype, init={"dist": "uniform", "low": 0.5, "high": 1.5, "seed": 1})
    g = Graph((x,), (Node("h", "mul", ("x", 2.0)), Node("y", op, ("h",), attrs), Node("z", "neg", ("y",))), ("z",))
    result = checker.check(Case(g), ["tvm/default"])
    (f,) = result.findings
    assert (f.oracle, f.ops, f.node) == ("error-bound", [op], "y") and f.ratio >= MARGIN


def test_regression_decompose_for_training_is_judged_with_training_batch_norm(checker: Checker) -> None:
    """Defect 6: DecomposeOpsForTraining computes batch_norm from batch statistics: judged so, no ~1e6 ratios."""
    case = example("batch_norm", "float32")
    result = checker.check(case, ["tvm/decompose", "tvm/default"])
    assert result.findings == []
    policy = checker.pool.executors["tvm/decompose"].policy_graph(case.graph)
    assert policy.node("out").attrs["training"] is True


def test_regression_tvm_training_batch_norm_as_far_off_as_eager_on_its_program_is_no_tvm_bug(checker: Checker) -> None:
    """triage21 b5d7db0caa: TVM's training flow computes a bfloat16 batch_norm from batch statistics, a program eager
    under test never ran (it ran the case's running-statistics one), and was filed as TVM's bug at 25.7x; PyTorch's
    own bfloat16 kernel is exactly as far off on that program. Eager now runs it as a control, as where it is not
    under test."""
    import torch

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-train-bf16-batch-norm-as-eager-triage21.json")
    result = checker.check(case, ["torch/eager", "tvm/train"])
    assert not [f for f in result.findings if f.oracle == "error-bound"], [f.message for f in result.findings]
    assert any("tvm/train: batch_norm1 is as far off as PyTorch eager's own" in n for n in result.notes), result.notes
    policy = checker.pool.executors["tvm/train"].policy_graph(case.graph)
    assert policy.node("batch_norm1").attrs["training"] is True
    values = input_values(case, 0)
    x = torch.tensor(values["x"]).to(torch.bfloat16)
    ones, zeros = torch.ones(9, dtype=torch.bfloat16), torch.zeros(9, dtype=torch.bfloat16)
    got = torch.nn.functional.batch_norm(x, ones.clone(), ones.clone(), ones, zeros, training=True).double().numpy()
    exact = evaluate(policy, rounded_inputs(policy, values), rounded=False)["batch_norm1"]
    assert np.abs(got - exact).max() > 0.1  # eager's own kernel is as far off


def test_regression_a_mixed_dtype_op_off_by_flushed_subnormals_is_no_silent_downcast() -> None:
    """triage23: xla/bf16-model ran a float32 conv3d of 1e-40 inputs with bfloat16 weights (PyTorch raises) and
    returned float32 off by 2e3x the bound; it was filed as "an operand was narrowed inside", but the float32 promotion
    is what XLA computes (2.5e-7 off on normal inputs): the error is its flush of subnormals to zero, said as such."""
    case = load_case(Path(__file__).parent / "fixtures" / "xla-conv3d-mixed-dtype-subnormal-triage23.json")
    with ExecutorPool(["torch/eager", "xla/bf16-model"], timeout=300.0) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/bf16-model"])
    assert not [f for f in result.findings if f.oracle == "silent-downcast"], [f.message for f in result.findings]
    assert any(f.error_class == "underflow" and f.ops == ["conv3d"] for f in result.findings)


def test_regression_mixed_precision_norm_on_xla_is_a_dtype_divergence_on_the_norm(checker: Checker) -> None:
    """bf16 activations with float32 norm parameters: PyTorch's CPU kernel keeps bf16, XLA returns float32."""
    base = example("layer_norm", "bfloat16")
    x = Input("x0", (2, 3, 8), "bfloat16")
    g = recast_inputs(base.graph, "param", "float32")
    g = Graph((x,) + g.inputs, (Node("x", "mul", ("x0", 2.0)),) + g.nodes, g.outputs)
    g = Graph(tuple(i for i in g.inputs if i.name != "x"), g.nodes, g.outputs)
    result = checker.check(Case(g), ["xla/native"])
    (f,) = result.findings
    assert (f.oracle, f.ops, f.node, f.dtypes) == ("dtype-divergence", ["layer_norm"], "out", ["bfloat16", "float32"])


def test_regression_gelu_of_large_negative_float32_is_zero_in_every_kernel() -> None:
    """Triage: 0.5 * x * (1 + erf(x / sqrt 2)) cancels to 0 at x = -6 in float32 on torch, XLA and TVM alike."""
    x = Input("x", (), "float32", init={"dist": "constant", "value": -6.0})
    g = Graph((x,), (Node("y", "gelu", ("x",)),), ("y",))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)["y"]
    assert exact == pytest.approx(-5.92e-9, rel=1e-3)
    assert error_stats(np.zeros(()), exact, ideal_values(g, inputs)["y"], "float32").ratio <= 1.0


def test_regression_a_float32_conv_may_accumulate_one_term_after_another() -> None:
    """Triage: 171 terms of 0.1 summed in float32 one after another are off by 2.9e-5; that is not a bug."""
    x = Input("x", (1, 57, 4, 6), "float32", init={"dist": "constant", "value": 0.1})
    w = Input("w", (1, 57, 3, 1), "float32", "param", init={"dist": "constant", "value": 1.0})
    g = Graph((x, w), (Node("y", "conv2d", ("x", "w")),), ("y",))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)["y"]
    sequential = np.cumsum(np.full(171, np.float32(0.1)), dtype=np.float32)[-1]
    assert abs(float(sequential) - exact.ravel()[0]) > 2e-5
    kernel = np.full(exact.shape, float(sequential))
    assert error_stats(kernel, exact, ideal_values(g, inputs)["y"], "float32").ratio <= 1.0


def test_regression_a_float32_norm_may_form_its_variance_in_one_pass() -> None:
    """Triage (smoke seed 20261130): XLA and TVM instance_norm on float32 data with mean/std ~ 20 were flagged at
    2.5x the bound; both form the variance as E[x^2] - E[x]^2 in float32, a common kernel, so that is not a bug,
    while accumulating that variance in float16 still is."""
    x = Input("x", (2, 3, 64), "float32", init={"dist": "offset", "mean": 0.1, "std": 0.005, "seed": 3})
    g = Graph((x,), (Node("y", "instance_norm", ("x",), {"eps": 1e-5}),), ("y",))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)["y"]
    ideals = ideal_values(g, inputs)["y"]
    assert len(ideals) == 4  # float64, float32, perturbed and float32 with one-pass variances

    def one_pass(v: np.ndarray, acc: type) -> np.ndarray:
        v = v.astype(np.float32)
        mu = np.cumsum(v, axis=-1, dtype=acc)[..., -1:].astype(np.float32) / np.float32(v.shape[-1])
        sq = np.cumsum(v * v, axis=-1, dtype=acc)[..., -1:].astype(np.float32) / np.float32(v.shape[-1])
        return ((v - mu) / np.sqrt(np.maximum(sq - mu * mu, 0) + np.float32(1e-5))).astype(np.float64)

    kernel = one_pass(inputs["x"], np.float32)
    two_pass_only = [i for i in ideals[:3]]
    assert error_stats(kernel, exact, two_pass_only, "float32").ratio > 1.0  # what the old bound said
    assert error_stats(kernel, exact, ideals, "float32").ratio <= 1.0
    assert error_stats(one_pass(inputs["x"], np.float16), exact, ideals, "float32").ratio > 10.0


def test_regression_excess_precision_of_a_fused_bf16_intermediate_is_not_blamed_on_the_next_op() -> None:
    """Triage (smoke seed 20261130): XLA autocast fed softmax the float32 quotient of a bf16 division that the
    program rounds to bf16 (xla_allow_excess_precision); judged on the observed bf16 quotient, softmax was
    blamed at 2390x. Judged fused with its producer computing in float32, it is within bound."""
    x = Input("x", (2, 16), "bfloat16", init={"dist": "uniform", "low": 600.0, "high": 700.0, "seed": 5})
    g = Graph((x,), (Node("d", "div", ("x", 4.47213595499958)), Node("d32", "astype", ("d",), {"dtype": "float32"}),
                     Node("p", "softmax", ("d32",), {"dim": -1})), ("p",))
    inputs = input_values(Case(g), 0)
    xv = rounded_inputs(g, inputs)["x"]
    d_bf16 = evaluate(g, inputs, rounded=True)["d"]  # what a probe observes: the program's bf16 quotient
    kept = (xv.astype(np.float32) / np.float32(4.47213595499958)).astype(np.float64)  # what XLA feeds softmax
    p = np.exp(kept - kept.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32).astype(np.float64)
    observed = {"d": d_bf16, "p": p}
    exact_on_observed = evaluate(Graph((Input("d32", (2, 16), "float32"),), (g.nodes[2],), ("p",)),
                                 {"d32": d_bf16}, rounded=False)["p"]
    assert np.abs(p - exact_on_observed).max() > 1e-2  # the old judgement: far out of bound
    (vd, vp) = judge_nodes(g, inputs, observed)
    assert vp.node == "p" and vp.excess and vp.stats.ratio <= 1.0
    assert not vd.excess and vd.stats.ratio <= 1.0


def test_regression_a_one_pass_variance_that_cancels_the_values_away_is_still_a_bug() -> None:
    """Triage (campaign seed 81): TVM group_norm on float16 data with mean/std ~ 1000 formed its variance in one
    float32 pass and returned -19.7 for -12.4; the one-pass ideal may not excuse an output it destroys."""
    x = Input("x", (1, 4, 64), "float32", init={"dist": "offset", "mean": 100.0, "std": 0.05, "seed": 4})
    g = Graph((x,), (Node("y", "group_norm", ("x",), {"num_groups": 1, "eps": 1e-5}),), ("y",))
    inputs = input_values(Case(g), 0)
    exact = evaluate(g, inputs, rounded=False)["y"]
    v = inputs["x"].astype(np.float32).reshape(1, -1)
    mu = np.cumsum(v, axis=-1, dtype=np.float32)[..., -1:] / np.float32(v.shape[-1])
    sq = np.cumsum(v * v, axis=-1, dtype=np.float32)[..., -1:] / np.float32(v.shape[-1])
    kernel = ((v - mu) / np.sqrt(np.maximum(sq - mu * mu, 0) + np.float32(1e-5))).reshape(exact.shape)
    assert np.sqrt(np.mean((kernel - exact) ** 2)) > 0.05  # the values are gone
    assert error_stats(kernel.astype(np.float64), exact, ideal_values(g, inputs)["y"], "float32").ratio > 10.0


def test_regression_one_lowering_one_bug_record() -> None:
    """Triage (campaign seed 82): torch_xla's unchecked operand dtypes at conv showed as 4 bugs (conv1d x 3 dtype
    pairs, conv2d); one convolution lowering, one record. Model hazards stay per op and dtype pair."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def down(op: str, pair: list[str], executor: str = "xla/native") -> Finding:
        return Finding("silent-downcast", executor, [op], pair + [pair[0]], "downcast", "m")

    keys = {bug_key(down("conv1d", ["float16", "bfloat16"])), bug_key(down("conv1d", ["bfloat16", "float32"])),
            bug_key(down("conv2d", ["float16", "float32"])), bug_key(down("conv3d", ["float16", "bfloat16"]))}
    assert keys == {"backend-bug|torch_xla|*|downcast|mixed|*"}
    # triage7 (seed 83): the same unchecked operand dtypes showed at conv, linear, matmul, layer_norm and
    # group_norm as 5 records: one missing check, one record (the record's ops list says where it shows)
    assert {bug_key(down(op, ["float16", "bfloat16"])) for op in ("linear", "matmul", "layer_norm", "group_norm")} == keys
    assert bug_key(down("conv2d", ["float16", "bfloat16"], "tvm/default")) == "backend-bug|tvm|*|downcast|mixed|*"
    hazard = Finding("model-hazard", "torch/eager", ["conv2d"], ["float32", "bfloat16"], "raised", "m", kind="model-hazard")
    assert bug_key(hazard) == "model-hazard|model|conv2d|hazard|float32>bfloat16|*"


def test_regression_numbers_of_an_op_pytorch_rejects_are_the_missing_dtype_check(checker: Checker) -> None:
    """triage8 sample #13: torch_xla's layer_norm of a bfloat16 x with float16 gamma (PyTorch raises) is off the
    float32 ideal, and was filed as a layer_norm accuracy bug (beside the NaN bug of float16 layer_norm). Its numbers
    show the missing dtype check (a narrower format), so it is keyed with the silent downcasts."""
    from oracles.bugs import bug_key

    case = Case(Graph((Input("x", (1, 884), "bfloat16", init={"dist": "normal", "std": 10.0, "seed": 174621433}),
                       Input("gamma", (1, 884), "float16", "param", init={"dist": "normal", "mean": 1.0, "std": 0.1,
                                                                          "seed": 1256291446})),
                      (Node("ln", "layer_norm", ("x", "gamma"), {"normalized_shape": [1, 884], "eps": 1e-6}),),
                      ("ln",)))
    found = [f for f in checker.check(case, ["torch/eager", "xla/native"]).findings if f.executor == "xla/native"]
    assert found and all(f.kind == "backend-bug" for f in found), [f.signature for f in found]
    assert {bug_key(f) for f in found} == {"backend-bug|torch_xla|*|downcast|mixed|*"}, [f.signature for f in found]


def test_regression_one_cause_in_both_16_bit_dtypes_is_one_record() -> None:
    """Triage (campaign seed 82): TVM's rms_norm over every axis fails to compile in float16 and float32 (two
    records), its LegalizeOps batch_norm returns float32 for float16 and bfloat16 (two records): one each."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    crash = [Finding("status-divergence", "tvm/default", ["rms_norm"], [d], "compiler-error", "m") for d in
             ("float16", "float32")]
    assert len({bug_key(f) for f in crash}) == 1
    dtype = [Finding("dtype-divergence", "tvm/default", ["batch_norm"], [d, "float32"], "dtype", "m") for d in
             ("float16", "bfloat16")]
    assert len({bug_key(f) for f in dtype}) == 1
    coverage = [Finding("coverage", "tvm/default", ["layer_norm"], [d], "unsupported", "m", kind="unsupported")
                for d in ("float16", "bfloat16")]
    assert len({bug_key(f) for f in coverage}) == 2  # what a backend does not support is per dtype


def test_regression_a_frontends_wrong_dtypes_are_one_record() -> None:
    """tvm/frontend campaign: from_exported_program keeps out_dtype float32 at every 16-bit contraction and
    never casts back; that showed as 7 bugs (linear, conv1d/2d/3d, add...). One importer rule, one record."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    keys = {bug_key(Finding("dtype-divergence", "tvm/frontend", [op], ["float16", "float32"], "dtype", "m"), True)
            for op in ("linear", "conv2d", "add")}
    assert keys == {"backend-bug|tvm|*|dtype|float16/bfloat16|frontend"}



def test_regression_frontend_errors_are_keyed_by_op_at_fault_and_message_class() -> None:
    """Issue 26: the frontend's compile errors were one catch-all record of 51 signatures holding at least 4
    different errors. A status divergence is keyed by the op it is pinned on and its normalized message."""
    from oracles.bugs import bug_key
    from oracles.errors import message_key
    from oracles.findings import Finding

    def error(op: str, message: str) -> Finding:
        return Finding("status-divergence", "tvm/frontend", [op], ["float16"], "compiler-error", message,
                       details={"error_key": message_key(message)})

    same = {bug_key(error("add", f"Binary operators must have the same datatype, but got float16 and float32 at {k}"),
                    True) for k in (3, 17)}
    assert len(same) == 1
    assert len({bug_key(error("add", "Binary operators must have the same datatype")),
                bug_key(error("layer_norm", "Binary operators must have the same datatype")),
                bug_key(error("add", "Cannot find the null pointer in AST traversal"))}) == 3


# ---------------------------------------------------------------- issue 20: oracle residuals


def test_regression_gelu_of_large_negative_values_is_judged_at_the_operands_magnitude() -> None:
    """Triage: ULPs counted on an exactly-zero gelu output reported 1.6e40x where the error was ~1.8e-7 * |x| (the
    gate's 1 + erf(x) cancelling): gated activations are judged at their operand's magnitude; 1e-3 * |x| still fails."""
    import numpy as np

    from fuzzer.ir import Graph, Input, Node
    from oracles.nodes import judge_nodes

    x = -np.linspace(20, 40, 16)
    g = Graph((Input("x", (16,), "float32"),), (Node("y", "gelu", ("x",), {}),), ("y",))
    assert judge_nodes(g, {"x": x}, {"y": 1.8e-7 * x})[0].stats.ratio <= 1.0
    assert judge_nodes(g, {"x": x}, {"y": 1e-3 * x})[0].stats.ratio > 100


def test_regression_a_normal_range_error_next_to_flushed_subnormals_is_no_underflow() -> None:
    """Triage: TVM's float16 tanh(1e-4) = 0 (a normal number) was filed as a subnormal limitation because other
    elements of the tensor were subnormal. Flushing explains an error only where it touches the element."""
    import numpy as np

    from fuzzer.dtypes import round_to
    from fuzzer.ir import Graph, Input, Node
    from oracles.nodes import judge_nodes

    x = round_to(np.array([1e-6, 2e-6, 3e-7, 1e-4, 1.2e-4, -1.5e-4, 2e-4, 1.1e-4]), "float16")
    g = Graph((Input("x", (8,), "float16"),), (Node("y", "tanh", ("x",), {}),), ("y",))
    flushed = np.where(np.abs(x) < 2.0**-14, 0.0, round_to(np.tanh(x), "float16"))
    only = judge_nodes(g, {"x": x}, {"y": flushed})[0]
    assert only.stats.ratio > 1 and only.underflow
    bad = flushed.copy()
    bad[3] = 0.0
    both = judge_nodes(g, {"x": x}, {"y": bad})[0]
    assert both.stats.ratio > 1 and not both.underflow


def test_regression_a_group_norm_of_flushed_subnormals_is_flushing_not_an_accuracy_bug() -> None:
    """Triage16 b1ab1c5acd (#12): XLA's bfloat16 group_norm of subnormal x (one element exactly 0) returned zeros,
    exact once x is flushed; the per-element test read the zero element (normalized by its group's mean) as a
    normal-range error. group_norm mixes elements: flushing explains it or not as a whole."""
    from fuzzer.dtypes import round_to
    from fuzzer.ir import Graph, Input, Node
    from oracles.nodes import judge_nodes

    x = round_to(np.random.default_rng(0).normal(0.0, 1e-39, (4, 2, 10)), "bfloat16")
    x[0, 0, 0] = 0.0
    g = Graph((Input("x", x.shape, "bfloat16"),),
              (Node("y", "group_norm", ("x",), {"num_groups": 2, "eps": 1e-5}),), ("y",))
    v = judge_nodes(g, {"x": x}, {"y": np.zeros_like(x)})[0]
    assert v.stats.ratio > 1 and v.underflow
    wrong = judge_nodes(g, {"x": x}, {"y": np.full_like(x, 1e-3)})[0]  # not what flushing gives: an accuracy bug
    assert wrong.stats.ratio > 1 and not wrong.underflow


def test_regression_tvm_var_is_tvms_own_variance_not_an_explicit_16_bit_program() -> None:
    """Triage: a float16 var lowered as mean/subtract/multiply/sum handed TVM an explicit fp16 program whose sum of
    squares overflows on any executor (PyTorch eager running it too): the lowering uses R.op.variance."""
    from fuzzer.executors.tvm_render import render_module
    from fuzzer.ir import Graph, Input, Node

    g = Graph((Input("x", (4, 300), "float16"),), (Node("v", "var", ("x",), {"dims": [-1]}),), ("v",))
    text = render_module(g)
    assert "R.op.variance(" in text and "R.op.sum(" not in text


def test_regression_a_hazard_names_the_first_node_where_eager_raises(checker: Checker) -> None:
    """Triage: 3 of 10 model hazards named a later node, where eager already raises at an earlier one; only the
    first chain break (in graph order, not by name) is a hazard."""
    from fuzzer.ir import Case, Graph, Input, Node

    inputs = (Input("x", (1, 4, 8), "float32"), Input("w", (4, 4, 1), "bfloat16", "param"),
              Input("zz", (6, 8), "bfloat16", "param"))
    nodes = (Node("z_conv", "conv1d", ("x", "w")), Node("a_lin", "linear", ("z_conv", "zz")))
    case = Case(Graph(inputs, nodes, ("a_lin",)))
    hazards = [f for f in checker.check(case, ["torch/eager"]).findings
               if f.kind == "model-hazard" and f.error_class == "raised"]
    assert [f.node for f in hazards] == ["z_conv"]


def test_a_status_divergence_is_pinned_on_the_op_that_raises(checker: Checker) -> None:
    """Issue 20: a compile error was keyed by the graph's op set (TVM rms_norm over every axis: 4 records). The
    checker bisects prefixes of the graph to the first node raising the same error and keys the message class."""
    from oracles.bugs import bug_key

    inputs = (Input("x", (2, 8), "bfloat16"),)
    nodes = (Node("t", "tanh", ("x",)), Node("p", "pow", ("t", 2.0)), Node("s", "sin", ("p",)))
    case = Case(Graph(inputs, nodes, ("s",)))
    (f,) = [f for f in checker.check(case, ["torch/eager", "tvm/default"]).findings if f.executor == "tvm/default"]
    assert (f.oracle, f.ops, f.node) == ("status-divergence", ["pow"], "p")
    assert bug_key(f).startswith("backend-bug|tvm|pow|compiler-error:") and "power only applies to float" in bug_key(f)


def test_timestep_embedding_in_bfloat16_is_a_precision_hazard_and_clean_in_float32(checker: Checker) -> None:
    """Issue 23: t * freqs in bfloat16 at t = 999 destroys the sinusoidal embedding on every backend, eager
    included: a model hazard of class precision; the same block in float32 is clean. It names `t_w`, the bfloat16
    cast of the timesteps (999 -> 1000), where the loss starts (triage17 #22), used by the multiply."""
    def block(dtype: str) -> Case:
        t = Input("t", (4,), "int64", init={"values": [999.0, 998.0, 500.0, 1.0]})
        nodes = (Node("idx", "arange", (), {"start": 0.0, "end": 16.0, "step": 1.0, "dtype": "float32"}),
                 Node("scaled", "mul", ("idx", -0.5756462732485115)), Node("freqs", "exp", ("scaled",)),
                 Node("freqs_w", "astype", ("freqs",), {"dtype": dtype}),
                 Node("t_col", "reshape", ("t",), {"shape": [4, 1]}),
                 Node("t_w", "astype", ("t_col",), {"dtype": dtype}), Node("args", "mul", ("t_w", "freqs_w")),
                 Node("s", "sin", ("args",)), Node("c", "cos", ("args",)), Node("emb", "cat", ("s", "c"), {"dim": -1}))
        return Case(Graph((t,), nodes, ("emb",)))

    found = [f for f in checker.check(block("bfloat16"), ["torch/eager"]).findings if f.error_class == "precision"]
    assert [(f.kind, f.node, f.ops) for f in found] == [("model-hazard", "t_w", ["mul"])]
    assert "the loss starts at the bfloat16 rounding of `t_w` (a cast)" in found[0].message
    assert "float32" in found[0].details["fix"] and found[0].details["loss"] > 0.1
    assert checker.check(block("float32"), ["torch/eager"]).findings == []


def test_regression_an_output_float32_cannot_compute_either_is_no_precision_hazard() -> None:
    """triage8 sample #6: a layer_norm without affine (each row sums to zero) times a constant weight is an exact
    zero; the bfloat16 policy was a precision hazard 'keep it in float32', but float32 misses it by 4e8 relative."""
    from oracles.precision_hazards import judge

    def graph(dtype: str) -> Graph:
        inputs = (Input("x", (4, 16), dtype, init={"dist": "normal", "seed": 1, "std": 3.0}),
                  Input("w", (8, 16), dtype, "param", init={"dist": "constant", "value": 0.1336}))
        return Graph(inputs, (Node("ln", "layer_norm", ("x",), {"normalized_shape": [16], "eps": 1e-5}),
                              Node("y", "linear", ("ln", "w"))), ("y",))

    from fuzzer.ir import Case, input_values

    policy, model = graph("bfloat16"), graph("float32")
    assert judge(policy, model, input_values(Case(policy), 0), input_values(Case(model), 0)) is None


def test_regression_a_model_output_below_float32s_normal_range_is_no_precision_hazard() -> None:
    """Triage16 sample #6 (b0f7dbdfbf): a bfloat16 conv1d + silu of x wholly below float32's smallest normal (std
    1e-39) was a precision hazard 'keep silu1 in float32'; the float32 model's answer is itself subnormal, eager
    flushes it, and no format keeps relative precision there. A cancellation at normal magnitudes still is one."""
    from fuzzer.ir import Case, input_values
    from oracles import precision_hazards

    def lost(dtype_nodes: tuple[Node, ...], x: dict, w: bool) -> object:
        def graph(dtype: str) -> Graph:
            inputs = (Input("x", (1, 8, 16), dtype, init=x),) + (
                (Input("w", (4, 8, 3), dtype, "param", init={"dist": "uniform", "low": -0.07, "high": 0.07,
                                                             "seed": 5}),) if w else ())
            return Graph(inputs, dtype_nodes, (dtype_nodes[-1].id,))
        policy, model = graph("bfloat16"), graph("float32")
        return precision_hazards.judge(policy, model, input_values(Case(policy), 0), input_values(Case(model), 0))

    conv = (Node("conv1", "conv1d", ("x", "w"), {"padding": 1}), Node("silu1", "silu", ("conv1",)))
    tiny = {"dist": "normal", "seed": 7, "std": 1e-39}
    assert lost(conv, tiny, True) is None
    cancel = (Node("y", "add", ("x", 1.0)), Node("z", "sub", ("y", 1.0)))
    assert lost(cancel, {"dist": "normal", "seed": 7, "std": 1e-2}, False) is not None


def test_regression_a_precision_hazard_names_the_input_where_the_loss_starts_not_the_node_carrying_it() -> None:
    """Triage17 sample #22 (a964cfb769): under autocast-bf16 a float16 x of -500 +- 0.1 (spacing 0.25) loses the
    layer_norm's answer on its own, before the bfloat16 conv3d named as the culprit; the hazard named conv1 and a fix
    that keeps x float16. It names x, says what x alone loses, and the fix passes x as float32 too."""
    from fuzzer.ir import Case, input_values
    from oracles.precision_hazards import finding, judge
    from fuzzer.executors.torch_exec import AUTOCAST_BF16

    def graph(x_dtype: str, compute: str) -> Graph:
        inputs = (Input("x", (4, 16), x_dtype, init={"dist": "offset", "mean": -500.0, "std": 0.1, "seed": 3}),)
        return Graph(inputs, (Node("xb", "astype", ("x",), {"dtype": compute}),
                              Node("z", "layer_norm", ("xb",), {"normalized_shape": [16], "eps": 1e-5})), ("z",))

    policy, model = graph("float16", "bfloat16"), graph("float32", "float32")
    lost = judge(policy, model, input_values(Case(policy), 0), input_values(Case(model), 0))
    assert lost is not None and lost.culprit == "xb" and lost.origin == "x" and lost.origin_loss > 0.5
    f = finding("torch/autocast", AUTOCAST_BF16, policy, lost, 0)
    assert f.node == "x" and f.ops == ["layer_norm"]  # x's first use past the policy's cast
    assert "the loss starts at the float16 rounding of input `x`" in f.message
    assert f.details["fix"].startswith("pass `x` as float32, and compute `xb`")


def test_regression_an_error_cpu_autocast_raises_too_is_pytorchs_bug_not_torch_xlas() -> None:
    """triage8 b71511808d (a false alarm): torch_xla autocast's cat of float8 raised "Unexpected floating ScalarType
    in at::autocast::prioritize", filed against torch_xla; torch.autocast("cpu") raises the same (PyTorch's autocast,
    pytorch#132715). With torch/autocast raising it in the same check, both findings are the PyTorch record."""
    from oracles.bugs import case_keys
    from oracles.findings import Finding

    def raised(executor: str) -> Finding:
        return Finding("status-divergence", executor, ["cat"], ["float8_e4m3fn"], "runtime-error",
                       "Unexpected floating ScalarType in at::autocast::prioritize",
                       details={"error_key": "unexpected floating scalartype in at::autocast::prioritize"})

    both = case_keys([raised("xla/autocast"), raised("torch/autocast")], ["xla/autocast", "torch/autocast"])
    assert len(set(both.values())) == 1 and next(iter(both.values())).startswith("backend-bug|torch|cat|")
    alone = case_keys([raised("xla/autocast")], ["xla/autocast"])
    assert next(iter(alone.values())).startswith("backend-bug|torch_xla|cat|")


def test_regression_a_backend_as_far_off_as_pytorch_eager_is_pytorchs_finding() -> None:
    """triage8 b81f59e425 (a false alarm): TVM's bfloat16 batch_norm after DecomposeOpsForTraining was filed as 17.9x
    the bound, and PyTorch eager's CPU bf16 batch_norm was as far off on the same inputs (its own record)."""
    from oracles.findings import Finding
    from oracles.localize import as_inaccurate_as_eager

    def bound(executor: str, ratio: float, node: str = "bn") -> Finding:
        return Finding("error-bound", executor, ["batch_norm"], ["bfloat16->bfloat16"], "bound", "m", ratio=ratio,
                       node=node)

    keys = {"torch/eager": "declared", "tvm/decompose": "declared", "xla/autocast": "autocast"}
    notes: list[str] = []
    kept = as_inaccurate_as_eager([bound("torch/eager", 17.0), bound("tvm/decompose", 17.9),
                                   bound("xla/autocast", 17.9)], keys, "torch/eager", notes)
    assert [f.executor for f in kept] == ["torch/eager", "xla/autocast"] and "as far off as PyTorch" in notes[0]
    worse = as_inaccurate_as_eager([bound("torch/eager", 2.0), bound("tvm/decompose", 90.0),
                                    bound("tvm/decompose", 30.0, "other")], keys, "torch/eager", [])
    assert [f.ratio for f in worse] == [2.0, 90.0, 30.0]  # much worse than eager, or another node: TVM's own


def test_regression_a_culprit_pass_that_is_a_pipeline_is_that_pipelines_record() -> None:
    """triage9 b81f59e425 / bebddeb315: the same batch_norm case after DecomposeOpsForTraining was two records, one
    from tvm/decompose and one from a tvm/passes sequence whose culprit pass was DecomposeOpsForTraining."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def found(executor: str, dtype: str = "float32", **details) -> Finding:
        return Finding("error-bound", executor, ["batch_norm"], [f"{dtype}->{dtype}"], "bound", "m", details=details)

    pipeline = bug_key(found("tvm/decompose"), pipeline_specific=True)
    assert pipeline.endswith("|decompose")
    assert bug_key(found("tvm/passes", culprit_pass="DecomposeOpsForTraining"), pipeline_specific=True) == pipeline
    assert bug_key(found("tvm/passes", culprit_pass="FuseOps"), pipeline_specific=True).endswith("|pass:FuseOps")
    # in float16 the pass's R.mean/R.variance sum in float16: TVM's 16-bit sums, whichever executor shows it
    half = {bug_key(found("tvm/decompose", "float16"), pipeline_specific=True),
            bug_key(found("tvm/passes", "float16", culprit_pass="DecomposeOpsForTraining"), pipeline_specific=True)}
    assert half == {"backend-bug|tvm|16-bit-sum|accuracy|float16/bfloat16|*"}


def test_regression_16_bit_accumulation_in_sums_means_variances_and_pools_is_one_record_per_backend() -> None:
    """triage8: torch_xla's reduce with a 16-bit accumulator showed as sum, var and two adaptive_avg_pool records,
    TVM's 16-bit topi sum as sum, var, two pools (and cumsum in the smoke run): one cause each, by both triagers."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def acc(executor: str, op: str, dtype: str = "float16", cls: str = "bound") -> Finding:
        return Finding("error-bound", executor, [op], [f"{dtype}->{dtype}"], cls, "m")

    ops = ("sum", "mean", "var", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "cumsum")
    assert {bug_key(acc("xla/native", op)) for op in ops} == {"backend-bug|torch_xla|16-bit-sum|accuracy|float16/bfloat16|*"}
    assert {bug_key(acc("tvm/default", op, "bfloat16", "nonfinite")) for op in ops} == \
        {"backend-bug|tvm|16-bit-sum|accuracy|float16/bfloat16|*"}
    assert bug_key(acc("tvm/default", "var", "float32")) == "backend-bug|tvm|var|accuracy|float32|*"  # one-pass, not this
    assert bug_key(acc("tvm/default", "layer_norm")) == "backend-bug|tvm|layer_norm|accuracy|float16/bfloat16|*"


def test_regression_torch_xla_layer_group_and_instance_norm_are_one_batch_norm_training_record() -> None:
    """triage11: torch_xla's one-pass float16 variance in HLO batch-norm-training showed as three records (layer_norm,
    group_norm, instance_norm) and its float32 affine promotion as two (layer_norm, group_norm): one cause each, as the
    triager found. TVM lowers each norm on its own: its layer_norm's record stays apart, while its group_norm and
    instance_norm share topi's one-pass variance (triage25: rule tvm-one-pass-variance)."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def nonfinite(executor: str, op: str) -> Finding:
        return Finding("error-bound", executor, [op], ["float16->float16"], "nonfinite", "m")

    def dtype(executor: str, op: str) -> Finding:
        return Finding("dtype-divergence", executor, [op], ["bfloat16,float32->float32"], "dtype", "m")

    norms = ("layer_norm", "group_norm", "instance_norm")
    assert {bug_key(nonfinite("xla/native", op)) for op in norms} == \
        {"backend-bug|torch_xla|batch-norm-training|accuracy|*|*"}
    assert len({bug_key(dtype("xla/autocast", op)) for op in norms}) == 1
    assert len({bug_key(nonfinite("tvm/default", op)) for op in norms}) == 2
    assert bug_key(nonfinite("xla/native", "rms_norm")).split("|")[2] == "rms_norm"  # elementwise HLO, not this


def test_regression_a_frontend_dtype_finding_tvm_default_shows_too_is_that_lowerings_record() -> None:
    """triage13: tvm/frontend's float16 batch_norm returning float32, which tvm/default shows on the imported program
    too (ablation), was filed as the importer's `*` dtype record beside tvm/default's own batch_norm record."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def dtype(executor: str) -> Finding:
        return Finding("dtype-divergence", executor, ["batch_norm"], ["float16", "float32"], "dtype", "m")

    assert bug_key(dtype("tvm/frontend"), False) == bug_key(dtype("tvm/default")) == \
        "backend-bug|tvm|batch_norm|dtype|float16/bfloat16|*"
    assert bug_key(dtype("tvm/frontend"), True) == "backend-bug|tvm|*|dtype|float16/bfloat16|frontend"


def test_regression_a_nonfinite_finding_is_blamed_on_the_node_that_makes_the_nonfinite_values() -> None:
    """triage12 b0239f15cc: XLA fused a bf16 conv and its float32 cast (one bf16 rounding skipped: 2097 for 2096, the
    exact 2101), then its float32 layer_norm gave NaN on the constant rows; the NaN was filed against the cast, the
    first node out of bound. For a non-finite finding the node making non-finite values of finite operands leads."""
    from oracles.bounds import ErrorStats
    from oracles.error_bounds import at_fault

    stats = [("conv1", ErrorStats(0.1, 0.1, 0.1, 0, 0)), ("astype1", ErrorStats(1.0, 4096.0, 541.0, 3, 0)),
             ("layer_norm1", ErrorStats(float("inf"), float("inf"), float("inf"), 0, 150))]
    assert at_fault(stats, nonfinite=True) == "layer_norm1"
    assert at_fault(stats) == "astype1"  # a finite finding: the first node out of bound
    assert at_fault(stats[:2], nonfinite=True) == "astype1"  # no node makes them on its own: as before


def test_regression_float16_values_with_few_bits_are_no_evidence_of_bfloat16() -> None:
    """triage12 bf6fef3f80: a float16 conv of tiny values "computes in bfloat16" because every output lay on the
    bfloat16 grid; float16 subnormals have at most 10 bits, and the exact answer held in float16 lies on that grid
    too. A float32 output rounded to bfloat16 still is."""
    import numpy as np

    from fuzzer.dtypes import round_to
    from oracles.precision import narrower_format

    rng = np.random.default_rng(0)
    exact = rng.uniform(1e-7, 3e-6, 64)  # float16 subnormals: 1 to 6 significant bits
    assert narrower_format(round_to(exact, "float16"), exact, "float16") is None
    wide = rng.normal(size=64)
    assert narrower_format(round_to(wide, "bfloat16"), wide, "float32") == "bfloat16"


def test_regression_mixed_float16_bfloat16_elementwise_ops_are_one_promotion_record() -> None:
    """triage11 b4365aa9ef (div) and triage12 b997d25324 (add): torch_xla converts one 16-bit operand of a mixed
    float16/bfloat16 op into the other before promoting, at add, sub, mul and div alike: one record."""
    from oracles.bugs import bug_key
    from oracles.findings import Finding

    def mixed(op: str, dtypes: str = "bfloat16,float16->float32") -> Finding:
        return Finding("error-bound", "xla/native", [op], [dtypes], "bound", "m")

    assert {bug_key(mixed(op)) for op in ("add", "sub", "mul", "div")} == \
        {"backend-bug|torch_xla|mixed-16-bit|accuracy|float16/bfloat16|*"}
    assert bug_key(mixed("add", "float16,float16->float16")).split("|")[2] == "add"  # not mixed
    assert bug_key(mixed("matmul")).split("|")[2] == "matmul"  # not elementwise


@pytest.mark.slow
def test_the_norms_keyed_as_batch_norm_training_lower_to_it_on_torch_xla() -> None:
    """The xla-batch-norm-training tag, checked on the pinned torch_xla: each tagged op's HLO holds batch-norm-training."""
    import subprocess
    import sys

    from fuzzer.ops import OPS, tagged

    script = ("import os, sys; os.environ['PJRT_DEVICE'] = 'CPU'\n"
              "import torch, torch_xla, torch.nn.functional as F\n"
              "x = torch.randn(2, 4, 6).to(torch_xla.device())\n"
              "calls = {'layer_norm': lambda: F.layer_norm(x, (6,)), 'group_norm': lambda: F.group_norm(x, 2), "
              "'instance_norm': lambda: F.instance_norm(x)}\n"
              "for op in sys.argv[1:]:\n"
              "    print(op, 'batch-norm-training' in torch_xla._XLAC._get_xla_tensors_hlo([calls[op]()]))\n")
    ops = sorted(tagged(OPS, "xla-batch-norm-training"))
    assert ops == ["group_norm", "instance_norm", "layer_norm"]
    out = subprocess.run([sys.executable, "-c", script, *ops], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [w for op in ops for w in (op, "True")], out.stdout


def test_regression_the_checker_asks_cpu_autocast_before_blaming_torch_xla_autocast(checker: Checker) -> None:
    """triage11 b71511808d: where the schedule had not run torch/autocast on the case, torch_xla autocast's cat of
    float16 ("Unexpected floating ScalarType in at::autocast::prioritize") was filed against torch_xla again. The
    checker runs torch.autocast("cpu") on the graph itself, and the finding keys to PyTorch's record."""
    from oracles.bugs import case_keys

    xs = (Input("x", (2, 3), "float16"), Input("y", (2, 3), "float16"))
    case = Case(Graph(xs, (Node("c", "cat", ("x", "y"), {"dim": 0}),), ("c",)))
    found = [f for f in checker.check(case, ["torch/eager", "xla/autocast"]).findings if f.executor == "xla/autocast"]
    assert found and all(f.details.get("cpu_autocast_raises") for f in found), [f.signature for f in found]
    assert {k.split("|")[1] for k in case_keys(found, ["torch/eager", "xla/autocast"]).values()} == {"torch"}


def test_regression_a_torch_xla_autocast_error_cpu_autocast_shares_says_so_when_both_ran(checker: Checker) -> None:
    """triage18 sample #12: torch/autocast ran on the case too, so the finding keyed to PyTorch's record, but its own
    message said "PyTorch eager on the CPU runs the same program (autocast-bf16)" and its title blamed torch_xla. The
    finding now says that torch.autocast on the CPU raises the same error, and its title names PyTorch."""
    from oracles.bugs import title

    xs = (Input("x", (2, 3), "float16"), Input("y", (2, 3), "float16"))
    case = Case(Graph(xs, (Node("c", "cat", ("x", "y"), {"dim": 0}),), ("c",)))
    result = checker.check(case, ["torch/eager", "torch/autocast", "xla/autocast"])
    found = [f for f in result.findings if f.executor == "xla/autocast"]
    assert found and all(f.details.get("cpu_autocast_raises") for f in found), [f.signature for f in found]
    assert all("torch.autocast on the CPU raises the same error" in f.message for f in found)
    assert all(title(f).startswith("[PyTorch] cat raises under autocast") for f in found)
    cpu = [f for f in result.findings if f.executor == "torch/autocast"]  # sample29 #4: "the same program
    # (autocast-bf16)" read as eager under autocast, which is what raises
    assert cpu and all("runs the same program (what torch.autocast(dtype=torch.bfloat16) computes, its casts written "
                       "out)" in f.message for f in cpu), [f.message for f in cpu]


def test_a_variant_finding_its_base_shows_too_is_the_bases_bug() -> None:
    """Issue 26: all 4 tvm/mixed-precision records were equally wrong without ToMixedPrecision. The checker runs the
    variant's program on its base (Checker._ablate); where the base shows the cause, the key drops the variant."""
    from oracles.bugs import case_keys
    from oracles.findings import Finding

    def found(specific: bool) -> Finding:
        return Finding("error-bound", "tvm/mixed-precision", ["mean"], ["float16->float16"], "bound", "m",
                       details={"variant_specific": specific})

    base = Finding("error-bound", "tvm/default", ["mean"], ["float16->float16"], "bound", "m")
    shared = case_keys([found(False)], ["tvm/mixed-precision"])
    assert set(shared.values()) == set(case_keys([base], ["tvm/default"]).values())
    own = case_keys([found(True)], ["tvm/mixed-precision"])
    assert list(own.values())[0].endswith("|mixed-precision")


def test_regression_flushing_check_of_a_node_whose_operands_do_not_broadcast_to_its_result() -> None:
    """Self-found: the elementwise branch of flushing_explains broadcast every operand to the result's shape and
    raised (an internal error) for a matmul whose operands do not broadcast to it."""
    import numpy as np

    from oracles.nodes import flushing_explains

    a = np.full((1, 2, 8, 12), 1e-6)
    b = np.full((1, 1, 12, 3), 1e-6)
    g = Graph((Input("a", a.shape, "float16"), Input("b", b.shape, "float16")), (Node("y", "matmul", ("a", "b")),), ("y",))
    assert flushing_explains(g, {"a": a, "b": b}, np.zeros((1, 2, 8, 3)), "float16") in (True, False)


def test_regression_an_attention_break_is_traced_to_the_wide_operand_not_a_literal() -> None:
    """Zoo (Llama under torch_xla autocast): the hazard at scaled_dot_product_attention named the literal `0` of a
    position `arange + 0` as the culprit and asked for a cast to the int64 arange's dtype. The trace follows the
    query/key of the winning dtype, and a literal never decides a tie."""
    from fuzzer.analysis import break_trace

    inputs = (Input("q", (1, 2, 4, 8), "bfloat16"), Input("k", (1, 2, 4, 8), "bfloat16"),
              Input("v", (1, 2, 4, 8), "bfloat16"), Input("table", (4, 8), "float32"))
    nodes = (Node("pos", "arange", (), {"start": 0, "end": 4, "step": 1, "dtype": "int64"}),
             Node("shifted", "add", ("pos", 0)), Node("posf", "astype", ("shifted",), {"dtype": "float32"}),
             Node("cos", "mul", ("table", 2.0)), Node("q_rot", "mul", ("q", "cos")),
             Node("attn", "scaled_dot_product_attention", ("q_rot", "k", "v")))
    g = Graph(inputs, nodes, ("attn",))
    trace = break_trace(g, infer(g), "attn")
    assert trace is not None and "0" not in trace.culprits and "table" in trace.culprits


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_semantics")


def test_regression_pytorch_under_test_is_never_excused_by_the_semantic_oracles_own_run() -> None:
    """This stop's shadow weighing (eager not under test) dropped torch/autocast's bf16 conv3d bug as "as far off as
    PyTorch eager's own": it is PyTorch's own run; only other backends are excused by it."""
    from oracles.findings import Finding
    from oracles.localize import as_inaccurate_as_eager

    mine = Finding("error-bound", "torch/autocast", ["conv3d"], ["bfloat16"], "bound", "m", ratio=40.0, node="conv1")
    tvm = Finding("error-bound", "tvm/default", ["conv3d"], ["bfloat16"], "bound", "m", ratio=40.0, node="conv1")
    eager = Finding("error-bound", "torch/eager", ["conv3d"], ["bfloat16"], "bound", "m", ratio=40.0, node="conv1")
    keys = {"torch/autocast": "p", "tvm/default": "p"}
    kept = as_inaccurate_as_eager([mine, tvm], keys, "torch/eager", [], {"p": [eager]})
    assert kept == [mine]


def test_regression_subnormal_layer_norm_input_within_what_a_backward_stable_fp32_kernel_loses() -> None:
    """triage14 b62fbe4b9c: float32 layer_norm of N(0, 1e-40) rows (subnormal) was "2.16x less accurate" in PyTorch:
    its mean is off by 0.87 units of 2**-149, which rstd = 1/sqrt(eps) = 316 makes 276 ULP of the output. Among
    subnormals the spacing is absolute: the perturbed ideal now feels it (a unit of 2**-149 per non-zero value)."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "torch-layer-norm-subnormal-b62fbe4b9c.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not result.findings, [f.message for f in result.findings]


def test_regression_a_contraction_some_fp32_order_overflows_is_not_judged_finite() -> None:
    """triage14 b7246b2b36: bfloat16 conv1d of 3e38 data (5 channels, weights +-0.25) is -inf in PyTorch: oneDNN adds
    kernel positions first and passes float32's range; the channel-first float32 ideal stayed finite. Where the
    terms' absolute sum passes float32's range, some order overflows: no fp32 kernel owes a finite answer there."""

    from fuzzer.interpret import order_overflows
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "torch-conv1d-order-overflow-b7246b2b36.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not result.findings, [f.message for f in result.findings]
    g = Graph((Input("x", (1, 4), "float32"), Input("w", (2, 4), "float32")), (Node("y", "linear", ("x", "w")),), ("y",))
    big = {"x": np.full((1, 4), 3e38), "w": np.array([[0.5, -0.5, 0.5, -0.5], [1e-3] * 4])}
    assert order_overflows(g, {**big, "y": big["x"] @ big["w"].T}) == {"y"}  # exact answer 0 and 1.2e36: finite
    small = {"x": np.full((1, 4), 3e37), "w": big["w"]}
    assert order_overflows(g, {**small, "y": small["x"] @ small["w"].T}) == set()


def test_regression_a_precision_hazard_is_named_where_the_rounding_is_made_not_at_a_cat_carrying_it() -> None:
    """triage14 3aba8c8efd: a float16 RoPE table (positions near 4057) lost 0.21 of q_rot; the hazard named `emb`, a
    cat of `angles` with itself, which rounds nothing. Layout ops move rounded values: the rounding is `angles`'. And
    the loss starts before it (triage17 #22): the float16 positions `pos_f` (4057 -> 4056) lose the answer alone."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "rope-positions-float16-3aba8c8efd.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    (f,) = [f for f in result.findings if f.error_class == "precision"]
    assert (f.kind, f.node, f.ops) == ("model-hazard", "pos_f", ["mul"]), f.message
    assert "`angles` (mul) carries it" in f.message and "compute `emb` (cat)" in f.details["fix"]


def test_regression_a_title_says_the_repros_ratio_and_where_inf_nan_was_seen() -> None:
    """triage15 ba0d982096: "returns inf/nan ... (inputs of 27 values)" over a repro of 18 values whose output is
    finite (1.7 off, the one-pass variance): the title leads with what the repro shows and says where inf/nan was."""
    from oracles.bugs import title
    from oracles.findings import Finding

    f = Finding("error-bound", "tvm/default", ["group_norm"], ["float32->float32"], "bound", "m", ratio=240.0,
                details={"worst_nonfinite": 27})
    text = title(f, ["tvm/default"])
    assert "240x less accurate" in text and "inf/nan on some inputs of 27 values" in text, text


def test_regression_a_producer_right_alone_but_wrong_fused_into_its_consumer_is_titled_as_the_fusion() -> None:
    """triage29 b0b2d8eefd: XLA:CPU contracts a mul into the softmax after it (an FMA: the subtract sees the exact
    product, max the rounded one), NaN at logits of -4.8e18; the mul alone is right, the title said "mul returns
    inf/nan". The title names the pair."""
    from oracles.bugs import title
    from oracles.findings import Finding

    f = Finding("error-bound", "xla/autocast", ["mul"], ["float32,bfloat16->float32"], "nonfinite", "m", ratio=None,
                details={"fused_into": "softmax1", "consumer_op": "softmax"})
    text = title(f, ["xla/autocast"])
    assert "mul fused into the softmax after it returns inf/nan" in text, text


def test_regression_a_kernel_that_flushes_subnormals_is_a_coverage_note_not_an_accuracy_bug() -> None:
    """triage16 b65c40d3ea: PyTorch's oneDNN bfloat16 gelu returns 0 for 3e-39 (it flushes subnormal inputs and
    results; an elementwise multiply keeps them, so asking a multiply whether the backend flushes said no, and the
    gelu was filed "3x less accurate"). Lifted to twice the smallest normal it is exact: flushing, a coverage note."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "torch-gelu-bf16-subnormal-flushed-b65c40d3ea.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not [f for f in result.findings if f.kind == "backend-bug"], [f.message for f in result.findings]
    assert all(f.error_class == "underflow" and f.kind == "unsupported" for f in result.findings)


def test_regression_a_scaled_mm_whose_scales_one_after_the_other_overflow_is_not_judged_finite() -> None:
    """triage16 b150d2acc4: PyTorch's _scaled_mm with scale_a 2e36 and scale_b 0 returns NaN: oneDNN applies the
    scales one after the other, (acc * 2e36) is inf in float32, times 0 is NaN; the ideal's acc * (sa * sb) is -0.
    Both orders are legitimate fp32: where one scale alone takes the sum past float32's range, nothing is owed."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "torch-scaled-mm-scale-order-b150d2acc4.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not [f for f in result.findings if f.kind == "backend-bug"], [f.message for f in result.findings]


def test_regression_a_contraction_among_subnormals_stays_a_flushing_note() -> None:
    """Self-found (the nightly smoke after triage16's fix): oneDNN's bf16 conv1d of subnormal activations, lifted
    just above the subnormal range, still flushes its products (weights below 1 times the smallest normal), so the
    lifted run failed and the conv was filed "3.33x less accurate". A contraction is not lifted: flushing stays."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "torch-conv1d-bf16-subnormal-products-smoke.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not [f for f in result.findings if f.kind == "backend-bug"], [f.message for f in result.findings]


@pytest.mark.parametrize("sources, says", [([], "promoted by an upstream tensor"), (["astype node"], "promoted by an astype node"),
                                           (["float32 tensor [1]"], "promoted by a float32 tensor [1]")])
def test_regression_a_model_hazards_title_reads_as_english(sources: list[str], says: str) -> None:
    """triage18's titles said "promoted by a an upstream tensor" and "promoted by a astype node"."""
    from oracles.bugs import title
    from oracles.findings import Finding

    f = Finding("model-hazard", "xla/autocast", ["linear"], ["float16", "float32"], "raised", "", kind="model-hazard",
                details={"sources": sources, "policy": "autocast"})
    assert says in title(f) and " a an " not in title(f)


def test_regression_a_norm_that_is_exactly_0_is_judged_at_the_magnitudes_its_kernel_passes_through(
        checker: Checker) -> None:
    """issue 33: a float16 group_norm of one-element groups is exactly 0 everywhere; PyTorch's scale-and-shift kernel
    (weight folded into the scale) returns an ULP of float32 at |x| * rstd * |w| (0.0039 at 47000 here), on its fp16,
    bf16 and fp32 paths alike, and was filed as PyTorch's bug. Judged at that magnitude it is within its bound, and
    a result off by far more than such an ULP still is not."""
    import torch

    case = load_case(Path(__file__).parent / "fixtures" / "torch-group-norm-one-element-groups-issue33.json")
    result = checker.check(case, ["torch/eager"])
    assert result.findings == [] and not result.notes, [f.message for f in result.findings] + result.notes
    values = rounded_inputs(case.graph, input_values(case, 0))
    node = case.graph.nodes[0]
    exact = evaluate(case.graph, values, rounded=False)["y"]
    assert not exact.any()
    terms = scale_shift_magnitude("group_norm", [values["x"], values["w"], values["b"]], node.attrs)
    args = [torch.tensor(values[k]) for k in ("x", "w", "b")]
    for dtype in (torch.float16, torch.bfloat16, torch.float32):  # every float32 kernel PyTorch has makes the same
        x, w, b = (a.to(dtype) for a in args)
        got = torch.nn.functional.group_norm(x, 4, w, b, eps=0.1).double().numpy()
        assert np.all(np.abs(got) <= 2.0 * 2.0 ** (np.floor(np.log2(terms)) - 23)), (dtype, got)
    floor = passed_through(node, values, "float16")
    ideal = ideal_values(case.graph, values)["y"]
    (torch_out,) = result.outcomes["torch/eager"][0].outputs
    assert error_stats(torch_out, exact, ideal, "float16").ratio > MARGIN  # what the result's own scale said
    assert error_stats(torch_out, exact, ideal, "float16", floor=floor).ratio <= 1.0
    assert error_stats(torch_out + 0.05, exact, ideal, "float16", floor=floor).ratio > 10 * MARGIN


def test_regression_an_overflow_of_the_one_pass_variance_is_no_backend_bug(checker: Checker) -> None:
    """issue 33: a bfloat16 layer_norm of a constant row near 2e37 (eps 1) is NaN in PyTorch's CPU kernels (its bf16
    and fp32 paths) and in torch_xla: E[x^2] passes float32's range, as the one-pass float32 ideal's does. The exact
    answer and the two-pass ideal are finite, and the NaN was filed as PyTorch's bug; where a common float32 form
    overflows, no float32 kernel owes a finite answer (as for a contraction's summation orders), so it is not
    judged there. A row in range stays judged."""
    import torch

    case = load_case(Path(__file__).parent / "fixtures" / "torch-layer-norm-bf16-row-near-2e37-issue33.json")
    x = torch.tensor(input_values(case, 0)["x"])
    for dtype in (torch.bfloat16, torch.float32):
        assert torch.nn.functional.layer_norm(x.to(dtype), (8,), eps=1.0)[0].isnan().all()
    result = checker.check(case, ["torch/eager"])
    assert result.findings == [], [f.message for f in result.findings]
    values = rounded_inputs(case.graph, input_values(case, 0))
    assert all(np.isnan(i).all() for i in ideal_values(case.graph, values)["y"])
    assert np.isfinite(evaluate(case.graph, values, rounded=False)["y"]).all()
    in_range = {**values, "x": values["x"][1:]}  # the row of 1..8 alone: judged as before
    g = Graph(tuple(replace(i, shape=(1, 8), init={"values": [[0.0] * 8]}) if i.name == "x" else i
                    for i in case.graph.inputs), case.graph.nodes, case.graph.outputs)
    assert all(np.isfinite(i).all() for i in ideal_values(g, in_range)["y"])


def _lanes_dot(x: np.ndarray, w: np.ndarray, lanes: int, acc: Any = np.float32) -> np.ndarray:
    """x @ w.T as a SIMD kernel sums it: `lanes` partial sums, each one term after another in `acc`, then added."""
    out = []
    for row in w:
        parts = [acc(0.0)] * lanes
        for i, p in enumerate(np.float32(x) * np.float32(row)):
            parts[i % lanes] = acc(np.float32(parts[i % lanes]) + np.float32(acc(p)))
        total = acc(0.0)
        for part in parts:
            total = acc(np.float32(total) + np.float32(part))
        out.append(float(total))
    return np.asarray(out)


def test_regression_a_float32_dot_product_whose_terms_cancel_is_judged_at_sqrt_k_times_its_term_sum(
        checker: Checker) -> None:
    """triage21 (ba9d9ac554): a float32 linear of 1024 nonnegative inputs against alternating +-1 weights was filed as
    PyTorch's bug (4.5x): the sequential ideal's partial sums stay small, while each lane of a vectorized kernel sums
    one sign only, so a right kernel loses ~4 u sum|x w|. A contraction is now judged at sqrt(K) ULPs of float32 at
    sum|x w| (the probabilistic bound of any summation order): a 16-lane float32 sum passes, and one accumulating in
    bfloat16 stays far out of bound."""
    import ml_dtypes

    case = load_case(Path(__file__).parent / "fixtures" / "torch-linear-fp32-cancelling-dot-triage21.json")
    result = checker.check(case, ["torch/eager"])
    assert result.findings == [], [f.message for f in result.findings]
    values = rounded_inputs(case.graph, input_values(case, 0))
    x, w, b = (values[k] for k in ("flat", "w", "bias"))
    node = case.graph.nodes[0]
    lanes = _lanes_dot(x, w, 16) + b
    (verdict,) = judge_nodes(case.graph, input_values(case, 0), {node.id: lanes.astype(np.float32)})
    assert verdict.stats.ratio <= 1.0, verdict.stats
    bf16 = _lanes_dot(x, w, 1, acc=lambda v: np.float32(ml_dtypes.bfloat16(v))) + b
    (verdict,) = judge_nodes(case.graph, input_values(case, 0), {node.id: bf16.astype(np.float32)})
    assert verdict.stats.ratio > 10 * MARGIN, verdict.stats


def test_regression_the_error_scale_of_a_node_without_operands_is_no_internal_error() -> None:
    """triage21: localizing a bound finding in a graph with a `full` node (no operands) raised IndexError in the
    norms' scale-and-shift floor, which read the first operand before asking whether the op centers one."""
    from fuzzer.ir import Node
    from oracles.nodes import passed_through

    node = Node("c", "full", (), {"shape": [2, 3], "value": 1.5, "dtype": "float16"})
    assert passed_through(node, {}, "float16") is None


def test_a_producer_wrong_only_where_it_feeds_its_consumer_is_named_not_the_consumer() -> None:
    """A backend that fuses a norm into the reduction after it can compute the norm right as an output and wrong
    inside the fusion: the probe then sees the reduction out of bound on right operands. Where the reduction alone
    on those operands is right and the pair is wrong, the producer is named (oracles.localize.fused_producer),
    here with a backend that errs only when it runs the two nodes together."""
    import numpy as np

    from fuzzer.interpret import evaluate
    from fuzzer.ir import case_from_json, input_values
    from fuzzer.outcome import Outcome
    from oracles.localize import fused_producer
    from oracles.subjects import Subject

    case = case_from_json({"format": "precfuzz-graph/1", "inputs": [
        {"name": "x", "shape": [4, 8], "dtype": "float32", "kind": "tensor", "init": {"dist": "normal", "seed": 3}}],
        "nodes": [{"id": "y", "op": "layer_norm", "inputs": ["x"], "attrs": {"normalized_shape": [8]}},
                  {"id": "s", "op": "sum", "inputs": ["y"], "attrs": {}}], "outputs": ["s"]})
    graph, values = case.graph, input_values(case, 0)

    def run(sub, vals):  # exact alone; 1.0 off when the layer_norm is computed in the same program as the sum
        out = evaluate(sub, vals, rounded=False)[sub.outputs[0]]
        off = 1.0 if {n.op for n in sub.nodes} == {"layer_norm", "sum"} else 0.0
        return Outcome("ok", [np.asarray(out, dtype=np.float64) + off], ["float32"])

    observed = {k: v for k, v in evaluate(graph, values, rounded=False).items() if k in ("y", "s")}
    s = Subject("debug/faults", graph, [], graph, graph)
    named = fused_producer(s, "s", values, observed, run)
    assert named is not None and named[0] == "y" and named[1].ratio > 1.0
    exact_run = lambda sub, vals: Outcome("ok", [np.asarray(evaluate(sub, vals, rounded=False)[sub.outputs[0]])],  # noqa: E731
                                          ["float32"])
    assert fused_producer(s, "s", values, observed, exact_run) is None


def test_regression_a_precision_hazards_fix_keeps_the_value_in_float32_into_the_op_that_reads_it() -> None:
    """triage25 sample #2 (and #7, #9): "compute `conv1` in float32 and cast to float16 after it" rounds it again
    before group_norm1 and loses as much (1.00); the loss given back (0.00875) was measured with group_norm1 reading
    the float32 value. The fix names the reader and casts after it."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "precision-hazard-fix-names-the-reader-sample25.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case, ["torch/eager"])
    (hazard,) = [f for f in result.findings if f.error_class == "precision"]
    assert "`group_norm1` (group_norm), which reads it, in float32, and cast to float16 after `group_norm1`" in \
        hazard.message, hazard.message


def test_regression_a_precision_hazard_of_the_output_itself_says_return_it_as_float32() -> None:
    """triage33 hazard b48d438146: float16 x = -2e-7 / 1 loses 0.11 of the output; "compute `div1` in float32, and
    cast to float16 after it" rounds the output, div1 itself, to float16 again and loses as much. The loss given back
    was measured with the output kept in float32, which the fix now says."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    g = Graph((Input("x", (), "float16", init={"dist": "constant", "value": -2e-07}),
               Input("d", (), "float16", init={"dist": "constant", "value": 1.0})),
              (Node("div1", "div", ("x", "d")),), ("div1",))
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(Case(g), ["torch/eager"])
    (hazard,) = [f for f in result.findings if f.error_class == "precision"]
    assert "return it as float32" in hazard.message and "cast to float16 after it" not in hazard.message, \
        hazard.message


def test_regression_a_sum_whose_terms_cancel_is_judged_at_its_terms_not_a_precision_hazard(checker: Checker) -> None:
    """triage26 sample #8 (4ed3eb8a95): under autocast-bf16 the harness's scalar loss sum(attn * upstream), its terms
    cancelling 4000-fold, lost 0.2 of its value to attn's bf16 rounding and was filed as a precision hazard (its
    script did not reproduce it). A sum's error is judged at the size of the terms it sums; a loss made where values
    themselves cancel (x + 1 - 1) still is one (test above)."""
    from fuzzer.ir import load_case
    from oracles.precision_hazards import terms_scale

    case = load_case(Path(__file__).parent / "fixtures" / "precision-hazard-cancelling-loss-sum-sample26.json")
    found = checker.check(case, ["torch/autocast"]).findings
    assert not [f for f in found if f.error_class == "precision"], [f.message for f in found]
    g = Graph((Input("a", (4,), "float32"),), (Node("s", "sum", ("a",)), Node("n", "neg", ("a",))), ("s", "n"))
    values = {"a": np.array([1.0, -1.0, 2.0, -2.0]), "s": np.array(0.0), "n": -np.array([1.0, -1.0, 2.0, -2.0])}
    assert terms_scale(g, "s", values) == 6.0 and terms_scale(g, "n", values) == 0.0


def test_regression_a_backend_refusing_a_program_eager_refuses_too_is_no_coverage_gap(checker: Checker) -> None:
    """triage26 sample #24 (f0f3f68e7a): a float64 noise-schedule scalar promotes the activation of a bfloat16
    group_norm; PyTorch eager raises (mixed dtype), and TVM's refusal of the float64 group_norm was filed as its
    coverage gap. Both refuse: agreement; the model hazard is the record."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-group-norm-unsupported-where-eager-raises-sample26.json")
    found = checker.check(case, ["torch/eager", "tvm/default"]).findings
    assert not [f for f in found if f.kind == "unsupported"], [f.message for f in found]
    assert [f for f in found if f.kind == "model-hazard" and f.executor == "torch/eager"]


def test_regression_an_exact_widening_cast_is_never_blamed_its_operand_is(checker: Checker) -> None:
    """triage27 b0239f15cc: under torch_xla's autocast, scaled_dot_product_attention rounds its logits to bf16 (0.044
    off where CPU autocast is 0.002 off); the float32 cast the autocast program puts after it was named, at 4.9e3x
    of a float32 bound. A cast that widens exactly cannot be wrong: its operand is named, judged in its own dtype."""
    from fuzzer.dtypes import holds_exactly
    from fuzzer.ir import load_case

    assert holds_exactly("bfloat16", "float32") and holds_exactly("float8_e4m3fn", "float16")
    assert not holds_exactly("float16", "bfloat16") and not holds_exactly("float32", "bfloat16")
    case = load_case(Path(__file__).parent / "fixtures" / "xla-autocast-sdpa-widening-cast-b0239f15cc-triage27.json")
    found = [f for f in checker.check(case, ["torch/eager", "torch/autocast", "xla/autocast"]).findings
             if f.executor == "xla/autocast" and f.oracle == "error-bound"]
    if not found:
        pytest.skip("XLA's autocast attention is within the bound on this CPU")
    assert found[0].ops == ["scaled_dot_product_attention"] and "exact widening cast" in found[0].message
    assert found[0].ratio < 100, found[0].message  # judged in bfloat16, not at a float32 ULP


def test_regression_a_mixed_16_bit_matmul_names_the_other_operands_dtype_not_the_promotion() -> None:
    """triage29 bf46a13882: torch_xla's float16 @ bfloat16 (model.to(bfloat16) of a float16 model's weights) was titled
    "a float16 input with float32 parameters": the chain break named the dtype the two promote to, so the hazard's
    fix cast to float32 too, which PyTorch rejects as well. The other operand's own dtype is the parameter side."""
    from fuzzer.ir import infer
    from oracles.semantics import downcast_message

    g = Graph((Input("x", (1, 4), "float16"), Input("w", (4, 3), "bfloat16", "param")),
              (Node("m", "matmul", ("x", "w")),), ("m",))
    brk = infer(g).chain_breaks()["m"]
    assert (brk.activation_dtype, brk.param_dtype) == ("float16", "bfloat16")
    assert "float16 activation with bfloat16 parameters" in downcast_message("xla/bf16-model", "m", "matmul", brk,
                                                                             "float16")


def test_regression_a_hazard_only_precfuzzs_own_bridging_ran_is_eagers_not_a_second_record() -> None:
    """sample29 #25: a float16 activation into batch_norm with bfloat16 statistics, which PyTorch refuses, was filed
    twice: by torch/eager and by tvm/decompose-inference, whose policy program only ran because precfuzz bridges
    mixed dtypes for Relax; that finding's repro ran the bridged program and exited 0. Eager's finding is the one;
    alone, the TVM executor still files it (nobody else saw it)."""
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "fp16-batch-norm-bf16-stats-bridged-hazard-sample29.json")
    with ExecutorPool(["torch/eager", "tvm/decompose-inference"], timeout=300.0) as pool:
        both = Checker(pool).check(case, ["torch/eager", "tvm/decompose-inference"])
        alone = Checker(pool).check(case, ["tvm/decompose-inference"])
    hazards = [f for f in both.findings if f.kind == "model-hazard"]
    assert [f.executor for f in hazards] == ["torch/eager"], hazards
    assert [f.executor for f in alone.findings if f.kind == "model-hazard"] == ["tvm/decompose-inference"]


def test_regression_a_matmul_hazard_names_the_parameter_by_its_role_and_a_declared_input_is_not_a_promotion() -> None:
    """hazards29 bc8b65c1cb: under model.to(bfloat16), x (a float32 input) @ w0 (a parameter, now bfloat16) was
    "a bfloat16 activation next to float32 parameters" with the fix w0.to(float32), which undoes the policy; the
    activation is x, the fix x.to(bfloat16). ba09fbe2cc: "promoted by a float16 tensor" where it was declared."""
    from fuzzer.isolation import ExecutorPool
    from oracles.bugs import title

    case = load_case(Path(__file__).parent / "fixtures" / "fp32-input-matmul-bf16-weight-roles-hazards29.json")
    with ExecutorPool(["torch/eager", "xla/bf16-model"], timeout=300.0) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/bf16-model"])
    (hazard,) = [f for f in result.findings if f.kind == "model-hazard"]
    assert hazard.dtypes == ["float32", "bfloat16"] and hazard.details["fix"] == "x.to(torch.bfloat16) before proj0"
    assert "gets a float32 activation next to bfloat16 parameters (from a float32 tensor" in title(hazard), title(hazard)


def test_regression_an_attention_hazard_names_operands_not_an_activation_and_parameters() -> None:
    """hazards30 ba76632b8f: under XLA_USE_BF16=1, q and k run float32 beside a bfloat16 v; the hazard said "a
    bfloat16 activation next to float32 parameters" and "the bfloat16 comes from q". Attention has no parameter side:
    its operands are named as such, and the traced (wide) dtype is the one said to come from q."""
    from fuzzer.isolation import ExecutorPool
    from oracles.bugs import title

    case = load_case(Path(__file__).parent / "fixtures" / "legacy-bf16-attention-mixed-operands-hazards30.json")
    with ExecutorPool(["torch/eager", "xla/legacy-bf16"], timeout=300.0) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/legacy-bf16"])
    (f,) = [f for f in result.findings if f.kind == "model-hazard"]
    assert "gets bfloat16 and float32 operands" in f.message and "the float32 comes from q" in f.message, f.message
    assert "gets bfloat16 and float32 operands (the float32 from a float32 tensor" in title(f), title(f)
