"""A black-box hostile pass over every subcommand: `python -m bench.hostile_pass [--out TABLE.md] [--only GROUP]`.

Each input runs `precfuzz` as a user would (a subprocess, a scratch directory of its own under /tmp), after
planting what a careless or hostile user leaves around: user files where outputs go, links to devices, FIFOs,
damaged campaign files, models that misbehave, case files whose names carry code. An input is handled well when
the exit status is the one expected (bad input: exactly one `precfuzz: error:` line, exit 2, no traceback), every
user file is byte for byte what it was (no data loss), no sentinel file appears (no code execution), no process
the input started outlives it, and its own check (where it has one) holds. The table goes to --out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SENTINEL = "PWNED"  # a payload that ran would create this file in the input's directory
PAYLOAD = f"__import__('os').system('touch {SENTINEL}')"

Check = Callable[[Path, "subprocess.CompletedProcess[str]"], "str | None"]


@dataclass
class Input:
    """One hostile input: what it plants, what it runs, what a good outcome is."""

    id: str
    group: str
    argv: list[str]
    setup: Callable[[Path], None] = lambda d: None
    expect: tuple[int, ...] = (2,)  # exit statuses that are right
    precious: tuple[str, ...] = ()  # user files (relative) that must not change
    check: Check | None = None  # a further check: None when fine, else the problem
    timeout: float = 300.0
    note: str = ""
    deadline: float | None = None  # the limit the input states (plus a few seconds): it must end within this
    orphans: bool = False  # also: no process left with its working directory in the input's folder


@dataclass
class Outcome:
    input: Input
    status: int | None
    seconds: float
    problems: list[str] = field(default_factory=list)
    first_line: str = ""


# ---------------------------------------------------------------- cases


def case(nodes=None, inputs=None, outputs=("y",), **extra) -> dict:
    base = {"format": "precfuzz-graph/1",
            "inputs": inputs or [{"name": "x", "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                                  "init": {"dist": "normal", "seed": 1}}],
            "nodes": nodes or [{"id": "y", "op": "exp", "inputs": ["x"]}], "outputs": list(outputs)}
    base.update(extra)
    return base


FAULTY = case(inputs=[{"name": "x", "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                       "init": {"dist": "normal", "seed": 1}},
                      {"name": "fault", "role": "input", "kind": "tensor", "shape": [1], "dtype": "float32",
                       "init": {"dist": "constant", "value": 5.0}}],
              nodes=[{"id": "y", "op": "mul", "inputs": ["x", "fault"]}])


def write(path: str, text: str | bytes | dict) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        p = d / path
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, dict):
            p.write_text(json.dumps(text))
        elif isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    return do


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        for s in steps:
            s(d)
    return do


def link(path: str, to: str) -> Callable[[Path], None]:
    return lambda d: (d / path).parent.mkdir(parents=True, exist_ok=True) or os.symlink(to, d / path)


def fifo(path: str) -> Callable[[Path], None]:
    return lambda d: (d / path).parent.mkdir(parents=True, exist_ok=True) or os.mkfifo(d / path)


def mkdir(path: str) -> Callable[[Path], None]:
    return lambda d: (d / path).mkdir(parents=True, exist_ok=True)


def pc(*args: str) -> list[str]:
    return [PY, "-m", "fuzzer.cli", *args]


def seed(name: str) -> str:
    return str(ROOT / "corpus" / "seeds" / name)


XLA_SEED = seed("xla-bf16-schedule-upcast.json")
TVM_SEED = seed("tvm-decompose-layernorm-fp16.json")
EAGER = ["--executors", "torch/eager"]
USER = "my own text, about precfuzz too: precfuzz export writes repro scripts\n"


def no_file(name: str) -> Check:
    return lambda d, p: f"{name} was created" if (d / name).exists() else None


def exists(name: str) -> Check:
    return lambda d, p: None if (d / name).exists() else f"{name} was not written"


def stderr_has(text: str) -> Check:
    return lambda d, p: None if text in p.stderr else f"stderr lacks {text!r}"


# ---------------------------------------------------------------- the inputs


def case_file_inputs() -> list[Input]:
    """check on hostile case files: data only, never code."""
    out: list[Input] = []
    bad = {
        "empty-file": "", "not-json": "hello", "truncated": '{"format": "precfuzz-graph/1", "inputs": [',
        "json-array": "[1, 2]", "json-null": "null", "json-string": '"case"', "utf16": '{"a": 1}'.encode("utf-16"),
        "nul-bytes": b"\x00\x00\x00", "latin1": b'{"format": "\xe9"}', "deep-nesting": "[" * 100_000 + "]" * 100_000,
        "huge-int": '{"inputs": [' + "9" * 5000 + "]}", "unknown-format": case(format="precfuzz-graph/99"),
        "unknown-op": case(nodes=[{"id": "y", "op": "system", "inputs": ["x"]}]),
        "op-is-code": case(nodes=[{"id": "y", "op": PAYLOAD, "inputs": ["x"]}]),
        "dtype-is-code": case(inputs=[{"name": "x", "shape": [4], "dtype": PAYLOAD, "init": {"dist": "normal"}}]),
        "dist-is-code": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32", "init": {"dist": PAYLOAD}}]),
        "shape-negative": case(inputs=[{"name": "x", "shape": [-4], "dtype": "float32", "init": {"dist": "normal"}}]),
        "shape-huge": case(inputs=[{"name": "x", "shape": [10**6, 10**6], "dtype": "float32",
                                    "init": {"dist": "normal"}}]),
        "shape-string": case(inputs=[{"name": "x", "shape": "4", "dtype": "float32", "init": {"dist": "normal"}}]),
        "shape-float": case(inputs=[{"name": "x", "shape": [4.5], "dtype": "float32", "init": {"dist": "normal"}}]),
        "shape-bool": case(inputs=[{"name": "x", "shape": [True], "dtype": "float32", "init": {"dist": "normal"}}]),
        "rank-9": case(inputs=[{"name": "x", "shape": [1] * 9, "dtype": "float32", "init": {"dist": "normal"}}]),
        "dtype-float8": case(inputs=[{"name": "x", "shape": [4], "dtype": "float8", "init": {"dist": "normal"}}]),
        "dtype-int-to-exp": case(inputs=[{"name": "x", "shape": [4], "dtype": "int8", "init": {"dist": "normal"}}]),
        "values-nan-strings": case(inputs=[{"name": "x", "shape": [2], "dtype": "float32",
                                            "init": {"values": ["nan", "inf"]}}]),
        "values-wrong-count": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32",
                                            "init": {"values": [1.0, 2.0]}}]),
        "values-nested-objects": case(inputs=[{"name": "x", "shape": [2], "dtype": "float32",
                                               "init": {"values": [{"a": 1}, 2]}}]),
        "seed-negative": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32",
                                       "init": {"dist": "normal", "seed": -1}}]),
        "seed-huge": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32",
                                   "init": {"dist": "normal", "seed": 10**40}}]),
        "uniform-reversed": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32",
                                          "init": {"dist": "uniform", "low": 1, "high": -1}}]),
        "input-twice": case(inputs=[{"name": "x", "shape": [4], "dtype": "float32", "init": {"dist": "normal"}},
                                    {"name": "x", "shape": [4], "dtype": "float32", "init": {"dist": "normal"}}]),
        "node-id-is-input": case(nodes=[{"id": "x", "op": "exp", "inputs": ["x"]}], outputs=("x",)),
        "cycle": case(nodes=[{"id": "y", "op": "exp", "inputs": ["z"]}, {"id": "z", "op": "exp", "inputs": ["y"]}]),
        "self-loop": case(nodes=[{"id": "y", "op": "exp", "inputs": ["y"]}]),
        "output-missing": case(outputs=("nope",)),
        "no-outputs": case(outputs=()),
        "no-nodes": case(nodes=[], outputs=("x",)),
        "arity-wrong": case(nodes=[{"id": "y", "op": "add", "inputs": ["x"]}]),
        "matmul-shape-mismatch": case(nodes=[{"id": "y", "op": "matmul", "inputs": ["x", "x"]}]),
        "attr-unknown": case(nodes=[{"id": "y", "op": "exp", "inputs": ["x"], "attrs": {"evil": PAYLOAD}}]),
        "softmax-dim-out-of-range": case(nodes=[{"id": "y", "op": "softmax", "inputs": ["x"], "attrs": {"dim": 7}}]),
        "input-sets-not-list": case(input_sets={"a": 1}),
        "input-set-unknown-name": case(input_sets=[{"nope": {"dist": "normal"}}]),
        "input-sets-too-many": case(input_sets=[{}] * 100_000),
        "tvm-passes-unknown": case(tvm_passes=["RemoveEverything"]),
        "tvm-passes-code": case(tvm_passes=[PAYLOAD]),
        "meta-not-object": case(meta=[1, 2]),
        "nodes-not-list": case(nodes={"y": 1}),
        "node-not-object": case(nodes=["exp"]),
        "literal-nan": case(nodes=[{"id": "y", "op": "mul", "inputs": ["x", float("nan")]}]),
        "literal-string": case(nodes=[{"id": "y", "op": "mul", "inputs": ["x", "2.0"]}]),
        "literal-bool": case(nodes=[{"id": "y", "op": "mul", "inputs": ["x", True]}]),
        "duplicate-node-ids": case(nodes=[{"id": "y", "op": "exp", "inputs": ["x"]},
                                          {"id": "y", "op": "neg", "inputs": ["x"]}]),
    }
    valid = {"no-nodes": "an identity graph (its input is its output) is a valid case"}
    for name, body in bad.items():
        out.append(Input(f"case-{name}", "check", pc("check", "c.json", *EAGER), write("c.json", body),
                         expect=(0, 1, 2) if name in valid else (2,), precious=("c.json",), check=no_file(SENTINEL),
                         note=valid.get(name, "")))
    # files that are not case files at all
    for name, setup in {"directory": mkdir("c.json"), "fifo": fifo("c.json"), "dev-zero-link": link("c.json", "/dev/zero"),
                        "dev-tty-link": link("c.json", "/dev/tty"), "dangling-link": link("c.json", "nowhere.json"),
                        "missing": lambda d: None,
                        "loop-link": both(link("c.json", "c2.json"), link("c2.json", "c.json"))}.items():
        out.append(Input(f"casefile-{name}", "check", pc("check", "c.json", *EAGER), setup, timeout=60))
    if os.geteuid() != 0:  # root reads a file of mode 000
        out.append(Input("casefile-unreadable", "check", pc("check", "c.json", *EAGER),
                         both(write("c.json", case()), lambda d: os.chmod(d / "c.json", 0))))
    # names that carry code, newlines and terminal escapes: valid cases, judged, never run
    for name, value in {"name-payload": PAYLOAD, "name-newline": "x\nimport os; os.system('touch PWNED')",
                        "name-quote": "x'); __import__('os').system('touch PWNED'); ('",
                        "name-escape": "x\x1b[2J\x1b]0;owned\x07", "name-unicode": "ξ_π√", "name-empty": "",
                        "name-keyword": "lambda", "name-dunder": "__builtins__"}.items():
        body = case(inputs=[{"name": value, "role": "input", "kind": "tensor", "shape": [4], "dtype": "float32",
                             "init": {"dist": "normal", "seed": 1}}], nodes=[{"id": "y", "op": "exp", "inputs": [value]}])
        out.append(Input(f"case-{name}", "check", pc("check", "c.json", *EAGER), write("c.json", body),
                         expect=(0, 1, 2), precious=("c.json",), check=no_file(SENTINEL)))
        out.append(Input(f"export-run-{name}", "export",
                         ["bash", "-c", f"{PY} -m fuzzer.cli export c.json --executor torch/eager --full --out r.py "
                                        f"&& {PY} -I r.py; test ! -e {SENTINEL}"],
                         write("c.json", body), expect=(0, 1, 2), precious=("c.json",), check=no_file(SENTINEL)))
    return out


def export_inputs() -> list[Input]:
    out: list[Input] = []
    base = ["export", XLA_SEED, "--executor", "torch/eager", "--full", "--out"]
    user_targets = {
        "user-file": write("out.py", USER), "user-file-with-keyword-first-4k": write("out.py", "# precfuzz\n" * 50),
        "user-file-fake-header": write("out.py", "# precfuzz-generated sha256:" + "0" * 64 + "\nmine\n"),
        "symlink-to-user-file": both(write("mine.txt", USER), link("out.py", "mine.txt")),
        "edited-export": both(lambda d: subprocess.run(pc(*base, "out.py"), cwd=d, capture_output=True),
                              lambda d: (d / "out.py").write_text((d / "out.py").read_text() + "# my edit\n")),
    }
    for name, setup in user_targets.items():
        prec = ("mine.txt",) if "symlink" in name else ("out.py",)
        out.append(Input(f"export-{name}", "export", pc(*base, "out.py"), setup, precious=prec,
                         check=stderr_has("--force")))
    specials = {"dir": mkdir("out.py"), "fifo": fifo("out.py"), "dev-null-link": link("out.py", "/dev/null"),
                "missing-parent-file": write("parent", "x"), "same-as-case": lambda d: None}
    for name, setup in specials.items():
        target = {"missing-parent-file": "parent/out.py", "same-as-case": XLA_SEED}.get(name, "out.py")
        out.append(Input(f"export-out-{name}", "export", pc(*base, target), setup, timeout=120))
    out += [
        Input("export-own-export-replaced", "export", ["bash", "-c", " && ".join([shlex.join(pc(*base, "o.py"))] * 2)],
              expect=(0,), check=exists("o.py")),
        Input("export-force-over-user-file", "export", pc(*base, "out.py", "--force"), write("out.py", USER),
              expect=(0,)),
        Input("export-empty-file", "export", pc(*base, "out.py"), write("out.py", ""), expect=(0,)),
        Input("export-report-user-file", "export", pc("export", XLA_SEED, "--executor", "xla/native", "--out", "r.py",
                                                     "--report", "notes.md"), write("notes.md", USER),
              precious=("notes.md",), check=no_file("r.py")),
        Input("export-report-equals-out", "export", pc(*base, "r.py", "--report", "r.py")),
        Input("export-set-out-of-range", "export", pc(*base, "r.py", "--set", "9")),
        Input("export-set-negative", "export", pc(*base, "r.py", "--set", "-1")),
        Input("export-unknown-executor", "export", pc("export", XLA_SEED, "--executor", "nope", "--out", "r.py")),
        Input("export-oracle-executor", "export", pc("export", XLA_SEED, "--executor", "reference", "--out", "r.py")),
        Input("export-two-executors", "export", pc("export", XLA_SEED, "--executor", "torch/*", "--out", "r.py")),
        Input("export-empty-out", "export", pc("export", XLA_SEED, "--executor", "torch/eager", "--out", "")),
    ]
    if os.geteuid() != 0:  # root writes into a directory of mode 500
        out.append(Input("export-readonly-dir", "export", pc(*base, "ro/r.py"),
                         both(mkdir("ro"), lambda d: os.chmod(d / "ro", 0o500))))
    return out


def minimize_inputs() -> list[Input]:
    m = ["minimize", "case.json", "--executors", "debug/faults", "--quiet", "--max-seconds", "30"]
    setup = write("case.json", FAULTY)
    out = [
        Input("minimize-default-path-user-file", "minimize", pc(*m), both(setup, write("case.min.json", USER)),
              precious=("case.min.json",)),
        Input("minimize-default-path-user-case", "minimize", pc(*m), both(setup, write("case.min.json", FAULTY)),
              precious=("case.min.json",)),
        Input("minimize-out-user-file", "minimize", pc(*m, "--out", "mine.json"), both(setup, write("mine.json", USER)),
              precious=("mine.json",)),
        Input("minimize-out-symlink-user", "minimize", pc(*m, "--out", "l.json"),
              both(setup, write("mine.json", USER), link("l.json", "mine.json")), precious=("mine.json",)),
        Input("minimize-export-script-user", "minimize", pc(*m, "--export"), both(setup, write("case.min.py", USER)),
              precious=("case.min.py",)),
        Input("minimize-export-full-script-user", "minimize", pc(*m, "--export"),
              both(setup, write("case.min.full.py", USER)), precious=("case.min.full.py",)),
        Input("minimize-out-is-case", "minimize", pc(*m, "--out", "case.json"), setup, precious=("case.json",)),
        Input("minimize-out-fifo", "minimize", pc(*m, "--out", "f.json"), both(setup, fifo("f.json")), timeout=60),
        Input("minimize-out-dev-null", "minimize", pc(*m, "--out", "n.json"), both(setup, link("n.json", "/dev/null"))),
        Input("minimize-twice-replaces-own", "minimize", ["bash", "-c", " && ".join([shlex.join(pc(*m))] * 2)], setup,
              expect=(0,), check=exists("case.min.json")),
        Input("minimize-force", "minimize", pc(*m, "--force"), both(setup, write("case.min.json", USER)), expect=(0,)),
        Input("minimize-same-basename-two-dirs", "minimize",
              pc("minimize", "a/c.json", "b/c.json", "--out", "o/", "--executors", "debug/faults"),
              both(write("a/c.json", FAULTY), write("b/c.json", FAULTY))),
        Input("minimize-same-case-twice", "minimize", pc("minimize", "case.json", "case.json", "--executors",
                                                          "debug/faults"), setup),
        Input("minimize-signature-garbage", "minimize", pc(*m, "--signature", "a|b|c"), setup),
        Input("minimize-signature-payload", "minimize", pc(*m, "--signature", PAYLOAD), setup, check=no_file(SENTINEL)),
        Input("minimize-max-seconds-nan", "minimize", pc("minimize", "case.json", "--max-seconds", "nan"), setup),
        Input("minimize-max-checks-zero", "minimize", pc("minimize", "case.json", "--max-checks", "0"), setup),
        Input("minimize-no-finding", "minimize", pc("minimize", "clean.json", "--executors", "torch/eager"),
              write("clean.json", case()), expect=(1,), check=no_file("clean.min.json")),
        Input("minimize-empty-out", "minimize", pc(*m, "--out", ""), setup),
        Input("minimize-out-dir-missing-parent-file", "minimize", pc(*m, "--out", "f/x.json"),
              both(setup, write("f", "file"))),
    ]
    return out


CAMP = ["run", "--out", "camp", "--executors", "debug/faults", "--no-seeds", "--no-minimize", "--max-tests", "6"]


def faulty_campaign(minimize: bool = False, tests: int = 12) -> Callable[[Path], None]:
    """A real campaign in d/camp (debug/faults on the generator's cases; bugs from the crash/wrong stream)."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); from pathlib import Path; "
            "from campaign_fixtures import fault_stream; from fuzzer.campaign import Campaign, CampaignConfig; "
            f"Campaign(CampaignConfig(out=Path('camp'), executors=['debug/faults'], seed=3, max_tests={tests}, "
            f"minimize={minimize}, generate=fault_stream)).run()")
    return lambda d: subprocess.run([PY, "-c", code], cwd=d, capture_output=True, env=env_of(), timeout=300)


def resume(tests: int = 21, minimize: bool = True) -> list[str]:
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'tests')!r}); from pathlib import Path; "
            "from campaign_fixtures import fault_stream; from fuzzer.campaign import Campaign, CampaignConfig, "
            "CampaignError\ntry:\n    s = Campaign(CampaignConfig(out=Path('camp'), executors=['debug/faults'], "
            f"seed=3, max_tests={tests}, minimize={minimize}, minimize_budget_s=30, generate=fault_stream)).run()\n"
            "    print(json.dumps({'tests': s.tests, 'bugs': s.bugs_total}))\n"
            "except CampaignError as e:\n    print('precfuzz: error:', e, file=sys.stderr); sys.exit(2)")
    return [PY, "-c", code]


def state_matches_rows(d: Path, p: subprocess.CompletedProcess) -> str | None:
    import pandas as pd

    state = json.loads((d / "camp" / "state.json").read_text())
    rows = len(pd.read_parquet(d / "camp" / "runs.parquet")) if (d / "camp" / "runs.parquet").exists() else 0
    return None if rows == state["tests"] else f"state.json counts {state['tests']} tests, runs.parquet {rows} rows"


def bugs_count(n: int) -> Check:
    def check(d: Path, p: subprocess.CompletedProcess) -> str | None:
        live = [json.loads(line) for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()]
        live = [b for b in live if not b.get("merged_into")]
        return None if len(live) >= n else f"{len(live)} live bugs, expected {n}"
    return check


def damage(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    return both(faulty_campaign(), fn)


def run_inputs() -> list[Input]:
    out = [
        Input("run-out-is-file", "run", pc(*CAMP), write("camp", USER), precious=("camp",)),
        Input("run-out-is-fifo", "run", pc(*CAMP), fifo("camp"), timeout=60),
        Input("run-out-dev-null", "run", pc(*CAMP), link("camp", "/dev/null")),
        Input("run-out-empty", "run", pc("run", "--out", "", "--executors", "debug/faults")),
        Input("run-time-nan", "run", pc(*CAMP, "--time", "nan")),
        Input("run-time-negative", "run", pc(*CAMP, "--time", "-1")),
        Input("run-max-tests-zero", "run", pc(*CAMP[:-1], "0")),
        Input("run-workers-zero", "run", pc(*CAMP, "--workers", "0")),
        Input("run-workers-huge", "run", pc(*CAMP, "--workers", "100000")),
        Input("run-seed-negative", "run", pc(*CAMP, "--seed", "-3")),
        Input("run-seed-huge", "run", pc(*CAMP, "--seed", str(2**70))),
        Input("run-schedule-unknown", "run", pc(*CAMP, "--schedule", "random")),
        Input("run-executors-empty", "run", pc("run", "--out", "camp", "--executors", "", "--max-tests", "1")),
        Input("run-executors-oracle", "run", pc("run", "--out", "camp", "--executors", "reference", "--max-tests", "1")),
        Input("run-seeds-dir-is-file", "run", pc("run", "--out", "camp", "--seeds-dir", "s", "--executors",
                                                 "debug/faults", "--max-tests", "1"), write("s", "x")),
        Input("run-seeds-dir-bad-case", "run", pc("run", "--out", "camp", "--seeds-dir", "s", "--executors",
                                                  "debug/faults", "--max-tests", "1"), write("s/a.json", "{")),
        Input("run-ray-empty", "run", pc(*CAMP, "--ray", "")),
        Input("run-fresh-ok", "run", pc(*CAMP), expect=(0,), check=state_matches_rows),
    ]
    files = {
        "state-garbage": write("camp/state.json", "{{{"), "state-dir": mkdir("camp/state.json"),
        "state-fifo": fifo("camp/state.json"), "state-dev-zero": link("camp/state.json", "/dev/zero"),
        "state-array": write("camp/state.json", "[]"), "state-wrong-seed": write("camp/state.json", '{"seed": 99}'),
        "state-deep": write("camp/state.json", "[" * 100000), "state-negative-tests": write("camp/state.json",
                                                                                          '{"seed": 0, "tests": -5}'),
        "findings-jsonl-dir": mkdir("camp/findings.jsonl"), "findings-jsonl-fifo": fifo("camp/findings.jsonl"),
        "bugs-jsonl-dev-zero": link("camp/bugs.jsonl", "/dev/zero"), "findings-dir-is-file": write("camp/findings", "x"),
        "bugs-dir-is-file": write("camp/bugs", "x"), "logs-is-file": write("camp/logs", "x"),
        "logs-is-fifo": fifo("camp/logs"), "runs-parquet-is-file": write("camp/runs.parquet", "x"),
        "schedule-json-dir": mkdir("camp/schedule.json"), "arm-results-fifo": fifo("camp/arm-results.jsonl"),
        "damaged-files-dir": mkdir("camp/damaged-files.jsonl"), "manifest-dir": mkdir("camp/.precfuzz-manifest.json"),
        "lock-is-dir": mkdir("camp/.lock"),
    }
    for name, setup in files.items():
        out.append(Input(f"run-{name}", "run", pc(*CAMP), setup, timeout=120,
                         check=lambda d, p: None if not (d / "camp" / "runs.parquet").is_dir() else
                         "cases ran before the refusal"))
    # resumes over damaged campaigns (minimizing): never die, re-derive, quarantine
    def all_originals(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        def do(d: Path) -> None:
            for p in (d / "camp" / "findings").glob("*/original.json"):
                p.unlink()
                fn(p)
        return do

    resumes = {
        "resume-bugs-jsonl-deleted": damage(lambda d: (d / "camp" / "bugs.jsonl").unlink()),
        "resume-bugs-jsonl-garbage": damage(lambda d: (d / "camp" / "bugs.jsonl").write_text("garbage\n" * 3)),
        "resume-findings-line-cut": damage(lambda d: (d / "camp" / "findings.jsonl").write_text(
            "{cut\n" + "\n".join((d / "camp" / "findings.jsonl").read_text().splitlines()[1:]) + "\n")),
        "resume-findings-all-garbage": damage(lambda d: (d / "camp" / "findings.jsonl").write_text("x\n")),
        "resume-originals-missing": damage(all_originals(lambda p: None)),
        "resume-originals-dev-zero": damage(all_originals(lambda p: os.symlink("/dev/zero", p))),
        "resume-originals-fifo": damage(all_originals(lambda p: os.mkfifo(p))),
        "resume-originals-dir": damage(all_originals(lambda p: p.mkdir())),
        "resume-originals-garbage": damage(all_originals(lambda p: p.write_text("{"))),
        "resume-originals-huge-shape": damage(all_originals(lambda p: p.write_text(json.dumps(case(
            inputs=[{"name": "x", "shape": [10**5, 10**5], "dtype": "float32", "init": {"dist": "normal"}}]))))),
        "resume-finding-folder-file": damage(lambda d: [shutil.rmtree(f) or f.write_text("x")
                                                        for f in (d / "camp" / "findings").iterdir()]),
        "resume-bug-folders-taken": damage(lambda d: [(d / "camp" / "bugs").mkdir(exist_ok=True)] + [
            (d / "camp" / "bugs" / json.loads(line)["bug"]).write_text("x")
            for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()]),
        "resume-parquet-chunks-deleted": damage(lambda d: [p.unlink() for p in (d / "camp" / "runs.parquet").glob("part-*")]),
        "resume-parquet-chunk-garbage": damage(lambda d: [p.write_bytes(b"PAR1garbage") for p in (d / "camp" / "runs.parquet").glob("part-*")]),
        "resume-journal-garbage": damage(lambda d: (d / "camp" / "runs.parquet" / ".journal-x.jsonl").write_text("{\n")),
        "resume-bug-merged-into-missing": damage(lambda d: (d / "camp" / "bugs.jsonl").write_text("".join(
            json.dumps({**json.loads(line), "merged_into": "bzzzz"}) + "\n"
            for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()))),
        "resume-bug-representative-bogus": damage(lambda d: (d / "camp" / "bugs.jsonl").write_text("".join(
            json.dumps({**json.loads(line), "representative": "nope"}) + "\n"
            for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()))),
        "resume-finding-original-outside": damage(lambda d: (d / "camp" / "findings.jsonl").write_text("".join(
            json.dumps({**{k: v for k, v in json.loads(line).items() if k != "id"}, "original": "/etc/passwd"}) + "\n"
            for line in (d / "camp" / "findings.jsonl").read_text().splitlines()))),
    }
    out.append(Input("resume-bugs-folder-is-file", "run", resume(), damage(write("camp/bugs", "x")),
                     check=stderr_has("not a directory"), timeout=400))
    for name, setup in resumes.items():
        out.append(Input(name, "run", resume(), setup, expect=(0,), check=state_matches_rows, timeout=400))
    out.append(Input("resume-twice-after-bugs-deleted", "run", ["bash", "-c", " && ".join([shlex.join(resume())] * 2)], damage(lambda d: (d / "camp" / "bugs.jsonl").unlink()), expect=(0,),
        check=bugs_count(2), timeout=600))
    out.append(Input("run-kill-9-then-resume", "run", ["bash", "-c", kill_and_resume()], expect=(0,),
                     check=state_matches_rows, timeout=400))
    out.append(Input("run-second-run-same-dir", "run", ["bash", "-c", f"{shlex.join(pc(*CAMP[:-2], '--time', '20'))} & "
                                                        f"sleep 8; {shlex.join(pc(*CAMP))}; s=$?; wait; exit $s"],
                     check=stderr_has("in use by another precfuzz run"), timeout=120))
    return out


def kill_and_resume() -> str:
    run = shlex.join(pc(*CAMP[:-2], "--time", "120"))
    return (f"for i in 1 2 3; do {run} >/dev/null 2>&1 & p=$!; sleep $((4 + i)); kill -9 $p; wait $p; done; "
            f"{shlex.join(pc(*CAMP[:-1], '1'))} >/dev/null 2>&1; exit 0")


def report_inputs() -> list[Input]:
    camp = faulty_campaign()
    return [
        Input("report-missing-dir", "report", pc("report", "nope")),
        Input("report-not-campaign", "report", pc("report", "d"), mkdir("d")),
        Input("report-file", "report", pc("report", "f"), write("f", "x")),
        Input("report-empty-arg", "report", pc("report", "")),
        Input("report-state-fifo", "report", pc("report", "camp"), fifo("camp/state.json"), timeout=60),
        Input("report-state-dev-zero", "report", pc("report", "camp"), link("camp/state.json", "/dev/zero"), timeout=60),
        Input("report-ok", "report", pc("report", "camp"), camp, expect=(0,), check=exists("camp/report.md")),
        Input("report-twice", "report", ["bash", "-c", " && ".join([shlex.join(pc("report", "camp"))] * 2)], camp,
              expect=(0,)),
        Input("report-user-report-md", "report", pc("report", "camp"), both(camp, write("camp/report.md", USER)),
              precious=("camp/report.md",), check=stderr_has("--force")),
        Input("report-user-png", "report", pc("report", "camp"),
              both(camp, write("camp/error_ratio_heatmap.png", b"\x89PNG mine")),
              precious=("camp/error_ratio_heatmap.png",)),
        Input("report-md-is-dir", "report", pc("report", "camp"), both(camp, mkdir("camp/report.md"))),
        Input("report-md-fifo", "report", pc("report", "camp"), both(camp, fifo("camp/report.md")), timeout=60),
        Input("report-md-symlink-user", "report", pc("report", "camp"),
              both(camp, write("mine.md", USER), link("camp/report.md", "../mine.md")), precious=("mine.md",)),
        Input("report-force", "report", pc("report", "camp", "--force"), both(camp, write("camp/report.md", USER)),
              expect=(0,)),
        Input("report-damaged-findings", "report", pc("report", "camp"),
              both(camp, lambda d: (d / "camp" / "findings.jsonl").write_text("garbage\n")), expect=(0,),
              precious=("camp/findings.jsonl",)),
        Input("report-manifest-forged", "report", pc("report", "camp"),
              both(camp, write("camp/.precfuzz-manifest.json", json.dumps(
                  {"files": {"error_ratio_heatmap.png": hashlib.sha256(b"mine").hexdigest()}})),
                   write("camp/error_ratio_heatmap.png", b"mine")), precious=("camp/error_ratio_heatmap.png",)),
    ]


SMOKE = ["smoke", "--max-tests", "2", "--executors", "torch/eager", "--workers", "1", "--baseline", ""]


def smoke_inputs() -> list[Input]:
    return [
        Input("smoke-junit-user-file", "smoke", pc(*SMOKE, "--out", "s", "--junit", "mine.xml"),
              write("mine.xml", USER), precious=("mine.xml",), check=no_file("s")),
        Input("smoke-summary-user-file", "smoke", pc(*SMOKE, "--out", "s", "--summary", "mine.md"),
              write("mine.md", USER), precious=("mine.md",)),
        Input("smoke-write-baseline-user-file", "smoke", pc(*SMOKE, "--out", "s", "--write-baseline", "mine.json"),
              write("mine.json", USER), precious=("mine.json",)),
        Input("smoke-out-user-dir", "smoke", pc(*SMOKE, "--out", "u"), write("u/data.txt", USER),
              precious=("u/data.txt",)),
        Input("smoke-out-forged-marker", "smoke", pc(*SMOKE, "--out", "u"),
              both(write("u/.precfuzz-smoke", "made by precfuzz smoke; the next smoke run with this --out empties it\n"),
                   write("u/data.txt", USER)), precious=("u/data.txt",)),
        Input("smoke-out-marker-symlink", "smoke", pc(*SMOKE, "--out", "u"),
              both(write("m", "x"), link("u/.precfuzz-smoke", "../m"), write("u/data.txt", USER)),
              precious=("u/data.txt",)),
        Input("smoke-out-is-file", "smoke", pc(*SMOKE, "--out", "f"), write("f", USER), precious=("f",)),
        Input("smoke-baseline-garbage", "smoke", [*pc(*SMOKE[:-2]), "--out", "s", "--baseline", "b.json"],
              write("b.json", "{"), precious=("b.json",)),
        Input("smoke-baseline-fifo", "smoke", [*pc(*SMOKE[:-2]), "--out", "s", "--baseline", "b.json"], fifo("b.json"),
              timeout=60),
        Input("smoke-baseline-deep", "smoke", [*pc(*SMOKE[:-2]), "--out", "s", "--baseline", "b.json"],
              write("b.json", "[" * 100000)),
        Input("smoke-junit-equals-summary", "smoke", pc(*SMOKE, "--out", "s", "--junit", "x", "--summary", "x")),
        Input("smoke-junit-is-state", "smoke", pc(*SMOKE, "--out", "s", "--junit", "s/state.json")),
        Input("smoke-baseline-inside-out", "smoke", [*pc(*SMOKE[:-2]), "--out", "s", "--baseline", "s/b.json"],
              both(write("s/.precfuzz-smoke", "x"), write("s/b.json", '{"bugs": []}')), precious=("s/b.json",)),
        Input("smoke-run-twice", "smoke", ["bash", "-c", " && ".join([shlex.join(pc(*SMOKE, "--out", "s",
                                                                                   "--junit", "s/j.xml"))] * 2)],
              expect=(0, 1), check=exists("s/j.xml"), timeout=600),
        Input("smoke-write-baseline-in-place", "smoke",
              [*pc(*SMOKE[:-2]), "--out", "s", "--baseline", "b.json", "--write-baseline", "b.json"],
              write("b.json", '{"bugs": []}'), expect=(0, 1), timeout=600),
        Input("smoke-max-tests-zero", "smoke", pc(*SMOKE[:2], "0")),
        Input("smoke-time-inf", "smoke", pc(*SMOKE, "--time", "inf")),
    ]


MODELS = {
    "ok": "import torch\ndef make():\n    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "base-exception": "class Stop(BaseException):\n    pass\ndef make():\n    raise Stop('x')\n",
    "keyboard-interrupt": "def make():\n    raise KeyboardInterrupt\n",
    "system-exit-0": "import sys\ndef make():\n    sys.exit(0)\n",
    "os-exit": "import os\ndef make():\n    os._exit(0)\n",
    "sigkill-self": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "segfault": "import ctypes\nctypes.string_at(0)\n",
    "hang": "def make():\n    while True:\n        pass\n",
    "returns-none": "def make():\n    return None\n",
    "returns-tensor-not-tuple": "import torch\ndef make():\n    return torch.nn.Linear(4, 4), torch.ones(2, 4)\n",
    "cuda-args": "import torch\ndef make():\n    return torch.nn.Linear(4, 4), ('cuda',)\n",
    "syntax-error": "def make(:\n",
    "import-error": "import not_a_module_at_all\n",
    "spawns-child": "import subprocess, sys, torch\ndef make():\n    subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(120)'])\n    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "spawns-session": "import subprocess, sys, torch\ndef make():\n    subprocess.Popen([sys.executable, '-c', "
                      "'import time; time.sleep(120)'], start_new_session=True)\n"
                      "    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "unprintable-exception": "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\ndef make():\n"
                             "    raise E()\n",
    "exception-in-forward": "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                            "        raise GeneratorExit('no')\ndef make():\n    return M(), (torch.ones(2),)\n",
    "unsupported-op": "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return torch.fft.fft(x).real\ndef make():\n    return M(), (torch.ones(4),)\n",
}


def no_sleepers(d: Path, p: subprocess.CompletedProcess) -> str | None:
    time.sleep(1.0)
    found = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    left = [line for line in found.splitlines() if "time.sleep(120)" in line and "ps -eo" not in line]
    for line in left:  # ours: end them so the next input starts clean
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    return f"{len(left)} process(es) the model started outlived the audit" if left else None


def audit_inputs() -> list[Input]:
    out = []
    for name, source in MODELS.items():
        expect = (0, 1) if name in ("ok", "spawns-child", "spawns-session") else (2,)
        extra = ["--timeout", "5"] if name == "hang" else []
        out.append(Input(f"audit-model-{name}", "audit", pc("audit", "m.py", *EAGER, "--no-minimize", *extra),
                         write("m.py", source), expect=expect, precious=("m.py",), check=no_sleepers, timeout=400))
    ok = write("m.py", MODELS["ok"])
    out += [
        Input("audit-save-case-user-file", "audit", pc("audit", "m.py", "--save-case", "c.json"),
              both(write("m.py", "raise SystemExit('loaded')\n"), write("c.json", USER)), precious=("c.json",),
              check=stderr_has("--force")),
        Input("audit-save-case-is-model", "audit", pc("audit", "m.py", "--save-case", "m.py"), ok, precious=("m.py",)),
        Input("audit-save-case-fifo", "audit", pc("audit", "m.py", "--save-case", "f"), both(ok, fifo("f")),
              timeout=60),
        Input("audit-save-case-ok-then-again", "audit", ["bash", "-c", " && ".join(
            [shlex.join(pc("audit", "m.py", *EAGER, "--no-minimize", "--save-case", "c.json"))] * 2)], ok,
              expect=(0, 1), check=exists("c.json"), timeout=600),
        Input("audit-model-fifo", "audit", pc("audit", "m.py"), fifo("m.py"), timeout=60),
        Input("audit-model-dir", "audit", pc("audit", "m.py"), mkdir("m.py")),
        Input("audit-model-not-py", "audit", pc("audit", "m.txt"), write("m.txt", MODELS["ok"])),
        Input("audit-func-not-identifier", "audit", pc("audit", "m.py:1bad"), ok),
        Input("audit-func-missing", "audit", pc("audit", "m.py:nope"), ok),
        Input("audit-out-is-file", "audit", pc("audit", "m.py", "--out", "o"), both(ok, write("o", USER)),
              precious=("o",)),
        Input("audit-timeout-zero", "audit", pc("audit", "m.py", "--timeout", "0"), ok),
        Input("audit-explore-negative", "audit", pc("audit", "m.py", "--explore", "-1"), ok),
    ]
    return out


def generate_inputs() -> list[Input]:
    return [
        Input("generate-count-negative", "generate", pc("generate", "--count", "-1", "--out", "c")),
        Input("generate-count-huge", "generate", pc("generate", "--count", str(10**9), "--out", "c")),
        Input("generate-out-file", "generate", pc("generate", "--count", "1", "--out", "c"), write("c", USER),
              precious=("c",)),
        Input("generate-families-unknown", "generate", pc("generate", "--count", "1", "--families", "nope", "--stats")),
        Input("generate-families-empty", "generate", pc("generate", "--count", "1", "--families", ",", "--stats")),
        Input("generate-no-out-no-stats", "generate", pc("generate", "--count", "1")),
        Input("generate-twice-same-dir", "generate", ["bash", "-c", " && ".join(
            [shlex.join(pc("generate", "--count", "3", "--seed", "1", "--out", "c"))] * 2)], expect=(0,)),
        Input("generate-user-file-at-name", "generate", ["bash", "-c", " && ".join([
            shlex.join(pc("generate", "--count", "1", "--seed", "1", "--out", "c")),
            "for f in c/*.json; do echo mine > $f; done",
            shlex.join(pc("generate", "--count", "1", "--seed", "1", "--out", "c"))])],
              check=lambda d, p: None if all(f.read_text() == "mine\n" for f in (d / "c").glob("*.json"))
              else "a user's file was replaced"),
        Input("generate-start-negative", "generate", pc("generate", "--count", "1", "--start", "-5", "--stats")),
    ]


def misc_inputs() -> list[Input]:
    return [
        Input("cli-unknown-subcommand", "cli", pc("frobnicate")),
        Input("cli-no-args", "cli", pc(), expect=(0, 2)),
        Input("cli-help", "cli", pc("--help"), expect=(0,)),
        Input("executors-list", "executors", pc("executors"), expect=(0,)),
        Input("check-unknown-executor", "check", pc("check", XLA_SEED, "--executors", "nope")),
        Input("check-executors-wildcard-none", "check", pc("check", XLA_SEED, "--executors", "zzz/*")),
        Input("check-json-ok", "check", pc("check", XLA_SEED, "--json", *EAGER), expect=(0, 1),
              check=lambda d, p: None if json.loads(p.stdout) else "no JSON"),
        Input("check-timeout-nan", "check", pc("check", XLA_SEED, "--timeout", "nan")),
        Input("check-tvm-seed", "check", pc("check", TVM_SEED, "--executors", "tvm/decompose"), expect=(1,)),
    ]


# ---------------------------------------------------------------- round five (issue 38's Done-when): a fresh pass

ORPHAN_MARK = "hostile5-orphan"  # in the argv of every process a round-five model starts


def orphans_in(d: Path) -> list[int]:
    """Processes (not this one) still running with their working directory under d, or carrying ORPHAN_MARK; each
    is ended (SIGKILL) after it is counted, so the next input starts clean."""
    time.sleep(1.0)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), "")
        except OSError:
            continue
        if "Z" in state.split(":", 1)[-1][:3]:
            continue  # a zombie is already gone
        if cwd == str(d) or cwd.startswith(str(d) + os.sep) or ORPHAN_MARK in argv:
            found.append(int(entry.name))
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found


def no_escapes(d: Path, p: subprocess.CompletedProcess) -> str | None:
    """Nothing precfuzz printed carries a raw terminal control character (ESC, BEL, CR)."""
    text = (p.stdout or "") + (p.stderr or "")
    bad = sorted({hex(ord(c)) for c in text if c in "\x1b\x07\r\x9b" or ord(c) in range(0x202a, 0x202f)})
    return f"raw control characters printed: {', '.join(bad)}" if bad else None


def all_of(*checks: Check) -> Check:
    def check(d: Path, p: subprocess.CompletedProcess) -> str | None:
        problems = [x for x in (c(d, p) for c in checks) if x]
        return "; ".join(problems) or None
    return check


def script_ran(name: str = "script.out") -> Check:
    """A written script ran to its own verdict: no traceback in its output, exit 0 or 1 (script.rc)."""
    def check(d: Path, p: subprocess.CompletedProcess) -> str | None:
        if p.returncode != 0:  # the export itself refused (its exit status is judged on its own): no script
            return None
        out = (d / name).read_text(errors="replace") if (d / name).exists() else ""
        rc = (d / "script.rc").read_text().strip() if (d / "script.rc").exists() else "?"
        if "Traceback (most recent call last)" in out:
            return f"the written script died: {out.strip().splitlines()[-1][:120]}"
        return None if rc in ("0", "1") else f"the written script exited {rc}"
    return check


def tensor(name: str, shape: list[int], dtype: str = "float32", role: str = "input", **more) -> dict:
    init = more.pop("init", {"dist": "normal", "seed": 1})
    return {"name": name, "role": role, "kind": "tensor", "shape": shape, "dtype": dtype, "init": init, **more}


def node(id_: str, op: str, *inputs, **attrs) -> dict:
    return {"id": id_, "op": op, "inputs": list(inputs), "attrs": attrs}


def train_case(x: dict | None = None, extra_inputs=(), nodes=None, outputs=("loss",)) -> dict:
    """A small training case: loss = sum(x * w), gradients of x and w."""
    x = x or tensor("x", [4, 8], grad=True)
    return case(inputs=[x, tensor("w", [8], role="param", grad=True, init={"dist": "normal", "seed": 2}),
                        *extra_inputs],
                nodes=nodes or [node("p", "mul", "x", "w"), node("loss", "sum", "p")], outputs=outputs)


EXAMPLE_TRAIN = str(ROOT / "corpus" / "examples" / "training-layer-norm-offset-fp16.json")
ESC = "\x1b[2J\x1b[HFAKE: all clean\r"


def costly(kind: str, grad: bool = False, dtype: str = "float16") -> dict:
    """Cases within the value and memory caps whose float64 reference does tens of billions of multiply-adds."""
    g = {"grad": True} if grad else {}
    if kind == "matmul":
        ins, nd = [tensor("a", [4096, 4096], dtype, **g), tensor("b", [4096, 4096], dtype, **g)], [node("y", "matmul", "a", "b")]
    elif kind == "linear":
        ins, nd = [tensor("a", [4096, 4096], dtype, **g), tensor("b", [4096, 4096], dtype, **g)], [node("y", "linear", "a", "b")]
    elif kind == "bmm":
        ins, nd = [tensor("a", [4, 2048, 2048], dtype, **g), tensor("b", [4, 2048, 2048], dtype, **g)], [node("y", "bmm", "a", "b")]
    elif kind == "conv2d":
        ins = [tensor("a", [1, 256, 128, 128], dtype, **g), tensor("b", [1024, 256, 3, 3], dtype, **g)]
        nd = [node("y", "conv2d", "a", "b")]
    elif kind == "conv_transpose2d":
        ins = [tensor("a", [1, 1024, 126, 126], dtype, **g), tensor("b", [1024, 256, 3, 3], dtype, **g)]
        nd = [node("y", "conv_transpose2d", "a", "b")]
    elif kind == "sdpa":
        ins = [tensor(n, [1, 1, 4096, 2048], dtype, **g) for n in "qkv"]
        nd = [node("y", "scaled_dot_product_attention", "q", "k", "v")]
    else:
        raise ValueError(kind)
    if grad:
        nd = nd + [node("loss", "sum", "y")]
    return case(inputs=ins, nodes=nd, outputs=("loss",) if grad else ("y",))


def costly_faulty(kind: str) -> dict:
    c = costly(kind)
    if kind == "conv2d":  # half the output channels: z = y * fault fits the memory cap next to y
        c["inputs"][1]["shape"] = [512, 256, 3, 3]
    c["inputs"].append(tensor("fault", [1], init={"dist": "constant", "value": 5.0}))
    c["nodes"].append(node("z", "mul", "y", "fault"))
    c["outputs"] = ["z"]
    return c


def int_case(values: list, dtype: str, op: str = "add", literal_=1, shape=None) -> dict:
    ins = [tensor("x", shape or [len(values)], dtype, init={"values": values})]
    nd = [node("y", op, "x", literal_) if literal_ is not None else node("y", op, "x")]
    return case(inputs=ins, nodes=nd)


def index_case(op: str, index: list[int]) -> dict:
    ins = [tensor("t", [4, 3]), tensor("i", [len(index)], "int64", init={"values": index})]
    nd = {"embedding": [node("y", "embedding", "t", "i")],
          "index_select": [node("y", "index_select", "t", "i", dim=0)],
          "gather": [node("y", "gather", "t", "j", dim=0)]}[op]
    if op == "gather":
        ins[1] = tensor("j", [1, 3], "int64", init={"values": [index[:3]]})
    return case(inputs=ins, nodes=nd)


FORK_MODELS = {  # models whose processes misbehave (every child carries ORPHAN_MARK; none outlives the audit)
    "fork-many": "import subprocess, sys, torch\ndef make():\n    for _ in range(12):\n"
                 f"        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{ORPHAN_MARK}'])\n"
                 "    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "child-ignores-sigterm": "import subprocess, sys, torch\ndef make():\n    subprocess.Popen([sys.executable, '-c', "
                             "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                             "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(120)', "
                             f"'{ORPHAN_MARK}'], start_new_session=True)\n"
                             "    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "double-fork-daemon": "import os, sys, time, torch\ndef make():\n    if os.fork() == 0:\n        os.setsid()\n"
                          "        if os.fork() == 0:\n"
                          f"            os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)', '{ORPHAN_MARK}'])\n"
                          "        os._exit(0)\n    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "session-hopper": "import os, sys, time, torch\ndef make():\n    if os.fork() == 0:\n"
                      "        for _ in range(60):  # a new pid and a new session, again and again, for a few seconds\n"
                      "            if os.fork():\n                os._exit(0)\n            os.setsid()\n            time.sleep(0.05)\n"
                      f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)', '{ORPHAN_MARK}'])\n"
                      "    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)\n",
    "forward-forks": "import subprocess, sys, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                     f"        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{ORPHAN_MARK}'])\n"
                     "        return x * 2\ndef make():\n    return M(), (torch.ones(2, 4),)\n",
    "hang-after-child": "import subprocess, sys, time\ndef make():\n    subprocess.Popen([sys.executable, '-c', "
                        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)', "
                        f"'{ORPHAN_MARK}'], start_new_session=True)\n    time.sleep(600)\n",
}

RAISING_MODELS = {  # fails in eager on its own inputs: one line, exit 2
    "eager-keyerror": "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return x * {'a': 1}[str(int(x.sum().item()))]\ndef make():\n    return M(), (torch.ones(2),)\n",
    "eager-shape-error": "import torch\ndef make():\n    return torch.nn.Linear(4, 4), (torch.ones(2, 5),)\n",
    "escape-in-message": "def make():\n    raise ValueError('\\x1b[2J\\x1b[HFAKE: verdict clean\\r')\n",
    "escape-in-class-name": "import torch\nM = type('M\\x1b[2J\\x07', (torch.nn.Module,), {'forward': lambda self, x: "
                            "x[:, 9]})\ndef make():\n    return M(), (torch.ones(2, 4),)\n",
}


def smoke_then(*steps: str) -> list[str]:
    """A smoke run into s, then shell steps, then the same smoke run again (which must keep the user's files)."""
    first = shlex.join(pc(*SMOKE, "--out", "s"))
    return ["bash", "-c", f"{first} >/dev/null 2>&1; " + "; ".join(steps) + f"; exec {first}"]


def renamed_executors(to: object) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        state = json.loads((d / "camp" / "state.json").read_text())
        state["executors"] = to
        (d / "camp" / "state.json").write_text(json.dumps(state))
    return do


def fresh_inputs() -> list[Input]:
    """Round five: variations on round four's eight fixes, and training cases (inputs with "grad": true)."""
    out: list[Input] = []
    ok_check = (0, 1)

    def chk(id_: str, body: dict | str, expect=(2,), argv=None, deadline=None, check=None, timeout=120.0, **kw):
        out.append(Input(id_, "check", argv or pc("check", "c.json", *EAGER), write("c.json", body), expect=expect,
                         precious=("c.json",), check=all_of(no_file(SENTINEL), no_escapes, *([check] if check else [])),
                         deadline=deadline, timeout=timeout, orphans=True, **kw))

    # --- training cases: bad ones refused in one line; odd valid ones judged without a traceback
    chk("train-grad-on-int-input", train_case(x=tensor("x", [4, 8], "int32", grad=True, init={"dist": "uniform", "low": -3, "high": 3})))
    chk("train-grad-on-bool-input", case(inputs=[tensor("m", [4], "bool", grad=True, init={"values": [1, 0, 1, 0]}),
                                                 tensor("x", [4], grad=True)],
                                         nodes=[node("y", "where", "m", "x", 0.0), node("loss", "sum", "y")], outputs=("loss",)))
    chk("train-grad-string-yes", train_case(x=tensor("x", [4, 8], grad="yes")))
    chk("train-grad-int-one", train_case(x=tensor("x", [4, 8], grad=1)))
    chk("train-grad-null", train_case(x=tensor("x", [4, 8], grad=None)), expect=(0, 2))
    chk("train-grad-payload", train_case(x=tensor("x", [4, 8], grad=PAYLOAD)))
    chk("train-grad-on-scalar-kind", case(inputs=[{"name": "s", "role": "input", "kind": "scalar", "dtype": "float32",
                                                   "shape": [], "grad": True, "init": {"dist": "normal", "seed": 1}},
                                                  tensor("x", [4], grad=True)],
                                          nodes=[node("y", "mul", "x", "s"), node("loss", "sum", "y")], outputs=("loss",)))
    chk("train-grad-not-reaching-loss", train_case(extra_inputs=[tensor("u", [8], grad=True)]), expect=ok_check)
    chk("train-grad-only-on-unused", case(inputs=[tensor("x", [4]), tensor("u", [4], grad=True)],
                                          nodes=[node("loss", "sum", "x")], outputs=("loss",)), expect=(0, 1, 2))
    chk("train-loss-not-0dim", train_case(outputs=("p",)))
    chk("train-loss-keepdim", train_case(nodes=[node("p", "mul", "x", "w"), node("loss", "sum", "p", keepdim=True)]))
    chk("train-loss-int", train_case(nodes=[node("p", "mul", "x", "w"), node("s", "sum", "p"),
                                            node("loss", "astype", "s", dtype="int64")]))
    chk("train-loss-bool", train_case(nodes=[node("p", "mul", "x", "w"), node("s", "sum", "p"), node("loss", "gt", "s", 0.0)]))
    chk("train-loss-second-output", train_case(outputs=("p", "loss")))
    chk("train-grad-nan-values", train_case(x=tensor("x", [2, 8], grad=True, init={"values": [[float("nan")] * 8, [1.0] * 8]})),
        expect=(0, 1, 2))
    chk("train-grad-inf-values", train_case(x=tensor("x", [2, 8], grad=True, init={"values": [[float("inf")] * 8, [-1e38] * 8]})),
        expect=(0, 1, 2))
    chk("train-grad-fp8-input", case(inputs=[tensor("x", [4, 8], "float8_e4m3fn", grad=True)],
                                     nodes=[node("h", "astype", "x", dtype="float32"), node("loss", "sum", "h")],
                                     outputs=("loss",)), expect=(0, 1, 2))
    chk("train-grad-float64", train_case(x=tensor("x", [4, 8], "float64", grad=True)), expect=(0, 1, 2))
    chunk = [node("h0", "mul", "x", "w")] + [node(f"h{k}", "add", f"h{k - 1}", "w") for k in range(1, 4000)]
    chk("train-huge-graph", train_case(nodes=chunk + [node("loss", "sum", "h3999")]), expect=(0, 1, 2),
        argv=pc("check", "c.json", *EAGER, "--timeout", "20"), deadline=120, timeout=300)
    chk("train-huge-matmul-timeout-5", costly("matmul", grad=True), expect=(0, 1, 2),
        argv=pc("check", "c.json", *EAGER, "--timeout", "5"), deadline=40, timeout=300)
    chk("train-tvm-train-example", open(EXAMPLE_TRAIN).read(), expect=ok_check,
        argv=pc("check", "c.json", "--executors", "tvm/train,torch/eager", "--timeout", "120"), timeout=400)
    chk("train-tvm-train-nan", train_case(x=tensor("x", [2, 8], grad=True, init={"values": [[float("nan")] * 8, [1.0] * 8]})),
        expect=(0, 1, 2), argv=pc("check", "c.json", "--executors", "tvm/train", "--timeout", "120"), timeout=400)
    chk("train-tvm-train-escape-names", case(inputs=[tensor("x" + ESC, [4], grad=True)],
                                             nodes=[node("l" + ESC, "sum", "x" + ESC)], outputs=("l" + ESC,)),
        expect=(0, 1, 2), argv=pc("check", "c.json", "--executors", "tvm/train,torch/eager"), timeout=400)
    # export and minimize of training cases
    script = "{ " + PY + " -I r.py > script.out 2>&1; echo $? > script.rc; }"
    for ex in ("torch/eager", "tvm/train"):
        out.append(Input(f"train-export-full-{ex.replace('/', '-')}", "export",
                         ["bash", "-c", f"{shlex.join(pc('export', EXAMPLE_TRAIN, '--executor', ex, '--full', '--out', 'r.py'))}"
                                        f" && {script}"], expect=(0,) if ex == "torch/eager" else (2,),
                         check=all_of(script_ran(), no_escapes), timeout=400,
                         note="" if ex == "torch/eager" else "tvm/train has no script exporter: one line, exit 2"))
    faulty_train = train_case(extra_inputs=[tensor("fault", [1], init={"dist": "constant", "value": 5.0})],
                              nodes=[node("p", "mul", "x", "w"), node("q", "mul", "p", "fault"), node("loss", "sum", "q")])
    out.append(Input("train-export-short-faulty", "export",
                     ["bash", "-c", f"{shlex.join(pc('export', 'c.json', '--executor', 'debug/faults', '--out', 'r.py'))} && {script}"],
                     write("c.json", faulty_train), expect=(2,), precious=("c.json",), check=script_ran(), timeout=200,
                     note="debug/faults has no script exporter: one line, exit 2"))
    out.append(Input("train-minimize-faulty", "minimize", pc("minimize", "c.json", "--executors", "debug/faults",
                                                              "--max-seconds", "30", "--quiet"),
                     write("c.json", faulty_train), expect=(0, 1), precious=("c.json",), deadline=60, orphans=True))
    out.append(Input("train-minimize-out-user-file", "minimize", pc("minimize", "c.json", "--executors", "debug/faults",
                                                                     "--max-seconds", "30", "--out", "mine.json"),
                     both(write("c.json", faulty_train), write("mine.json", USER)), precious=("c.json", "mine.json")))
    # run --train with bad and odd flags
    tr = ["run", "--out", "camp", "--no-seeds", "--no-minimize", "--train"]
    for id_, extra in {"run-train-value": ["--train=yes", "--executors", "debug/faults"],
                       "run-train-families-unknown": ["--families", "training,nope", "--executors", "debug/faults"],
                       "run-train-families-zero": ["--families", "training:0", "--executors", "debug/faults"],
                       "run-train-families-negative": ["--families", "training:-1", "--executors", "debug/faults"],
                       "run-train-families-payload": ["--families", PAYLOAD, "--executors", "debug/faults"],
                       "run-train-executor-unknown": ["--executors", "tvm/train,nope"],
                       "run-train-timeout-zero": ["--executors", "debug/faults", "--timeout", "0"]}.items():
        out.append(Input(id_, "run", pc(*tr, *extra, "--max-tests", "2"), check=no_file(SENTINEL), timeout=120))
    out.append(Input("run-train-twice-flag-ok", "run", pc(*tr, "--train", "--executors", "debug/faults", "--max-tests", "8"),
                     expect=(0,), check=state_matches_rows, timeout=300, orphans=True))
    out.append(Input("run-train-tvm-train-time-40", "run", pc(*tr, "--families", "training", "--executors", "tvm/train",
                                                              "--time", "40", "--timeout", "30"),
                     expect=(0,), check=state_matches_rows, deadline=110, timeout=400, orphans=True))
    out.append(Input("run-train-resume-without-train", "run", ["bash", "-c", shlex.join(pc(*CAMP)) + " >/dev/null 2>&1 && "
                                                                + shlex.join(pc(*tr, "--executors", "debug/faults", "--max-tests", "12"))],
                     expect=(0, 2), check=state_matches_rows, timeout=300))

    # --- cost: huge matmul / conv / attention work within the caps on values, under every command's limit
    for kind in ("matmul", "linear", "bmm", "conv2d", "conv_transpose2d", "sdpa"):
        chk(f"cost-{kind}-check-timeout-5", costly(kind), expect=(0, 1, 2),
            argv=pc("check", "c.json", *EAGER, "--timeout", "5"), deadline=40, timeout=300)
    out.append(Input("cost-matmul-export", "export", pc("export", "c.json", "--executor", "torch/eager", "--out", "r.py"),
                     write("c.json", costly("matmul")), expect=(0, 2), precious=("c.json",), deadline=60, timeout=300,
                     orphans=True))
    out.append(Input("cost-conv2d-minimize-10", "minimize", pc("minimize", "c.json", "--executors", "debug/faults",
                                                                "--max-seconds", "10", "--timeout", "5"),
                     write("c.json", costly_faulty("conv2d")), expect=(0, 1, 2), precious=("c.json",), deadline=45,
                     timeout=300, orphans=True))
    out.append(Input("cost-sdpa-run-seeds-time-30", "run", pc("run", "--out", "camp", "--seeds-dir", "s", "--executors",
                                                               "torch/eager", "--time", "30", "--timeout", "5", "--no-minimize"),
                     write("s/big.json", costly("sdpa")), expect=(0, 2), deadline=70, timeout=300, orphans=True))
    chk("cost-max-pool1d-wide", case(inputs=[tensor("x", [1, 1, 2**24], "float16")],
                                     nodes=[node("y", "max_pool1d", "x", kernel_size=2**20, stride=1)]),
        argv=pc("check", "c.json", *EAGER, "--timeout", "5"), deadline=30, expect=(0, 1, 2))
    chk("cost-adaptive-pool2d-300", case(inputs=[tensor("x", [1, 1, 4, 4])],
                                         nodes=[node("y", "adaptive_avg_pool2d", "x", output_size=[300, 300])]),
        argv=pc("check", "c.json", *EAGER, "--timeout", "5"), deadline=30, expect=(0, 1, 2))
    chk("cost-conv3d-windows", case(inputs=[tensor("x", [1, 4, 64, 64, 64], "float16"), tensor("w", [64, 4, 9, 9, 9], "float16")],
                                    nodes=[node("y", "conv3d", "x", "w")]),
        argv=pc("check", "c.json", *EAGER, "--timeout", "5"), deadline=40, expect=(0, 1, 2), timeout=300)

    # --- integers: other widths refused; overflow wraps as PyTorch does (no false bug); indices out of range
    for dt in ("int8", "uint8", "int16", "uint32"):
        chk(f"int-dtype-{dt}", int_case([127, 1], dt))
    chk("int64-add-wraps", int_case([2**63 - 1, 5], "int64"), expect=(2,),
        note="int64's max is not held exactly (values are float64): refused in one line (wraparound: int64-mul-wraps)")
    chk("int64-mul-wraps", int_case([2**62, -2**62], "int64", "mul", 4), expect=(0,))
    chk("int32-sum-overflow", int_case([2**31 - 1, 2**31 - 1, 7], "int32", "sum", None), expect=(0,))
    chk("int32-cumsum-overflow", case(inputs=[tensor("x", [3], "int32", init={"values": [2**31 - 1, 2**31 - 1, 3]})],
                                      nodes=[node("y", "cumsum", "x", dim=0)]), expect=(0,))
    chk("int32-neg-min", int_case([-2**31, 3], "int32", "neg", None), expect=(0,))
    chk("int32-abs-min", int_case([-2**31, 3], "int32", "abs", None), expect=(0,))
    chk("int32-pow-overflow", int_case([3, 1000], "int32", "pow", 7), expect=(0,))
    chk("int64-input-below-min", int_case([-2**63 - 1, 0], "int64"))
    chk("int32-input-float-values", int_case([1.5, 2.0], "int32"), expect=(0, 2))
    chk("int32-literal-huge", int_case([1, 2], "int32", "add", 2**40))
    chk("int32-uniform-beyond-range", case(inputs=[tensor("x", [4], "int32", init={"dist": "uniform", "low": -1e12, "high": 1e12})]),
        expect=(0, 2))
    for op_, idx in (("embedding", [0, 7]), ("embedding", [-1, 0]), ("index_select", [9]), ("gather", [0, 5, 1])):
        chk(f"index-out-of-range-{op_}-{idx[-1] if idx[0] == 0 else idx[0]}", index_case(op_, idx), expect=(0, 1, 2))
    for id_, body in {"bool": case(nodes=[node("y", "gt", "x", 0.0)]),
                      "fp8": case(nodes=[node("y", "astype", "x", dtype="float8_e5m2")]),
                      "int64-wrap": int_case([2**63 - 1, 1], "int64"),
                      "int64-mul-wrap": int_case([2**52, -3], "int64", "mul", 4096)}.items():
        for full in (True, False):
            flags = ["--full"] if full else []
            out.append(Input(f"export-{id_}-output{'-full' if full else ''}", "export",
                             ["bash", "-c", f"{shlex.join(pc('export', 'c.json', '--executor', 'torch/eager', *flags, '--out', 'r.py'))}"
                                            f" && {script}"],
                             write("c.json", body), expect=(2,) if id_ == "int64-wrap" else (0,), precious=("c.json",),
                             check=script_ran(), timeout=200,
                             note="int64's max is not held exactly (values are float64): refused in one line"
                             if id_ == "int64-wrap" else ""))

    # --- terminal escapes in what a case, a flag or a file name carries
    chk("escape-meta-title", case(meta={"title": ESC, "note": ESC}), expect=ok_check)
    chk("escape-unknown-op", case(nodes=[node("y", ESC, "x")]))
    chk("escape-unknown-dtype", case(inputs=[tensor("x", [4], ESC)]))
    chk("escape-attr-name", case(nodes=[{"id": "y", "op": "exp", "inputs": ["x"], "attrs": {ESC: 1}}]))
    chk("escape-output-missing", case(outputs=(ESC,)))
    chk("escape-in-finding", case(inputs=[tensor("x" + ESC, [4]), tensor("fault" , [1], init={"dist": "constant", "value": 5.0})],
                                  nodes=[node("y" + ESC, "mul", "x" + ESC, "fault")], outputs=("y" + ESC,)),
        expect=(1,), argv=pc("check", "c.json", "--executors", "debug/faults"))
    chk("escape-executor-name", case(), argv=pc("check", "c.json", "--executors", "torch/" + ESC))
    out.append(Input("escape-case-file-name", "check", pc("check", "c" + ESC + ".json", *EAGER), write("c" + ESC + ".json", "{"),
                     check=no_escapes))
    out.append(Input("escape-export-out-name", "export", pc("export", XLA_SEED, "--executor", "torch/eager", "--out", "r" + ESC + ".py"),
                     write("r" + ESC + ".py", USER), precious=("r" + ESC + ".py",), check=no_escapes))
    out.append(Input("escape-minimize-names", "minimize", pc("minimize", "c.json", "--executors", "debug/faults", "--max-checks", "6"),
                     write("c.json", case(inputs=[tensor("x" + ESC, [4]), tensor("fault", [1], init={"dist": "constant", "value": 5.0})],
                                          nodes=[node("y" + ESC, "mul", "x" + ESC, "fault")], outputs=("y" + ESC,))),
                     expect=(0, 1), precious=("c.json",), check=no_escapes, timeout=200))
    out.append(Input("escape-bug-id-resume", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(lambda d: (d / "camp" / "bugs.jsonl").write_text("".join(
                         json.dumps({**json.loads(line), "bug": json.loads(line)["bug"] + ESC}) + "\n"
                         for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()))),
                     expect=(0, 2), check=no_escapes, timeout=400))
    out.append(Input("escape-bug-id-report", "report", pc("report", "camp"),
                     damage(lambda d: (d / "camp" / "bugs.jsonl").write_text("".join(
                         json.dumps({**json.loads(line), "bug": json.loads(line)["bug"] + ESC, "title": ESC}) + "\n"
                         for line in (d / "camp" / "bugs.jsonl").read_text().splitlines()))),
                     expect=(0, 2), check=no_escapes, timeout=400))
    out.append(Input("escape-state-executor-resume", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(renamed_executors(["debug/faults" + ESC])), expect=(0, 2), check=no_escapes, timeout=400))

    # --- resume with renamed or removed executors
    out.append(Input("resume-executor-renamed-told-keep", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(renamed_executors(["debug/faults", "gone/renamed"])), expect=(0,), check=state_matches_rows,
                     timeout=400))
    out.append(Input("resume-executor-all-removed-told-keep", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(renamed_executors(["gone/a", "gone/b"])), expect=(0, 2), check=state_matches_rows, timeout=400))
    out.append(Input("resume-executor-removed-not-told", "run", pc("run", "--out", "camp", "--no-seeds", "--no-minimize",
                                                                   "--max-tests", "20", "--seed", "3"),
                     damage(renamed_executors(["debug/faults", "gone/renamed"])), expect=(0, 2), timeout=400))
    out.append(Input("resume-executors-not-a-list", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(renamed_executors("debug/faults")), expect=(0, 2), check=state_matches_rows, timeout=400))
    out.append(Input("resume-executors-payload", "run", pc(*CAMP[:-1], "20", "--seed", "3"),
                     damage(renamed_executors([PAYLOAD])), expect=(0, 2), check=no_file(SENTINEL), timeout=400))

    # --- smoke reruns over user files in nested folders and links that point outside
    out.append(Input("smoke-rerun-user-file-deep", "smoke",
                     smoke_then("mkdir -p s/findings/a/b/c", "echo mine > s/findings/a/b/c/mine.txt",
                                "cp s/findings/a/b/c/mine.txt keep.txt"),
                     check=lambda d, p: None if (d / "s/findings/a/b/c/mine.txt").read_text() == "mine\n" else "deleted",
                     timeout=400))
    out.append(Input("smoke-rerun-link-to-outside-dir", "smoke",
                     smoke_then("mkdir -p outside", "echo mine > outside/x.txt", "mkdir -p s/logs", "ln -s ../../outside s/logs/linked"),
                     precious=(), check=lambda d, p: None if (d / "outside/x.txt").exists() else "outside/x.txt deleted",
                     timeout=400))
    out.append(Input("smoke-rerun-findings-replaced-by-link", "smoke",
                     smoke_then("mkdir -p outside", "echo mine > outside/x.txt", "rm -rf s/findings",
                                "ln -s ../outside s/findings"),
                     check=lambda d, p: None if (d / "outside/x.txt").exists() else "outside/x.txt deleted", timeout=400))
    out.append(Input("smoke-rerun-own-file-edited", "smoke",
                     smoke_then("echo my-edit >> s/state.json"),
                     check=lambda d, p: None if (d / "s/state.json").read_text().endswith("my-edit\n") else "edit lost",
                     timeout=400))
    out.append(Input("smoke-rerun-marker-lists-outside", "smoke",
                     smoke_then("echo mine > outside.txt", f"{PY} -c {shlex.quote(_FORGE_MARKER)}"),
                     expect=(0, 1, 2), check=lambda d, p: None if (d / "outside.txt").exists() else "outside.txt deleted",
                     timeout=400))
    out.append(Input("smoke-rerun-user-file-hardlink", "smoke",
                     smoke_then("echo mine > mine.txt", "mkdir -p s/logs", "ln mine.txt s/logs/hard.txt"),
                     check=lambda d, p: None if (d / "mine.txt").exists() else "mine.txt deleted", timeout=400))

    # --- audit and zoo: models that raise in eager, fork, ignore SIGTERM, change session; signals to audit
    for name, source in RAISING_MODELS.items():
        out.append(Input(f"audit-{name}", "audit", pc("audit", "m.py", *EAGER, "--no-minimize", "--out", "a"),
                         write("m.py", source), precious=("m.py",), check=no_escapes, timeout=300, orphans=True))
    for name, source in FORK_MODELS.items():
        hang = name.startswith("hang")
        out.append(Input(f"audit-{name}", "audit", pc("audit", "m.py", *EAGER, "--no-minimize", "--out", "a",
                                                      *(["--timeout", "10"] if hang else [])),
                         write("m.py", source), expect=(2,) if hang else (0, 1), precious=("m.py",),
                         deadline=40 if hang else None, timeout=300, orphans=True))
    for sig in ("TERM", "HUP", "INT"):
        out.append(Input(f"audit-sig{sig.lower()}-mid-run", "audit",
                         ["bash", "-c", f"set -m; {shlex.join(pc('audit', 'm.py', *EAGER, '--no-minimize', '--out', 'a'))} & p=$!; "
                                        f"sleep 12; kill -{sig} $p; wait $p"],
                         write("m.py", FORK_MODELS["hang-after-child"]), expect=tuple(range(0, 256)), deadline=40,
                         timeout=300, orphans=True))
    out.append(Input("zoo-hang-after-child-timeout-15", "zoo", pc("zoo", "--dir", "z", "--out", "zo", "--timeout", "15",
                                                                 "--no-inventory", *EAGER),
                     write("z/m.py", FORK_MODELS["hang-after-child"]), expect=(1,), deadline=50, timeout=300, orphans=True))
    out.append(Input("zoo-session-hopper", "zoo", pc("zoo", "--dir", "z", "--out", "zo", "--timeout", "60",
                                                     "--no-inventory", *EAGER),
                     write("z/m.py", FORK_MODELS["session-hopper"]), expect=(0, 1), timeout=300, orphans=True))
    out.append(Input("check-sigint-costly", "check",
                     ["bash", "-c", f"set -m; {shlex.join(pc('check', 'c.json', *EAGER))} & p=$!; sleep 6; kill -INT $p; wait $p"],
                     write("c.json", case(inputs=[tensor("a", [2048, 2048], "float16"), tensor("b", [2048, 4096], "float16")],
                                          nodes=[node("y", "matmul", "a", "b")])),  # at the multiply-add cap: runs
                     expect=tuple(range(0, 256)), deadline=25, timeout=300, orphans=True))
    return out


_FORGE_MARKER = ("import hashlib, json; from pathlib import Path; from fuzzer.outfiles import replace_file; "
                 "m = Path('s/.precfuzz-smoke'); lines = m.read_text().splitlines()[1:]; "
                 "lines.append(hashlib.sha256(Path('outside.txt').read_bytes()).hexdigest() + ' ' + json.dumps('../outside.txt')); "
                 "m.unlink(); replace_file(m, chr(10).join(lines) + chr(10), sync=False, style='python', force=True)")


GROUPS = {"check": case_file_inputs, "export": export_inputs, "minimize": minimize_inputs, "run": run_inputs,
          "report": report_inputs, "smoke": smoke_inputs, "audit": audit_inputs, "generate": generate_inputs,
          "misc": misc_inputs, "fresh": fresh_inputs}


# ---------------------------------------------------------------- running them


def env_of() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def fingerprint(path: Path) -> tuple[str, str] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        return ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return ("other", oct(st.st_mode))


def run_one(inp: Input, scratch: Path) -> Outcome:
    d = scratch / inp.id
    d.mkdir(parents=True)
    try:
        inp.setup(d)
    except Exception as exc:  # noqa: BLE001 - a harness problem is reported, not hidden
        return Outcome(inp, None, 0.0, [f"setup failed: {type(exc).__name__}: {exc}"])
    before = {p: fingerprint(d / p) for p in inp.precious}
    t0 = time.monotonic()
    try:
        done = subprocess.run(inp.argv, cwd=d, env=env_of(), capture_output=True, text=True, timeout=inp.timeout,
                              stdin=subprocess.DEVNULL, start_new_session=True)
        status: int | None = done.returncode
    except subprocess.TimeoutExpired as exc:
        done = subprocess.CompletedProcess(inp.argv, -1, str(exc.stdout or ""), str(exc.stderr or ""))
        status = None
    out = Outcome(inp, status, time.monotonic() - t0)
    err = done.stderr if isinstance(done.stderr, str) else ""
    lines = [line for line in err.splitlines() if line.strip()]
    out.first_line = next((line for line in lines if line.startswith("precfuzz: error:")), lines[-1] if lines else "")
    if status is None:
        out.problems.append(f"no answer within {inp.timeout:.0f} s")
    elif status not in inp.expect:
        out.problems.append(f"exit {status}, expected {'/'.join(map(str, inp.expect))}")
    if "Traceback (most recent call last)" in err + (done.stdout or "") and inp.group != "export":
        out.problems.append("a traceback")
    if status == 2 and inp.expect == (2,) and inp.argv[0] == PY:
        errors = [line for line in lines if line.startswith("precfuzz: error:")]
        if len(errors) != 1:
            out.problems.append(f"{len(errors)} error lines (one expected)")
    for p, fp in before.items():
        if fingerprint(d / p) != fp:
            out.problems.append(f"DATA LOSS: {p} changed")
    if (d / SENTINEL).exists():
        out.problems.append("CODE EXECUTION: the payload ran")
    if inp.deadline is not None and status is not None and out.seconds > inp.deadline:
        out.problems.append(f"HANG: {out.seconds:.0f} s, past its limit of {inp.deadline:.0f} s")
    if inp.orphans:
        left = orphans_in(d)
        if left:
            out.problems.append(f"ORPHAN: {len(left)} process(es) left running in its folder")
    if inp.check is not None:
        try:
            problem = inp.check(d, done)
        except Exception as exc:  # noqa: BLE001
            problem = f"check failed: {type(exc).__name__}: {exc}"
        if problem:
            out.problems.append(problem)
    for p in d.rglob("*"):  # let the scratch tree be removed
        try:
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o700)
        except OSError:
            pass
    return out


def table(outcomes: list[Outcome]) -> str:
    good = sum(not o.problems for o in outcomes)
    by_group: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_group.setdefault(o.input.group, []).append(o)
    lines = [f"Inputs: {len(outcomes)}; handled well: {good} ({100.0 * good / max(1, len(outcomes)):.1f}%); "
             f"code execution: {sum('CODE EXECUTION' in ' '.join(o.problems) for o in outcomes)}; "
             f"data loss: {sum('DATA LOSS' in ' '.join(o.problems) for o in outcomes)}", "",
             "| subcommand | inputs | handled well |", "|---|---|---|"]
    lines += [f"| {g} | {len(os_)} | {sum(not o.problems for o in os_)} |" for g, os_ in by_group.items()]
    lines += ["", "| # | input | subcommand | exit | s | verdict | what it said (first error line) |",
              "|---|---|---|---|---|---|---|"]
    for k, o in enumerate(outcomes, 1):
        said = o.first_line.replace("|", "/")[:160]
        verdict = "well" if not o.problems else "NOT: " + "; ".join(o.problems).replace("|", "/")
        lines.append(f"| {k} | {o.input.id} | {o.input.group} | {o.status} | {o.seconds:.1f} | {verdict} | {said} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/HOSTILE.md", help="where the table goes")
    parser.add_argument("--only", help="comma-separated groups (default: all)")
    parser.add_argument("--ids", help="comma-separated input ids (default: all of the groups)")
    args = parser.parse_args()
    # run from a background job of a non-interactive shell (nohup ... &), this process inherits SIGINT and SIGQUIT
    # ignored, and so would every precfuzz it starts (an ignored SIGINT stays ignored across exec): give the
    # children the disposition a terminal's Ctrl-C meets
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    groups = args.only.split(",") if args.only else list(GROUPS)
    inputs = [i for g in groups for i in GROUPS[g]()]
    if args.ids:
        inputs = [i for i in inputs if i.id in set(args.ids.split(","))]
    scratch = Path(tempfile.mkdtemp(prefix="precfuzz-hostile-"))
    outcomes = []
    for k, inp in enumerate(inputs, 1):
        o = run_one(inp, scratch)
        outcomes.append(o)
        print(f"[{k}/{len(inputs)}] {inp.id}: exit {o.status} in {o.seconds:.1f} s: "
              f"{'well' if not o.problems else '; '.join(o.problems)}", flush=True)
        Path(args.out).write_text(table(outcomes))
    shutil.rmtree(scratch, ignore_errors=True)
    print(table(outcomes).split("\n", 1)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
