"""TVM Relax executors (real apache-tvm on the CPU): lowering of every op, dtype behaviour per family, repro scripts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

pytest.importorskip("tvm")

from op_examples import combined, example  # noqa: E402

from fuzzer.executors import REGISTRY, create  # noqa: E402
from fuzzer.executors.tvm_exec import PIPELINES, TVMExecutor  # noqa: E402
from fuzzer.executors.tvm_render import render_module  # noqa: E402
from fuzzer.export import render_script  # noqa: E402
from fuzzer.interpret import evaluate  # noqa: E402
from fuzzer.ir import Case, Graph, Input, Node, infer, input_values, load_case  # noqa: E402
from fuzzer.isolation import ExecutorPool  # noqa: E402
from fuzzer.ops import OPS  # noqa: E402
from oracles.bounds import error_stats  # noqa: E402

N = {"dist": "normal", "seed": 3}


@pytest.fixture(scope="module")
def default() -> TVMExecutor:
    return create("tvm/default")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def decompose() -> TVMExecutor:
    return create("tvm/decompose")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def seed(seeds_dir: Path) -> Case:
    return load_case(seeds_dir / "tvm-decompose-layernorm-fp16.json")


def run(ex: TVMExecutor, case: Case):
    """(outcome, inputs) of input set 0."""
    inputs = input_values(case, 0)
    (outcome,) = ex.run_case(case.graph, [inputs])
    return outcome, inputs


def ratios(case: Case, inputs, outcome) -> list[float]:
    """Error ratio of each output against the bound (both ideals: exact rounded and float32 arithmetic)."""
    graph, typed = case.graph, infer(case.graph)
    expected = evaluate(graph, inputs, rounded=False)
    exact = evaluate(graph, inputs, rounded=True)
    fp32 = evaluate(graph, inputs, rounded=True, arithmetic="float32")
    return [error_stats(out, expected[name], [exact[name], fp32[name]], typed.values[name].dtype).ratio
            for name, out in zip(graph.outputs, outcome.outputs)]


def tensor(name: str, shape: list[int], dtype: str, init: dict | None = None, kind: str = "tensor") -> Input:
    return Input(name, tuple(shape), dtype, "input", kind, dict(init or {**N, "seed": len(name) + len(shape)}))


def graph_case(inputs: list[Input], nodes: list[tuple], outputs: list[str]) -> Case:
    made = tuple(Node(n[0], n[1], tuple(n[2]), n[3] if len(n) > 3 else {}) for n in nodes)
    return Case(Graph(tuple(inputs), made, tuple(outputs)))


# ---------------------------------------------------------------- registry and settings


def test_registry_has_the_pipelines() -> None:
    for pipeline in ("default", "decompose", "decompose-inference"):
        target, kwargs = REGISTRY[f"tvm/{pipeline}"]
        assert target == "fuzzer.executors.tvm_exec:TVMExecutor" and kwargs == {"pipeline": pipeline}
        ex = create(f"tvm/{pipeline}")
        assert ex.name == f"tvm/{pipeline}" and ex.group == "tvm" and ex.requires == ("tvm",)
        assert ex.availability() is None
    assert PIPELINES["decompose"] == ("DecomposeOpsForTraining",) and PIPELINES["default"] == ()
    desc = create("tvm/decompose").describe()
    assert desc["settings"]["passes"] == '["DecomposeOpsForTraining"]' and "apache-tvm" in desc["versions"]
    with pytest.raises(KeyError, match="unknown TVM pipeline"):
        TVMExecutor("no-such-pipeline")


# ---------------------------------------------------------------- the motivating bug


def test_seed_decompose_loses_the_fp32_accumulation(seed: Case, default: TVMExecutor, decompose: TVMExecutor) -> None:
    inputs = input_values(seed, 0)
    expected = evaluate(seed.graph, inputs, rounded=False)["y"]
    ideal = evaluate(seed.graph, inputs, rounded=True)["y"]
    assert np.allclose(np.abs(expected), 0.99992, atol=1e-5)
    (bad,) = decompose.run_case(seed.graph, [inputs])
    (good,) = default.run_case(seed.graph, [inputs])
    assert bad.ok and good.ok and bad.dtypes == good.dtypes == ["float16"]
    assert np.all(np.abs(bad.outputs[0]) == 1.4140625)
    assert np.all(np.abs(good.outputs[0]) == 1.0)
    worse = error_stats(bad.outputs[0], expected, ideal, "float16")
    fine = error_stats(good.outputs[0], expected, ideal, "float16")
    assert worse.ratio > 100 and worse.max_ulp > 500 and abs(worse.max_abs - 0.414) < 1e-3
    assert fine.ratio <= 1.0


# ---------------------------------------------------------------- every op, per dtype

# What TVM 0.27 does with each op family in low precision (everything not listed: ok, declared dtype, in bound).
UNSUPPORTED = {
    ("layer_norm", "bfloat16"): "layer_norm: only support float32 and float16",  # TOPI, at legalization
    ("instance_norm", "bfloat16"): "instance_norm: only support float32 and float16",  # TOPI, at legalization
    ("group_norm", "bfloat16"): "expects that data must be float, but got T.bfloat16",  # Relax type inference
}
# A TVM error at compile that is no limitation it states: a backend bug (power's check forgets bfloat16 is a float)
FAILS = {("pow", "bfloat16"): "power only applies to float",
         # TVM's own frontend fails the same on torch.argmax of a bfloat16 tensor (a TVM limitation, issue 37's op)
         ("argmax", "bfloat16"): "StructuralEqual()(value->ty, var->ty)"}
# Legalized batch_norm adds its float32 epsilon to the float16/bfloat16 variance and returns float32 tensors
# while Relax declares the input dtype: a dtype divergence the oracles report (values are fine). Legalized
# nn.attention does the same with an explicit float32 scale (the example has none: see test_tvm_attention_*).
RETURNS_FLOAT32 = {("batch_norm", "float16"), ("batch_norm", "bfloat16")}
# Out of bound on the op's example: float16 sums in the adaptive 3-d pool's windows (as TVM's float16 reductions)
OUT_OF_BOUND = {("adaptive_avg_pool3d", "float16")}


@pytest.fixture(scope="module")
def every_op(default: TVMExecutor):
    """dtype -> op -> (outcome of its outputs, ratios): the examples that compile together run as one module."""
    cache: dict[str, dict[str, tuple]] = {}

    def get(dtype: str) -> dict[str, tuple]:
        if dtype not in cache:
            alone = {op for op, d in [*UNSUPPORTED, *FAILS] if d == dtype}
            case, owner = combined([op for op in sorted(OPS) if op not in alone], dtype)
            outcome, inputs = run(default, case)
            results: dict[str, tuple] = {}
            if outcome.ok:
                rs = ratios(case, inputs, outcome)
                for k, name in enumerate(case.graph.outputs):
                    results[owner[name]] = (outcome, [outcome.dtypes[k]], [rs[k]])
            for op in sorted(OPS):  # alone: the expected failures, and every op when the module did not build
                if op not in results:
                    single = example(op, dtype)
                    out, ins = run(default, single)
                    results[op] = (out, out.dtypes, ratios(single, ins, out) if out.ok else [])
            cache[dtype] = results
        return cache[dtype]

    return get


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_lowers_and_agrees_in_float32(op: str, every_op) -> None:
    outcome, dtypes, rs = every_op("float32")[op]
    assert outcome.ok, outcome.summary()
    assert dtypes == [infer(example(op).graph).values["out"].dtype]
    assert max(rs) <= 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_in_low_precision(op: str, dtype: str, every_op) -> None:
    outcome, dtypes, rs = every_op(dtype)[op]
    if (op, dtype) in UNSUPPORTED:
        assert outcome.status == "unsupported" and outcome.stage == "compile", outcome.summary()
        assert UNSUPPORTED[op, dtype] in outcome.message
        return
    if (op, dtype) in FAILS:
        assert outcome.status == "error" and FAILS[op, dtype] in outcome.message, outcome.summary()
        return
    assert outcome.ok, outcome.summary()
    declared = infer(example(op, dtype).graph).values["out"].dtype
    assert dtypes == (["float32"] if (op, dtype) in RETURNS_FLOAT32 else [declared])
    assert (max(rs) > 1.0) == ((op, dtype) in OUT_OF_BOUND), max(rs)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_match_pytorch_on_the_reference_and_tvm(mode: str, default: TVMExecutor) -> None:
    """The pad op's non-constant modes (a new user's UNet1D pads with mode 'reflect'): the fp64 reference, PyTorch's
    F.pad and TVM's nn.pad agree exactly (they copy values); PyTorch's limits are the IR's."""
    import torch.nn.functional as F

    from fuzzer.ir import IRError

    x = Input("x", (2, 3, 5), "float16", init={"dist": "normal", "seed": 4})
    graph = Graph((x,), (Node("out", "pad", ("x",), {"pads": [2, 1, 1, 0], "value": 0.0, "mode": mode}),), ("out",))
    case = Case(graph, ({},))
    outcome, inputs = run(default, case)
    assert outcome.ok, outcome.summary()
    want = F.pad(torch.tensor(inputs["x"], dtype=torch.float16), [2, 1, 1, 0], mode=mode).double().numpy()
    np.testing.assert_array_equal(evaluate(graph, inputs, rounded=True)["out"], want)
    np.testing.assert_array_equal(outcome.outputs[0], want)
    with pytest.raises(IRError, match="does not fit|pads the last"):
        bad = {"reflect": [5, 0], "replicate": [1, 1, 1, 1, 1, 1], "circular": [6, 0]}[mode]
        infer(Graph((x,), (Node("out", "pad", ("x",), {"pads": bad, "mode": mode}),), ("out",)))


def test_float64_norms_are_unsupported_and_rms_norm_computes_in_float32(default: TVMExecutor) -> None:
    outcome, _ = run(default, example("layer_norm", "float64"))
    assert outcome.status == "unsupported" and "only support float32 and float16" in outcome.message
    case = example("rms_norm", "float64")
    outcome, inputs = run(default, case)
    assert outcome.ok and outcome.dtypes == ["float64"]
    assert max(ratios(case, inputs, outcome)) > 1e6  # TOPI's rms_norm goes through float32


# ---------------------------------------------------------------- accumulation


def test_float16_sum_keeps_tvm_accumulation_but_products_accumulate_in_float32(default: TVMExecutor) -> None:
    tenth = {"dist": "constant", "value": 0.1}
    summed = graph_case([tensor("x", [1, 4096], "float16", tenth)], [("y", "sum", ["x"], {"dims": [1]})], ["y"])
    outcome, inputs = run(default, summed)
    assert outcome.ok and outcome.outputs[0][0] == 256.0  # the float16 accumulator stalls (exact: 409.5)
    assert ratios(summed, inputs, outcome)[0] > 100
    ones = {"dist": "constant", "value": 1.0}
    linear = graph_case([tensor("x", [1, 4096], "float16", tenth), tensor("w", [2, 4096], "float16", ones)],
                        [("y", "linear", ["x", "w"])], ["y"])
    outcome, inputs = run(default, linear)
    assert outcome.ok and outcome.dtypes == ["float16"] and ratios(linear, inputs, outcome)[0] <= 1.0
    assert "out_dtype='float32'" in render_module(linear.graph)


# ---------------------------------------------------------------- promotion, scalars, chain breaks


def test_regression_a_0_dim_float32_multiplier_of_float16_is_read_at_float32_like_pytorch(default: TVMExecutor) -> None:
    """triage8 b51bb42d36 (a false alarm): the Relax program cast the 0-dim float32 scale to float16 first, so 448 *
    146.2143 became 448 * 146.25 = inf; PyTorch's CPU kernel reads a second operand that is 0-dim at float precision
    and gives 65504 (torch.tensor([448.], dtype=torch.float16) * torch.tensor(146.2143))."""
    case = graph_case([tensor("x", [4], "float16", {"values": [448.0, 1.0, -448.0, 2.0]}),
                       tensor("s", [], "float32", {"values": 146.2143})],
                      [("y", "mul", ["x", "s"]), ("z", "mul", ["s", "x"])], ["y", "z"])
    outcome, _ = run(default, case)
    assert outcome.ok and outcome.dtypes == ["float16", "float16"], outcome.summary()
    x = torch.tensor([448.0, 1.0, -448.0, 2.0], dtype=torch.float16)
    np.testing.assert_array_equal(outcome.outputs[0], (x * torch.tensor(146.2143)).double().numpy())
    assert np.isinf(outcome.outputs[1][0])  # the first operand is cast to float16 in PyTorch too (its value: inf)
    assert np.isinf((torch.tensor(146.2143) * x).double().numpy()[0])


def test_explicit_casts_follow_pytorch_promotion(default: TVMExecutor) -> None:
    ints = {"dist": "randint", "low": -50, "high": 50, "seed": 1}
    case = graph_case(
        [tensor("i", [4], "int32", ints), tensor("j", [4], "int64", {**ints, "low": 1}), tensor("h", [4], "float16"),
         tensor("z", [], "float32"), tensor("s", [], "float32", {"dist": "constant", "value": 0.1}, kind="scalar"),
         tensor("b", [4], "bfloat16")],
        [("ij", "add", ["i", "j"]), ("q", "div", ["i", "j"]), ("e", "exp", ["i"]), ("t", "sum", ["i"]),
         ("hz", "add", ["h", "z"]), ("es", "exp", ["s"]), ("hs", "mul", ["h", "es"]), ("h2", "add", ["h", 0.5]),
         ("hb", "mul", ["h", "b"]), ("f", "astype", ["hb"], {"dtype": "int32"}), ("ih", "mul", ["i", 0.25])],
        ["ij", "q", "e", "t", "hz", "hs", "h2", "hb", "f", "ih"])
    outcome, inputs = run(default, case)
    assert outcome.ok, outcome.summary()
    assert outcome.dtypes == ["int64", "float32", "float32", "int64", "float16", "float16", "float16", "float32",
                              "int32", "float32"]
    assert max(ratios(case, inputs, outcome)) <= 1.0
    assert np.array_equal(outcome.outputs[8], np.trunc(evaluate(case.graph, inputs, rounded=True)["hb"]))
    source = render_module(case.graph)
    assert "R.Var('s', R.TensorType([], 'float64'))" in source  # a Python scalar input: 0-dim float64
    assert "R.const(0.5, 'float16')" in source  # a literal: a constant of the node's dtype


def test_chain_break_is_bridged_and_recorded(default: TVMExecutor) -> None:
    case = graph_case([tensor("x", [2, 8], "float16"), tensor("w", [4, 8], "float32"), tensor("b", [4], "float32")],
                      [("y", "linear", ["x", "w", "b"])], ["y"])
    assert infer(case.graph).chain_breaks()
    outcome, inputs = run(default, case)
    assert outcome.ok and outcome.dtypes == ["float32"] and default.bridged(case.graph) == {"y"}
    assert ratios(case, inputs, outcome)[0] <= 1.0
    assert "chain break bridged" in render_module(case.graph)


def test_mixed_norm_computes_in_float32_and_returns_the_activation_dtype(default: TVMExecutor) -> None:
    for op, params, attrs in (("layer_norm", ["w", "b"], {"normalized_shape": [8]}),
                              ("rms_norm", ["w"], {"normalized_shape": [8]})):
        inputs = [tensor("x", [2, 8], "float16"), tensor("w", [8], "float32"), tensor("b", [8], "float32")]
        case = graph_case(inputs[:1 + len(params)], [("y", op, ["x", *params], attrs)], ["y"])
        outcome, values = run(default, case)
        assert outcome.ok and outcome.dtypes == ["float16"] and "bridged_chain_breaks" not in outcome.info
        assert ratios(case, values, outcome)[0] <= 1.0
        assert "R.op.astype(x, 'float32')" in render_module(case.graph)


def test_bfloat16_io_and_odd_names(default: TVMExecutor) -> None:
    case = graph_case([tensor("bb", [3, 2], "bfloat16"), tensor("R", [3, 2], "bfloat16")],
                      [("outputs", "neg", ["bb"]), ("1x", "mul", ["outputs", "R"])], ["1x", "bb", "outputs"])
    ex_ns, vm, _ = default.prepare(case.graph)
    inputs = input_values(case, 0)
    args = [np.asarray(inputs[k]).astype(ml_dtypes.bfloat16) for k in ("bb", "R")]
    import tvm

    raw = vm["main"](*[tvm.runtime.tensor(a, tvm.cpu()) for a in args])
    assert raw[0].numpy().dtype == np.dtype(ml_dtypes.bfloat16) and str(raw[0].dtype) == "bfloat16"
    outcome, _ = run(default, case)
    assert outcome.ok and outcome.dtypes == ["bfloat16"] * 3
    assert np.array_equal(outcome.outputs[1], inputs["bb"]) and np.array_equal(outcome.outputs[2], -inputs["bb"])


def test_prepare_compiles_once_per_graph(default: TVMExecutor, seed: Case) -> None:
    first = default.prepare(seed.graph)
    again = default.prepare(seed.graph)
    assert again[1] is first[1] and not again[2]["compiled"]
    sets = [input_values(seed, 0)] * 3
    outcomes = default.run_case(seed.graph, sets)
    assert all(o.ok for o in outcomes) and outcomes[0].compile_s < 0.05  # served from the cache


def test_pipelines_and_value_variants_share_one_compiled_program(seed: Case) -> None:
    """A pass that leaves the module alone, or new values for the same graph, compile nothing new (issue 13)."""
    from dataclasses import replace

    from fuzzer.executors import create, tvm_exec

    tvm_exec._PROGRAMS.clear()  # an earlier test of this process may have compiled the same program
    default, inference = create("tvm/default"), create("tvm/decompose-inference")
    graph = example("exp", "float16").graph
    first = default.run_case(graph, [input_values(Case(graph), 0)])[0]
    shared = inference.run_case(graph, [input_values(Case(graph), 0)])[0]
    other_values = replace(graph, inputs=tuple(replace(i, init={"dist": "uniform", "seed": 9}) for i in graph.inputs))
    again = default.run_case(other_values, [input_values(Case(other_values), 0)])[0]
    assert first.info["compiled"] and not shared.info["compiled"] and not again.info["compiled"]
    assert shared.info["shared_with"] == "tvm/default" and first.info["program"] == again.info["program"]
    np.testing.assert_array_equal(first.outputs[0], shared.outputs[0])  # the same program gives the same numbers


# ---------------------------------------------------------------- classification


def test_classify_limitations_vs_errors(default: TVMExecutor) -> None:
    import tvm

    limit = tvm.error.InternalError("Check failed: (x) is false: layer_norm: only support float32 and float16 for now")
    assert default.classify("compile", limit) == "unsupported"
    assert default.classify("run", limit) == "error"  # only compile-time refusals are limitations
    internal = tvm.error.InternalError("Check failed: (!expr->ty.IsMissing()) is false: The type is not populated")
    assert default.classify("compile", internal) == "error"
    assert default.classify("compile", ValueError("not supported")) == "error"  # not raised by TVM


# ---------------------------------------------------------------- other pipelines (documented findings)


def test_decompose_for_training_uses_batch_statistics_in_inference_batch_norm() -> None:
    case = example("batch_norm", "float32")
    outcome, inputs = run(create("tvm/decompose"), case)  # type: ignore[arg-type]
    assert outcome.ok and ratios(case, inputs, outcome)[0] > 1e3
    inference = example("batch_norm", "float16")
    outcome, inputs = run(create("tvm/decompose-inference"), inference)  # type: ignore[arg-type]
    assert outcome.ok and outcome.dtypes == ["float16"] and ratios(inference, inputs, outcome)[0] <= 1.0


# ---------------------------------------------------------------- repro scripts


def test_repro_body_is_the_executed_source(seed: Case, decompose: TVMExecutor) -> None:
    parts = decompose.repro_parts(seed.graph)
    assert render_module(seed.graph) in parts.body and "def run_backend(inputs):" in parts.body
    assert 'PASSES = ["DecomposeOpsForTraining"]' in parts.imports
    assert "import tvm" in parts.imports and "def round_to(values, dtype):" in parts.round_to


def _run_script(text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(text)
    return subprocess.run([sys.executable, "-I", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_seed_repro_script_fails_on_decompose_and_passes_without_it(seed: Case, decompose: TVMExecutor,
                                                                      tmp_path: Path) -> None:
    script = render_script(seed, decompose.repro_parts(seed.graph), "precfuzz export tvm-decompose-layernorm-fp16.json")
    bad = _run_script(script, tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "1.4140625" in bad.stdout and "BUG REPRODUCED" in bad.stdout
    fixed = re.sub(r'^PASSES = \["DecomposeOpsForTraining"\]$', "PASSES = []", script, count=1, flags=re.M)
    assert fixed != script
    good = _run_script(fixed, tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "OK: matches" in good.stdout


@pytest.mark.slow
def test_runs_in_an_isolated_worker(seed: Case) -> None:
    with ExecutorPool(["tvm/default", "tvm/decompose"], timeout=300.0) as pool:
        sets = [input_values(seed, 0)]
        default, decompose = pool.run("tvm/default", seed.graph, sets)[0], pool.run("tvm/decompose", seed.graph, sets)[0]
    assert default.ok and decompose.ok
    assert np.abs(default.outputs[0]).max() == 1.0 and np.abs(decompose.outputs[0]).max() == 1.4140625


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_tvm_executor")


def test_regression_a_16_bit_attention_right_in_float32_is_not_the_one_formula_record() -> None:
    """triage30 b1ca6657d9: TVM's float16 attention with scores past 65504 returns NaN (its scores and softmax stay
    in float16) and was keyed with its dtype-independent causal mask as 0 (tvm-one-formula), titled "(any dtype)".
    The op alone in float32 on the same values is right: the float16 record, titled float16."""
    from fuzzer.check import Checker
    from oracles.bugs import bug_key, title

    def inp(name: str, seed: int, std: float) -> Input:
        return Input(name, (1, 2, 4, 8), "float16", init={"dist": "normal", "mean": 0.0, "std": std, "seed": seed})

    graph = Graph((inp("q", 1, 400.0), inp("k", 2, 400.0), inp("v", 3, 1.0)),
                  (Node("y", "scaled_dot_product_attention", ("q", "k", "v")),), ("y",))
    names = ["torch/eager", "tvm/default"]
    with ExecutorPool(names) as pool:
        found = [f for f in Checker(pool).check(Case(graph), names).findings if f.executor == "tvm/default"]
    assert found and all(f.details.get("wrong_in_float32") is False for f in found), found
    assert all("|float16/bfloat16|" in bug_key(f) and "float16 scaled_dot_product_attention" in title(f)
               for f in found), [title(f) for f in found]
