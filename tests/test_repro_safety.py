"""Repro scripts never run text from outside as code (issue 11, item 1): names, ids, titles and paths with quotes,
triple quotes, newlines and unicode end up in repr() literals or escaped comments, and the scripts still run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.cli import main
from fuzzer.executors import create
from fuzzer.export import render_script
from fuzzer.ir import Case, Graph, Input, Node, save_case
from fuzzer.report_draft import title as title_of
from oracles.findings import Finding

PAYLOAD = '__import__("os").system("touch pwned")'
HOSTILE_TEXT = [
    f'o""",{PAYLOAD},"""',
    f"o''',{PAYLOAD},'''",
    f"line one\n{PAYLOAD}\n",
    f"carriage\r{PAYLOAD}",
    f"nul\x00{PAYLOAD}",
    f"separator\u2028{PAYLOAD}\u2029",
    f"form feed\x0c{PAYLOAD}",
    "# -*- coding: utf-7 -*-\n+AAo-__import__(+ACI-os+ACI-).system(+ACI-touch pwned+ACI-)",
    f"bidi \u202e{PAYLOAD}\u2066",
    f"backslash at the end \\\n{PAYLOAD}",
    "lone surrogate \ud800 " + PAYLOAD,
    "𝐭𝐨𝐫𝐜𝐡 ünïcödé 名前 " + PAYLOAD,
]


def hostile_case() -> Case:
    """Value names that collide when sanitized, shadow builtins or modules, normalize to `torch`, or inject code."""
    names = ["a.", "a_", "list", "v_list", "𝐭𝐨𝐫𝐜𝐡", "it's\n\"q\"\r'''", f'o""",{PAYLOAD},"""', "a-b", "a_b"]
    x = Input(names[0], (2, 3), "float32", init={"dist": "normal", "seed": 1})
    y = Input(names[1], (2, 3), "float32", init={"dist": "normal", "seed": 2})
    w = Input(names[2], (3,), "float32", init={"dist": "uniform", "low": 0.5, "high": 2.0, "seed": 3})
    p = Input(names[7], (3,), "float32", init={"dist": "normal", "seed": 4})
    q = Input(names[8], (3,), "float32", init={"dist": "normal", "seed": 5})
    nodes = (Node(names[3], "mul", (names[0], names[1])),
             Node(names[4], "add", (names[3], names[2])),
             Node(names[5], "layer_norm", (names[4], names[2]), {"normalized_shape": [3]}),
             Node("sum of a-b and a_b", "sub", (names[7], names[8])),
             Node(names[6], "add", (names[5], "sum of a-b and a_b")))
    return Case(Graph((x, y, w, p, q), nodes, (names[6], names[3])))


def finding_about(text: str) -> Finding:
    return Finding("status", "torch/eager", ["add"], ["float32,float32->float32"], "raises",
                   f"output {text} raised where the reference runs", node=text)


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_outside_text_in_the_header_changes_no_statement(text: str) -> None:
    case = hostile_case()
    parts = create("torch/eager").repro_parts(case.graph)
    benign = render_script(case, parts, "precfuzz export case.json", 0, "a plain title")
    hostile = render_script(case, parts, f"precfuzz export {text}/case.json", 0, title_of(finding_about(text)))
    assert ast.dump(ast.parse(hostile)) == ast.dump(ast.parse(benign))  # comments differ, code does not
    assert hostile.splitlines()[1] == benign.splitlines()[1]  # no encoding declaration can sneak in
    hostile.encode("utf-8")  # writable as a file


def _export_and_run(case_path: Path, executor: str, tmp_path: Path, capsys) -> subprocess.CompletedProcess:
    script = tmp_path / f"repro-{executor.replace('/', '_')}.py"
    capsys.readouterr()
    assert main(["export", str(case_path), "--executor", executor, "--out", str(script), "--set", "0"]) == 0
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, str(script)], cwd=run_dir, capture_output=True, text=True, timeout=600)
    assert not list(run_dir.iterdir()) and not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    return proc


def hostile_case_path(tmp_path: Path) -> Path:
    folder = tmp_path / 'dir """ with\nnewline and \'quotes\' 名前'
    return save_case(hostile_case(), folder / f'case {PAYLOAD} """.json')


def test_exported_torch_script_with_hostile_names_and_path_runs_clean(tmp_path: Path, capsys) -> None:
    proc = _export_and_run(hostile_case_path(tmp_path), "torch/eager", tmp_path, capsys)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: matches the fp64 reference" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["tvm/default", "xla/native"])
def test_exported_tvm_and_xla_scripts_with_hostile_names_run_clean(executor: str, tmp_path: Path, capsys) -> None:
    proc = _export_and_run(hostile_case_path(tmp_path), executor, tmp_path, capsys)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: matches the fp64 reference" in proc.stdout


def test_campaign_title_with_a_hostile_node_id_stays_a_comment(tmp_path: Path) -> None:
    case = hostile_case()
    text = f'o""",{PAYLOAD},"""'
    script = render_script(case, create("torch/eager").repro_parts(case.graph), "precfuzz run --out x", 0,
                           title_of(finding_about(text)))
    path = tmp_path / "repro.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, "-c", f"import ast; ast.parse(open({str(path)!r}).read())"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not (tmp_path / "pwned").exists()
    head = script.split('"""', 1)[0]
    assert all(line.startswith("#") for line in head.splitlines())
    assert script.splitlines()[1] == "# precfuzz repro script (text from the finding is escaped and kept in comments)"
