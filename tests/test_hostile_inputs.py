"""Hostile inputs (issue 11): every bad case file, option or path is one line on stderr and exit 2, never a
traceback, and changes no file. Each case runs `precfuzz` in-process from an empty working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from op_examples import example

from fuzzer.cli import main
from fuzzer.ir import case_to_json, save_case

ROOT = Path(__file__).resolve().parent.parent

Mutate = Callable[[dict[str, Any]], Any]


class Document(list):
    """Returned by a mutation that replaces the whole JSON document."""


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and modification time."""
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run precfuzz in-process; (status, stdout, stderr)."""
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def assert_refused(status: int, err: str, needle: str = "") -> None:
    """Exit 2 with exactly one line `precfuzz: error: ...` (holding needle) and no traceback."""
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("precfuzz: error: "), err
    assert "Traceback" not in err
    assert needle in lines[0], (needle, lines[0])


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (files a command wrongly creates land here and are caught)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------- case files


def node(b: dict[str, Any]) -> dict[str, Any]:
    return b["nodes"][0]


def inp(b: dict[str, Any], k: int = 0) -> dict[str, Any]:
    return b["inputs"][k]


def attrs(**kw: Any) -> Mutate:
    return lambda b: node(b)["attrs"].update(kw)


def init(**kw: Any) -> Mutate:
    return lambda b: inp(b).update(init=kw)


def literal(value: Any) -> Mutate:
    return lambda b: node(b).update(inputs=["x", value])


def deep(levels: int) -> Mutate:
    def mutate(b: dict[str, Any]) -> None:
        value: Any = 1.0
        for _ in range(levels):
            value = [value]
        inp(b)["init"] = {"values": value}
    return mutate


# (id, op of the base example, mutation of its JSON, needle in the error line)
CASE_FILES: list[tuple[str, str, Mutate, str]] = [
    ("normalized-shape-string", "layer_norm", attrs(normalized_shape="8"), "'normalized_shape' must be"),
    ("normalized-shape-letters", "layer_norm", attrs(normalized_shape="abc"), "'normalized_shape' must be"),
    ("normalized-shape-empty", "layer_norm", attrs(normalized_shape=[]), "'normalized_shape' must be"),
    ("normalized-shape-bools", "layer_norm", attrs(normalized_shape=[True]), "'normalized_shape' must be"),
    ("normalized-shape-null", "layer_norm", lambda b: node(b)["attrs"].pop("normalized_shape"), "normalized_shape"),
    ("dim-string", "softmax", attrs(dim="1"), "'dim' must be an int"),
    ("dim-float", "softmax", attrs(dim=1.0), "'dim' must be an int"),
    ("dim-huge", "softmax", attrs(dim=10**30), "'dim' must be an int"),
    ("stride-float", "conv2d", attrs(stride=1.5), "'stride' must be"),
    ("stride-mixed-list", "conv2d", attrs(stride=[1, "a"]), "'stride' must be"),
    ("stride-zero", "conv2d", attrs(stride=0), "'stride' must be"),
    ("padding-negative", "conv2d", attrs(padding=-1), "'padding' must be"),
    ("padding-huge", "conv1d", attrs(padding=10**9), "elements"),
    ("groups-zero", "conv2d", attrs(groups=0), "'groups' must be"),
    ("dilation-bool", "conv2d", attrs(dilation=True), "'dilation' must be"),
    ("keepdim-string", "mean", attrs(keepdim="false"), "'keepdim' must be true or false"),
    ("dims-string", "sum", attrs(dims="0"), "'dims' must be"),
    ("dims-repeated", "sum", attrs(dims=[0, -3]), "twice"),
    ("dims-float", "sum", attrs(dims=[1.0]), "'dims' must be"),
    ("eps-nan", "layer_norm", attrs(eps=float("nan")), "'eps' must be a finite number"),
    ("eps-infinity", "layer_norm", attrs(eps=float("inf")), "'eps' must be a finite number"),
    ("eps-negative", "batch_norm", attrs(eps=-1.0), "'eps' must be"),
    ("eps-string", "group_norm", attrs(eps="1e-5"), "'eps' must be"),
    ("num-groups-float", "group_norm", attrs(num_groups=2.0), "'num_groups' must be"),
    ("correction-negative", "var", attrs(correction=-1), "'correction' must be"),
    ("approximate-unknown", "gelu", attrs(approximate="fast"), "'approximate' must be"),
    ("astype-dtype-unknown", "astype", attrs(dtype="float8"), "'dtype' must be"),
    ("astype-dtype-null", "astype", attrs(dtype=None), "'dtype' must be"),
    ("unknown-attribute-newline", "add", attrs(**{"a\nb": 1}), "unknown attribute"),
    ("literal-nan", "mul", literal(float("nan")), "must be a finite float"),
    ("literal-infinity", "add", literal(float("inf")), "must be a finite float"),
    ("literal-minus-infinity", "sub", literal(float("-inf")), "must be a finite float"),
    ("literal-huge-int", "add", literal(10**30), "literal operand"),
    ("literal-bool", "add", literal(True), "neither a value name"),
    ("literal-object", "add", literal({"a": 1}), "neither a value name"),
    ("seed-negative", "add", init(dist="normal", seed=-1), "seed must be"),
    ("seed-float", "add", init(dist="normal", seed=1.5), "seed must be"),
    ("seed-bool", "add", init(dist="normal", seed=True), "seed must be"),
    ("seed-huge", "add", init(dist="normal", seed=2**70), "seed must be"),
    ("std-negative", "add", init(dist="normal", std=-1.0), "std must be >= 0"),
    ("std-negative-zero", "add", init(dist="normal", std=-0.0), "std must be >= 0"),
    ("param-huge-int", "add", init(dist="linspace", start=10**30), "finite number"),
    ("offset-std-negative", "add", init(dist="offset", std=-0.5), "std must be >= 0"),
    ("randint-empty-range", "add", init(dist="randint", low=5, high=5), "low must be < high"),
    ("randint-fraction", "add", init(dist="randint", low=0.5, high=3), "integers"),
    ("uniform-overflowing-range", "add", init(dist="uniform", low=-1e308, high=1e308), "finite"),
    ("uniform-reversed", "add", init(dist="uniform", low=1.0, high=-1.0), ">= 0"),
    ("loguniform-reversed", "add", init(dist="loguniform", lo=3.0, hi=-3.0), ">= 0"),
    ("param-nan", "add", init(dist="constant", value=float("nan")), "finite number"),
    ("param-string", "add", init(dist="normal", mean="0"), "finite number"),
    ("param-unknown", "add", init(dist="normal", sigma=1.0), "no parameter 'sigma'"),
    ("distribution-unknown", "add", init(dist="cauchy"), "unknown distribution"),
    ("distribution-not-string", "add", init(dist=["normal"]), "unknown distribution"),
    ("inline-wrong-shape", "add", lambda b: inp(b).update(init={"values": [1.0, 2.0, 3.0]}), "do not fit shape"),
    ("inline-ragged", "add", lambda b: inp(b).update(init={"values": [[1.0], [1.0, 2.0]]}), "regular nested list"),
    ("inline-objects", "add", lambda b: inp(b).update(init={"values": [{}]}), "regular nested list"),
    ("inline-nan", "add", lambda b: inp(b).update(init={"values": float("nan")}), "finite"),
    ("inline-deep", "add", deep(40), "nested deeper"),
    ("override-wrong-shape", "add", lambda b: b.update(input_sets=[{}, {"x": {"values": [[1.0, 2.0]]}}]), "input set 1"),
    ("override-unknown-input", "add", lambda b: b.update(input_sets=[{"nope": {"dist": "normal"}}]), "no input named"),
    ("input-sets-not-list", "add", lambda b: b.update(input_sets={"x": 1}), "input_sets must be a list"),
    ("input-sets-too-many", "add", lambda b: b.update(input_sets=[{}] * 1000), "at most"),
    ("shape-30000-square", "add", lambda b: inp(b).update(shape=[30000, 30000]), "elements"),
    ("shape-100000-square", "add", lambda b: inp(b).update(shape=[100000, 100000]), "elements"),
    ("shape-total-over-cap", "add", lambda b: [i.update(shape=[8000, 8000]) for i in b["inputs"]], "cap"),
    ("shape-huge-int", "add", lambda b: inp(b).update(shape=[10**30]), "shape must be"),
    ("shape-zero", "add", lambda b: inp(b).update(shape=[0, 3]), "shape must be"),
    ("shape-rank-20", "add", lambda b: inp(b).update(shape=[1] * 20), "shape must be"),
    ("shape-string", "add", lambda b: inp(b).update(shape="2,3"), "wrong type"),
    ("attrs-list", "add", lambda b: node(b).update(attrs=[1, 2]), "attrs must be an object"),
    ("attrs-string", "add", lambda b: node(b).update(attrs="ab"), "attrs must be an object"),
    ("outputs-nested", "add", lambda b: b.update(outputs=[[1]]), "outputs must be value names"),
    ("outputs-empty", "add", lambda b: b.update(outputs=[]), "no outputs"),
    ("meta-number", "add", lambda b: b.update(meta=5), "meta must be an object"),
    ("node-id-empty", "add", lambda b: node(b).update(id="") or b.update(outputs=[""]), "non-empty string"),
    ("name-1000-chars", "add", lambda b: inp(b).update(name="x" * 1000), "at most 256"),
    ("name-lone-surrogate", "add", lambda b: node(b).update(id="\ud800") or b.update(outputs=["\ud800"]), "surrogate"),
    ("name-duplicate", "add", lambda b: inp(b, 1).update(name="x"), "duplicate name"),
    ("op-unknown-newline", "add", lambda b: node(b).update(op="exp\nimport os"), "unknown op"),
    ("format-unknown", "add", lambda b: b.update(format="precfuzz-graph/99"), "unsupported format"),
    ("top-level-list", "add", lambda b: Document([b]), "expected a JSON object"),
    ("too-many-nodes", "add", lambda b: b.update(nodes=[node(b)] * 5000), "at most"),
]


@pytest.mark.parametrize("name, op, mutate, needle", CASE_FILES, ids=[c[0] for c in CASE_FILES])
def test_bad_case_file_is_one_line_exit_2(name: str, op: str, mutate: Mutate, needle: str, workdir: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    body = case_to_json(example(op))
    replaced = mutate(body)
    doc = list(replaced) if isinstance(replaced, Document) else body
    path = workdir / "case.json"
    path.write_text(json.dumps(doc))
    before = tree(workdir)
    status, _, err = cli(["check", str(path), "--executors", "debug/faults"], capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before


RAW_FILES: list[tuple[str, Callable[[Path], str], str]] = [
    ("nesting-100k", lambda d: _write(d, "[" * 100_000 + "]" * 100_000), "nested deeper"),
    ("integer-5000-digits", lambda d: _write(d, '{"inputs": [], "x": ' + "9" * 5000 + "}"), "malformed JSON"),
    ("not-utf8", lambda d: _write_bytes(d, b'{"inputs": "\xff\xfe"}'), "not UTF-8"),
    ("utf16-bom", lambda d: _write_bytes(d, '{"inputs": []}'.encode("utf-16")), "not UTF-8"),
    ("truncated", lambda d: _write(d, json.dumps(case_to_json(example("add")))[:-7]), "malformed JSON"),
    ("trailing-garbage", lambda d: _write(d, json.dumps(case_to_json(example("add"))) + " ]"), "malformed JSON"),
    ("empty-file", lambda d: _write(d, ""), "malformed JSON"),
    ("nul-bytes", lambda d: _write_bytes(d, b"\0" * 64), "malformed JSON"),
    ("too-large", lambda d: _write(d, " " * (64 * 2**20 + 10)), "larger than"),
    ("dev-zero", lambda d: "/dev/zero", "larger than"),
    ("directory", lambda d: str(d), "is a directory"),
    ("missing", lambda d: str(d / "nope.json"), "cannot read"),
]


def _write(d: Path, text: str) -> str:
    (d / "raw.json").write_text(text)
    return str(d / "raw.json")


def _write_bytes(d: Path, data: bytes) -> str:
    (d / "raw.json").write_bytes(data)
    return str(d / "raw.json")


@pytest.mark.parametrize("name, make, needle", RAW_FILES, ids=[c[0] for c in RAW_FILES])
def test_unreadable_case_file_is_one_line_exit_2(name: str, make: Callable[[Path], str], needle: str, workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = make(workdir)
    before = tree(workdir)
    status, _, err = cli(["check", path, "--executors", "debug/faults"], capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before


# ---------------------------------------------------------------- options and paths

RUN = ["run", "--out", "camp", "--executors", "debug/faults", "--no-seeds", "--max-tests", "1", "--no-minimize"]

# (id, argv with CASE / FILE / DIR placeholders, needle); the files named by placeholders exist beforehand
OPTIONS: list[tuple[str, list[str], str]] = [
    ("run-timeout-zero", RUN + ["--timeout", "0"], "--timeout"),
    ("run-timeout-negative", RUN + ["--timeout", "-5"], "--timeout"),
    ("run-timeout-tiny", RUN + ["--timeout", "1e-9"], "--timeout"),
    ("run-timeout-nan", RUN + ["--timeout", "nan"], "--timeout"),
    ("run-time-nan", RUN + ["--time", "nan"], "--time"),
    ("run-time-inf", RUN + ["--time", "inf"], "--time"),
    ("run-time-zero", RUN + ["--time", "0"], "--time"),
    ("run-max-tests-negative", RUN[:-3] + ["--max-tests", "-1", "--no-minimize"], "--max-tests"),
    ("run-max-tests-zero", RUN[:-3] + ["--max-tests", "0", "--no-minimize"], "--max-tests"),
    ("run-workers-zero", RUN + ["--workers", "0"], "--workers"),
    ("run-workers-huge", RUN + ["--workers", "100000"], "--workers"),
    ("run-seed-negative", RUN + ["--seed", "-1"], "--seed"),
    ("run-seed-text", RUN + ["--seed", "abc"], "--seed"),
    ("run-minimize-budget-nan", RUN + ["--minimize-budget", "nan"], "--minimize-budget"),
    ("run-executor-unknown", ["run", "--out", "camp", "--executors", "nope", "--max-tests", "1"], "unknown executor"),
    ("run-executors-commas", ["run", "--out", "camp", "--executors", ",", "--max-tests", "1"], "no executor named"),
    ("run-out-is-file", ["run", "--out", "FILE", "--executors", "debug/faults", "--no-seeds", "--max-tests", "1"],
     "not a directory"),
    ("run-out-under-file", ["run", "--out", "FILE/sub", "--executors", "debug/faults", "--no-seeds", "--max-tests", "1"],
     "not a directory"),
    ("run-seeds-dir-missing", ["run", "--out", "camp", "--executors", "debug/faults", "--seeds-dir", "nope",
                               "--max-tests", "1"], "not a directory"),
    ("run-seeds-dir-bad-case", ["run", "--out", "camp", "--executors", "debug/faults", "--seeds-dir", "BADSEEDS",
                                "--max-tests", "1"], "bad.json"),
    ("check-timeout-zero", ["check", "CASE", "--timeout", "0"], "--timeout"),
    ("check-executors-oracle-only", ["check", "CASE", "--executors", "reference"], "not a backend executor"),
    ("export-executor-wildcard", ["export", "CASE", "--executor", "torch/*", "--out", "r.py"], "one executor"),
    ("export-executor-empty", ["export", "CASE", "--executor", "", "--out", "r.py"], "no executor named"),
    ("export-set-negative", ["export", "CASE", "--executor", "debug/faults", "--out", "r.py", "--set", "-1"], "--set"),
    ("export-set-out-of-range", ["export", "CASE", "--executor", "torch/eager", "--out", "r.py", "--set", "9"],
     "out of range"),
    ("export-out-directory", ["export", "CASE", "--executor", "torch/eager", "--out", "DIR", "--set", "0"],
     "is a directory"),
    ("export-out-under-file", ["export", "CASE", "--executor", "torch/eager", "--out", "FILE/r.py", "--set", "0"],
     "not a directory"),
    ("export-out-overwrites-case", ["export", "CASE", "--executor", "torch/eager", "--out", "CASE", "--set", "0"],
     "overwrite"),
    ("export-report-under-file", ["export", "CASE", "--executor", "torch/eager", "--out", "r.py", "--set", "0",
                                  "--report", "FILE/r.md"], "not a directory"),
    ("export-missing-out", ["export", "CASE", "--executor", "torch/eager"], "--out"),
    ("export-report-same-as-out", ["export", "CASE", "--executor", "torch/eager", "--out", "r.py", "--set", "0",
                                   "--report", "r.py"], "would overwrite"),
    ("generate-count-negative", ["generate", "--count", "-1", "--out", "gen"], "--count"),
    ("generate-count-text", ["generate", "--count", "ten", "--out", "gen"], "--count"),
    ("generate-start-negative", ["generate", "--count", "1", "--start", "-3", "--out", "gen"], "--start"),
    ("generate-out-is-file", ["generate", "--count", "1", "--out", "FILE"], "not a directory"),
    ("generate-family-unknown", ["generate", "--count", "1", "--out", "gen", "--families", "nope"], "unknown family"),
    ("minimize-max-seconds-zero", ["minimize", "CASE", "--max-seconds", "0"], "--max-seconds"),
    ("minimize-max-checks-zero", ["minimize", "CASE", "--max-checks", "0"], "--max-checks"),
    ("minimize-timeout-negative", ["minimize", "CASE", "--timeout", "-1"], "--timeout"),
    ("minimize-out-under-file", ["minimize", "CASE", "--out", "FILE/m.json", "--executors", "debug/faults"],
     "not a directory"),
    ("minimize-signature-garbage", ["minimize", "CASE", "--signature", "garbage"], ""),
    ("smoke-workers-zero-keeps-dir", ["smoke", "--out", "DIR", "--workers", "0"], "--workers"),
    ("smoke-out-not-empty", ["smoke", "--out", "DIR", "--executors", "debug/faults", "--max-tests", "1"],
     "not empty"),
    ("smoke-out-is-file", ["smoke", "--out", "FILE", "--executors", "debug/faults", "--max-tests", "1"],
     "not a directory"),
    ("smoke-baseline-garbage", ["smoke", "--out", "fresh", "--baseline", "FILE", "--max-tests", "1"], "baseline"),
    ("smoke-junit-under-file", ["smoke", "--out", "fresh", "--junit", "FILE/j.xml", "--executors", "debug/faults",
                                "--max-tests", "1"], "not a directory"),
    ("smoke-max-tests-zero", ["smoke", "--out", "fresh", "--max-tests", "0"], "--max-tests"),
    ("smoke-baseline-dev-zero", ["smoke", "--out", "fresh", "--baseline", "/dev/zero", "--max-tests", "1"], "is a device, not a file"),
    ("smoke-baseline-directory", ["smoke", "--out", "fresh", "--baseline", "DIR", "--max-tests", "1"], "baseline"),
    ("report-not-a-campaign", ["report", "DIR"], "not a campaign directory"),
    ("report-file", ["report", "FILE"], "not a campaign directory"),
    ("command-unknown", ["frobnicate"], "invalid choice"),
    ("option-unknown", ["check", "CASE", "--bogus"], "unrecognized arguments"),
    ("no-command", [], "required"),
]


@pytest.mark.parametrize("name, argv, needle", OPTIONS, ids=[c[0] for c in OPTIONS])
def test_bad_option_or_path_is_one_line_exit_2(name: str, argv: list[str], needle: str, workdir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    save_case(example("add"), workdir / "case.json")
    (workdir / "file.txt").write_text("precious, and not JSON\n")
    (workdir / "dir").mkdir()
    (workdir / "dir" / "keep.txt").write_text("precious\n")
    (workdir / "badseeds").mkdir()
    (workdir / "badseeds" / "bad.json").write_text("{nope")
    subst = {"CASE": "case.json", "FILE": "file.txt", "DIR": "dir", "BADSEEDS": "badseeds"}
    argv = [subst.get(a, a.replace("FILE/", "file.txt/")) for a in argv]
    before = tree(workdir)
    status, _, err = cli(argv, capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before


def test_every_documented_hostile_input_is_in_the_corpus() -> None:
    assert len(CASE_FILES) + len(RAW_FILES) + len(OPTIONS) >= 60
    ids = [c[0] for c in CASE_FILES] + [c[0] for c in RAW_FILES] + [c[0] for c in OPTIONS]
    assert len(ids) == len(set(ids))


def test_internal_error_is_one_line_with_the_traceback_in_a_file(workdir: Path, capsys, monkeypatch) -> None:
    from fuzzer.commands import executors

    def boom(args: Any) -> int:
        raise RuntimeError("simulated\nbug")

    monkeypatch.setattr(executors, "run", boom)
    monkeypatch.delenv("PRECFUZZ_DEBUG", raising=False)
    status, _, err = cli(["executors"], capsys)
    (line,) = err.strip().splitlines()
    assert status == 3 and line.startswith("precfuzz: internal error: RuntimeError: simulated\\nbug")
    path = Path(line.rsplit("traceback in ", 1)[1].rstrip(")"))
    assert "simulated" in path.read_text()
    os.unlink(path)


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; (sleep 1; {sys.executable} -m fuzzer.cli executors) | true"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.stderr == "" and proc.returncode == 141


# ---- a fresh adversarial pass (204 inputs, 183 handled well): each failure it found, now handled


def test_adversarial_inline_values_must_be_numbers(tmp_path: Path) -> None:
    """Booleans and numeric strings were accepted as inline values while 'abc' was refused."""
    from fuzzer.values import ValueSpecError, inline_values

    for bad in ([[True, False]], [["1.0", "2.0"]], "3"):
        with pytest.raises(ValueSpecError):
            inline_values(bad)
    assert inline_values([[1, 2.5]]).tolist() == [[1.0, 2.5]]


def test_adversarial_timeouts_beyond_a_week_are_bad_input() -> None:
    """--timeout 1e10 overflowed the OS wait (exit 3, or a run that never stopped)."""
    from fuzzer.cli import main

    assert main(["check", "corpus/seeds/xla-bf16-schedule-upcast.json", "--executors", "torch/eager",
                 "--timeout", "1e10"]) == 2


def test_adversarial_state_with_nan_elapsed_is_damaged_not_a_crash(tmp_path: Path) -> None:
    from fuzzer.campaign.store import CampaignStore, StoreError

    (tmp_path / "state.json").write_text('{"seed": 1, "elapsed_s": NaN}')
    with pytest.raises(StoreError, match="elapsed_s"):
        CampaignStore(tmp_path).load_state()


def test_adversarial_runs_parquet_that_is_a_file_refuses_before_any_case_runs(tmp_path: Path) -> None:
    from fuzzer.campaign.store import CampaignStore, StoreError

    (tmp_path / "runs.parquet").write_text("hi")
    with pytest.raises(StoreError, match="not a directory"):
        CampaignStore(tmp_path)


def test_adversarial_smoke_marker_must_be_a_file_smoke_wrote_not_a_symlink(tmp_path: Path) -> None:
    """A planted symlink named .precfuzz-smoke made smoke empty a user's directory."""
    from fuzzer.commands.common import UsageError
    from fuzzer.commands.smoke import MARKER, fresh_out

    made = tmp_path / "made"
    fresh_out(made)
    user = tmp_path / "user"
    user.mkdir()
    (user / "data.txt").write_text("precious")
    (user / MARKER).symlink_to(made / MARKER)
    with pytest.raises(UsageError):
        fresh_out(user)
    assert (user / "data.txt").read_text() == "precious"


def test_adversarial_audit_save_case_never_overwrites_the_model_and_sys_exit_is_bad_input(tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    source = "import sys\n\ndef make():\n    sys.exit(0)\n"
    model.write_text(source)
    proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--save-case", str(model)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and model.read_text() == source and "overwrite" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "sys.exit(0)" in proc.stderr and "Traceback" not in proc.stderr


# ---- a second fresh adversarial pass (208 inputs, 196 handled well): its failures, now handled


def test_adversarial_smoke_never_writes_over_or_empties_its_baseline(tmp_path: Path) -> None:
    """--junit equal to the baseline replaced it with XML; a baseline inside a smoke-made --out was deleted."""
    base = tmp_path / "kf.json"
    base.write_text('{"bugs": []}')
    assert main(["smoke", "--out", str(tmp_path / "s"), "--baseline", str(base), "--junit", str(base),
                 "--max-tests", "2", "--executors", "torch/eager", "--workers", "1"]) == 2
    assert base.read_text() == '{"bugs": []}'
    out = tmp_path / "s2"
    out.mkdir()
    (out / ".precfuzz-smoke").write_text("made by precfuzz smoke\n")
    inside = out / "kf.json"
    inside.write_text('{"bugs": []}')
    assert main(["smoke", "--out", str(out), "--baseline", str(inside), "--max-tests", "2",
                 "--executors", "torch/eager", "--workers", "1"]) == 2
    assert inside.exists()


def test_adversarial_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "case.json"
    os.mkfifo(fifo)
    assert main(["check", str(fifo), "--executors", "torch/eager"]) == 2
    from fuzzer.campaign.store import CampaignStore, StoreError

    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / "findings.jsonl")
    with pytest.raises(StoreError, match="not a regular file"):
        CampaignStore(tmp_path / "run").load_findings()


def test_adversarial_empty_executor_list_and_input_sets_object_are_bad_input(tmp_path: Path) -> None:
    from fuzzer.ir import IRError, case_from_json

    assert main(["check", "corpus/seeds/xla-bf16-schedule-upcast.json", "--executors", ""]) == 2
    obj = json.loads(Path("corpus/seeds/xla-bf16-schedule-upcast.json").read_text())
    obj["input_sets"] = {}
    with pytest.raises(IRError, match="input_sets"):
        case_from_json(obj)


# ---- a third adversarial pass (55 inputs, 39 handled well): each failure it found, now handled

# (id, model source, extra audit options, needle): the model kills, ends or hangs the process that imports it
DYING_MODELS: list[tuple[str, str, list[str], str]] = [
    ("os-exit-at-import", "import os\nos._exit(7)\n", [], "while importing it (exit status 7, as os._exit(7) does)"),
    ("os-exit-in-forward", "import os, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
     "        os._exit(0)\ndef make():\n    return M(), (torch.ones(2),)\n", [], "while exporting the module"),
    ("sigkill-in-make", "import os, signal\ndef make():\n    os.kill(os.getpid(), signal.SIGKILL)\n", [],
     "killed by SIGKILL while calling make()"),
    ("segfault-at-import", "import ctypes\nctypes.string_at(0)\n", [], "killed by SIGSEGV while importing it"),
    ("infinite-loop-in-make", "def make():\n    while True:\n        pass\n", ["--timeout", "1"],
     "calling make() did not finish within 1 s (--timeout)"),
    ("infinite-loop-at-import", "while True:\n    pass\n", ["--timeout", "1"], "importing it did not finish"),
    ("sys-exit-in-forward", "import sys, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
     "        sys.exit(4)\ndef make():\n    return M(), (torch.ones(2),)\n", [], "sys.exit(4)"),
]


@pytest.mark.parametrize("name, source, extra, needle", DYING_MODELS, ids=[c[0] for c in DYING_MODELS])
def test_adversarial3_audit_of_a_model_that_ends_or_hangs_its_process_is_one_line_exit_2(
        name: str, source: str, extra: list[str], needle: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """os._exit, a signal or an endless loop in the model ended the audit silently (exit 0, -9, -11) or hung it."""
    import torch  # noqa: F401 - loaded here, the model's child process does not import it again

    (workdir / "m.py").write_text(source)
    before = tree(workdir)
    status, _, err = cli(["audit", "m.py", "--executors", "torch/eager", *extra], capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before


def test_adversarial3_audit_model_output_never_reaches_json_stdout(workdir: Path, capsys) -> None:
    """A model that prints (here 2 MB, then raises) wrote into the --json verdict's stdout."""
    (workdir / "m.py").write_text("print('x' * 2_000_000)\nraise ValueError('no')\n")
    status, out, err = cli(["audit", "m.py", "--json", "--executors", "torch/eager"], capsys)
    assert_refused(status, err, "raised ValueError: no")
    assert out == ""


# (id, make() or forward body, needle): the message says what was expected and what came back
WRONG_RETURNS: list[tuple[str, str, str]] = [
    ("make-returns-module-and-tensor", "import torch\ndef make():\n    return torch.nn.Linear(2, 2), torch.ones(2)\n",
     "but it returned a tuple of 2 (Linear module, Tensor) (a single example arg x is written (x,))"),
    ("make-returns-int", "def make():\n    return 3\n", "but it returned an int"),
    ("forward-returns-int", "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return 3\n"
     "def make():\n    return M(), (torch.ones(2),)\n", "forward must return tensors it computes (a tensor or a "
     "tuple of tensors), but it returned int 3"),
    ("forward-returns-its-input-in-a-dict", "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
     "        return {'a': x}\ndef make():\n    return M(), (torch.ones(2),)\n", "returned a dict ('x' unchanged"),
]


@pytest.mark.parametrize("name, source, needle", WRONG_RETURNS, ids=[c[0] for c in WRONG_RETURNS])
def test_adversarial3_a_wrong_return_type_says_what_was_expected_and_returned(
        name: str, source: str, needle: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch  # noqa: F401

    (workdir / "m.py").write_text(source)
    status, _, err = cli(["audit", "m.py", "--executors", "torch/eager"], capsys)
    assert_refused(status, err, needle)


def _dev_zero_state(d: Path) -> None:
    (d / "state.json").symlink_to("/dev/zero")


# (id, how state.json is damaged, needle)
BAD_STATES: list[tuple[str, Callable[[Path], Any], str]] = [
    ("state-directory", lambda d: (d / "state.json").mkdir(), "is not a regular file (a directory)"),
    ("state-link-to-dev-zero", _dev_zero_state, "is not a regular file (a device"),
    ("state-dangling-link", lambda d: (d / "state.json").symlink_to(d / "gone"), "(a link to nothing)"),
]


@pytest.mark.parametrize("name, damage, needle", BAD_STATES, ids=[c[0] for c in BAD_STATES])
def test_adversarial3_report_says_state_json_is_not_a_regular_file(
        name: str, damage: Callable[[Path], Any], needle: str, workdir: Path, capsys) -> None:
    """`report` said "no state.json" for a state.json that is there but is a directory or a device."""
    from fuzzer.campaign.store import CampaignStore, StoreError

    camp = workdir / "camp"
    camp.mkdir()
    damage(camp)
    before = tree(workdir)
    status, _, err = cli(["report", "camp"], capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before
    with pytest.raises(StoreError, match="not a regular file"):  # a resumed `run` reads it too (/dev/zero: forever)
        CampaignStore(camp).load_state()


# same harness as OPTIONS: (id, argv, needle); none of them may change a file
ADVERSARIAL3_OPTIONS: list[tuple[str, list[str], str]] = [
    ("export-executor-reference", ["export", "CASE", "--executor", "reference", "--out", "r.py"],
     "not a backend executor; name one of: torch/eager"),
    ("check-executors-family-unavailable", ["check", "CASE", "--executors", "neuron/*"],
     "selects no available executor; available:"),
    ("run-out-empty", ["run", "--out", "", "--executors", "debug/faults", "--no-seeds", "--max-tests", "1"],
     "--out needs a directory name"),
    ("generate-count-huge", ["generate", "--count", "10" * 15, "--out", "gen"], "--count"),
    ("audit-model-fifo", ["audit", "FIFO.py"], "not a regular file"),
    ("audit-model-link-to-dev-zero", ["audit", "ZERO.py"], "not a regular file"),
    # hostile pass #378: --explore 100000000 ran on for ever, one line per variant
    ("audit-explore-huge", ["audit", "ZERO.py", "--explore", "100000000"], "--explore"),
]


@pytest.mark.parametrize("name, argv, needle", ADVERSARIAL3_OPTIONS, ids=[c[0] for c in ADVERSARIAL3_OPTIONS])
def test_adversarial3_bad_option_or_path_is_one_line_exit_2(name: str, argv: list[str], needle: str, workdir: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    save_case(example("add"), workdir / "case.json")
    os.mkfifo(workdir / "fifo.py")
    (workdir / "zero.py").symlink_to("/dev/zero")
    argv = [{"CASE": "case.json", "FIFO.py": "fifo.py", "ZERO.py": "zero.py"}.get(a, a) for a in argv]
    before = tree(workdir)
    status, _, err = cli(argv, capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before


def test_adversarial3_run_without_a_ray_head_leaves_no_directory(tmp_path: Path) -> None:
    """`run --ray` with no cluster there refused in one line but left the empty --out directory behind."""
    proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "run", "--out", str(tmp_path / "camp"), "--ray",
                           "127.0.0.1:1", "--executors", "debug/faults", "--no-seeds", "--max-tests", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("precfuzz: error:"), proc.stderr
    assert not (tmp_path / "camp").exists()


def test_adversarial3_minimize_of_a_case_without_finding_is_one_line_exit_1(workdir: Path, capsys) -> None:
    """Exit 1 is the documented status of a case that does not reproduce; the line says nothing was minimized."""
    save_case(example("add"), workdir / "case.json")
    before = tree(workdir)
    status, _, err = cli(["minimize", "case.json", "--executors", "debug/faults"], capsys)
    assert status == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("case.json: not minimized: ") and "shows no finding" in line
    assert tree(workdir) == before


def test_adversarial3_float_to_int_cast_out_of_range_or_nan_is_not_judged() -> None:
    """A float->int cast of NaN, inf or a value beyond the int type is undefined in C and PyTorch: the int a
    backend returns there (eager's INT_MIN included) was reported as an error-bound backend bug."""
    import numpy as np

    from fuzzer.dtypes import cast_undefined
    from fuzzer.interpret import evaluate, ideal_values
    from fuzzer.ir import case_from_json, infer
    from oracles.nodes import judge_nodes, undefined_casts

    assert cast_undefined([1.5, np.nan, np.inf, -1e10, 2.0**31, -2.0**31, 2.12e9, 1e6], "int32").tolist() == \
        [False, True, True, True, True, True, True, False]
    assert not cast_undefined([1e10], "int64").any() and cast_undefined([1e19], "int64").all()
    assert not cast_undefined([np.nan], "float16").any()
    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": "x", "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                       "init": {"values": [1.5, 1e10, -1.0, 3.0]}}],
           "nodes": [{"id": "s", "op": "sqrt", "inputs": ["x"], "attrs": {}},
                     {"id": "i", "op": "astype", "inputs": ["s"], "attrs": {"dtype": "int32"}},
                     {"id": "j", "op": "astype", "inputs": ["x"], "attrs": {"dtype": "int64"}},
                     {"id": "y", "op": "mul", "inputs": ["s", 2.0], "attrs": {}}],
           "outputs": ["i", "j", "y"],
           "input_sets": [{}, {"x": {"values": [1.5, 4.0, 9.0, 16.0]}}]}
    case = case_from_json(doc)
    graph, typed = case.graph, infer(case.graph)
    from fuzzer.ir import input_values

    sets = [input_values(case, k) for k in range(2)]
    expected = [evaluate(graph, v, rounded=False) for v in sets]
    ideal = [ideal_values(graph, v) for v in sets]
    undefined = undefined_casts(graph, typed, expected, ideal)
    assert list(undefined) == [0]  # set 1 holds no NaN and nothing beyond int32: judged as usual
    hit, reached = undefined[0]
    assert hit == ["i"] and "i" in reached and "y" not in reached and "j" not in reached  # sqrt(-1) is NaN
    with np.errstate(invalid="ignore"):
        root = np.sqrt(np.array([1.5, 1e10, -1.0, 3.0], dtype=np.float32))
    observed = {"s": root,
                "i": np.array([1, 100000, -2**31, 1], dtype=np.int32), "j": np.array([1, 10**10, -1, 3]),
                "y": 2 * root}
    verdicts = {v.node for v in judge_nodes(graph, sets[0], observed)}
    assert "i" not in verdicts and {"s", "j", "y"} <= verdicts  # the undefined cast is not pinned as the fault


def test_regression_an_undefined_cast_that_where_discards_leaves_the_output_judged() -> None:
    """A new user's T5 audit said "clean" with no output judged: its relative-position buckets cast log(0) = -inf
    to an int that torch.where then drops, and every value downstream of the cast was left unjudged."""
    from fuzzer.interpret import evaluate, ideal_values
    from fuzzer.ir import case_from_json, infer, input_values
    from oracles.nodes import undefined_casts

    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": "x", "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                       "init": {"values": [0.0, 1.0, 2.0, 8.0]}}],
           "nodes": [{"id": "l", "op": "log", "inputs": ["x"], "attrs": {}},
                     {"id": "i", "op": "astype", "inputs": ["l"], "attrs": {"dtype": "int64"}},
                     {"id": "small", "op": "lt", "inputs": ["x", 2.0], "attrs": {}},
                     {"id": "xi", "op": "astype", "inputs": ["x"], "attrs": {"dtype": "int64"}},
                     {"id": "b", "op": "where", "inputs": ["small", "xi", "i"], "attrs": {}},
                     {"id": "y", "op": "astype", "inputs": ["b"], "attrs": {"dtype": "float32"}},
                     {"id": "z", "op": "add", "inputs": ["i", 1], "attrs": {}}],
           "outputs": ["y", "z"], "input_sets": [{}]}
    case = case_from_json(doc)
    graph, typed = case.graph, infer(case.graph)
    sets = [input_values(case, 0)]
    expected = [evaluate(graph, v, rounded=False) for v in sets]
    ideal = [ideal_values(graph, v) for v in sets]
    hit, reached = undefined_casts(graph, typed, expected, ideal, sets)[0]
    assert hit == ["i"] and "z" in reached and "y" not in reached, reached  # where(x < 2) drops log(0)'s int
    assert "y" in undefined_casts(graph, typed, expected, ideal)[0][1]  # without the inputs: every value downstream


def test_adversarial3_float_to_int_cast_beyond_int32_is_a_note_not_a_finding(workdir: Path, capsys) -> None:
    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": "x", "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                       "init": {"values": [1.5, 1e10, -1e10, 3e9]}}],
           "nodes": [{"id": "out", "op": "astype", "inputs": ["x"], "attrs": {"dtype": "int32"}}],
           "outputs": ["out"], "input_sets": [{}]}
    (workdir / "cast.json").write_text(json.dumps(doc))
    status, out, err = cli(["check", "cast.json", "--executors", "torch/eager"], capsys)
    assert status == 0, out + err
    assert "no findings" in out and "note: input set 0: out casts NaN, inf or values beyond the int type" in out


# ---- a fourth adversarial pass (352 inputs, 344 handled well): each failure it found, now handled

def _adv4_state(**fields: Any) -> str:
    """A state.json a campaign could have written, with `fields` changed."""
    from fuzzer.campaign.state import CampaignState

    return json.dumps({**CampaignState(0, ["debug/faults"], cases=3, next_index=3, schedule="adaptive").to_json(),
                       **fields})


# (id, argv, what to make first, needle): an output path that exists and is not a regular file is refused before
# any work (a rename over it replaced /dev/full itself, and users' FIFOs, with a JSON file)
ADVERSARIAL4_OUTPUTS: list[tuple[str, list[str], str]] = [
    ("audit-save-case-fifo", ["audit", "model.py", "--executors", "torch/eager", "--save-case", "fifo"], "is a FIFO"),
    ("audit-save-case-dir", ["audit", "model.py", "--executors", "torch/eager", "--save-case", "dir"], "directory"),
    ("audit-save-case-link-to-fifo", ["audit", "model.py", "--executors", "torch/eager", "--save-case", "fifolink"],
     "is a FIFO"),
    ("minimize-out-fifo", ["minimize", "case.json", "--executors", "torch/eager", "--out", "fifo"], "is a FIFO"),
    ("export-out-fifo", ["export", "case.json", "--executor", "torch/eager", "--out", "fifo"], "is a FIFO"),
    ("export-report-fifo", ["export", "case.json", "--executor", "torch/eager", "--out", "r.py", "--report", "fifo"],
     "is a FIFO"),
    ("smoke-junit-fifo", ["smoke", "--out", "s", "--junit", "fifo", "--max-tests", "1", "--executors", "torch/eager"],
     "is a FIFO"),
    ("smoke-write-baseline-eq-junit", ["smoke", "--out", "s", "--write-baseline", "x.json", "--junit", "x.json",
                                       "--max-tests", "1", "--executors", "torch/eager"], "are the same file"),
    ("smoke-junit-eq-summary", ["smoke", "--out", "s", "--summary", "x.md", "--junit", "./x.md",
                                "--max-tests", "1", "--executors", "torch/eager"], "are the same file"),
    ("smoke-junit-eq-default-summary", ["smoke", "--out", "s", "--junit", "s/smoke.md",
                                        "--max-tests", "1", "--executors", "torch/eager"], "are the same file"),
    ("smoke-junit-is-campaign-state", ["smoke", "--out", "s", "--junit", "s/state.json",
                                       "--max-tests", "1", "--executors", "torch/eager"], "a file the campaign keeps"),
    ("generate-families-empty", ["generate", "--count", "1", "--families", "", "--out", "gen"], "names no family"),
    ("generate-families-commas", ["generate", "--count", "1", "--families", " , ", "--out", "gen"], "names no family"),
    ("generate-out-empty", ["generate", "--count", "1", "--out", "", "--stats"], "--out is empty"),
    ("minimize-out-empty", ["minimize", "case.json", "--executors", "torch/eager", "--out", ""], "--out is empty"),
    ("minimize-signature-empty", ["minimize", "case.json", "--signature", ""], "--signature is empty"),
    ("audit-save-case-empty", ["audit", "model.py", "--save-case", ""], "--save-case is empty"),
    ("audit-out-empty", ["audit", "model.py", "--out", ""], "--out is empty"),
    ("run-seeds-dir-empty", ["run", "--out", "camp", "--seeds-dir", "", "--executors", "debug/faults", "--max-tests", "1",
                             "--no-minimize"], "--seeds-dir needs a directory name"),
    ("report-dir-empty", ["report", ""], "the campaign directory is empty"),
]


@pytest.mark.parametrize("name, argv, needle", ADVERSARIAL4_OUTPUTS, ids=[c[0] for c in ADVERSARIAL4_OUTPUTS])
def test_adversarial4_output_that_is_no_regular_file_or_clashes_is_refused(
        name: str, argv: list[str], needle: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_case(example("add"), workdir / "case.json")
    (workdir / "model.py").write_text("raise SystemExit('the model must not be loaded')\n")
    os.mkfifo(workdir / "fifo")
    (workdir / "fifolink").symlink_to("fifo")
    (workdir / "dir").mkdir()
    before = tree(workdir)
    status, _, err = cli(argv, capsys)
    assert_refused(status, err, needle)
    assert tree(workdir) == before  # the FIFO is still a FIFO, nothing written
    assert (workdir / "fifo").is_fifo() and (workdir / "fifolink").is_symlink()


def test_adversarial4_writers_never_replace_a_special_file_and_leave_no_temp_file(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """save_case and the campaign's atomic_write renamed a temp file over whatever held the name (a FIFO, a
    device, a directory); a failed write left its .tmp file behind."""
    from fuzzer.campaign.store import atomic_write

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    for target in (fifo, tmp_path / "dir"):
        for write in (lambda p: save_case(example("add"), p), lambda p: atomic_write(p, "{}\n")):
            with pytest.raises(OSError, match="not replacing it"):
                write(target)
    assert fifo.is_fifo() and (tmp_path / "dir").is_dir()
    # a symlink is written through: its target gets the case, the link stays a link
    save_case(example("mul"), tmp_path / "real.json")  # (a file precfuzz did not write is kept: issue 24)
    (tmp_path / "link.json").symlink_to("real.json")
    save_case(example("add"), tmp_path / "link.json")
    assert (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "real.json").read_text())["nodes"]

    def refuse(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic_write(tmp_path / "state.json", "{}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "fifo", "link.json", "real.json"]


# (id, state.json fields, needle): out-of-range or inconsistent numbers are a damaged state, refused in one line
# before any case runs (next_index 10**30 built a list over range(next_index): 6 GB and a hang)
ADVERSARIAL4_STATES: list[tuple[str, dict[str, Any], str]] = [
    ("next-index-huge", {"next_index": 10**30}, "'next_index' must be an integer in 0.."),
    ("next-index-past-cases", {"next_index": 1000}, "is more than the cases run (3)"),
    ("cases-huge", {"cases": 10**20}, "'cases' must be an integer"),
    ("tests-negative", {"tests": -1}, "'tests' must be an integer"),
    ("invocations-huge", {"invocations": 2**62}, "'invocations' must be"),
    ("pending-past-next-index", {"pending": [7]}, "'pending' lists a case index at or past 'next_index'"),
    ("schedule-block-huge", {"schedule_block": 10**12}, "'schedule_block' must be an integer in 1.."),
    ("counts-huge", {"counts": {"s": 10**30}}, "'counts' must map signatures to counts in 0.."),
    ("nested-deep", None, "nested too deeply"),
    # fifth adversarial pass: an unknown executor in state.json resumed silently with the command line's; issue 38:
    # one that no longer exists is dropped, said and recorded, where --executors names the ones to keep
    # (test_resume_damage.py), and refused with that advice where it does not; a name that is no string is damage
    ("executors-not-names", {"executors": [3]}, "field 'executors' names no known executor"),
]


@pytest.mark.parametrize("name, fields, needle", ADVERSARIAL4_STATES, ids=[c[0] for c in ADVERSARIAL4_STATES])
def test_adversarial4_state_with_numbers_out_of_range_is_damaged(
        name: str, fields: dict[str, Any] | None, needle: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "camp").mkdir()
    (workdir / "camp" / "state.json").write_text("[" * 100_000 if fields is None else _adv4_state(**fields))
    text = (workdir / "camp" / "state.json").read_text()
    status, _, err = cli([*RUN, "--seed", "0"], capsys)
    assert_refused(status, err, needle)
    assert "state.json is damaged" in err
    assert os.listdir(workdir / "camp") == ["state.json"]  # no lock left behind either
    assert (workdir / "camp" / "state.json").read_text() == text


def test_adversarial4_lost_case_results_are_counted_not_listed(workdir: Path, capsys) -> None:
    """A consistent but enormous state (a trillion cases, no arm-results.jsonl) is refused without building a
    list over range(next_index); a few lost results are found from the gaps between the kept ones."""
    (workdir / "camp").mkdir()
    (workdir / "camp" / "state.json").write_text(_adv4_state(next_index=10**12, cases=10**12))
    status, _, err = cli([*RUN, "--seed", "0"], capsys)
    assert_refused(status, err, "state.json is damaged: next_index 1000000000000 but only 0 case results are kept")
    assert not (workdir / "camp" / ".lock").exists()

    from fuzzer.campaign.schedule_book import lost_indices

    assert lost_indices({0: 1, 2: 1, 3: 1}, 7, {5}) == [1, 4, 6]


def test_adversarial4_campaign_file_that_is_a_directory_is_refused_before_any_case_runs(workdir: Path, capsys) -> None:
    """schedule.json replaced by a directory: the campaign ran, then failed naming .schedule.json.<pid>.<tid>.tmp
    and left that file behind."""
    (workdir / "camp").mkdir()
    for name in ("schedule.json", "arm-results.jsonl", "bugs.jsonl.damaged"):
        (workdir / "camp" / name).mkdir()
        status, _, err = cli([*RUN, "--seed", "0"], capsys)
        assert_refused(status, err, f"camp/{name} is a directory, not a regular file; move it away")
        assert os.listdir(workdir / "camp") == [name] and not os.listdir(workdir / "camp" / name)
        (workdir / "camp" / name).rmdir()


@pytest.mark.parametrize("name", ["findings.jsonl", "bugs.jsonl", "arm-results.jsonl"])
def test_adversarial4_jsonl_line_nested_too_deep_or_too_long_is_quarantined(name: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A bugs.jsonl line of 100000 '[' ended the campaign with 'internal error: RecursionError' (exit 3)."""
    from fuzzer.campaign import store as store_mod
    from fuzzer.campaign.store import CampaignStore

    monkeypatch.setattr(store_mod, "MAX_LINE_CHARS", 1000)
    (tmp_path / name).write_text("[" * 100_000 + "\n" + '{"x": "' + "y" * 2000 + '"}\n' + "[1]\n")
    warnings: list[str] = []
    assert CampaignStore(tmp_path, warn=warnings.append).load_records(name, lambda r: isinstance(r, list)) == [[1]]
    assert len((tmp_path / f"{name}.damaged").read_text().splitlines()) == 2
    assert len(warnings) == 1 and "2 line(s) could not be read" in warnings[0]


def test_adversarial4_report_reads_damaged_lines_without_moving_them(workdir: Path, capsys) -> None:
    """`report` (a reader) moved unreadable lines of findings.jsonl/bugs.jsonl into *.damaged files."""
    from fuzzer.campaign.store import CampaignStore

    camp = workdir / "camp"
    camp.mkdir()
    (camp / "findings.jsonl").write_text("not json\n")
    (camp / "bugs.jsonl").write_text("[" * 100_000 + "\n")
    warnings: list[str] = []
    store = CampaignStore(camp, warn=warnings.append, read_only=True)
    assert store.load_findings() == [] and store.load_bugs() == []
    assert sorted(p.name for p in camp.iterdir()) == ["bugs.jsonl", "findings.jsonl"]
    assert len(warnings) == 2 and all("are left out" in w for w in warnings)
    from fuzzer.campaign import report

    assert "read_only=True" in Path(report.__file__).read_text()


def test_adversarial4_messages_do_not_repeat_their_prefix_and_quote_wrong_values(workdir: Path, capsys) -> None:
    """C21 said "input 'a': input 'a': field 'dtype' ..."; C57 reported the string seed "1" as "got 1"."""
    obj = case_to_json(example("add"))
    obj["inputs"][0]["dtype"] = 16
    (workdir / "c21.json").write_text(json.dumps(obj))
    status, _, err = cli(["check", "c21.json", "--executors", "torch/eager"], capsys)
    assert_refused(status, err, "field 'dtype' has the wrong type (int)")
    name = obj["inputs"][0]["name"]
    assert err.count(f"input {name!r}") == 1, err
    obj = case_to_json(example("add"))
    obj["inputs"][0]["dtype"] = case_to_json(example("add"))["inputs"][0]["dtype"]
    obj["inputs"][0]["init"] = {"dist": "normal", "seed": "1"}
    (workdir / "c57.json").write_text(json.dumps(obj))
    status, _, err = cli(["check", "c57.json", "--executors", "torch/eager"], capsys)
    assert_refused(status, err, "got '1'")


# ---------------------------------------------------------------- fifth adversarial pass


def test_adversarial5_export_never_replaces_a_file_precfuzz_did_not_write(workdir: Path, capsys) -> None:
    """`export --out existing.py` replaced a user's file (data loss); now refused unless --force, while an earlier
    export at that path is replaced as before."""
    mine = workdir / "existing.py"
    mine.write_text("precious\n")
    seed = str(ROOT / "corpus" / "seeds" / "tvm-decompose-layernorm-fp16.json")
    status, _, err = cli(["export", seed, "--executor", "torch/eager", "--full", "--out", str(mine)], capsys)
    assert_refused(status, err, "exists and was not written by precfuzz; pass --force")
    assert mine.read_text() == "precious\n"
    report = workdir / "notes.md"
    report.write_text("my notes\n")
    status, _, err = cli(["export", seed, "--executor", "torch/eager", "--out", str(workdir / "new.py"),
                          "--report", str(report)], capsys)
    assert_refused(status, err, "--report")
    assert report.read_text() == "my notes\n" and not (workdir / "new.py").exists()


@pytest.mark.parametrize("name", ["bugs.jsonl", "findings.jsonl", "state.json"])
def test_adversarial4_a_campaign_file_that_links_to_a_users_file_is_refused_not_written_through(
        name: str, workdir: Path) -> None:
    """Hostile pass #241 / #435: a resume with bugs.jsonl (or findings.jsonl) a symbolic link to a user's file
    overwrote (truncated) that file. The campaign refuses the link at start, naming the file it points at."""
    from fuzzer.campaign.store import CampaignStore, StoreError

    camp = workdir / "camp"
    camp.mkdir()
    mine = workdir / "mine.json"
    mine.write_text('{"mine": true}\n')
    (camp / name).symlink_to(mine)
    store = CampaignStore(camp)
    with pytest.raises(StoreError, match="is a symbolic link to .*mine.json"):
        store.load_state() if name == "state.json" else store._load_jsonl(name, lambda r: True)
    assert mine.read_text() == '{"mine": true}\n'


# ---- round four (issue 38): each fault it found, now handled

ESCAPE = "\x1b[2J\x1b[HFAKE: all clean\r"


def _injection_case(d: Path) -> Path:
    """A case whose input and output names clear the screen and print a fake verdict; debug/faults gets it wrong."""
    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": "x" + ESCAPE, "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                       "init": {"dist": "normal", "seed": 1}},
                      {"name": "fault", "role": "input", "kind": "tensor", "shape": [1], "dtype": "float32",
                       "init": {"values": [5.0]}}],
           "nodes": [{"id": "y" + ESCAPE, "op": "add", "inputs": ["x" + ESCAPE, "fault"], "attrs": {}}],
           "outputs": ["y" + ESCAPE], "input_sets": [{}]}
    (d / "inj.json").write_text(json.dumps(doc))
    return d / "inj.json"


def _no_control(text: str) -> None:
    """No character but a line break that a terminal would act on."""
    assert all(c == "\n" or c.isprintable() for c in text), [c for c in set(text) if not c.isprintable()]


def test_regression_value_names_are_escaped_in_checks_verdict_and_minimizes_steps(workdir: Path, capsys) -> None:
    """A case file's value names cleared the screen and printed "FAKE: all clean" through check and minimize."""
    from fuzzer.terminal import safe

    assert safe("a\x1b[2J\nb\r\u202e") == "a\\x1b[2J\nb\\r\\u202e"
    _injection_case(workdir)
    status, out, err = cli(["check", "inj.json", "--executors", "debug/faults"], capsys)
    assert status == 1, out + err
    _no_control(out + err)
    assert "y\\x1b[2J\\x1b[HFAKE: all clean\\r (add" in out
    status, out, err = cli(["minimize", "inj.json", "--executors", "debug/faults", "--max-checks", "4"], capsys)
    _no_control(out + err)
    assert "x\\x1b[2J" in out, out


def test_regression_smoke_rerun_keeps_files_the_user_put_in_findings_and_logs(workdir: Path, capsys) -> None:
    """Rerunning `smoke --out DIR` over an earlier smoke folder deleted DIR/findings/<id>/ and DIR/logs/ by name,
    user files inside included; now it deletes only what its marker lists, and refuses a folder holding more."""
    from fuzzer.campaign.smoke_dir import listed

    argv = ["smoke", "--out", "s", "--executors", "debug/faults", "--max-tests", "2", "--workers", "1",
            "--baseline", ""]
    status, out, err = cli(argv, capsys)
    assert status in (0, 1), err
    assert "state.json" in listed(workdir / "s")
    for rel in ("findings/abc123/mine.txt", "logs/notes.txt"):
        (workdir / "s" / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / "s" / rel).write_text("precious\n")
    before = tree(workdir / "s")
    assert_refused(*cli(argv, capsys)[::2], "which precfuzz smoke did not write")
    assert tree(workdir / "s") == before
    (workdir / "s" / "findings" / "abc123" / "mine.txt").unlink()
    (workdir / "s" / "logs" / "notes.txt").unlink()
    status, out, err = cli(argv, capsys)  # only its own files left: emptied and run again
    assert status in (0, 1), err


def _int_case(d: Path, values: list[int], dtype: str = "int32", op: str = "add", literal_: int = 1) -> str:
    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": "x", "role": "input", "kind": "tensor", "shape": [len(values)], "dtype": dtype,
                       "init": {"values": values}}],
           "nodes": [{"id": "y", "op": op, "inputs": ["x", literal_], "attrs": {}}],
           "outputs": ["y"], "input_sets": [{}]}
    (d / "int.json").write_text(json.dumps(doc))
    return "int.json"


def test_regression_int32_wraparound_follows_pytorch_and_is_no_bug(workdir: Path, capsys) -> None:
    """int32 2**31-1 + 1 wraps in PyTorch (as documented): it was judged 8.4e6x out of bound, a false backend bug."""
    from fuzzer.ops.ints import wrap_int

    assert wrap_int([2**31], "int32").tolist() == [-2**31]
    assert wrap_int([2.0**64 + 2.0**12], "int64").tolist() == [2**12]
    path = _int_case(workdir, [2**31 - 1, 5, -2**31])
    status, out, err = cli(["check", path, "--executors", "torch/eager"], capsys)
    assert status == 0 and "no findings" in out, out + err
    path = _int_case(workdir, [2**31 - 1, 70000], op="mul", literal_=65536)
    status, out, err = cli(["check", path, "--executors", "torch/eager"], capsys)
    assert status == 0 and "no findings" in out, out + err


@pytest.mark.parametrize("dtype, value", [("int32", 2**32), ("int32", -2**31 - 1), ("int64", 2**64)])
def test_regression_int_input_beyond_its_dtype_is_refused(dtype: str, value: int, workdir: Path, capsys) -> None:
    """int inputs outside their dtype's range were accepted (and rounded or wrapped without a word)."""
    path = _int_case(workdir, [value, 1], dtype)
    before = tree(workdir)
    assert_refused(*cli(["check", path, "--executors", "torch/eager"], capsys)[::2], f"beyond {dtype}'s range")
    assert tree(workdir) == before


def test_regression_audit_of_a_model_raising_under_eager_on_its_own_inputs_is_exit_2(workdir: Path, capsys) -> None:
    """A model whose forward raises IndexError under eager on its own example input (torch.export traces it fine:
    the index is data) got "verdict: clean" and exit 0. (A model that fails under eager because of a dtype break,
    corpus/models/denoiser.py, is the hazard an audit reports: test_audit.py's denoiser tests.)"""
    (workdir / "m.py").write_text("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x, idx):\n"
                                  "        return x[:, idx] * 2.0\n\ndef make():\n"
                                  "    return M(), (torch.randn(2, 4), torch.tensor([0, 7]))\n")
    status, out, err = cli(["audit", "m.py", "--executors", "torch/eager", "--out", "a"], capsys)
    errors = [x for x in err.splitlines() if x.startswith("precfuzz: error:")]
    assert status == 2 and "verdict: clean" not in out, out + err
    assert len(errors) == 1 and "raises IndexError: index 7" in errors[0], err
    assert "under eager PyTorch on its own example args, and no dtype break explains it" in errors[0], err


def test_regression_audit_of_a_model_taking_a_float8_input_is_no_internal_error(workdir: Path, capsys) -> None:
    """An audit of a model taking a float8 input exited 3 (torch has no isfinite for float8)."""
    (workdir / "m.py").write_text("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                                  "        return x.to(torch.float32) * 2.0\n\ndef make():\n"
                                  "    return M(), (torch.tensor([[1.5, -2.0], [0.5, 3.0]]).to(torch.float8_e4m3fn),)\n")
    status, out, err = cli(["audit", "m.py", "--executors", "torch/eager", "--out", "a", "--no-minimize"], capsys)
    assert status == 0 and "verdict: clean" in out and "internal error" not in err, out + err


# (id, op, input shapes, attrs, needle): a 258-byte case kept check --timeout 5 busy for hours in the float64
# reference (max_pool3d); the cost cap now counts pool windows, adaptive-pool steps and attention scores
COSTLY: list[tuple[str, str, list[list[int]], dict[str, Any], str]] = [
    ("max-pool3d-kernel-127", "max_pool3d", [[1, 1, 256, 256, 256]], {"kernel_size": 127, "stride": 1},
     "(its pooling windows) has 4500297451000 elements"),
    ("avg-pool2d-wide-kernel", "avg_pool2d", [[1, 1, 4096, 4096]], {"kernel_size": 63, "stride": 1},
     "(its pooling windows)"),
    ("adaptive-avg-pool3d-400", "adaptive_avg_pool3d", [[1, 1, 8, 8, 8]], {"output_size": [400, 400, 400]},
     "64000000 Python-level steps"),
    ("attention-scores", "scaled_dot_product_attention", [[1, 1, 16384, 4]] * 3, {}, "(its attention scores)"),
]


@pytest.mark.parametrize("name, op, shapes, attrs_, needle", COSTLY, ids=[c[0] for c in COSTLY])
def test_regression_reference_work_past_the_cap_is_refused_within_the_timeout(
        name: str, op: str, shapes: list[list[int]], attrs_: dict[str, Any], needle: str, workdir: Path,
        capsys) -> None:
    """Refused in one line before anything is allocated, well within `check --timeout 5` (and so for export,
    minimize and a campaign's seeds, which read cases the same way)."""
    import time

    names = ["x"] if len(shapes) == 1 else ["q", "k", "v"]
    doc = {"format": "precfuzz-graph/1",
           "inputs": [{"name": n, "role": "input", "kind": "tensor", "shape": s, "dtype": "float16",
                       "init": {"dist": "normal", "seed": 1}} for n, s in zip(names, shapes)],
           "nodes": [{"id": "y", "op": op, "inputs": names, "attrs": attrs_}], "outputs": ["y"], "input_sets": [{}]}
    (workdir / "big.json").write_text(json.dumps(doc))
    assert len((workdir / "big.json").read_bytes()) < 600
    t0 = time.monotonic()
    status, _, err = cli(["check", "big.json", "--executors", "torch/eager", "--timeout", "5"], capsys)
    assert time.monotonic() - t0 < 5
    assert_refused(status, err, needle)
    assert_refused(*cli(["minimize", "big.json", "--executors", "torch/eager", "--max-seconds", "10"], capsys)[::2],
                   needle)
    assert_refused(*cli(["export", "big.json", "--executor", "torch/eager", "--out", "r.py"], capsys)[::2], needle)


def test_regression_pool_and_attention_cases_of_ordinary_size_still_run(workdir: Path, capsys) -> None:
    """The cap refuses only work past it: a small max_pool3d, adaptive pool and attention check as before."""
    from fuzzer.ir import check_size, infer

    for op in ("max_pool3d", "avg_pool2d", "adaptive_avg_pool3d", "scaled_dot_product_attention"):
        graph = example(op).graph
        check_size(graph, infer(graph))
    save_case(example("adaptive_avg_pool2d"), workdir / "a.json")
    status, out, err = cli(["check", "a.json", "--executors", "torch/eager"], capsys)
    assert status == 0 and "no findings" in out, out + err


def _t(name: str, shape: list[int], dtype: str = "float16", grad: bool = False) -> dict[str, Any]:
    return {"name": name, "role": "input", "kind": "tensor", "shape": shape, "dtype": dtype,
            "init": {"dist": "normal", "seed": 1}, **({"grad": True} if grad else {})}


# (id, inputs, node, training): round five's fresh pass (issue 38): within the value and memory caps, each makes the
# float64 reference do 35-70 billion multiply-adds before any backend's clock: `check --timeout 5` took 37 s on
# a [4096, 4096] @ [4096, 4096] matmul and 43 s on its training form (the cap counted values, windows and scores)
MACS: list[tuple[str, list[dict[str, Any]], dict[str, Any], bool]] = [
    ("matmul-4096", [_t("a", [4096, 4096]), _t("b", [4096, 4096])], {"op": "matmul", "inputs": ["a", "b"]}, False),
    ("linear-4096", [_t("a", [4096, 4096]), _t("b", [4096, 4096])], {"op": "linear", "inputs": ["a", "b"]}, False),
    ("bmm-4x2048", [_t("a", [4, 2048, 2048]), _t("b", [4, 2048, 2048])], {"op": "bmm", "inputs": ["a", "b"]}, False),
    ("conv2d-1024-channels", [_t("a", [1, 256, 128, 128]), _t("b", [1024, 256, 3, 3])],
     {"op": "conv2d", "inputs": ["a", "b"]}, False),
    ("attention-head-dim-2048", [_t(n, [1, 1, 4096, 2048]) for n in "qkv"],
     {"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"]}, False),
    ("training-matmul-4096", [_t("a", [4096, 4096], grad=True), _t("b", [4096, 4096], grad=True)],
     {"op": "matmul", "inputs": ["a", "b"]}, True),
    ("training-matmul-2048x4096-gradients-count", [_t("a", [2048, 2048], "float32", True), _t("b", [2048, 4096], "float32", True)],
     {"op": "matmul", "inputs": ["a", "b"]}, True),
]


@pytest.mark.parametrize("name, inputs, node_, training", MACS, ids=[m[0] for m in MACS])
def test_regression_matmul_conv_attention_work_past_the_cap_is_refused_within_the_timeout(
        name: str, inputs: list[dict[str, Any]], node_: dict[str, Any], training: bool, workdir: Path, capsys) -> None:
    """Refused in one line, before anything is allocated, by check, minimize and export alike."""
    import time

    nodes = [{"id": "y", "attrs": {}, **node_}] + ([{"id": "loss", "op": "sum", "inputs": ["y"]}] if training else [])
    doc = {"format": "precfuzz-graph/1", "inputs": inputs, "nodes": nodes,
           "outputs": ["loss" if training else "y"], "input_sets": [{}]}
    (workdir / "big.json").write_text(json.dumps(doc))
    t0 = time.monotonic()
    status, _, err = cli(["check", "big.json", "--executors", "torch/eager", "--timeout", "5"], capsys)
    assert time.monotonic() - t0 < 5
    assert_refused(status, err, "multiply-adds")
    assert_refused(*cli(["minimize", "big.json", "--executors", "torch/eager", "--max-seconds", "10"], capsys)[::2],
                   "multiply-adds")
    assert_refused(*cli(["export", "big.json", "--executor", "torch/eager", "--out", "r.py"], capsys)[::2],
                   "multiply-adds")


def test_regression_matmul_within_the_multiply_add_cap_still_checks() -> None:
    """The cap is on work, not shape: the same matmul forward-only at 2**34 multiply-adds passes, and the examples
    of every op pass."""
    from fuzzer.ir import check_size, infer
    from fuzzer.ops import OPS

    doc = {"format": "precfuzz-graph/1", "inputs": [_t("a", [2048, 2048]), _t("b", [2048, 4096])],
           "nodes": [{"id": "y", "op": "matmul", "inputs": ["a", "b"]}], "outputs": ["y"]}
    from fuzzer.ir import case_from_json

    case_from_json(doc)
    for op in OPS:
        graph = example(op).graph
        check_size(graph, infer(graph))


@pytest.mark.parametrize("value", [2**63 - 1, -2**63 - 1, 2**53 + 1])
def test_regression_int64_values_past_2_53_are_refused_not_rounded(value: int, workdir: Path, capsys) -> None:
    """Round five: an int64 input's values went through float64: 2**63 - 1 (int64's max) was refused as "beyond
    int64's range (got 9.2233720368547758e+18)", -2**63 - 1 (beyond it) became -2**63 and was checked, 2**53 + 1
    became 2**53. Now each is refused in one line naming the value and the reason."""
    path = _int_case(workdir, [value, 5], "int64")
    before = tree(workdir)
    needle = f"beyond int64's range" if value < -2**63 else f"int64 value {value} is beyond +-2**53"
    assert_refused(*cli(["check", path, "--executors", "torch/eager"], capsys)[::2], needle)
    assert tree(workdir) == before
    path = _int_case(workdir, [2**53, -2**53, 5], "int64")
    status, out, err = cli(["check", path, "--executors", "torch/eager"], capsys)
    assert status == 0 and "no findings" in out, out + err


def test_regression_audit_of_a_model_torch_export_refuses_prints_no_torch_traceback(workdir: Path) -> None:
    """Round five: `precfuzz audit` of a Linear(4, 4) given a [2, 5] example input exited 2 with its one error line,
    under 17 lines of traceback torch's fake-tensor dispatch logs at ERROR level before raising."""
    root = Path(__file__).resolve().parent.parent
    (workdir / "m.py").write_text("import torch\ndef make():\n    return torch.nn.Linear(4, 4), (torch.ones(2, 5),)\n")
    done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", "m.py", "--executors", "torch/eager",
                           "--no-minimize", "--out", "a"], cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    errors = [line for line in done.stderr.splitlines() if line.startswith("precfuzz: error:")]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "fake_tensor" not in done.stderr, done.stderr
    assert len(errors) == 1 and "must have same reduction dim" in errors[0], done.stderr


def test_regression_an_export_failure_is_one_line_naming_the_users_line_and_torchs_dump_goes_to_a_log(
        workdir: Path) -> None:
    """issue 37: a model torch.export cannot capture (data-dependent control flow) printed torch's graph dump (117 KB
    on a real model) above the error, and the error line left out torch's pointer to the user's source line."""
    root = Path(__file__).resolve().parent.parent
    (workdir / "m.py").write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                                  "        if x.sum() > 0:\n            return x * 2\n        return x - 1\n"
                                  "def make():\n    return M(), (torch.ones(4, 4),)\n")
    done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", "m.py", "--executors", "torch/eager",
                           "--no-minimize", "--out", "a"], cwd=workdir, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root), "TMPDIR": str(workdir)})
    assert done.returncode == 2, done.stderr
    assert "def forward" not in done.stderr and "torch.ops.aten" not in done.stderr, done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("precfuzz: error:")]
    assert "at m.py:4 (`if x.sum() > 0:`)" in error, error
    log = Path(error.rsplit("torch's full message and output: ", 1)[1])
    assert log.parent == workdir and "torch.ops.aten" in log.read_text()


def _processes_in(folder: Path) -> list[int]:
    """Processes (not this one) whose working directory is `folder` or under it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if "Z" not in state.split(":", 1)[1][:3] and (cwd == str(folder) or cwd.startswith(str(folder) + os.sep)):
            found.append(int(entry.name))
    return found


def _children_of(pid: int) -> list[int]:
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    except OSError:
        return []


def _interruptible() -> None:
    """In the child: SIGINT as a terminal delivers it (a suite started in the background, `make test &` or nohup,
    passes SIGINT on ignored, and an ignored signal is what a background job should ignore: the clean-clone run
    of these tests failed so)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_regression_ctrl_c_during_a_costly_check_stops_within_seconds(tmp_path: Path) -> None:
    """Round five's `check-sigint-costly`: a check at the multiply-add cap (fp16 2048x2048 @ 2048x4096, no --timeout)
    exited 185 s after SIGINT: the KeyboardInterrupt reached the main thread (computing the float64 ideals) at once,
    but its way out joined the backend thread, which waited on the worker still multiplying in fp16. Now the
    interrupt kills the workers: one line, exit 130, within seconds, and no process left behind."""
    import signal
    import time

    body = {"format": "precfuzz-graph/1",
            "inputs": [{"name": n, "role": "input", "kind": "tensor", "shape": s, "dtype": "float16",
                        "init": {"dist": "normal", "seed": k}} for k, (n, s) in enumerate((("a", [2048, 2048]),
                                                                                         ("b", [2048, 4096])), 1)],
            "nodes": [{"id": "y", "op": "matmul", "inputs": ["a", "b"]}], "outputs": ["y"]}
    (tmp_path / "c.json").write_text(json.dumps(body))
    proc = subprocess.Popen([sys.executable, "-m", "fuzzer.cli", "check", "c.json", "--executors", "torch/eager"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_interruptible)
    try:
        deadline = time.monotonic() + 60
        while not _children_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # its worker started: the case is on its way to it
        assert proc.poll() is None and _children_of(proc.pid), proc.communicate()
        time.sleep(4.0)  # the worker multiplies in fp16 (minutes on a CPU); the main thread computes the ideals
        assert proc.poll() is None, "the check ended before it was interrupted (too fast a machine for this case)"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and took < 10.0, (proc.returncode, took, err[-2000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted") and "Traceback" not in err, err
    time.sleep(0.5)
    assert _processes_in(tmp_path) == []  # the worker (its own session) is gone too


def test_ctrl_c_inside_one_long_numpy_call_ends_the_command_after_the_grace(tmp_path: Path) -> None:
    """The backstop: a main thread inside one long C call acts on KeyboardInterrupt only when it returns; the watcher
    of terminating.ended_soon_after_interrupt ends the process (130, one line) `grace_s` after the signal."""
    import signal
    import time

    code = ("import numpy as np, sys; from fuzzer.terminating import ended_soon_after_interrupt\n"
            "a = np.ones((1500, 1500), np.longdouble)\n"
            "with ended_soon_after_interrupt(grace_s=1.0):\n"
            "    print('busy', flush=True); a @ a @ a @ a\n"
            "print('the call returned', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_interruptible)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and took < 5.0 and "returned" not in out, (proc.returncode, took, out, err)
    assert err.strip().startswith("interrupted") and len(err.strip().splitlines()) == 1, err
