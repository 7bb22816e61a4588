"""Training cases (issue 35): the IR's gradient inputs, the backends' own autodiff, the float64 gradient reference,
and the gradient oracles (status, dtype, bound, the op whose backward is wrong)."""

from __future__ import annotations

from dataclasses import replace

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer.executors import create
from fuzzer.gradients import program, reference
from fuzzer.ir import Case, Graph, Input, IRError, Node, case_from_json, graph_to_json, input_values, load_case, parse_case
from oracles.findings import Finding
from oracles.gradients import single_op_case
from oracles.nodes import rounded_inputs

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_alone(path: Path) -> subprocess.CompletedProcess:
    """As a user runs it: `python -I` in the script's folder, with a bare environment."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return subprocess.run([sys.executable, "-I", path.name], cwd=path.parent, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def training_case(dtype: str = "float16", mean: float = 3.0, n: int = 512) -> dict:
    """A layer_norm of offset rows (x = mean + 0.1 randn) under a random upstream gradient: loss = sum(y * up)."""
    return {"inputs": [
        {"name": "x", "shape": [8, n], "dtype": dtype, "grad": True,
         "init": {"dist": "normal", "mean": mean, "std": 0.1, "seed": 1}},
        {"name": "w", "shape": [n], "dtype": dtype, "role": "param", "grad": True,
         "init": {"dist": "normal", "mean": 1.0, "std": 0.1, "seed": 2}},
        {"name": "b", "shape": [n], "dtype": dtype, "role": "param", "grad": True,
         "init": {"dist": "normal", "std": 0.1, "seed": 3}},
        {"name": "up", "shape": [8, n], "dtype": dtype, "init": {"dist": "normal", "seed": 4}}],
        "nodes": [{"id": "y", "op": "layer_norm", "inputs": ["x", "w", "b"], "attrs": {"normalized_shape": [n]}},
                  {"id": "p", "op": "mul", "inputs": ["y", "up"]},
                  {"id": "loss", "op": "sum", "inputs": ["p"]}],
        "outputs": ["loss"]}


def linear_case(x_dtype: str = "float32", w_dtype: str = "float32") -> Graph:
    """loss = sum(linear(x, w) * up), gradients of x and w."""
    return Graph((Input("x", (4, 8), x_dtype, grad=True), Input("w", (3, 8), w_dtype, "param", grad=True),
                  Input("up", (4, 3), x_dtype)),
                 (Node("y", "linear", ("x", "w")), Node("p", "mul", ("y", "up")), Node("loss", "sum", ("p",))),
                 ("loss",))


def test_a_gradient_input_round_trips_and_a_forward_case_keeps_its_json() -> None:
    case = case_from_json(training_case())
    assert case.graph.wrt == ("x", "w", "b")
    again = case_from_json(json.loads(json.dumps(graph_to_json(case.graph))))
    assert again.graph.wrt == ("x", "w", "b")
    forward = linear_case()
    plain = Graph(tuple(Input(i.name, i.shape, i.dtype, i.role) for i in forward.inputs), forward.nodes, forward.outputs)
    assert all("grad" not in i for i in graph_to_json(plain)["inputs"])  # forward-only cases keep their ids


@pytest.mark.parametrize("edit, said", [
    (lambda c: c["inputs"][3].update(dtype="int32"), None),  # an int input without grad is fine
    (lambda c: c["inputs"][0].update(grad="yes"), "grad must be true or false"),
    (lambda c: c["inputs"][3].update(grad=True, dtype="int64"), "true only on a floating-point tensor"),
    (lambda c: c.update(outputs=["p"]), "first output is its loss"),
])
def test_a_malformed_training_case_is_one_line(edit, said) -> None:
    raw = training_case()
    edit(raw)
    if said is None:
        parse_case(json.dumps(raw))
        return
    with pytest.raises(IRError) as exc:
        parse_case(json.dumps(raw))
    assert said in str(exc.value) and "\n" not in str(exc.value)


def test_the_exact_gradient_of_a_linear_loss_is_its_other_operand() -> None:
    g = linear_case()
    values = rounded_inputs(g, {"x": np.arange(32.0).reshape(4, 8) / 7, "w": np.ones((3, 8)) / 3,
                                "up": np.full((4, 3), 0.5)})
    exact, ideals, _ = reference(g, values)
    np.testing.assert_allclose(exact[0], values["up"] @ values["w"], rtol=1e-15)
    np.testing.assert_allclose(exact[1], values["up"].T @ values["x"], rtol=1e-15)
    assert len(ideals) == 2  # float64 and float32 arithmetic; no subnormal anywhere, so no flushing ideal


def test_the_ideal_backward_rounds_each_gradient_to_its_values_dtype() -> None:
    """The rounded program casts every value to its declared dtype and back, so autograd rounds the gradient there."""
    g = linear_case("bfloat16", "bfloat16")
    rounded = program(g, "float64", rounded=True)
    casts = [n.attrs["dtype"] for n in rounded.nodes if n.op == "astype"]
    assert casts.count("bfloat16") == 3 and casts.count("float64") == 3
    values = rounded_inputs(g, input_values(case_from_json(graph_to_json(g)), 0))
    _, ideals, _ = reference(g, values)
    import ml_dtypes

    for grad in ideals[0]:
        assert np.array_equal(grad, grad.astype(ml_dtypes.bfloat16).astype(np.float64))


def test_eager_gradients_have_the_parameters_dtype_and_autocast_keeps_float32_parameters_float32() -> None:
    g = linear_case("float32", "float32")
    values = input_values(case_from_json(graph_to_json(g)), 0)
    (plain,) = create("torch/eager").run_case(g, [values])
    (amp,) = create("torch/autocast").run_case(g, [values])
    assert plain.grad_dtypes == ["float32", "float32"] and amp.grad_dtypes == ["float32", "float32"]
    exact, _, _ = reference(g, rounded_inputs(g, values))
    np.testing.assert_allclose(plain.grads[1], exact[1], rtol=1e-5, atol=1e-5)
    assert not np.allclose(amp.grads[1], exact[1], rtol=1e-6, atol=0)  # autocast's bf16 matmul shows in its gradient


def test_a_float32_training_case_makes_no_gradient_finding_on_eager() -> None:
    """No false alarm: float32 layer_norm gradients of eager are within the bound of an ideal float32 backward."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = case_from_json(training_case("float32", mean=0.0, n=64))
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case)
    assert not [f for f in result.findings if f.error_class.startswith("grad") or f.oracle == "status-divergence"]
    assert result.outcomes["torch/eager"][0].grad_dtypes == ["float32"] * 3


@pytest.mark.slow  # ~20-36 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_tvm_training_flow_layer_norm_backward_is_pinned_on_layer_norm() -> None:
    """issue 35: TVM's DecomposeOpsForTraining + Gradient on a float16 layer_norm of offset rows: its weight gradient
    is several times past an ideal 16-bit backward (4.6x here, eager's fp16 kernel under 1x, floored at the magnitude
    the backward sums), and the finding names layer_norm,
    checked alone on exact operands and upstream gradient. Its forward alone is off too (the seed bug), but the
    case's loss is within 2x, so no forward finding holds it: the gradient's stands and says so."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = case_from_json(training_case())
    with ExecutorPool(["torch/eager", "tvm/train"]) as pool:
        result = Checker(pool).check(case, ["tvm/train"])
    (f,) = [f for f in result.findings if f.executor == "tvm/train" and f.error_class.startswith("grad")]
    assert f.ops == ["layer_norm"] and f.node == "y" and f.details["located"]
    assert f.details["grad"] in ("x", "w") and f.ratio > 3 and "its forward alone is off too" in f.message
    assert result.outcomes["tvm/train"][0].grad_dtypes == ["float16"] * 3


def test_regression_a_gradient_whose_forward_is_already_wrong_is_left_to_the_forward_record() -> None:
    """triage19 b0f0576cc4: XLA's float16 group_norm of a constant group is NaN in its forward pass; the NaN
    gradient only carried it, and was filed as a backward bug. Where the forward has a finding on the executor, the
    gradient is a note beside it (XLA:CPU picks its fp16 code by ISA: where its forward is right here, nothing to
    check)."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool

    case = load_case(FIXTURES / "training-xla-group-norm-constant-fp16.json")
    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["xla/native"])
    forward = [f for f in result.findings if f.executor == "xla/native" and "grad" not in f.details]
    if not forward:
        pytest.skip("XLA's float16 group_norm forward is right on this CPU")
    assert not [f for f in result.findings if f.executor == "xla/native" and "grad" in f.details]
    assert any("its forward finding is the record" in n for n in result.notes), result.notes


@pytest.mark.parametrize("values, why", [
    ([[1e-39, -2e-39, 3e-39]], "subnormal"),  # bf16 subnormals, flushed by XLA's CPU code and bf16 GEMMs
])
def test_regression_a_flushed_subnormal_gradient_is_no_finding(values, why) -> None:
    """triage19 ba2f5bb60f, bd86210ab6, b521ee6a3d, b2d3b5a110, bbe18d0ba5: gradients of subnormal values flushed
    to zero were filed at 3x to 7e6x. The reference has a flush-to-zero ideal there."""
    from fuzzer.gradients import reference

    g = Graph((Input("x", (1, 3), "bfloat16", grad=True, init={"values": values}),
               Input("w", (2, 3), "bfloat16", "param", grad=True, init={"dist": "constant", "value": 1.0})),
              (Node("y", "linear", ("x", "w")), Node("loss", "sum", ("y",))), ("loss",))
    vals = rounded_inputs(g, input_values(case_from_json(graph_to_json(g)), 0))
    exact, ideals, floors = reference(g, vals)
    flushed = ideals[-1]
    assert len(ideals) == 3 and np.all(flushed[1] == 0.0)  # the flushing ideal's weight gradient is 0
    from oracles.bounds import error_stats

    assert error_stats(np.zeros_like(exact[1]), exact[1], [i[1] for i in ideals], "bfloat16",
                       floor=np.asarray(floors[1])).ratio <= 1.0


def test_regression_a_gradient_that_cancels_to_zero_is_judged_for_inf_and_nan_only() -> None:
    """triage19 bc010f26db (sum(softmax): exact gradient 4e-16, XLA's 1e-3 judged 2e3x) and b1b1b0968a (attention over
    equal keys): a gradient below half an ULP of the terms its backward sums is zero to the dtype's precision."""
    from fuzzer.gradients import reference
    from oracles.gradients import judge

    # 64 scores a row: float32's softmax then sums to 1 within rounding, which estimates the terms' magnitude (with
    # 8 it sums to exactly 1, the estimate is 0 and the gradient is judged at the dtype's smallest spacing: open)
    g = Graph((Input("s", (2, 64), "float16", grad=True, init={"dist": "normal", "std": 3.0, "seed": 4}),),
              (Node("p", "softmax", ("s",), {"dim": -1}), Node("loss", "sum", ("p",))), ("loss",))
    vals = rounded_inputs(g, input_values(case_from_json(graph_to_json(g)), 0))
    ref = reference(g, vals)
    noisy = np.full((2, 64), 1e-4)  # what a float16 backward of a saved float16 softmax returns there
    from fuzzer.outcome import ok

    (j,) = judge([ok([np.zeros(())], ["float16"], grads=[noisy], grad_dtypes=["float16"])], [ref], list(g.inputs))
    assert j.stats.ratio == 0.0
    (bad,) = judge([ok([np.zeros(())], ["float16"], grads=[np.full((2, 64), np.nan)], grad_dtypes=["float16"])],
                   [ref], list(g.inputs))
    assert bad.stats.nonfinite_mismatch


def test_a_single_op_training_graph_feeds_its_op_an_upstream_gradient() -> None:
    case = case_from_json(training_case())
    one = single_op_case(case.graph, "y")
    assert one.wrt == ("x", "w", "b") and one.outputs == ("__loss", "y")
    assert [n.op for n in one.nodes] == ["layer_norm", "mul", "sum"]


def gradient_finding(executor: str, grad: str, case: Case) -> Finding:
    return Finding("error-bound", executor, ["backward"], [], "grad-bound", "m", output=f"grad:{grad}",
                   details={"grad": grad})


@pytest.mark.parametrize("executor, fixture, grad", [
    pytest.param("xla/native", "training-xla-group-norm-constant-fp16.json", "x", marks=pytest.mark.slow),  # ~18 s
    pytest.param("tvm/train", None, "w", marks=pytest.mark.slow),  # ~26 s: `make test-slow`
])
def test_a_gradient_scripts_exit_agrees_with_the_oracle_on_this_cpu(tmp_path, executor, fixture, grad) -> None:
    """The short script of a gradient finding runs alone (python -I) and exits 1 exactly where the oracle finds the
    gradient out of bound on this machine (XLA:CPU and LLVM pick fp16 code by ISA: the verdict, not the bug, is
    what must agree). Minimized from a training campaign: XLA's float16 group_norm of a constant group gives NaN
    forward and backward; TVM's DecomposeOpsForTraining layer_norm weight gradient is ~50x past the bound."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool
    from fuzzer.repro import render

    case = load_case(FIXTURES / fixture) if fixture else case_from_json(training_case())
    with ExecutorPool(["torch/eager", executor]) as pool:
        result = Checker(pool, localize_faults=False).check(case, [executor])
    found = any(f.details.get("grad") == grad for f in result.findings if f.executor == executor)
    text = render(case, gradient_finding(executor, grad, case), create(executor).bind({}), "[test] a title")
    assert len(text.splitlines()) <= 60 and "autograd.grad" in text
    assert ("Gradient('main'" in text) == (executor == "tvm/train")
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = run_alone(path)
    assert done.returncode == (1 if found else 0), done.stdout + done.stderr[-2000:]
    assert f"gradient of {grad}" in done.stdout


def test_a_gradient_finding_is_its_own_record_and_its_title_names_the_op_and_the_tensor() -> None:
    from oracles.bugs import bug_key, title

    forward = Finding("error-bound", "xla/native", ["group_norm"], ["float16,float16,float16->float16"], "nonfinite", "m")
    backward = Finding("error-bound", "xla/native", ["group_norm"], ["float16,float16,float16->float16"],
                       "grad-nonfinite", "m", details={"grad": "x"})
    assert bug_key(forward) != bug_key(backward) and "backward-accuracy" in bug_key(backward)
    said = title(backward)
    assert said.startswith("[torch_xla] float16 group_norm backward: the gradient of x is inf/nan"), said


def test_train_draws_a_fifth_training_cases_a_tenth_optimizer_steps_and_a_default_draw_none() -> None:
    from fuzzer.commands.run import TRAINING_SHARE, with_training
    from generators.graphs import generate_case

    mix = with_training(None)
    assert abs(mix["training"] / sum(mix.values()) - TRAINING_SHARE) < 1e-3
    assert with_training({"norm": 14.0}) == {"norm": 14.0, "training": 4.0, "optimizer": 2.0}
    assert not any(generate_case(3, i).graph.wrt for i in range(40))  # the forward-only draw is as it was
    drawn = [generate_case(3, i, list(mix)) for i in range(80)]
    assert 8 <= sum(bool(c.graph.wrt) for c in drawn) <= 35


def test_a_new_campaign_draws_training_by_default_and_a_resume_keeps_what_it_was_started_with(tmp_path) -> None:
    """Issue 35: training families are drawn by default; --no-train is the forward-only campaign of before."""
    import json

    from fuzzer.commands.run import wants_training

    new = tmp_path / "new"
    assert wants_training(None, None, new) and not wants_training(False, None, new)
    assert not wants_training(None, "norm", new) and wants_training(True, "norm", new)
    forward = tmp_path / "forward"
    forward.mkdir()
    (forward / "state.json").write_text(json.dumps({"families": ""}))
    assert not wants_training(None, None, forward)  # a forward-only campaign resumes forward-only
    (forward / "state.json").write_text(json.dumps({"families": "norm,optimizer,training"}))
    assert wants_training(None, None, forward)


def test_regression_tvm_training_flow_raising_is_one_record_whatever_the_ops() -> None:
    """triage19: relax.transform.Gradient refusing bfloat16 parameters was filed 8 times, once per op list."""
    from oracles.bugs import bug_key

    def raised(ops: list[str]) -> Finding:
        return Finding("status-divergence", "tvm/train", ops, [], "compile-error", "m",
                       details={"error_key": "only tensors of floating point dtype can require gradients"})

    assert bug_key(raised(["sum", "mul"])) == bug_key(raised(["gather", "rms_norm", "linear"])) == bug_key(raised(["mul"]))


def test_regression_attribution_cuts_a_training_case_into_a_forward_program() -> None:
    """triage22 (case 83): TVM's attention returned float32 and the loss's `sub` then raised; attribution cut the case
    after the attention to recheck it, kept the gradient flags, and the cut (no loss) raised IRError as an invalid
    training case: an internal error, the case's findings lost. The cut is a forward program now."""
    from oracles.attribution import at_departure

    case = load_case(Path(__file__).parent / "fixtures" / "training-sdpa-bf16-mask-triage22.json")
    f = Finding("dtype-divergence", "tvm/decompose", ["scaled_dot_product_attention"], ["bfloat16,float32"], "dtype",
                "m", node="attn", details={"raised_at": "residual"})
    cut = at_departure(f, case)
    assert cut.graph.outputs == ("attn",) and not any(i.grad for i in cut.graph.inputs)
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    with ExecutorPool(["torch/eager", "tvm/default", "tvm/decompose"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "tvm/decompose"])
    assert any(g.executor == "tvm/decompose" and g.oracle == "dtype-divergence" for g in result.findings)


def test_regression_a_tvm_training_flow_raise_the_default_pipeline_shares_is_that_pipelines_record() -> None:
    """triage21: silu's LLVM verification failure and rms_norm's legalization error, raised by tvm/default and
    tvm/train alike, were two records each (the training flow's raise keyed with every op as `*`). Where the
    default pipeline shows the same cause, the training flow's finding joins its record."""
    from oracles.bugs import bug_key

    def raised(executor: str) -> Finding:
        return Finding("status-divergence", executor, ["silu"], [], "compiler-error", "m",
                       details={"error_key": "llvm module verification failed with the following errors:"})

    assert bug_key(raised("tvm/train"), False) == bug_key(raised("tvm/default"))
    assert bug_key(raised("tvm/train"), True) != bug_key(raised("tvm/default"))  # Gradient's own: one record
    assert bug_key(raised("tvm/train"), None) == bug_key(replace(raised("tvm/train"), ops=["mul", "sum"]), None)


def test_regression_the_training_flow_raising_what_another_pipeline_raises_is_that_pipelines_record() -> None:
    """triage22: `full`'s PrimType error and interpolate_linear's divide by zero were filed from tvm/decompose and
    again from tvm/train (whose raise is keyed for the whole module). In one check where another TVM pipeline raises
    the same, the training flow's finding joins that record; where none does, it stays Gradient's."""
    from oracles.bugs import case_keys

    detail = {"error_key": "argument of type is not iterable"}
    other = Finding("status-divergence", "tvm/decompose", ["full"], [], "compiler-error", "m", details=detail)
    train = Finding("status-divergence", "tvm/train", ["add", "full", "mul", "sum"], [], "compiler-error", "m",
                    details=detail)
    keys = case_keys([other, train], ["torch/eager", "tvm/decompose", "tvm/train"])
    assert keys[train.signature] == keys[other.signature]
    alone = case_keys([train], ["torch/eager", "tvm/decompose", "tvm/train"])
    assert alone[train.signature] != keys[other.signature]


def test_regression_one_mechanism_is_one_record_across_the_dtypes_and_pipelines_it_shows_in() -> None:
    """triage21: torch_xla's HLO batch-norm-training (one-pass variance) was one record in float32 and another in
    float16; TVM's float16 layer_norm after DecomposeOpsForTraining was one record from tvm/decompose (the 16-bit
    mean it exposes) and another from tvm/train, which runs the same pass."""
    from oracles.bugs import bug_key

    def xla(op: str, dtype: str) -> Finding:
        return Finding("error-bound", "xla/native", [op], [f"{dtype}->{dtype}"], "bound", "m")

    assert bug_key(xla("instance_norm", "float32")) == bug_key(xla("layer_norm", "float16"))
    assert bug_key(xla("softmax", "float32")) != bug_key(xla("softmax", "float16"))  # other ops keep the split

    def tvm(executor: str) -> Finding:
        return Finding("error-bound", executor, ["layer_norm"], ["float16->float16"], "bound", "m")

    assert bug_key(tvm("tvm/train"), True) == bug_key(tvm("tvm/decompose"), True)


@pytest.mark.parametrize("bug, ops", [("bf16-sum", ["sum"]), ("f16-matmul", ["matmul"])])
def test_regression_a_tvm_training_flow_raise_has_a_script_that_runs_gradient(tmp_path, bug, ops) -> None:
    """triage19: the short script of tvm/train raising at Gradient was the forward one (no Gradient), exit 0. It
    runs DecomposeOpsForTraining + Gradient now and exits 1 while TVM raises (a bfloat16 parameter; a float16 matmul
    whose Relax lowering accumulates in float32 with out_dtype, whose gradient mixes float32 and float16)."""
    from fuzzer.repro import render

    dtype = "bfloat16" if bug == "bf16-sum" else "float16"
    if ops == ["sum"]:
        g = Graph((Input("x", (3,), dtype, grad=True),), (Node("loss", "sum", ("x",)),), ("loss",))
    else:
        g = Graph((Input("q", (1, 1), dtype, grad=True), Input("k", (1, 1), dtype, grad=True)),
                  (Node("qk", "matmul", ("q", "k")), Node("loss", "sum", ("qk",))), ("loss",))
    case = case_from_json(graph_to_json(g))
    text = render(case, Finding("status-divergence", "tvm/train", ops, [], "compile-error", "m"),
                  create("tvm/train").bind({}), "[test] a title")
    assert "R.transform.Gradient(" in text and len(text.splitlines()) <= 60
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = run_alone(path)
    assert done.returncode in (0, 1) and "PyTorch autograd on the CPU" in done.stdout, done.stdout + done.stderr[-1500:]
    assert (done.returncode == 1) == ("TVM training flow raises" in done.stdout)


def test_regression_the_cancellation_floor_of_huge_gradients_does_not_overflow() -> None:
    """triage20: the float32 program's gradient of 3e38 against float64's squared to inf (a RuntimeWarning, and an
    infinite floor would have judged nothing). The RMS is taken after scaling by the largest difference."""
    import warnings

    from fuzzer.gradients import cancellation

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floor = cancellation(np.array([3.0e38, -3.0e38, np.inf]), np.array([-3.0e38, 3.0e38, 1.0]))
    assert np.isfinite(floor) and floor > 0
    assert cancellation(np.zeros(3), np.zeros(3)) == 0.0


def test_regression_a_forward_finding_of_a_training_case_is_localized_to_its_node() -> None:
    """triage21: six records named the loss's sum, mean or neg for a norm's fault (bf46602d33: torch_xla's float32
    layer_norm of a constant row of 1000 is NaN, filed as `mean`). The probe that localizes a forward finding ran
    the training case with every node as an output, so its first output was no loss and the run failed: every
    forward finding of a training case stayed on the output's op. The probe is a forward program now."""
    from fuzzer.check import Checker
    from fuzzer.executors import create
    from fuzzer.isolation import ExecutorPool

    if create("xla/native").availability() is not None:
        pytest.skip("torch_xla unavailable")
    case = case_from_json({"format": "precfuzz-graph/1", "inputs": [
        {"dtype": "float32", "grad": True, "init": {"dist": "constant", "value": 1000.0}, "kind": "tensor",
         "name": "latents", "role": "input", "shape": [5]}],
        "nodes": [{"attrs": {"normalized_shape": [5]}, "id": "layer_norm1", "inputs": ["latents"], "op": "layer_norm"},
                  {"attrs": {}, "id": "loss", "inputs": ["layer_norm1"], "op": "mean"}], "outputs": ["loss"]})
    with ExecutorPool(["xla/native"]) as pool:
        result = Checker(pool).check(case, ["xla/native"])
    forward = [f for f in result.findings if f.kind == "backend-bug" and not f.details.get("grad")]
    assert forward and forward[0].ops == ["layer_norm"] and forward[0].node == "layer_norm1", result.findings


def test_regression_the_cancellation_floor_of_infinite_gradients_warns_nothing() -> None:
    """triage22: inf - inf in the gradient floor printed numpy's RuntimeWarning on the campaign's terminal."""
    import warnings

    from fuzzer.gradients import cancellation

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cancellation(np.array([np.inf, 1.0]), np.array([np.inf, 1.0])) == 0.0


@pytest.mark.slow  # ~13-16 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_regression_a_gradient_dtype_finding_names_the_op_and_its_script_checks_the_dtype(tmp_path) -> None:
    """triage22 b94a8c15e3: TVM's training flow gives a float16 conv2d's weight a float32 gradient; the finding named
    no op ("float16 backward backward" in its title), and its script judged only the error and exited 0. It names
    the op reading the input now, and the script exits 1 while the gradient's dtype is not eager's."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool
    from fuzzer.repro import render
    from oracles.bugs import title

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-train-fp16-conv2d-weight-grad-float32-triage22.json")
    with ExecutorPool(["torch/eager", "tvm/train"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "tvm/train"])
    (f,) = [g for g in result.findings if g.error_class == "grad-dtype"]
    assert f.ops == ["conv2d"] and f.details["expected_dtype"] == "float16"
    assert title(f).startswith(f"[TVM] float16 conv2d backward: the gradient of {f.details['grad']} has dtype float32 "
                               "where PyTorch's is float16"), title(f)
    script = tmp_path / "repro.py"
    script.write_text(render(case, f, create("tvm/train"), title(f)))
    run = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "dtype float32 on tvm/train; PyTorch eager gives float16" in run.stdout, run


def test_regression_the_reference_gradient_of_a_group_norm_bias_without_weight_is_computed() -> None:
    """triage22 b3e61a53b2: the minimizer dropped a group_norm's weight and kept its bias's gradient; PyTorch's CPU
    group_norm backward allocates that gradient like the (undefined) weight and raises "tensor does not have a
    device", and the float64 reference failed as an internal error. The reference gives the group_norm a weight of
    ones (the same function): d sum(group_norm(x) + beta) / d beta is the element count."""
    case = load_case(Path(__file__).parent / "fixtures" / "group-norm-bias-grad-without-weight-triage22.json")
    exact, ideals, _ = reference(case.graph, rounded_inputs(case.graph, input_values(case, 0)))
    assert exact[0].tolist() == [2.0] and all(i[0].tolist() == [2.0] for i in ideals)


@pytest.mark.parametrize("fixture", ["group-norm-sum-gradient-zero-by-cancellation-triage22.json",
                                     # triage23: a sum of softmax rows, a layer_norm of one element, a uniform softmax
                                     "gradient-zero-by-cancellation-bcb6015512-triage23.json",
                                     "gradient-zero-by-cancellation-b3eda8e3c1-triage23.json"])
def test_regression_a_gradient_zero_by_cancellation_is_no_underflow_hazard(fixture: str) -> None:
    """triage22: d sum(group_norm(conv(x, w))) / dx is 0 (a normalized output sums to a constant); float64 leaves
    1e-16 of rounding there, which the float16 backward returns as 0, and the gradients of x and w were filed as
    "100% lost to underflow, scale the loss". Below an ULP of float32 at the terms it sums, an exact gradient is
    zero by cancellation."""
    from oracles.training_hazards import gradient_underflow

    case = load_case(Path(__file__).parent / "fixtures" / fixture)
    values = rounded_inputs(case.graph, input_values(case, 0))
    exact, ideals, floors = reference(case.graph, values)
    assert gradient_underflow(case.graph, values, exact, ideals[0], floors) == []
    assert any(np.any(e != 0) for e in exact)  # float64 leaves its rounding there, which was filed as lost


def test_regression_an_exact_zero_gradient_float32_also_cancels_is_judged_at_its_terms_magnitude() -> None:
    """triage23 b521ee6a3d: d sum(group_norm(x)) / dx for one group of 4 is 0 in float64 and in float32 alike, so
    the gradient's floor (from float32's cancellation) was 0, and eager's bfloat16 rounding of terms near 1 (0.0074)
    was filed as PyTorch's bug at 4e37x. The floor is now the magnitude of the terms, from random-sign upstreams."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "group-norm-exact-zero-gradient-b521ee6a3d-triage23.json")
    values = rounded_inputs(case.graph, input_values(case, 0))
    exact, _, floors = reference(case.graph, values)
    assert not np.any(exact[0]) and 0.5 < floors[0] < 20, floors  # zero, from terms of order 1 / sigma
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case, ["torch/eager"])
    assert not [f for f in result.findings if f.kind == "backend-bug"], [f.message for f in result.findings]


def test_regression_a_float32_gradient_summed_in_order_over_broadcast_copies_is_within_the_bound() -> None:
    """triage23 b52df0b7f3: d sum(dt * u) / d dt for a float32 scalar dt and 364 values of u is a sum of 364 terms;
    TVM's collapse_sum adds them in order, 30 ULPs from the exact sum, exactly as its forward `sum` of u (within
    the forward's bound: its float32 ideal sums in order too); the gradient was judged against PyTorch's pairwise
    float32 autograd alone and filed at 14.6x. The gradient's float32 ideal now includes the in-order sum."""
    from fuzzer.check import Checker
    from fuzzer.gradients import summed_in_order
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures"
                     / "float32-broadcast-scalar-gradient-in-order-b52df0b7f3-triage23.json")
    values = rounded_inputs(case.graph, input_values(case, 0))
    in_order = summed_in_order(case.graph, values)[0]
    exact, ideals, _ = reference(case.graph, values)
    assert in_order is not None and abs(float(in_order) - float(exact[0])) > 1e-6  # in order: 30 ULPs of 1.092
    assert any(float(i[0]) == float(in_order) for i in ideals)
    with ExecutorPool(["tvm/train"]) as pool:
        result = Checker(pool).check(case, ["tvm/train"])
    assert not [f for f in result.findings if f.kind == "backend-bug"], [f.message for f in result.findings]


def test_regression_a_uniform_softmax_under_autocast_has_no_underflowing_weight_gradient() -> None:
    """triage23 b8162ac49a: equal keys and values make attention's softmax uniform, so the exact gradient of the
    query projection is 0; float64's 1e-14 of rounding was filed under autocast as "100% lost to underflow"."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "gradient-zero-by-cancellation-b8162ac49a-triage23.json")
    with ExecutorPool(["torch/eager", "torch/autocast"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "torch/autocast"])
    assert not [f for f in result.findings if f.error_class == "grad-underflow"], [f.message for f in result.findings]


def test_regression_a_loss_scale_the_float16_loss_cannot_hold_is_never_the_fix() -> None:
    """hz24 bcb6015512: the named fix "scale the loss by 65536" for a float16 loss of about 1 overflows (65536 is
    inf in float16, and every gradient NaN); a scale is offered only where the scaled loss and its seed fit."""
    from oracles.training_hazards import gradient_underflow

    case = load_case(Path(__file__).parent / "fixtures" / "fp16-loss-scale-overflow-hz24.json")
    found = []
    for k in range(max(1, len(case.input_sets))):
        values = rounded_inputs(case.graph, input_values(case, k))
        exact, ideals, floors = reference(case.graph, values)
        found += gradient_underflow(case.graph, values, exact, ideals[0], floors)
    assert found and all(loss.scale <= 65504.0 for loss in found), found


BD18 = Path(__file__).parent / "fixtures" / "bf16-div-scalar-gradient-eager-as-far-off-bd18a077ac-triage25.json"


@pytest.mark.slow  # ~15-26 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_regression_a_gradient_eager_gets_as_wrong_is_not_the_backends_in_the_minimizer_locator_and_script(
        tmp_path: Path) -> None:
    """triage25 bd18a077ac, b32559a80d: a torch_xla gradient record whose minimized case is PyTorch's own div gradient
    (the float32 divisor's gradient computed in the bf16 result dtype: 872 for 868.75, bit-equal in eager). The
    minimizer judged gradients without eager (error-bound needs no eager), so it shrank into a case eager gets as
    wrong; the locator blamed an op whose backward alone eager gets as wrong; the script exited 1 while printing
    eager's identical error. Now the minimizer runs eager for gradient targets of other backends, the locator skips
    an op eager gets as wrong alone, and the script exits 1 only where the backend is worse than eager."""
    import subprocess
    import sys

    from fuzzer.grad_repro import render
    from fuzzer.minimize.target import Target
    from oracles.gradients import locate

    for executor, needs in (("xla/bf16-model", True), ("tvm/train", True), ("torch/autocast", False)):
        target = Target.parse(f"error-bound|{executor}|div|bfloat16,float32->bfloat16|grad-bound")
        assert target.needs_eager == needs, executor
    from fuzzer.isolation import ExecutorPool

    case = load_case(BD18)  # (triage31: its own values, 872 for 868.75, are within an ideal that reads the float32
    # divisor through the op's bfloat16; these are 184x off that ideal in eager and in XLA alike)
    values_at = {"sub1": {"dist": "constant", "value": 6.030653476715088},
                 "root1": {"dist": "constant", "value": 0.0458896773893924}}
    case = replace(case, graph=replace(case.graph, inputs=tuple(replace(i, init=values_at[i.name])
                                                                for i in case.graph.inputs)))
    with ExecutorPool(["xla/bf16-model", "torch/eager"]) as pool:
        xla = pool.ensure("xla/bf16-model")
        numeric = xla.numeric_graph(case.graph)
        values = rounded_inputs(numeric, input_values(case, 0))
        run = lambda g, v: pool.run("xla/bf16-model", g, [v])[0]  # noqa: E731
        assert locate(numeric, values, run, "root1") is not None  # alone, the div backward is out of bound
        assert locate(numeric, values, run, "root1", eager=lambda g, v: pool.run("torch/eager", g, [v])[0]) is None
        finding = Finding("error-bound", "xla/bf16-model", ["div"], ["float32"], "grad-bound", "m", ratio=1e4,
                          details={"grad": "root1"})
        script = tmp_path / "repro.py"
        script.write_text(render(case, finding, xla, "t"))
    out = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert out.returncode == 0 and "not reproduced" in out.stdout, out.stdout + out.stderr


def test_regression_a_training_flow_raise_found_by_a_campaign_gets_the_script_that_runs_gradient(
        tmp_path: Path) -> None:
    """triage25 sample #10, #18, #19, #24: a campaign's tvm/train coverage or status finding on a training case got
    only the full-oracle script, which compiles the forward and exits 0 while Gradient still raises; it now gets the
    short script (DecomposeOpsForTraining, Gradient, build, run) and no forward-only one."""
    import subprocess
    import sys

    from fuzzer.artifacts import write_finding

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-train-no-gather-elements-gradient-sample25.json")
    finding = Finding("coverage", "tvm/train", ["gather"], ["float16"], "unsupported",
                      "tvm/train cannot run this graph: no gradient for relax.gather_elements", kind="unsupported")
    art = write_finding(tmp_path, case, finding, {}, "precfuzz run", short=False)
    assert art.repro is not None and art.repro_full is None, art.errors
    out = subprocess.run([sys.executable, "-I", str(art.repro)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "BUG REPRODUCED" in out.stdout, out.stdout + out.stderr[-2000:]


def test_a_gradient_finding_whose_op_is_off_in_its_forward_alone_is_keyed_and_titled_as_the_forward() -> None:
    """An op whose forward alone is off (its gradient only carries it) is the forward's cause: the key's class is the
    forward's (one record with its forward finding) and the title says forward (triage25 b5e4011b9a's class)."""
    from oracles.bugs import error_family, title

    base = Finding("error-bound", "xla/native", ["layer_norm"], ["float32,float32,float32->float32"], "grad-bound",
                   "m", ratio=4e3, details={"grad": "gamma", "located": True})
    carried = replace(base, details={**base.details, "forward_wrong": True})
    assert (error_family(base), error_family(carried)) == ("backward-accuracy", "accuracy")
    assert "layer_norm backward:" in title(base) and "layer_norm forward (off alone" in title(carried)


def test_regression_a_norms_forward_hidden_by_a_zero_weight_is_named_as_the_forward() -> None:
    """triage25 b5e4011b9a: torch_xla's float32 layer_norm (one-pass variance) is 0.27 off in its normalized values,
    but gamma = 0 hid it in the forward; the gradient of gamma (sum of upstream * x_hat) showed it and the record
    named layer_norm's backward. The locator also runs the op's forward with its weight all ones: the finding names
    the forward and joins torch_xla's one-pass-variance record."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool
    from oracles.bugs import bug_key, title

    case = load_case(Path(__file__).parent / "fixtures"
                     / "xla-layer-norm-variance-hidden-by-zero-gamma-b5e4011b9a-triage25.json")
    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/native"])
    (grad,) = [f for f in result.findings if f.details.get("grad") == "gamma"]
    assert grad.details.get("forward_wrong") and "layer_norm forward" in title(grad)
    assert bug_key(grad) == "backend-bug|torch_xla|batch-norm-training|accuracy|*|*"


def test_regression_a_dtype_min_mask_keeps_its_number_in_the_float64_gradient_reference() -> None:
    """triage26 bc4c631c89, bcb6015512: an attention mask `full(value="min", dtype=float16)` became float64's lowest
    in the float64 gradient reference (redeclare), which swamps fully masked rows' scores: another function, whose
    gradients the program's were "96% / 138% lost" against. The fill keeps -65504 when the dtype widens."""
    from fuzzer.check import Checker
    from fuzzer.ir import redeclare
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "fp16-min-mask-reference-bcb6015512-triage26.json")
    wide = redeclare(case.graph, ("float16",), "float64")
    assert wide.node("mask_fill").attrs["value"] == -65504.0 and wide.node("mask_fill").attrs["dtype"] == "float64"
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case, ["torch/eager"])
    assert not [f for f in result.findings if f.error_class.startswith("grad-")], [f.message for f in result.findings]


def test_regression_a_refusal_of_tvms_gradient_pass_is_titled_with_the_pass_not_the_op() -> None:
    """triage26 bfb0a4e4c1: relax.transform.Gradient refuses any bfloat16 input ("Only Tensors of floating point
    dtype ... can require gradients"); the record was titled "[TVM] bfloat16 sum raises", naming the op the minimizer
    kept rather than the pass that refused. The outcome says which pass raised, and the title names it."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool
    from oracles.bugs import title

    case = load_case(FIXTURES / "tvm-train-gradient-refuses-bf16-bfb0a4e4c1-triage26.json")
    with ExecutorPool(["torch/eager", "tvm/train"]) as pool:
        result = Checker(pool).check(case, ["tvm/train"])
    assert result.outcomes["tvm/train"][0].info.get("in_pass") == "relax.transform.Gradient"
    (f,) = [f for f in result.findings if f.executor == "tvm/train"]
    said = title(f)
    assert said.startswith("[TVM] relax.transform.Gradient raises on a bfloat16 sum program"), said


def test_row_scale_names_a_gradient_off_by_one_factor_per_row_and_nothing_else() -> None:
    """Pure logic of the saved-1/std diagnosis: a per-row factor that explains the error, else None."""
    from fuzzer.ir import Node
    from oracles.gradients import factor_text, row_scale

    norm = Node("y", "layer_norm", ("x",), {"normalized_shape": (3,)})
    exact = np.array([[-210.8, 421.6, -210.8], [1.0, -2.0, 1.0]])
    assert row_scale(exact * 0.18, exact, norm) == pytest.approx((0.18, 0.18))
    assert factor_text(row_scale(exact * 0.18, exact, norm)) == "0.18"
    assert row_scale(exact, exact, norm) is None  # right: no factor to name
    assert row_scale(exact + np.array([[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]]), exact, norm) is None  # not a scaling
    assert row_scale(exact * 0.18, exact, Node("y", "softmax", ("x",), {"dim": -1})) is None  # not a norm
    assert factor_text((0.99963, 0.99963)) == "1-0.00037"


@pytest.mark.parametrize("fixture, dtype", [
    ("xla-layer-norm-constant-rows-rstd-b521ee6a3d-triage26.json", "bfloat16"),
    ("xla-layer-norm-constant-rows-rstd-float32-b5e4011b9a-triage26.json", "float32"),
])
def test_regression_a_layer_norm_gradient_off_by_its_saved_rstd_says_so(fixture, dtype) -> None:
    """triage26 b521ee6a3d, b5e4011b9a: torch_xla's layer_norm of constant rows has a one-pass variance that is not
    0; its forward output (x - mean) * rstd is 0 and right, and the gradient of x is the exact one times 0.18 (bf16)
    or 1-0.00037 (float32) per row. The triager read "layer_norm backward" as blaming the backward for its forward's
    statistics: the finding and its title now say the gradient is off by one factor per row, a wrong saved 1/std."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool
    from oracles.bugs import title

    case = load_case(FIXTURES / fixture)
    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["xla/native"])
    (f,) = [f for f in result.findings if f.executor == "xla/native" and f.details.get("grad") == "x"]
    assert f.ops == ["layer_norm"] and f.details.get("row_scale"), f.message
    assert "per row, as a wrong saved 1/std would make it" in f.message
    said = title(f)
    assert said.startswith(f"[torch_xla] {dtype} layer_norm backward: the gradient of x is") and "a wrong saved 1/std" in said, said


def test_regression_a_norm_weight_gradient_is_judged_at_its_normalized_terms() -> None:
    """triage27 b521ee6a3d: a bfloat16 layer_norm of constant rows (x = 3, 95 wide): x_hat is exactly 0, so the
    exact gradient of gamma, sum(dy * x_hat), is 0 and its floor was the subnormal one; XLA's float32 mean, sum *
    (1/95), misses by an ULP and 1/sqrt(eps) = 316 makes x_hat 7.5e-5: filed at 4.23e35x. The floor of a norm
    weight's gradient is the size of its terms, |dy| * |x| * rstd (an ULP of float32 there is the mean's
    rounding); the gradient of x off by a wrong saved rstd (test above) is still found."""
    from fuzzer.gradients import normalized_terms
    from fuzzer.ir import input_values, load_case

    case = load_case(FIXTURES / "xla-layer-norm-constant-rows-gamma-grad-b521ee6a3d-triage27.json")
    numeric = case.graph
    values = input_values(case, 0)
    floors = normalized_terms(numeric, values)
    k = numeric.wrt.index(next(n.inputs[1] for n in numeric.nodes if n.op == "layer_norm"))
    assert floors[k] > 0.01  # an ULP of float32 at 316 * 3 * sum |dy|, as a bfloat16 floor
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["xla/native"])
    assert not [f for f in result.findings if f.details.get("grad")], [f.message for f in result.findings]


@pytest.mark.slow  # ~20-36 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_regression_the_op_off_on_the_very_input_is_blamed_before_one_off_on_another_operand() -> None:
    """triage27 b0a5795659: XLA's bf16 group_norm sums beta's gradient over N, H, W with a bf16 accumulator (20x
    eager); the conv2d after it, whose backward alone is further off on its activation's gradient, was named. The
    op off alone on the gradient the finding is about comes first."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool

    case = load_case(FIXTURES / "xla-group-norm-beta-grad-bf16-reduce-b0a5795659-triage27.json")
    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["xla/native"])
    grads = [f for f in result.findings if f.executor == "xla/native" and f.details.get("grad") == "beta"]
    if not grads:
        pytest.skip("XLA's bf16 reduce of beta's gradient is within the bound on this CPU")
    assert grads[0].ops == ["group_norm"] and grads[0].details.get("operand") == "beta", grads[0].message


def test_a_gradient_of_a_broadcast_operand_is_titled_as_the_sum_over_its_broadcast_axes() -> None:
    """triage27 b2d3b5a110: 'mul backward' read as mul's arithmetic; the gradient of a broadcast scalar is a reduce
    (XLA's bf16 sum of 266 ones gives 256, as its forward sum does): the title says so."""
    from oracles.bugs import title

    f = Finding("error-bound", "xla/native", ["mul"], ["bfloat16,bfloat16->bfloat16"], "grad-bound", "m", ratio=2.5,
                details={"grad": "root", "operand": "root", "broadcast_sum": True})
    assert "mul backward (the sum over root's broadcast axes): the gradient of root" in title(f), title(f)


def test_regression_a_non_finite_gradient_beside_an_exact_one_past_the_dtypes_range_is_the_range_edge() -> None:
    """triage29 31cc3bd553: float16 layer_norm of rows at 30000 (constant in float16), exact gradient of x up to
    1.1e5, past float16's 65504: the ideal backward is non-finite in 1001 places, eager in 555, 14 of them where the
    ideal rounded finite; filed as PyTorch's bug. An exact gradient past its dtype's range makes its non-finite
    values the range's edge (oracles.gradients.past_range); a gradient within range is still judged."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool
    from oracles.gradients import past_range

    assert past_range(np.array([1.0, -1.1e5]), "float16") and not past_range(np.array([1.0, 6e4]), "float16")
    assert not past_range(np.array([1.1e5, np.inf]), "float32")
    case = load_case(FIXTURES / "training-layer-norm-fp16-rows-past-range.json")
    with ExecutorPool(["torch/eager"]) as pool:
        result = Checker(pool).check(case, ["torch/eager"])
    assert not [f for f in result.findings if f.error_class == "grad-nonfinite"], result.findings


def test_regression_an_operand_whose_gradient_never_reaches_the_finding_is_not_its_culprit() -> None:
    """triage29 bd86210ab6: the gradient of hidden was off on torch_xla and the locator blamed a linear's bias, whose
    gradient (a bf16 sum, off alone) never flows into hidden's. Only operands on hidden's path may be the culprit."""
    from oracles.gradients import locate

    g = Graph((Input("hidden", (4, 8), "bfloat16", grad=True), Input("w1", (6, 8), "bfloat16", grad=True),
               Input("bias", (6,), "bfloat16", grad=True), Input("upstream", (4, 6), "bfloat16")),
              (Node("lin", "linear", ("hidden", "w1", "bias")), Node("weighted", "mul", ("lin", "upstream")),
               Node("loss", "sum", ("weighted",))), ("loss",))
    values = rounded_inputs(g, input_values(case_from_json(graph_to_json(g)), 0))
    eager = create("torch/eager")

    def spoiled(graph: Graph, vals: dict) -> object:
        """Eager's gradients with the bias's gradient made 100x too large: a backend wrong on bias alone."""
        (got,) = eager.run_case(graph, [vals])
        if "bias" in graph.wrt:
            grads = list(got.grads)
            grads[graph.wrt.index("bias")] = grads[graph.wrt.index("bias")] * 100.0
            got = replace(got, grads=grads)
        return got

    assert locate(g, values, spoiled, "bias") is not None  # the bias's own gradient: linear is the culprit
    assert locate(g, values, spoiled, "hidden") is None  # hidden's gradient does not see bias's


@pytest.mark.slow  # ~15-26 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_regression_an_exact_zero_gradient_whose_float32_got_lucky_is_judged_at_its_terms() -> None:
    """triage30 bfb5aaf24e: d sum(softmax(x)) / dx is exactly 0; float32 autograd happened to be off by 2e-18 only,
    which set a floor of 3.6e-11, and TVM's 1.3e-9 (one float32 ULP of sum(p), times p: any summation order's) was
    filed at 9e7x. An exact gradient below its cancellation floor takes the magnitude of its terms (0.0097)."""
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "fp32-sum-softmax-exact-zero-gradient-bfb5aaf24e-triage30.json")
    values = rounded_inputs(case.graph, input_values(case, 0))
    _, _, floors = reference(case.graph, values)
    assert floors[0] > 1e-3, floors
    from fuzzer.check import Checker

    with ExecutorPool(["torch/eager", "tvm/train"], timeout=300.0) as pool:
        found = Checker(pool).check(case, ["torch/eager", "tvm/train"]).findings
    assert not [f for f in found if f.executor == "tvm/train"], [f.message for f in found]


@pytest.mark.parametrize("fixture", ["torch-bf16-mul-fp32-scalar-grad-rounded-b8b7e62481-triage31.json",
                                     "torch-bf16-div-fp32-scalar-grad-rounded-bf2b7acf42-triage31.json"])
def test_regression_a_wide_scalars_gradient_through_a_16_bit_op_may_round_to_that_ops_dtype(fixture: str) -> None:
    """triage31 b8b7e62481, bf2b7acf42: a float32 0-dim tensor times (or dividing) a bfloat16 one makes a bfloat16
    op; PyTorch's gradient of the scalar is the op's gradient summed and rounded to bfloat16 (3 x 0.2002 -> 0.6016,
    the correctly rounded sum), filed at 8.2e3x and 571x against a float32 rounding. An ideal that reads the wide
    operand through the op's dtype sets the bound too."""
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / fixture)
    values = rounded_inputs(case.graph, input_values(case, 0))
    _, ideals, _ = reference(case.graph, values)
    assert len(ideals) >= 3  # float64, float32, and the wide operand read through the op's bfloat16 (and more)
    with ExecutorPool(["torch/eager"], timeout=300.0) as pool:
        found = Checker(pool).check(case, ["torch/eager"]).findings
    assert not [f for f in found if f.kind == "backend-bug"], [f.message for f in found]
