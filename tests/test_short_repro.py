"""Short repro scripts (issue 10): a handful of lines of plain backend code that run alone with `python -I`,
exit 1 while the bug shows and 0 once fixed; hostile value names and titles stay in literals and comments."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.dtypes import round_to
from fuzzer.executors import create
from fuzzer.ir import Case, Graph, Input, Node, infer, load_case
from fuzzer.repro import render
from oracles.findings import Finding

ROOT = Path(__file__).resolve().parent.parent
TVM_SEED = ROOT / "corpus" / "seeds" / "tvm-decompose-layernorm-fp16.json"


def finding(oracle: str, executor: str, ops: list[str], **details) -> Finding:
    return Finding(oracle, executor, ops, [], "bound", "a message that the short script does not need", details=details)


def script_for(case: Case, f: Finding, tmp_path: Path, title: str = "[test] a title") -> tuple[Path, str]:
    text = render(case, f, create(f.executor).bind({}), title)
    ast.parse(text)
    path = tmp_path / "repro.py"
    path.write_text(text)
    return path, text


def run_alone(path: Path) -> subprocess.CompletedProcess:
    """As a user runs it: `python -I` in the script's folder, with a bare environment (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return subprocess.run([sys.executable, "-I", path.name], cwd=path.parent, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def standalone(text: str) -> None:
    imported = {line.split()[1].split(".")[0] for line in text.splitlines() if line.startswith(("import ", "from "))}
    stdlib = {"typing", "contextvars"}  # what the pasted reference interpreter's functions use (annotations, a flag)
    assert imported <= {"os,", "math,", "numpy", "ml_dtypes", "tvm", "torch", "torch_xla"} | stdlib, imported
    assert "fuzzer" not in text and "oracles" not in text and "precfuzz export" not in text


def xla_var_case() -> Case:
    """triage6's bf5f745d8f minimized: 5 nodes, bfloat16 var under xla/autocast (its short script had 79 lines)."""
    x = Input("x", (7, 15, 42), "float32", role="input", init={"dist": "normal", "std": 3.0, "seed": 2143226667})
    w = Input("w", (18, 15, 5), "float32", role="param",
              init={"dist": "uniform", "low": -0.11547005383792514, "high": 0.11547005383792514, "seed": 1087839587})
    gamma = Input("gamma", (18,), "float16", role="param", init={"dist": "constant", "value": 1.0})
    beta = Input("beta", (18,), "float16", role="param", init={"dist": "constant", "value": 0.0})
    w1 = Input("w1", (228, 40), "float16", role="param", init={"dist": "alternating", "value": 0.15811388300841897})
    nodes = (Node("conv1", "conv1d", ("x", "w"), {"padding": [1], "stride": [1]}),
             Node("astype1", "astype", ("conv1",), {"dtype": "float16"}),
             Node("group_norm1", "group_norm", ("astype1", "gamma", "beta"), {"eps": 1e-12, "num_groups": 9}),
             Node("linear1", "linear", ("group_norm1", "w1")),
             Node("var1", "var", ("linear1",), {"correction": 0, "dims": [2]}))
    return Case(Graph((x, w, gamma, beta, w1), nodes, ("var1",)))


def xla_dtype_case() -> Case:
    """triage6's ba3e395526: layer_norm of a float16 input with a float32 bias returns float32 on XLA."""
    x = Input("x", (1,), "float16", role="input", init={"dist": "constant", "value": 1.0})
    beta = Input("beta", (1,), "float32", role="param", init={"dist": "constant", "value": 0.0})
    node = Node("layer_norm1", "layer_norm", ("x", None, "beta"), {"normalized_shape": [1]})
    return Case(Graph((x, beta), (node,), ("layer_norm1",)))


def test_tvm_one_node_bound_bug_is_short_and_fails_alone_then_passes_without_the_pass(tmp_path: Path) -> None:
    path, text = script_for(load_case(TVM_SEED), finding("error-bound", "tvm/decompose", ["layer_norm"]), tmp_path)
    assert len(text.splitlines()) <= 49, text  # 40 + the bound in ULPs (3) + controls that may not build (4) + torch
    # kept out of `import tvm` (1: issue 24) + the verdict's words (1: a cast's, triage33 beacf72a2b)
    standalone(text)
    assert 'PASSES = ["DecomposeOpsForTraining"]' in text
    proc = run_alone(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "got -1.414" in proc.stdout and "BUG REPRODUCED" in proc.stdout
    path.write_text(text.replace('PASSES = ["DecomposeOpsForTraining"]', "PASSES = []"))
    proc = run_alone(path)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


def test_tvm_status_script_has_no_dtype_tables(tmp_path: Path) -> None:
    case = load_case(TVM_SEED)
    _, text = script_for(case, finding("status-divergence", "tvm/default", ["layer_norm"]), tmp_path)
    assert len(text.splitlines()) <= 33, text  # (+1: torch kept out of `import tvm`, issue 24)
    assert "DECLARED" not in text and "T[" not in text and "R.TensorType([1, 4096], 'float16')" in text


@pytest.mark.slow
def test_xla_one_node_dtype_bug_is_short_and_fails_alone(tmp_path: Path) -> None:
    path, text = script_for(xla_dtype_case(), finding("dtype-divergence", "xla/native", ["layer_norm"]), tmp_path)
    assert len(text.splitlines()) <= 30, text
    standalone(text)
    proc = run_alone(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "returns ['float32'] expected ['float16']" in proc.stdout
    assert "PyTorch eager on the CPU returns ['torch.float16']" in proc.stdout


@pytest.mark.slow
def test_xla_five_node_bound_bug_keeps_one_line_per_node_and_fails_alone(tmp_path: Path) -> None:
    case = xla_var_case()
    path, text = script_for(case, finding("error-bound", "xla/autocast", ["var"]), tmp_path)
    assert len(text.splitlines()) <= 60, text
    standalone(text)
    assert "def exact(" not in text  # the exact answer reuses the program's text: its casts keep float64
    for node in case.graph.nodes:  # the backend's graph and the program eager runs, each one line per node
        assert sum(line.lstrip().startswith(f"{node.id} = ") for line in text.splitlines()) == 2
    proc = run_alone(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BUG REPRODUCED" in proc.stdout and "expected" in proc.stdout and "got" in proc.stdout


PAYLOAD = '__import__("os").system("touch pwned")'


def hostile_case() -> Case:
    """Names that shadow the script's own (inputs, cast, exact, rng, DECLARED), quote, or inject; two outputs."""
    names = ["inputs", "cast", "exact", f'o""",{PAYLOAD},"""', "rng", "DECLARED"]
    a = Input(names[0], (2, 3), "float32", init={"dist": "normal", "seed": 1})
    b = Input(names[4], (2, 3), "float32", init={"dist": "normal", "seed": 1})
    w = Input(names[5], (3,), "float32", init={"dist": "uniform", "low": 0.5, "high": 2.0, "seed": 3})
    nodes = (Node(names[1], "mul", (names[0], names[4])),
             Node(names[2], "layer_norm", (names[1], names[5]), {"normalized_shape": [3]}),
             Node(names[3], "add", (names[2], names[1])))
    return Case(Graph((a, b, w), nodes, (names[3], names[1])))


@pytest.mark.parametrize("executor", ["torch/eager", "tvm/default"])
def test_hostile_names_and_title_stay_out_of_the_code_and_a_clean_case_exits_0(executor: str, tmp_path: Path) -> None:
    case = hostile_case()
    f = finding("error-bound", executor, ["add"])
    _, benign = script_for(case, f, tmp_path, "a plain title")
    path, hostile = script_for(case, f, tmp_path, f"title\n{PAYLOAD}\r\u2028# -*- coding: utf-7 -*-")
    assert ast.dump(ast.parse(hostile)) == ast.dump(ast.parse(benign))  # comments differ, code does not
    assert hostile.splitlines()[:2] == benign.splitlines()[:2]  # no encoding declaration can sneak in
    assert "for name, " in hostile  # two outputs: one verdict line each
    proc = run_alone(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # float32 on the CPU: no bug, and nothing injected
    assert not (tmp_path / "pwned").exists() and proc.stdout.count("max error") == 2 and "OK" in proc.stdout


# ---------------------------------------------------------------- the script's verdict is the oracle's

BMM_CASE = Path(__file__).resolve().parent / "fixtures" / "xla-bmm-fp16-b6e13de9b2.json"


def test_inputs_of_one_seed_get_a_fresh_generator_each_as_precfuzz_makes_them(tmp_path: Path) -> None:
    """triage6's b6e13de9b2: x and rhs both draw from seed 0; the script shared one generator, so its rhs was not
    the one precfuzz ran (and its error was measured on other numbers)."""
    import numpy as np

    from fuzzer.ir import input_values

    for case in (load_case(BMM_CASE), hostile_case()):
        _, text = script_for(case, finding("error-bound", "torch/eager", [case.graph.nodes[-1].op]), tmp_path)
        head = text[:text.index("expected = ")]  # imports, ALLOWED, the program, the inputs
        ns: dict = {}
        exec(compile(head.replace("sys.excepthook = ", "_ = "), "repro", "exec"), ns)
        want = input_values(case, 0)
        for inp, got in zip(case.graph.inputs, ns["inputs"]):
            assert np.array_equal(got.double().numpy(), want[inp.name]), (inp.name, head)


def _verdict_of_script(text: str, actual) -> int:
    """Exit status of a rendered torch/eager script whose backend result is replaced by `actual`."""

    run = "    actual = graph(*inputs)[0]"
    assert run in text
    body = text.replace(run, "    actual = ACTUAL")
    try:
        exec(compile(body, "repro", "exec"), {"ACTUAL": actual, "__name__": "repro"})
    except SystemExit as stop:
        return int(stop.code)
    raise AssertionError("the script did not exit")


def test_script_verdict_is_the_oracles_on_error_bound_cases(tmp_path: Path, monkeypatch) -> None:
    """Property: for error-bound cases and backend results around the bound, the rendered script exits 1 exactly
    when the oracle (bound_ratio on exact and ideals, a finding at MARGIN x) reports the node."""
    import sys as _sys

    import numpy as np
    import torch

    from fuzzer.interpret import evaluate, ideal_values
    from fuzzer.ir import input_values
    from oracles.bounds import error_stats
    from oracles.error_bounds import MARGIN
    from oracles.nodes import rounded_inputs

    monkeypatch.setattr(_sys, "excepthook", _sys.excepthook)  # the script sets its own
    ex = create("torch/eager").bind({})
    a = Input("a", (64, 48), "float16", init={"dist": "normal", "seed": 5})
    b = Input("b", (48, 16), "float16", init={"dist": "uniform", "seed": 5})
    n = Input("n", (3, 200), "bfloat16", init={"dist": "offset", "mean": 3.0, "std": 0.5, "seed": 7})
    cases = [load_case(BMM_CASE),
             Case(Graph((a, b), (Node("mm1", "matmul", ("a", "b")),), ("mm1",))),
             Case(Graph((n,), (Node("sum1", "sum", ("n",), {"dims": [1]}),), ("sum1",))),
             Case(Graph((a,), (Node("sm", "softmax", ("a",), {"dim": 1}),), ("sm",)))]
    rng = np.random.default_rng(0)
    checked = 0
    for case in cases:
        out = case.graph.outputs[0]
        numeric = ex.numeric_graph(case.graph)
        dtype = infer(numeric).values[out].dtype
        inputs = rounded_inputs(numeric, input_values(case, 0))
        exact, ideal = evaluate(numeric, inputs, rounded=False)[out], ideal_values(numeric, inputs)[out]
        _, text = script_for(case, finding("error-bound", "torch/eager", [case.graph.nodes[0].op]), tmp_path)
        spread = np.abs(ideal[0] - exact).max() + np.abs(exact).max() * 2.0 ** -10
        for scale in (0.0, 1.0, 3.0, 6.0, 12.0, 30.0):
            noisy = round_to(exact + rng.standard_normal(exact.shape) * spread * scale, dtype)
            if scale == 12.0:  # one element far off, the rest exact: the max term alone decides
                noisy = round_to(exact, dtype).copy()
                noisy.flat[min(7, noisy.size - 1)] += spread * 8
            oracle = error_stats(noisy, exact, ideal, dtype).ratio >= MARGIN
            got = _verdict_of_script(text, torch.tensor(noisy).to(getattr(torch, dtype)))
            assert got == int(oracle), (case.graph.nodes[0].op, scale, error_stats(noisy, exact, ideal, dtype))
            checked += oracle
    assert checked >= 4  # the property was exercised on both sides


@pytest.mark.slow
def test_xla_bmm_b6e13de9b2_script_exits_1_as_the_oracle_reported(tmp_path: Path) -> None:
    """triage6's b6e13de9b2: the oracle reports bmm at 3.21x its bound on its own operands; the script (other rhs
    values, and one absolute bound at the largest value's ULP) measured 0.0484 <= 0.0487 and exited 0."""
    f = Finding("error-bound", "xla/native", ["bmm"], ["float16,float16->float16"], "bound", "bmm: 3.21x",
                ratio=3.2112588818759757, input_set=0, output="bmm", node="bmm")
    path, text = script_for(load_case(BMM_CASE), f, tmp_path)
    standalone(text)
    proc = run_alone(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[746]:" in proc.stdout and "3.21x the allowed error" in proc.stdout, proc.stdout


BF16_LN_CASE = Path(__file__).resolve().parent / "fixtures" / "tvm-decompose-layernorm-bf16-b6d999e4ee.json"


def test_regression_a_control_that_cannot_build_does_not_crash_the_tvm_script(tmp_path: Path) -> None:
    """triage7's b6d999e4ee: bfloat16 layer_norm after DecomposeOpsForTraining; the 'without PASSES' control
    cannot build (TVM's layer_norm has no bfloat16 kernel), which crashed the script (exit 2) instead of the bug
    showing (exit 1). A control that does not build is NaN and named so."""
    f = Finding("error-bound", "tvm/decompose", ["layer_norm"], ["bfloat16->bfloat16"], "bound", "layer_norm: 2.99x",
                ratio=2.9884154351934975, input_set=0, node="layer_norm1")
    path, text = script_for(load_case(BF16_LN_CASE), f, tmp_path)
    standalone(text)
    proc = run_alone(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nan without" in proc.stdout and "BUG REPRODUCED" in proc.stdout, proc.stdout
    assert len(text.splitlines()) <= 60


def test_regression_repro_scripts_paste_the_functions_this_process_loaded(tmp_path: Path, monkeypatch) -> None:
    """triage9: fuzzer/interpret.py was edited while a 20-minute campaign ran, and inspect.getsource (which reads
    the file as it is on disk) pasted ideal_values where meaningful was meant: 58 of 90 repro_full.py scripts died
    of a NameError, and their exit status 1 read as 'reproduced'. Sources come from the text loaded at start."""
    import importlib
    import linecache
    import sys

    import fuzzer.export  # noqa: F401 - its import snapshots the loaded modules' text
    from fuzzer.interpret import meaningful
    from fuzzer.ops.sources import function_source

    real = linecache.getlines
    monkeypatch.setattr(linecache, "getlines", lambda *a, **k: ["# edited\n"] * 400)  # every file, as changed on disk
    assert function_source(meaningful).startswith("def meaningful(")
    monkeypatch.setattr(linecache, "getlines", real)
    module = tmp_path / "late_module.py"
    module.write_text("def late(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    late = importlib.import_module("late_module").late
    module.write_text("# a line added above\ndef other(x):\n    return x\n")  # changed before precfuzz read it
    linecache.clearcache()
    with pytest.raises(RuntimeError, match="changed on disk"):
        function_source(late)
    sys.modules.pop("late_module", None)


def test_regression_a_graph_without_inputs_still_defines_inputs() -> None:
    """triage11 b6a9abc065 (TVM `full` of -inf): the short script of a graph with no inputs never defined `inputs`;
    TVM fails before that line today, but a fixed TVM would raise NameError there, which the script's
    `except Exception` printed as 'TVM raises' and exited 1."""
    from fuzzer.ir import Case, Graph, Node
    from fuzzer.script_parts import input_lines

    case = Case(Graph((), (Node("inf", "full", (), {"shape": [1], "value": float("-inf"), "dtype": "bfloat16"}),),
                      ("inf",)))
    lines, names = input_lines(case, 0, lambda inp, expr: expr, listed=True)
    assert names == [] and lines == ["inputs = []"]


def test_regression_the_float32_control_of_a_policy_program_runs_its_casts_in_float32(tmp_path: Path) -> None:
    """triage11 b7246b2b36 (PyTorch bf16 conv3d under autocast): the script's float32 control ran the policy program
    with its bfloat16 cast against a float32 weight and crashed (exit 2, "Input type and weight type should be the
    same"). It runs the program's casts in float32 now (exit 1 where oneDNN's bf16 conv3d is wrong, else 0).

    The short script is rendered directly, not through `export`: export writes it only where this CPU's kernel shows
    the bug (oneDNN's AMX bf16 conv3d; an AMD EPYC without AMX computes it right and got the full-oracle script,
    issue 33), while the control's casts are the same on every CPU."""
    case = load_case(ROOT / "tests" / "fixtures" / "torch-autocast-conv3d-b7246b2b36.json")
    f = Finding("error-bound", "torch/autocast", ["conv3d"], ["bfloat16,bfloat16->bfloat16"], "bound", "m",
                node="conv1", output="conv1")
    path, text = script_for(case, f, tmp_path)
    assert "cast=lambda dtype: torch.float32" in text
    done = run_alone(path)
    assert done.returncode in (0, 1) and "(float32 on the CPU)" in done.stdout, done.stdout + done.stderr[-2000:]


def test_regression_the_short_tvm_script_takes_its_expected_value_from_an_independent_float64_reference(
        tmp_path: Path) -> None:
    """issue 33 (was test_regression_a_nan_the_float64_module_gives_too_is_no_bug_of_the_short_tvm_script, which
    asserted exit 0 here): the short TVM script of a fully masked attention row took its expected value from TVM's own
    module built in float64, which gives the same NaN, so it exited 0 while the bug was there (3 of 33 campaign
    repros). The exact answer is now precfuzz's float64 reference interpreter pasted as code (PyTorch's 0 for such a
    row, the answer check judges against), never the backend under test: TVM's NaN there exits 1, as check reports."""
    # TVM's causal mask is trilu's 0 (relax-one-formula): a row whose one kept score is far below 0 (-2545) is 0/0,
    # in a float64 module too (the fully masked bool rows this test used are now lowered to 0, triage31 b19e97bca2)
    import numpy as np

    q = np.full((1, 1, 2, 8), -30.0)
    k = np.concatenate([np.full((1, 1, 1, 8), 30.0), np.zeros((1, 1, 1, 8))], axis=2)
    v = np.arange(16.0).reshape(1, 1, 2, 8) / 16
    case = Case(Graph(tuple(Input(n, (1, 1, 2, 8), "float32", init={"values": a.tolist()})
                            for n, a in (("q", q), ("k", k), ("v", v))),
                      (Node("attn", "scaled_dot_product_attention", ("q", "k", "v"), {"is_causal": True}),), ("attn",)))
    f = Finding("error-bound", "tvm/default", ["scaled_dot_product_attention"], ["float32,float32,float32->float32"],
                "nonfinite", "m", node="attn")
    path, text = script_for(case, f, tmp_path)
    standalone(text)
    assert "def reference(inputs, rounded, round_to):" in text and "float64'" not in text.split("def run(")[1]
    out = run_alone(path)
    assert out.returncode == 1 and "got nan" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow  # ~15-26 s on 2 cores: `make test-slow` (make test stays under 12 minutes with the install)
def test_regression_a_finding_is_confirmed_by_a_script_that_exits_1_in_a_fresh_process(tmp_path: Path) -> None:
    """issue 33: torch_xla runs a bfloat16 x float16 linear PyTorch refuses and narrows the float16 weight to bfloat16
    inside the matmul; cast to float32 after it, the output has the promoted dtype, so the short script (dtypes only)
    exits 0 while the bug is there. Confirmation runs the written scripts in fresh processes: repro.py exits 0, so the
    full-oracle script, which exits 1, is the record's repro, and the note says so."""
    from fuzzer.artifacts import REPRO_FULL, confirm_scripts, rewrite_report, write_finding
    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool

    case = load_case(ROOT / "tests" / "fixtures" / "xla-linear-fp16-weight-narrowed-issue33.json")
    with ExecutorPool(["torch/eager", "xla/native"], timeout=300.0) as pool:
        result = Checker(pool).check(case, ["torch/eager", "xla/native"])
    f = next(f for f in result.findings if f.executor == "xla/native")
    assert (f.oracle, f.dtypes) == ("silent-downcast", ["bfloat16", "float16", "bfloat16"]), f.message
    art = write_finding(tmp_path, case, f, {}, "test")
    shown = confirm_scripts(art)
    assert shown.script == art.repro_full and shown.ran, shown
    assert shown.note.startswith("repro.py exits 0") and f"the record's repro is {REPRO_FULL}" in shown.note, shown.note
    assert "BUG REPRODUCED" in shown.note.split("; the record's repro")[1]  # the full script's own verdict
    before = art.report.read_text()
    assert rewrite_report(tmp_path, case, f, {}, "test") == []  # the draft then inlines the full script
    after = art.report.read_text()
    assert "python repro.py" in before and "python repro_full.py" in after and "bound_ratio" in after


def test_confirmation_names_no_script_where_none_exits_1(tmp_path: Path) -> None:
    """A short script that exits 1 is the record's repro; where neither script exits 1 none is, and both exits are
    said."""
    from fuzzer.artifacts import Artifacts, confirm_scripts

    for name, code in (("repro.py", 0), ("repro_full.py", 2)):
        (tmp_path / name).write_text(f"import sys\nprint('ran {name}')\nsys.exit({code})\n")
    shown = confirm_scripts(Artifacts(repro=tmp_path / "repro.py", repro_full=tmp_path / "repro_full.py"))
    assert shown.script is None and shown.ran
    assert "repro.py exits 0 (ran repro.py)" in shown.note and "repro_full.py exits 2" in shown.note, shown.note
    (tmp_path / "repro.py").write_text("import sys\nsys.exit(1)\n")
    shown = confirm_scripts(Artifacts(repro=tmp_path / "repro.py", repro_full=tmp_path / "repro_full.py"))
    assert shown.script == tmp_path / "repro.py" and shown.note.startswith("repro.py reproduces it"), shown


def test_regression_a_precision_hazards_script_leaves_out_what_the_float32_model_gives_nan() -> None:
    """triage17 b3dad78eab: a bfloat16 conv3d + rsqrt hazard (0.086 of the output lost) whose minimized repro printed
    'relative RMS error nan' and exited 0: rsqrt of the negative conv outputs is NaN in the float32 model too. The
    oracle measures the elements the float32 model answers; the script now does the same and shows the bug."""
    import tempfile

    case = load_case(Path(__file__).resolve().parent / "fixtures" / "precision-rsqrt-nan-b3dad78eab.json")
    f = Finding("model-hazard", "torch/eager", ["conv3d"], ["bfloat16"], "precision", "loses 0.086", kind="model-hazard",
                input_set=0, output="rsqrt1", node="conv1", details={"fix": "compute `conv1` (conv3d) in float32"})
    with tempfile.TemporaryDirectory() as d:
        path, text = script_for(case, f, Path(d))
        standalone(text)
        proc = run_alone(path)
    assert proc.returncode == 1 and "relative RMS error nan" not in proc.stdout, proc.stdout + proc.stderr[-2000:]


@pytest.mark.parametrize("executor", ["torch/eager", "tvm/default"])
def test_regression_short_script_of_an_int_finding_runs_and_wraps_as_the_backend(executor: str, tmp_path: Path) -> None:
    """Short scripts of int findings died in mean() (exit 2), and TVM's compared int32 2**31-1 + 1 with an exact
    answer that did not wrap; with int, bool and int64 outputs each now runs and is clean."""
    k = Input("k", (4,), "int32", role="input", init={"values": [1, 2, 3, 2147483647]})
    x = Input("x", (4,), "float32", role="input", init={"values": [1.5, -2.0, 3.25, 0.5]})
    nodes = (Node("j", "add", ("k", 1), {}), Node("b", "gt", ("x", 0.0), {}),
             Node("i", "astype", ("x",), {"dtype": "int64"}))
    for outputs in (("j",), ("j", "b", "i")):
        path, text = script_for(Case(Graph((k, x), nodes, outputs)), finding("error-bound", executor, ["add"]),
                                tmp_path)
        proc = run_alone(path)
        assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


def test_regression_a_bug_gone_with_the_cpus_isa_limited_is_said_to_depend_on_the_cpu(tmp_path: Path) -> None:
    """triage29 bba664053e (oneDNN's avx512_bf16 dot flushing subnormal products), b150d2acc4 (without AMX,
    _scaled_mm's emulated path): real on this CPU, gone with oneDNN and ATen limited to AVX2, and no record said
    so. The confirmed script runs once more with the ISA limited (artifacts.LOWER_ISA); where it exits 0 there, the
    record's note says the bug is this CPU's kernel's; where it still exits 1, nothing is said."""
    from fuzzer.artifacts import LOWER_ISA, Artifacts, confirm_scripts

    (tmp_path / "repro.py").write_text("import os, sys\nsys.exit(0 if os.environ.get('ONEDNN_MAX_CPU_ISA') else 1)\n")
    shown = confirm_scripts(Artifacts(repro=tmp_path / "repro.py"), ask_isa=True)
    assert shown.script == tmp_path / "repro.py" and shown.cpu_dependent is True
    assert "CPU-dependent" in shown.note and f"ONEDNN_MAX_CPU_ISA={LOWER_ISA['ONEDNN_MAX_CPU_ISA']}" in shown.note
    (tmp_path / "repro.py").write_text("import sys\nsys.exit(1)\n")
    shown = confirm_scripts(Artifacts(repro=tmp_path / "repro.py"), ask_isa=True)
    assert shown.cpu_dependent is False and "CPU-dependent" not in shown.note
    assert confirm_scripts(Artifacts(repro=tmp_path / "repro.py")).cpu_dependent is None
