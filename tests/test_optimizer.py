"""Optimizer steps (issue 36): the update rules, their 16-bit ideal, TVM's optimizer, the training hazards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fuzzer.check import Checker
from fuzzer.interpret import evaluate
from fuzzer.ir import case_from_json, input_values, load_case
from oracles.bugs import bug_key, title

SHAPE = [4, 8]


def step_case(op: str, dtype: str, attrs: dict, weights: dict, grad: dict, state: list[dict] | None = None,
              master_of: str | None = None) -> dict:
    """One optimizer step as a case: weight, grad, state inputs of `dtype`; with `master_of`, the float32 master's
    step of a `master_of` gradient, and the 16-bit copy as a second output."""
    def inp(name: str, init: dict, dt: str = dtype) -> dict:
        return {"name": name, "shape": SHAPE, "dtype": dt, "role": "param", "kind": "tensor", "init": init}
    names = {"sgd_step": ["momentum_buffer"], "adam_step": ["exp_avg", "exp_avg_sq"]}[op]
    state = state if state is not None else [{"dist": "constant", "value": 0.0}] * len(names)
    if op == "sgd_step" and not attrs.get("momentum"):
        names, state = [], []
    inputs = [inp("w", weights), inp("g", grad, master_of or dtype)] + [inp(n, s) for n, s in zip(names, state)]
    nodes = []
    g = "g"
    if master_of:
        nodes.append({"id": "g32", "op": "astype", "inputs": ["g"], "attrs": {"dtype": "float32"}})
        g = "g32"
    nodes.append({"id": "w_new", "op": op, "inputs": ["w", g, *names], "attrs": attrs})
    outputs = ["w_new"]
    if master_of:
        nodes.append({"id": "w_model", "op": "astype", "inputs": ["w_new"], "attrs": {"dtype": master_of}})
        outputs.append("w_model")
    return {"format": "precfuzz-graph/1", "inputs": inputs, "nodes": nodes, "outputs": outputs}


def torch_step(op: str, attrs: dict, tensors: list[torch.Tensor]) -> torch.Tensor:
    """torch.optim's class-based step (the API users call) on clones: the updated parameter."""
    p = tensors[0].clone().requires_grad_(False)
    p = torch.nn.Parameter(p)
    p.grad = tensors[1].clone()
    if op == "sgd_step":
        opt = torch.optim.SGD([p], lr=attrs["lr"], momentum=attrs.get("momentum", 0.0),
                              weight_decay=attrs.get("weight_decay", 0.0), nesterov=attrs.get("nesterov", False))
        if attrs.get("momentum"):
            opt.state[p]["momentum_buffer"] = tensors[2].clone()
    else:
        cls = torch.optim.AdamW if attrs.get("decoupled") else torch.optim.Adam
        opt = cls([p], lr=attrs["lr"], weight_decay=attrs.get("weight_decay", 0.0), eps=attrs.get("eps", 1e-8))
        opt.state[p].update(step=torch.tensor(float(attrs.get("step", 1) - 1)), exp_avg=tensors[2].clone(),
                            exp_avg_sq=tensors[3].clone())
    opt.step()
    return p.detach()


RULES = [
    ("sgd_step", {"lr": 0.1, "weight_decay": 0.01}),
    ("sgd_step", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    ("sgd_step", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("adam_step", {"lr": 1e-3, "weight_decay": 0.01, "step": 5}),
    ("adam_step", {"lr": 1e-3, "weight_decay": 0.1, "decoupled": True, "step": 1}),
]


@pytest.mark.parametrize("op,attrs", RULES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(RULES)])
def test_the_exact_update_rule_is_torch_optims_in_float64(op: str, attrs: dict) -> None:
    """The reference is the rule torch.optim.SGD / Adam / AdamW apply (the class API, float64): not a rule of our own."""
    state = [{"dist": "normal", "std": 0.01, "seed": 3}, {"dist": "uniform", "low": 1e-5, "high": 1e-4, "seed": 4}]
    case = case_from_json(step_case(op, "float32", attrs, {"dist": "normal", "std": 0.02, "seed": 1},
                                    {"dist": "normal", "std": 0.01, "seed": 2}, state[:1] if op == "sgd_step" else state))
    values = input_values(case, 0)
    exact = evaluate(case.graph, values, rounded=False)["w_new"]
    tensors = [torch.tensor(np.asarray(values[i.name], np.float64)) for i in case.graph.inputs]
    np.testing.assert_allclose(exact, torch_step(op, attrs, tensors).numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op,attrs", RULES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(RULES)])
def test_the_16bit_ideal_rounds_where_torch_optims_single_tensor_step_does(op: str, attrs: dict, dtype: str) -> None:
    """The ideal of a 16-bit step (each elementary result rounded once to the parameter's dtype) is within two ULPs of
    PyTorch's single-tensor step on the CPU (its vectorized 16-bit kernels round through float32 first, and a near-tie
    at a binade edge is two of the smaller ULPs), well inside the bound's 2-ULP slack plus 3x the ideal's error:
    eager is judged against the algorithm it runs, not a fused one."""
    from oracles.bounds import ulp

    state = [{"dist": "normal", "std": 0.01, "seed": 3}, {"dist": "uniform", "low": 1e-5, "high": 1e-4, "seed": 4}]
    case = case_from_json(step_case(op, dtype, attrs, {"dist": "normal", "std": 0.02, "seed": 1},
                                    {"dist": "normal", "std": 0.01, "seed": 2}, state[:1] if op == "sgd_step" else state))
    values = input_values(case, 0)
    ideal = evaluate(case.graph, values, rounded=True)["w_new"]
    tdt = getattr(torch, dtype)
    tensors = [torch.tensor(np.asarray(values[i.name], np.float64)).to(tdt) for i in case.graph.inputs]
    got = torch_step(op, attrs, tensors).double().numpy()
    unit = ulp(np.maximum(np.abs(got), np.abs(ideal)), dtype)
    assert np.all(np.abs(got - ideal) <= 2 * unit), np.max(np.abs(got - ideal) / unit)


@pytest.fixture(scope="module")
def checker():
    from fuzzer.isolation import ExecutorPool

    pool = ExecutorPool(["torch/eager", "tvm/default"])
    yield Checker(pool)
    pool.close()


def test_tvm_bf16_adamw_dropping_its_updates_is_a_tvm_bug(checker: Checker) -> None:
    """TVM's relax.training.optimizer.Adam keeps beta2 = 0.999 as a bfloat16 constant (1.0): at step 1 the bias
    correction 1 - beta2_prod is 0, v_hat is inf and no weight moves; PyTorch's bf16 step (Python-float scalars)
    moves weights of std 0.02 by lr = 1e-3 (8 ULPs). Found by hand on TVM 0.27 while building the op."""
    case = case_from_json(step_case("adam_step", "bfloat16", {"lr": 1e-3, "weight_decay": 0.01, "decoupled": True},
                                    {"dist": "normal", "std": 0.02, "seed": 1},
                                    {"dist": "normal", "std": 1e-3, "seed": 2}))
    result = checker.check(case)
    bugs = [f for f in result.findings if f.kind == "backend-bug"]
    assert [(f.executor, f.ops) for f in bugs] == [("tvm/default", ["adam_step"])], result.findings
    assert "adam_step" in bug_key(bugs[0]) and bugs[0].ratio > 2


def test_bf16_adamw_of_weights_near_one_losing_its_update_is_a_training_hazard_and_master_weights_fix_it(
        checker: Checker) -> None:
    """bf16 AdamW with norm gains near 1 and lr 1e-4: every update is below half an ULP (eager and any backend alike):
    a model hazard naming master weights; the same step on float32 master weights has none."""
    gains, grad = {"dist": "normal", "mean": 1.0, "std": 0.01, "seed": 1}, {"dist": "normal", "std": 1e-3, "seed": 2}
    attrs = {"lr": 1e-4, "weight_decay": 0.01, "decoupled": True}
    result = checker.check(case_from_json(step_case("adam_step", "bfloat16", attrs, gains, grad)))
    hazards = [f for f in result.findings if f.error_class == "update-lost"]
    assert hazards and all(f.kind == "model-hazard" for f in hazards), result.findings
    assert "master weights" in hazards[0].message and hazards[0].details["frozen"] > 0.5
    assert title(hazards[0]).startswith("Training hazard: bfloat16 adam_step loses")
    assert not [f for f in result.findings if f.kind == "backend-bug"]
    fixed = checker.check(case_from_json(step_case("adam_step", "float32", attrs, gains, grad, master_of="bfloat16")))
    assert not [f for f in fixed.findings if f.kind == "model-hazard"], fixed.findings


def test_regression_lost_updates_of_other_shares_are_one_record(checker: Checker) -> None:
    """triage31: the update hazard's key held its cause in words, "94% of the weights do not move", so each share
    of frozen weights was a record of its own. The key holds the mechanism (frozen), the message the share."""
    gains, grad = {"dist": "uniform", "low": 0.25, "high": 1.0, "seed": 1}, {"dist": "normal", "std": 1e-3, "seed": 2}
    keys, shares = set(), set()
    for lr in (1e-4, 1e-3):  # every weight frozen; those below 0.5 (half an ULP under 1e-3) move
        attrs = {"lr": lr, "weight_decay": 0.01, "decoupled": True}
        result = checker.check(case_from_json(step_case("adam_step", "bfloat16", attrs, gains, grad)))
        for f in result.findings:
            if f.error_class == "update-lost":
                keys.add(bug_key(f))
                shares.add(f.details["frozen"])
    assert len(shares) == 2 and len(keys) == 1, (shares, keys)
    assert all("update-lost:frozen|" in k for k in keys), keys


def test_fp16_adam_whose_eps_rounds_to_zero_gives_a_nonfinite_update_hazard_not_a_pytorch_bug(checker: Checker) -> None:
    """float16 Adam, eps 1e-8, zero gradients (unused embedding rows): `denom.add_(eps)` rounds to 0 and the step is
    0/0 = NaN in eager's single-tensor path; the ideal of the program does the same, so it is the model's hazard."""
    case = case_from_json(step_case("adam_step", "float16", {"lr": 1e-3, "impl": "single"},
                                    {"dist": "normal", "std": 0.02, "seed": 1},
                                    {"dist": "randint", "low": 0, "high": 2, "seed": 2}))
    result = checker.check(case)
    assert not np.all(np.isfinite(result.outcomes["torch/eager"][0].outputs[0]))
    hazards = [f for f in result.findings if f.error_class == "update-nonfinite"]
    assert hazards and "eps=1e-08 rounds to 0.0 in float16" in hazards[0].message, result.findings
    assert not [f for f in result.findings if f.kind == "backend-bug" and f.executor == "torch/eager"]


def test_tvm_frontend_declares_an_optimizer_step_a_harness_limit() -> None:
    from fuzzer.executors import create
    from fuzzer.executors.base import HarnessLimit

    case = case_from_json(step_case("sgd_step", "float32", {"lr": 0.1}, {"dist": "normal", "seed": 1},
                                    {"dist": "normal", "seed": 2}))
    ex = create("tvm/frontend")
    if ex.availability() is not None:
        pytest.skip(ex.availability())
    with pytest.raises(HarnessLimit, match="optimizer step"):
        ex.prepare(case.graph)


def test_optimizer_family_draws_every_optimizer_master_weights_and_gradient_source() -> None:
    from generators.graphs import generate_case

    drawn = [generate_case(11, i, ["optimizer"]) for i in range(60)]
    ops = {n.op for c in drawn for n in c.graph.nodes}
    assert {"sgd_step", "adam_step", "astype"} <= ops
    kinds = {c.meta["detail"]["optimizer"]["kind"] for c in drawn}
    assert kinds == {"sgd", "momentum", "adam", "adamw"}
    assert {c.meta["detail"]["optimizer"]["master"] for c in drawn} == {True, False}
    assert {c.meta["detail"]["optimizer"]["source"] for c in drawn} == {"direct", "sparse", "accumulated", "unscaled"}


def test_fp16_gradients_underflowing_without_loss_scaling_are_a_hazard_the_named_scale_fixes(checker: Checker) -> None:
    """mean(x * w) over 4096 float16 values with w ~ 1e-4: the gradient of x is w / 4096 ~ 2e-8, below float16's
    smallest subnormal, so an ideal float16 backward returns zeros (eager's too). A training hazard naming
    GradScaler's 65536, checked: the scaled program's gradients, unscaled, are back."""
    graph = {"format": "precfuzz-graph/1",
             "inputs": [{"name": "x", "shape": [64, 64], "dtype": "float16", "grad": True, "role": "input",
                         "kind": "tensor", "init": {"dist": "normal", "seed": 1}},
                        {"name": "w", "shape": [64, 64], "dtype": "float16", "role": "param", "kind": "tensor",
                         "init": {"dist": "normal", "std": 1e-4, "seed": 2}}],
             "nodes": [{"id": "p", "op": "mul", "inputs": ["x", "w"], "attrs": {}},
                       {"id": "loss", "op": "mean", "inputs": ["p"], "attrs": {}}],
             "outputs": ["loss"]}
    result = checker.check(case_from_json(graph))
    hazards = [f for f in result.findings if f.error_class == "grad-underflow"]
    assert len(hazards) == 1 and hazards[0].kind == "model-hazard", result.findings
    # a float16 loss: GradScaler's 65536 is inf as its backward seed (hz24), 2^15 is the largest scale it holds
    assert hazards[0].details["scale"] == 32768.0 and hazards[0].details["with_scale"] < 0.01
    assert hazards[0].details["checked_on"] == "torch/eager"  # the scale given back on eager itself, not only ideally
    assert "GradScaler(init_scale=32768)" in hazards[0].message
    assert "float32 master weights" in hazards[0].message  # triage25: GradScaler refuses to unscale fp16 gradients
    assert title(hazards[0]).startswith("Training hazard: float16 mul backward: the gradient of x underflows")
    assert not [f for f in result.findings if f.kind == "backend-bug"], result.findings


def _subnormal_activations_case() -> dict:
    """layer_norm of bfloat16 activations near 1e-39 (eps 0.1 keeps them there), a linear, an MSE loss (hz24)."""
    def inp(name: str, shape: list[int], init: dict, role: str = "param", grad: bool = True) -> dict:
        return {"name": name, "shape": shape, "dtype": "bfloat16", "role": role, "kind": "tensor", "init": init,
                **({"grad": True} if grad else {})}
    return {"format": "precfuzz-graph/1",
            "inputs": [inp("x", [4, 6, 4], {"dist": "normal", "std": 1e-39, "seed": 3}, "input"),
                       inp("gamma", [4], {"dist": "constant", "value": 1.0}),
                       inp("beta", [4], {"dist": "constant", "value": 0.0}, grad=False),
                       inp("w", [64, 4], {"dist": "uniform", "low": -0.5, "high": 0.5, "seed": 4}),
                       inp("target", [4, 6, 64], {"dist": "normal", "seed": 5}, "input", grad=False)],
            "nodes": [{"id": "ln", "op": "layer_norm", "inputs": ["x", "gamma", "beta"],
                       "attrs": {"normalized_shape": [4], "eps": 0.1}},
                      {"id": "y", "op": "linear", "inputs": ["ln", "w"], "attrs": {}},
                      {"id": "r", "op": "sub", "inputs": ["y", "target"], "attrs": {}},
                      {"id": "sq", "op": "mul", "inputs": ["r", "r"], "attrs": {}},
                      {"id": "loss", "op": "mean", "inputs": ["sq"], "attrs": {}}],
            "outputs": ["loss"]}


def test_regression_a_gradient_subnormal_in_float32_is_no_hazard_of_a_16_bit_policy(checker: Checker) -> None:
    """hz24 b8162ac49a, triage26 b8162ac49a and bb32db210a: a bfloat16 linear's weight gradient from layer_norm
    activations near 1e-39 was filed as "underflows, scale the loss by 65536" (hz24: the scale was checked only on
    the ideal model; PyTorch's CPU bf16 linear reads the subnormal activations as 0), then, with the scale run on the
    executor, as "lost to subnormal activations, run this op in float32" (triage26: subnormal in float32 too, and a
    gradient near 1e-40 moves no weight under any optimizer). A gradient subnormal in float32 is lost by float32
    training as well: no hazard of the 16-bit policy."""
    case = case_from_json(_subnormal_activations_case())
    result = checker.check(case, ["torch/eager"])
    assert not [f for f in result.findings if f.error_class == "grad-underflow"], [f.message for f in result.findings]


def test_regression_a_gradient_the_executor_keeps_is_no_hazard_and_an_overflow_is_no_underflow() -> None:
    """hz24 b2457f0683: an rms_norm of rows near 3e38 (their square overflows float32) was called an underflow whose
    fix is a loss scale; eager's own backward keeps that gradient. A hazard is filed only where the executor's
    backward loses it too, and what blocks the scale is named (an overflow here)."""
    from oracles.training_hazards import GradientLoss, gradient_finding, obstacle, on_backend
    from fuzzer.executors.torch_exec import AUTOCAST_BF16
    from fuzzer.policy import DECLARED

    graph = case_from_json({"format": "precfuzz-graph/1",
                            "inputs": [{"name": "x", "shape": [2, 8], "dtype": "bfloat16", "role": "input",
                                        "kind": "tensor", "grad": True, "init": {"dist": "constant", "value": 3e38}}],
                            "nodes": [{"id": "n", "op": "rms_norm", "inputs": ["x"],
                                       "attrs": {"normalized_shape": [8], "eps": 1e-12}},
                                      {"id": "loss", "op": "mean", "inputs": ["n"], "attrs": {}}],
                            "outputs": ["loss"]}).graph
    blocked = obstacle(graph, {"x": np.full((2, 8), 3e38)}, "x")
    assert blocked[0] == "overflow" and "`x`" in blocked[1]
    loss = GradientLoss("x", "bfloat16", 1.0, 1.0, 65536.0, 0.0)
    assert on_backend(loss, "torch/eager", 0.1, None, lambda: blocked) is None  # eager keeps it: no hazard
    shown = on_backend(loss, "xla/native", 1.0, 1.0, lambda: blocked)
    assert shown is not None and shown.scale == 0.0 and shown.cause == "overflow"
    found = gradient_finding("xla/native", DECLARED, graph, shown, 0)
    assert found.error_class == "grad-overflow" and "lost to an overflow" in title(found)
    # the scale the ideal offers fails on the executor: the subnormal activations are named, and where they are
    # subnormal in float32 too, the fix is to rescale them (triage26: "run this op in float32" failed on XLA)
    sub = on_backend(loss, "xla/autocast", 1.0, 1.0, lambda: ("subnormal", "`a` is subnormal in bfloat16 (and in "
                                                                          "float32) ..."))
    assert sub is not None and sub.cause == "subnormal"
    fix = gradient_finding("xla/autocast", AUTOCAST_BF16, graph, sub, 0).details["fix"]
    assert "rescale them: they are subnormal in float32 too" in fix and "run this op in float32" not in fix
    # an ideal backward that no scale helps loses the gradient by its own arithmetic: no kernel flushes it
    tiny = on_backend(GradientLoss("x", "float16", 1.0, 1.0, 0.0, 1.0), "torch/eager", 1.0, None,
                      lambda: ("subnormal", "`x` is subnormal"))
    assert tiny is not None and tiny.cause == "underflow"


def _scalar_step(op: str, dtype: str, values: dict, attrs: dict | None = None) -> dict:
    """A 0-dim optimizer step with constant inputs (the minimized form of triage21's training hazards)."""
    inputs = [{"name": n, "shape": [], "dtype": dtype, "role": "param", "kind": "tensor",
               "init": {"dist": "constant", "value": v}} for n, v in values.items()]
    return {"format": "precfuzz-graph/1", "inputs": inputs,
            "nodes": [{"id": "weight_new", "op": op, "inputs": list(values), "attrs": attrs or {}}],
            "outputs": ["weight_new"]}


def test_regression_an_update_float32_loses_too_is_no_training_hazard(checker: Checker) -> None:
    """triage21 bd5c50f359: SGD at lr 0.01 of a gradient of 8e-7 on a weight of 1 (an update of 8e-9) was filed as
    bf16's loss with master weights as the fix, but float32 master weights lose it as well (below float32's half
    ULP): not the policy's precision to lose."""
    from oracles import training_hazards

    case = case_from_json(_scalar_step("sgd_step", "bfloat16", {"weight": 1.0, "grad_dense": -8e-7}))
    assert training_hazards.judge(case.graph, input_values(case, 0)) == []


def test_regression_an_update_rounded_up_to_a_whole_ulp_is_said_to_be_wrong_not_lost(checker: Checker) -> None:
    """triage21 b6ad04c2a7: float16 Adam moving a weight of 1 by 2.85e-4 (0.58 ULP) moves it a whole ULP (171% of
    the update): the hazard said it 'loses 71%' and blamed an update below half an ULP; it overshoots. The script
    shows it and that float32 master weights give the update back, exit 1."""
    import subprocess
    import sys

    from fuzzer.executors import create
    from fuzzer.repro import render

    case = case_from_json(_scalar_step("adam_step", "float16", {"weight": 1.0, "grad": 0.0, "exp_avg": 1.0,
                                                                 "exp_avg_sq": 1.0}, {"lr": 1e-3}))
    hazards = [f for f in checker.check(case, ["torch/eager"]).findings if f.error_class == "update-lost"]
    assert len(hazards) == 1 and "gets its update 71% wrong" in hazards[0].message, hazards
    assert "below half an ULP" not in hazards[0].message and "moves by whole ULPs" in hazards[0].message
    script = render(case, hazards[0], create("torch/eager"), "t")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-800:]
    assert "71% of the update lost in the 16-bit step" in done.stdout and "0% lost with float32 master" in done.stdout


def test_gradscaler_skips_the_step_where_the_scaled_gradient_overflowed_on_every_backend(checker: Checker) -> None:
    """Loss scaling (issue 36): GradScaler's unscale_ kernel (torch._amp_foreach_non_finite_check_and_unscale_) and
    its skip: an fp16 scaled gradient holding inf leaves the weight as it was, on eager and on TVM as in the
    float64 reference; a finite one steps."""
    def case(value: float) -> dict:
        return {"format": "precfuzz-graph/1", "inputs": [
            {"name": "w", "shape": [8], "dtype": "float32", "role": "param", "kind": "tensor",
             "init": {"dist": "normal", "std": 0.02, "seed": 1}},
            {"name": "gs", "shape": [8], "dtype": "float16", "role": "param", "kind": "tensor",
             "init": {"dist": "constant", "value": value}}],
            "nodes": [{"id": "gs4", "op": "mul", "inputs": ["gs", 4.0], "attrs": {}},  # the backward's last op
                      {"id": "g32", "op": "astype", "inputs": ["gs4"], "attrs": {"dtype": "float32"}},
                      {"id": "g", "op": "amp_unscale", "inputs": ["g32"], "attrs": {"inv_scale": 2.0**-16}},
                      {"id": "w1", "op": "sgd_step", "inputs": ["w", "g"], "attrs": {"lr": 0.1}},
                      {"id": "found", "op": "amp_found_inf", "inputs": ["g"], "attrs": {}},
                      {"id": "skip", "op": "gt", "inputs": ["found", 0.0], "attrs": {}},
                      {"id": "w_out", "op": "where", "inputs": ["skip", "w", "w1"], "attrs": {}}],
            "outputs": ["w_out", "found"]}
    for value, skipped in ((30000.0, True), (300.0, False)):  # 4 x 30000 overflows float16
        c = case_from_json(case(value))
        result = checker.check(c)
        assert not [f for f in result.findings if f.kind == "backend-bug"], result.findings
        from oracles.nodes import rounded_inputs

        want = evaluate(c.graph, rounded_inputs(c.graph, input_values(c, 0)), rounded=True)  # fp16 overflows there
        assert float(want["found"]) == float(skipped)
        for name, outs in result.outcomes.items():
            w_out, found = outs[0].outputs
            assert float(found) == float(skipped), name
            assert np.array_equal(w_out == want["w"], np.full(8, skipped)), name


def test_torch_xla_growing_the_loss_scale_past_float32_is_its_bug() -> None:
    """GradScaler.update (torch._amp_update_scale_) grows the scale by growth_factor on the growth_interval-th
    successful step, and PyTorch's kernels keep the scale where the product is not finite; torch_xla's lowering makes
    it inf (2^127 * 2), after which every scaled loss is inf, every step is skipped and the scale stays inf. Found by
    the op's example when it was added (issue 36: GradScaler's scale update modelled)."""
    from pathlib import Path

    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent.parent / "corpus" / "examples"
                     / "amp-update-scale-growth-past-float32.json")
    with ExecutorPool(["torch/eager", "xla/native"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/native"])
    bugs = [f for f in result.findings if f.kind == "backend-bug"]
    assert [(f.executor, f.ops, f.error_class) for f in bugs] == [("xla/native", ["amp_update_scale"], "nonfinite")]
    assert "amp_update_scale returns inf/nan" in title(bugs[0])


def test_regression_a_gradient_no_scale_brings_into_float16_range_is_no_hazard() -> None:
    """triage25 b46e9d491f (and bc4c631c89): the gradient of a float16 input is sigma = 1e-38 (a float32 subnormal),
    filed as "100% lost, keep the backward in float32"; a float16 gradient cannot hold it with any scale up to 65536,
    and an update that small is lost to any optimizer. Such a gradient is no hazard (out_of_reach)."""
    from pathlib import Path

    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "fp16-gradient-out-of-reach-b46e9d491f-triage25.json")
    with ExecutorPool(["torch/eager", "torch/autocast"]) as pool:
        result = Checker(pool).check(case, ["torch/eager", "torch/autocast"])
    assert not [f for f in result.findings if f.error_class == "grad-underflow"], [f.message for f in result.findings]


def test_regression_a_loss_scale_whose_gradients_come_back_non_finite_is_no_fix() -> None:
    """hazards30 b466de186e: "scale the loss by 32768" for a float16 conv2d gradient, where 32768 times an upstream of
    2.24 overflows the backward's seed: every scaled gradient NaN, and the finite ones left (none) counted "0% lost".
    A non-finite scaled gradient beside a finite exact one is a failed scale; the fix then names the float32 path."""
    from oracles.training_hazards import gradient_lost

    assert gradient_lost(np.array([1e-4, 2e-4]), np.array([np.nan, 2e-4])) == float("inf")
    case = load_case(Path(__file__).parent / "fixtures" / "fp16-conv-groupnorm-scale-overflows-seed-hazards30.json")
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    with ExecutorPool(["torch/eager"]) as pool:
        found = [f for f in Checker(pool).check(case, ["torch/eager"]).findings if f.error_class == "grad-underflow"]
    assert found and all(not f.details.get("scale") for f in found), [f.details for f in found]
    assert all("in float32, forward and backward" in f.details["fix"] for f in found)


def test_regression_an_optimizer_step_that_moves_nothing_is_titled_as_a_lost_update() -> None:
    """triage30 b04c1a9e27: TVM's bfloat16 Adam (0.999 rounds to 1 in bfloat16, the bias correction is 0) leaves
    every parameter where it was; the record said "27.4x less accurate". It says the update is lost."""
    from fuzzer.isolation import ExecutorPool

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-bf16-adam-update-lost-b04c1a9e27-triage30.json")
    with ExecutorPool(["torch/eager", "tvm/default"], timeout=300.0) as pool:
        found = [f for f in Checker(pool).check(case, ["torch/eager", "tvm/default"]).findings
                 if f.executor == "tvm/default"]
    assert found and found[0].details.get("update_dropped") == 1.0, [f.message for f in found]
    assert "adam_step leaves 100% of the parameters it should move unchanged (the update is lost)" in title(found[0])
