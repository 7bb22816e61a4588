"""TVM in depth (issue 14): tvm/passes (pass sequences in the case), tvm/mixed-precision, tvm/frontend."""

from __future__ import annotations

import io
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzer.artifacts import write_finding
from fuzzer.check import Checker, pin_passes
from fuzzer.cli import main as cli_main
from fuzzer.executors import create
from fuzzer.executors.tvm_mixed import (
    MIXED_PRECISION,
    mixed_precision_graph,
    runs_in_float16,
)
from fuzzer.ir import (
    Case,
    Graph,
    Input,
    IRError,
    Node,
    case_to_json,
    input_values,
    parse_case,
)
from fuzzer.isolation import ExecutorPool
from fuzzer.minimize import minimize
from fuzzer.minimize.pass_sequence import fewer_tvm_passes
from fuzzer.tvm_passes import (
    PASS_TABLE,
    PassSequenceError,
    check_sequence,
    derive_sequence,
    draw_sequence,
)
from generators import generate_case
from oracles.bugs import bug_key, title

pytest.importorskip("tvm")

EMOS = "ExpandMatmulOfSum"


def matmul_of_sum(passes: tuple[str, ...] | None, k: int = 4096) -> Case:
    """matmul(x, add(w1, w2)) in float16: x [4, k], w1 and w2 [k, 8] (the done-when case of issue 14)."""
    inputs = (Input("x", (4, k), "float16", init={"dist": "normal", "seed": 1}),
              Input("w1", (k, 8), "float16", "param", init={"dist": "normal", "seed": 2}),
              Input("w2", (k, 8), "float16", "param", init={"dist": "normal", "seed": 3}))
    nodes = (Node("w", "add", ("w1", "w2")), Node("y", "matmul", ("x", "w")))
    return Case(Graph(inputs, nodes, ("y",)), tvm_passes=passes)


@pytest.fixture(scope="module")
def pool() -> ExecutorPool:
    with ExecutorPool(["tvm/passes"], timeout=600.0) as p:
        yield p


# ---------------------------------------------------------------- the pass table and the case field


def test_tvm_pass_table_names_real_relax_passes() -> None:
    from tvm import relax

    for name in PASS_TABLE:
        assert callable(getattr(relax.transform, name)), name


def test_tvm_sequence_validation_names_the_problem() -> None:
    assert check_sequence([EMOS, "LegalizeOps", "FuseOps"]) == (EMOS, "LegalizeOps", "FuseOps")
    for bad, words in ((["Nope"], "unknown pass Nope"), (["FuseOps"], "needs LegalizeOps"),
                       (["LegalizeOps", EMOS], "cannot follow LegalizeOps"), ([3], "not a pass name"),
                       (["DecomposeOpsForTraining", "DecomposeOpsForInference"], "different batch_norm")):
        with pytest.raises(PassSequenceError, match=words):
            check_sequence(bad)


def test_tvm_bad_pass_name_in_case_json_is_a_one_line_exit_2(tmp_path: Path) -> None:
    body = case_to_json(matmul_of_sum((EMOS,), k=8))
    body["tvm_passes"] = [EMOS, "import os; os.system('x')"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(body))
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        status = cli_main(["check", str(path), "--executors", "tvm/passes"])
    assert status == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "unknown pass" in lines[0]
    with pytest.raises(IRError, match="must be a list"):
        parse_case(json.dumps({**body, "tvm_passes": EMOS}))


def test_tvm_sequence_is_saved_replayed_and_derived_deterministically() -> None:
    case = matmul_of_sum((EMOS, "CanonicalizeBindings"), k=8)
    again = parse_case(json.dumps(case_to_json(case)))
    assert again.tvm_passes == case.tvm_passes and again.id == case.id
    assert replace(case, tvm_passes=None).id != case.id  # the sequence is part of the case
    ops = ["matmul", "add"]
    assert derive_sequence("7:3", ops) == derive_sequence("7:3", ops)
    draws = {draw_sequence(random.Random(s), ops) for s in range(40)}
    assert len(draws) > 10 and all(check_sequence(d) == d for d in draws)
    generated = generate_case(7, 3)
    pinned = pin_passes(generated, True)
    assert pinned.tvm_passes == pin_passes(generate_case(7, 3), True).tvm_passes  # from the campaign seed
    assert pin_passes(pinned.with_graph(pinned.graph), True).tvm_passes == pinned.tvm_passes  # kept once written
    assert pin_passes(generated, False).tvm_passes is None


def test_tvm_minimizer_drops_passes_keeping_a_valid_order() -> None:
    case = matmul_of_sum(("CanonicalizeBindings", EMOS, "LegalizeOps", "FuseOps"), k=8)
    labels = [c.label for c in fewer_tvm_passes(case)]
    assert labels == ["drop Relax pass CanonicalizeBindings", f"drop Relax pass {EMOS}", "drop Relax pass FuseOps"]


# ---------------------------------------------------------------- the done-when case


@pytest.mark.slow
def test_tvm_expand_matmul_of_sum_is_flagged_named_and_minimized(pool: ExecutorPool, tmp_path: Path) -> None:
    """Flagged with ExpandMatmulOfSum in the sequence, not without; the culprit and the minimized title name it."""
    checker = Checker(pool)
    sequence = ("CanonicalizeBindings", EMOS, "EliminateCommonSubexpr")
    flagged = checker.check(matmul_of_sum(sequence))
    (finding,) = [f for f in flagged.findings if f.executor == "tvm/passes"]
    # the matmul of a sum: named as the matmul, or as the add where it feeds the matmul (the fused-form localizer's
    # reading of the rewrite matmul(x, w1) + matmul(x, w2): the add is gone, its operands rounded apart)
    assert (finding.ops == ["matmul"] or (finding.ops == ["add"] and "fused into the matmul" in finding.message)), finding.message
    assert finding.error_class == "bound" and finding.ratio > 2
    assert finding.details["culprit_pass"] == EMOS
    assert bug_key(finding).endswith(f"|pass:{EMOS}")
    clean = checker.check(matmul_of_sum(("CanonicalizeBindings", "EliminateCommonSubexpr")))
    assert not clean.findings
    result = minimize(flagged.case, finding, checker, budget_s=240, max_checks=6, fresh_recheck=False)
    assert result.finding is not None and result.case.tvm_passes == (EMOS,)
    assert EMOS in title(result.finding, ["tvm/passes"], variant=f"pass:{EMOS}")
    art = write_finding(tmp_path, result.case, result.finding, {"name": "tvm/passes"}, "test", full=False)
    script = art.repro.read_text()  # regression: the script once ran a sequence derived from the graph instead
    assert f'PASSES = ["{EMOS}"]' in script and EMOS in art.title


def test_tvm_one_graph_with_two_sequences_compiles_twice() -> None:
    """Regression: the prepared-module cache was keyed by the graph alone, so a second sequence reused the first."""
    case = matmul_of_sum(None, k=16)
    ex = create("tvm/passes")
    sets = [input_values(case, 0)]
    with_pass = ex.bind({"tvm_passes": [EMOS]}).run_case(case.graph, sets)[0]
    without = ex.bind({"tvm_passes": []}).run_case(case.graph, sets)[0]
    assert with_pass.ok and without.ok
    assert with_pass.info["program"] != without.info["program"]


# ---------------------------------------------------------------- mixed precision


def test_tvm_mixed_precision_table_matches_tvm_registry() -> None:
    """MIXED_PRECISION agrees with TMixedPrecisionPolicy of the Relax op each IR op lowers to."""
    import tvm

    relax_op = {"matmul": "matmul", "bmm": "matmul", "conv1d": "nn.conv1d", "conv2d": "nn.conv2d",
                "conv3d": "nn.conv3d", "linear": "matmul", "add": "add", "sub": "subtract", "mul": "multiply",
                "div": "divide", "neg": "negative", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
                "sin": "sin", "cos": "cos", "tanh": "tanh", "silu": "nn.silu", "gelu": "nn.gelu",
                "layer_norm": "nn.layer_norm", "group_norm": "nn.group_norm", "instance_norm": "nn.instance_norm",
                "rms_norm": "nn.rms_norm", "softmax": "nn.softmax", "log_softmax": "nn.log_softmax", "sum": "sum",
                "mean": "mean", "var": "mean", "cumsum": "cumsum", "batch_norm": "nn.batch_norm",
                "relu": "nn.relu", "sigmoid": "sigmoid", "abs": "abs", "erf": "erf", "pow": "power",
                "maximum": "maximum", "minimum": "minimum", "hardswish": "minimum", "hardsigmoid": "minimum",
                "clamp": "minimum", "transpose": "permute_dims", "permute": "permute_dims", "reshape": "reshape",
                "expand": "broadcast_to", "cat": "concat", "slice": "strided_slice", "select": "squeeze",
                "pad": "nn.pad", "embedding": "take", "index_select": "take", "gather": "gather_elements",
                "where": "where", "scaled_dot_product_attention": "nn.attention", "slice_scatter": "slice_scatter",
                "index": "index_tensor",
                "conv_transpose1d": "nn.conv1d_transpose", "conv_transpose2d": "nn.conv2d_transpose",
                "conv_transpose3d": "nn.conv3d_transpose", "interpolate_nearest": "image.resize2d",
                "interpolate_linear": "image.resize2d",
                **{f"{kind}_pool{n}d": f"nn.{kind}_pool{n}d" for kind in ("max", "avg", "adaptive_avg") for n in (1, 2, 3)}}
    names = {0: "always", 1: "follow"}
    for op, rop in relax_op.items():
        policy = tvm.ir.Op.get(f"relax.{rop}").get_attr("TMixedPrecisionPolicy")
        assert MIXED_PRECISION[op] == names.get(None if policy is None else int(policy), "never"), op


def test_tvm_mixed_precision_policy_graph_states_the_float16_ops() -> None:
    inputs = (Input("x", (2, 8), "float16"), Input("w", (8, 4), "float32", "param"))
    nodes = (Node("h", "matmul", ("x", "w")), Node("e", "exp", ("h",)), Node("s", "softmax", ("e",), {"dim": -1}))
    graph = Graph(inputs, nodes, ("s", "h"))
    assert runs_in_float16(mixed_precision_graph(graph)) >= {"h", "e"}
    policy = mixed_precision_graph(graph)
    assert [i.dtype for i in policy.inputs] == ["float32", "float32"]
    assert [n.op for n in policy.nodes] == ["astype", "astype", "matmul", "exp", "astype", "softmax"]


@pytest.mark.slow
def test_tvm_mixed_precision_judges_a_clean_case_clean() -> None:
    inputs = (Input("x", (4, 64), "float32"), Input("w", (64, 8), "float32", "param"))
    nodes = (Node("h", "matmul", ("x", "w")), Node("t", "tanh", ("h",)), Node("s", "softmax", ("t",), {"dim": -1}))
    case = Case(Graph(inputs, nodes, ("s", "h")), ({}, {"x": {"dist": "uniform", "low": -4, "high": 4, "seed": 5}}))
    with ExecutorPool(["tvm/mixed-precision"], timeout=600.0) as p:
        result = Checker(p).check(case)
    assert [o.status for o in result.outcomes["tvm/mixed-precision"]] == ["ok", "ok"]
    assert result.outcomes["tvm/mixed-precision"][0].dtypes == ["float32", "float32"]
    assert not result.findings, [f.message for f in result.findings]


# ---------------------------------------------------------------- the torch.export frontend


@pytest.mark.slow
def test_tvm_frontend_agrees_with_the_hand_lowering() -> None:
    inputs = (Input("x", (2, 3, 16), "float32"), Input("w", (8, 16), "float32", "param"),
              Input("g", (8,), "float32", "param", init={"dist": "uniform", "low": 0.5, "high": 2, "seed": 1}))
    nodes = (Node("h", "linear", ("x", "w", None)), Node("n", "layer_norm", ("h", "g", None), {"normalized_shape": [8]}),
             Node("y", "gelu", ("n",)))
    case = Case(Graph(inputs, nodes, ("y",)))
    with ExecutorPool(["tvm/frontend", "tvm/default"], timeout=600.0) as p:
        result = Checker(p).check(case)
    front, hand = result.outcomes["tvm/frontend"][0], result.outcomes["tvm/default"][0]
    assert front.ok and hand.ok, front.summary()
    assert front.dtypes == hand.dtypes == ["float32"]
    assert abs(front.outputs[0] - hand.outputs[0]).max() < 1e-4
    assert not result.findings, [f.message for f in result.findings]


def test_tvm_executors_are_listed_with_descriptions() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["executors"]) == 0
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()}
    for name, words in (("tvm/passes", "pass sequence"), ("tvm/mixed-precision", "ToMixedPrecision"),
                        ("tvm/frontend", "torch.export")):
        assert words in lines[name], lines[name]


def test_report_lists_tvm_bugs_by_pass() -> None:
    """Issue 14: the campaign report groups TVM bugs by the pass that causes them."""
    from fuzzer.campaign.report import bug_sections

    bugs = [{"kind": "backend-bug", "backend": "tvm", "key": "backend-bug|tvm|matmul|accuracy|float16/bfloat16|"
             "pass:ExpandMatmulOfSum", "title": "[TVM] matmul after ExpandMatmulOfSum"},
            {"kind": "backend-bug", "backend": "tvm", "key": "backend-bug|tvm|layer_norm|accuracy|float16/bfloat16|"
             "decompose", "title": "[TVM] layer_norm"},
            {"kind": "backend-bug", "backend": "tvm", "key": "backend-bug|tvm|mean|accuracy|float16/bfloat16|*",
             "title": "[TVM] mean"},
            {"kind": "backend-bug", "backend": "tvm", "key": "backend-bug|tvm|*|compiler-error|*|frontend", "title": "fe"},
            {"kind": "backend-bug", "backend": "torch_xla", "key": "backend-bug|torch_xla|mean|accuracy|x|*", "title": "x"}]
    text = "\n".join(bug_sections(bugs))
    section = text[text.index("## TVM bugs by pass"):]
    assert "| ExpandMatmulOfSum | 1 |" in section and "| DecomposeOpsForTraining | 1 |" in section
    assert "| (the default pipeline) | 1 | [TVM] mean |" in section and "torch_xla" not in section
    assert "| from_exported_program (the torch frontend) | 1 | fe |" in section


def test_regression_a_graph_the_frontend_path_cannot_express_is_no_tvm_coverage_gap() -> None:
    """tvm/frontend exports tensors only: a Python-scalar input is precfuzz's limitation, which was reported as
    '[TVM] ... is not supported'; now it is skipped and says why."""
    x = Input("x", (2, 3), "float32")
    s = Input("s", (), "float32", kind="scalar", init={"dist": "constant", "value": 2.0})
    case = Case(Graph((x, s), (Node("y", "mul", ("x", "s")),), ("y",)))
    with ExecutorPool(["torch/eager", "tvm/frontend"], timeout=300.0) as p:
        result = Checker(p).check(case)
    (out,) = result.outcomes["tvm/frontend"]
    assert out.status == "unsupported" and out.message.startswith("precfuzz cannot express")
    assert [f for f in result.findings if f.executor == "tvm/frontend"] == []


@pytest.mark.slow  # ~20-36 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_frontend_finding_has_a_short_repro_that_exits_1_alone(tmp_path: Path) -> None:
    """Issue 26: the frontend's records had only the 262-366 line full-oracle script. The short one exports the
    graph as a torch module, imports it with from_exported_program, builds and runs it next to eager (<= 60 lines)."""
    import subprocess
    import sys

    from fuzzer.ir import Case, Graph, Input, Node
    from fuzzer.repro import render

    inputs = (Input("x", (2, 8), "float16", init={"dist": "normal", "seed": 1}),
              Input("w", (4, 8), "float16", "param", init={"dist": "normal", "seed": 2}))
    case = Case(Graph(inputs, (Node("y", "linear", ("x", "w")), Node("z", "tanh", ("y",))), ("z",)))
    with ExecutorPool(["torch/eager", "tvm/frontend"]) as pool:
        result = Checker(pool).check(case)
    (finding,) = [f for f in result.findings if f.executor == "tvm/frontend"]
    script = render(result.case, finding, create("tvm/frontend"), title(finding))
    assert len(script.splitlines()) <= 60 and "from_exported_program" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tvm/frontend returns ['float32'] expected ['float16']" in done.stdout


@pytest.mark.slow
def test_regression_a_raise_after_a_dtype_departure_is_the_departures_bug_not_the_pass_that_trips_on_it(
        pool: ExecutorPool) -> None:
    """triage9 b7c8652ad3: bf16 attention then linear under [EliminateCommonSubexpr, FuseTransposeMatmul,
    DecomposeOpsForTraining] raised a dtype mismatch at the linear, filed as FuseTransposeMatmul's bug. Attention's
    legalization already returns float32 (its float32 scale, one cause with bbf14ee65e on tvm/default): the finding
    names attention's dtype, no culprit pass, and keys with tvm/default's record."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-passes-attention-linear-b7c8652ad3.json")
    result = Checker(pool).check(case, ["tvm/passes"])
    (f,) = [f for f in result.findings if f.executor == "tvm/passes"]
    assert (f.oracle, f.ops, f.node, f.dtypes) == ("dtype-divergence", ["scaled_dot_product_attention"], "attn",
                                                    ["bfloat16", "float32"]), f.message
    assert "linear1 (linear) then raises" in f.message
    assert f.details["culprit_pass"] is None and f.details["variant_specific"] is False
    assert bug_key(f, f.details["variant_specific"]) == \
        "backend-bug|tvm|scaled_dot_product_attention|dtype|float16/bfloat16|*"


def test_regression_a_frontend_raise_of_a_bias_meeting_a_float32_product_is_the_importers_dtype_record() -> None:
    """triage9 b0109fdbc8 / be1fc9775e / b030004d4a: the importer's float32 out_dtype of a 16-bit linear or conv
    showed as compile errors at linear, conv2d (their 16-bit bias meets it) and a later layer_norm: one record with
    the importer's dtype findings (b2d319ce21)."""
    from fuzzer.ir import Case, Graph, Input, Node

    def graph(*nodes: Node, extra: tuple[Input, ...] = ()) -> Graph:
        ins = (Input("x", (2, 2, 4, 4), "bfloat16"), Input("w", (3, 2, 1, 1), "bfloat16", role="param"),
               Input("b", (3,), "bfloat16", role="param"), *extra)
        return Graph(ins, nodes, (nodes[-1].id,))

    with ExecutorPool(["tvm/frontend", "tvm/default"], timeout=600.0) as frontend:
        checker = Checker(frontend)
        biased = checker.check(Case(graph(Node("c", "conv2d", ("x", "w", "b")))), ["tvm/frontend"])
        normed = checker.check(Case(graph(Node("c", "conv2d", ("x", "w")),
                                          Node("n", "layer_norm", ("c", "g"), {"normalized_shape": [4]}),
                                          extra=(Input("g", (4,), "bfloat16", role="param"),))), ["tvm/frontend"])
    keys = set()
    for result, message in ((biased, "without its bias tvm/frontend returns float32"),
                            (normed, "n (layer_norm) then raises")):
        (f,) = [f for f in result.findings if f.executor == "tvm/frontend"]
        assert f.oracle == "dtype-divergence" and f.node == "c" and message in f.message, f.message
        keys.add(bug_key(f, f.details.get("variant_specific")))
    assert keys == {"backend-bug|tvm|*|dtype|float16/bfloat16|frontend"}


def test_regression_without_eager_under_test_what_pytorch_gets_as_wrong_is_no_tvm_bug() -> None:
    """triage13 b4377ff1d6 / ba0d982096: float32 group_norm of -1.3e31 (x * x overflows float32) is NaN in TVM and in
    PyTorch eager too; a TVM-only campaign does not test eager, so nothing weighed TVM's NaN against PyTorch's and it
    was filed twice. The semantic oracle's own run of the program now is. Since issue 33 the values are not even
    judged: x * x passes float32's range in the one-pass variance, a common float32 form, so no float32 kernel owes a
    finite answer there (fuzzer.interpret.ideal_values); the note PyTorch's own NaN gave is no longer needed."""
    from fuzzer.ir import Case, Graph, Input, Node

    x = Input("x", (1, 4, 3), "float32", init={"dist": "constant", "value": -1.336e31})
    case = Case(Graph((x,), (Node("g", "group_norm", ("x",), {"num_groups": 2}),), ("g",)))
    with ExecutorPool(["tvm/default"], timeout=600.0) as alone:
        result = Checker(alone).check(case)
    assert not [f for f in result.findings if f.executor == "tvm/default"], [f.message for f in result.findings]
    import numpy as np

    from fuzzer.interpret import ideal_values
    from fuzzer.ir import input_values

    (judged,) = result.judgements["tvm/default"]
    assert judged.stats.ratio == 0.0  # not compared: every ideal is NaN there
    assert all(np.isnan(i).all() for i in ideal_values(case.graph, input_values(case, 0))["g"])


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_tvm_depth")


@pytest.mark.slow
def test_regression_float16_attention_overflowing_its_scores_is_the_default_lowerings_bug_not_to_mixed_precision() -> None:
    """triage13 baf9062a49: q=300, k=-400 under ToMixedPrecision gives NaN (the scores, computed in float16, overflow);
    it was keyed to ToMixedPrecision because the ablation's tvm/default run got an explicit float32 scale from the
    hand lowering, which widened the scores to float32 and hid the same NaN. The lowering passes scale=None as the
    importer does, and the record is tvm/default's."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-mixed-attention-overflow-baf9062a49.json")
    with ExecutorPool(["tvm/mixed-precision", "tvm/default"], timeout=600.0) as both:
        result = Checker(both).check(case, ["tvm/mixed-precision"])
    (f,) = [f for f in result.findings if f.executor == "tvm/mixed-precision"]
    assert f.details["variant_specific"] is False, f.details.get("ablation")
    # float16 scores past 65504: the op alone in float32 is right, so no one-formula key across dtypes (triage30
    # b1ca6657d9); the 16-bit attention's record
    assert bug_key(f, False) == "backend-bug|tvm|scaled_dot_product_attention|accuracy|float16/bfloat16|*"


def test_tvm_attention_widens_to_float32_only_with_an_explicit_scale() -> None:
    """bbf14ee65e stays reachable: R.nn.attention with an explicit (float32) scale returns float32 for float16
    operands, TVM's own default scale keeps float16."""
    tvm = create("tvm/default")
    for scale, want in ((None, "float16"), (0.5, "float32")):
        ins = tuple(Input(n, (1, 1, 2, 4), "float16") for n in "qkv")
        case = Case(Graph(ins, (Node("a", "scaled_dot_product_attention", ("q", "k", "v"), {"scale": scale}),), ("a",)))
        (outcome,) = tvm.run_case(case.graph, [input_values(case, 0)])
        assert outcome.ok and outcome.dtypes == [want], (scale, outcome.summary())


def test_regression_a_16_bit_norm_sum_decompose_exposes_is_tvms_16_bit_sum_record() -> None:
    """triage13 b6d999e4ee: float16 layer_norm NaN after DecomposeOpsForTraining was keyed to the pass; the pass turns
    it into float16 R.mean/R.variance, whose legalization sums in float16 (R.mean of [30000] * 4 is inf on the default
    pipeline alone): one record with TVM's 16-bit sums."""
    from oracles.findings import Finding

    def found(executor: str, op: str, dtypes: str = "float16->float16") -> Finding:
        return Finding("error-bound", executor, [op], [dtypes], "nonfinite", "m", details={"variant_specific": True})

    summing = "backend-bug|tvm|16-bit-sum|accuracy|float16/bfloat16|*"
    assert bug_key(found("tvm/decompose", "layer_norm"), True) == summing
    assert bug_key(found("tvm/default", "mean"), None) == summing
    assert bug_key(found("tvm/decompose", "layer_norm", "float32->float32"), True).endswith("|float32|decompose")
    assert bug_key(found("tvm/decompose", "softmax"), True).endswith("|decompose")


def test_relax_decompose_for_training_turns_the_tagged_norms_into_16_bit_means() -> None:
    """The tag relax-training-mean is TVM's fact: DecomposeOpsForTraining emits float16 R.mean and R.variance for them."""
    from tvm import relax

    from fuzzer.ops import OPS, tagged

    assert tagged(OPS, "relax-training-mean") == {"layer_norm", "batch_norm"}
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3, 4), "float16"))
    g = relax.Var("g", relax.TensorType((3,), "float16"))
    w = relax.Var("w", relax.TensorType((4,), "float16"))
    with bb.function("main", [x, g, w]):
        with bb.dataflow():
            bn = bb.emit(relax.op.nn.batch_norm(x, g, g, g, g, axis=1, training=True)[0])
            ln = bb.emit(relax.op.nn.layer_norm(x, w, w, axes=[-1]))
            out = bb.emit_output(relax.Tuple([bn, ln]))
        bb.emit_func_output(out)
    text = relax.transform.DecomposeOpsForTraining()(bb.get()).script()
    assert "nn.batch_norm" not in text and "nn.layer_norm" not in text
    assert text.count('R.mean(') == 2 and text.count('R.variance(') == 2
    assert 'dtype="float32"' not in text


def test_regression_an_op_that_fails_just_above_the_subnormal_range_is_not_excused_by_flushing() -> None:
    """triage14 85007d003d: TVM's float16 tanh of conv outputs near 1e-6 returned 0, filed as flushing (unsupported);
    its tanh returns 0 for 6.1e-5, the smallest normal, too: the tanh's bug. The op is run alone with its operands
    lifted just above the subnormal range before flushing is said to explain it."""
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-tanh-small-not-flushing-85007d003d.json")
    with ExecutorPool(["tvm/default"], timeout=600.0) as alone:
        result = Checker(alone).check(case, ["tvm/default"])
    (f,) = [f for f in result.findings if f.executor == "tvm/default"]
    assert (f.kind, f.oracle, f.ops, f.error_class) == ("backend-bug", "error-bound", ["tanh"], "bound"), f.message
    assert f.details.get("fails_above_subnormals") is True

def test_regression_a_boolean_mask_lowered_to_relax_returns_0_for_rows_keeping_no_key() -> None:
    """triage31 b19e97bca2 (and triage16 b2ec291c20, this fixture, then filed as TVM's own "masked-rows" record), a
    false alarm of precfuzz's own lowering: R.nn.attention takes only an additive bias and TVM's importer refuses bool
    masks, so precfuzz lowered a bool mask as a -inf bias, whose fully masked rows are 0/0 in TVM: filed as TVM's
    NaN. A bool mask means "a row keeping none is 0" (PyTorch); the lowering now says so."""
    import numpy as np

    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "tvm-sdpa-fp16-all-masked-b2ec291c20.json")
    with ExecutorPool(["tvm/default"], timeout=600.0) as alone:
        result = Checker(alone).check(case, ["tvm/default"])
    assert not [f for f in result.findings if f.executor == "tvm/default"], [f.message for f in result.findings]
    (outcome,) = create("tvm/default").run_case(case.graph, [input_values(case, 0)])
    assert outcome.ok and np.array_equal(np.asarray(outcome.outputs[0], np.float64), np.zeros((1, 8, 13, 64)))


def test_regression_a_boolean_mask_computed_in_the_graph_finds_its_fully_masked_rows() -> None:
    """triage18 sample #19: the mask was `ne(attention_mask, 0)` reshaped, a node whose observed value came back as
    0/1 numbers; read as an additive bias every key was allowed, and the fully masked rows' NaN was filed as a
    16-bit accuracy bug of attention. A value the graph types bool is a boolean mask, however it was observed."""
    import numpy as np

    from fuzzer.ir import Graph, Input, Node
    from oracles.localize import fully_masked_rows

    graph = Graph((Input("q", (1, 1, 2, 4), "bfloat16"), Input("k", (1, 1, 3, 4), "bfloat16"),
                   Input("v", (1, 1, 3, 4), "bfloat16"), Input("m", (2, 3), "int64")),
                  (Node("keep", "ne", ("m", 0)), Node("keep4", "reshape", ("keep",), {"shape": [1, 1, 2, 3]}),
                   Node("attn", "scaled_dot_product_attention", ("q", "k", "v", "keep4"))), ("attn",))
    observed = {"keep4": np.array([[[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]]]), "attn": np.zeros((1, 1, 2, 4))}
    rows = fully_masked_rows(graph, "attn", {}, observed)
    assert rows is not None and rows.tolist() == [[[False, True]]]


def test_relax_group_and_instance_norm_take_the_variance_in_one_pass_in_float32_too() -> None:
    """The tag relax-one-pass-variance is TVM's fact (triage25 b4377ff1d6, b37ea4b019, ba0d982096): on rows offset by
    1000 its float32 group_norm and instance_norm are off by tenths or NaN (E[x^2] - E[x]^2 cancels, or goes negative), its layer_norm is not."""
    import numpy as np

    from fuzzer.interpret import evaluate
    from fuzzer.ops import OPS, tagged

    assert tagged(OPS, "relax-one-pass-variance") == {"group_norm", "instance_norm"}
    tvm = create("tvm/default")
    x = 1000.0 + np.array([0.0, 0.0, 0.0625, 0.0, 0.03125, 0.0]).reshape(1, 2, 3)
    for op, attrs, want_off in (("group_norm", {"num_groups": 1, "eps": 1e-5}, True),
                                ("instance_norm", {"eps": 1e-5}, True),
                                ("layer_norm", {"normalized_shape": [3], "eps": 1e-5}, False)):
        case = Case(Graph((Input("x", (1, 2, 3), "float32"),), (Node("n", op, ("x",), attrs),), ("n",)))
        (outcome,) = tvm.run_case(case.graph, [{"x": x}])
        exact = evaluate(case.graph, {"x": x}, rounded=False)["n"]
        off = float(np.max(np.nan_to_num(np.abs(np.asarray(outcome.outputs[0], np.float64) - exact), nan=np.inf)))
        assert (off > 0.1) == want_off and (want_off or off < 1e-2), (op, off)
