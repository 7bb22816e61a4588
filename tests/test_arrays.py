"""Large arrays beside cases and repro scripts (fuzzer.arrays, issue 37): a block's real weights in an .npz, read back
exactly, refused in one line when the file is missing, elsewhere, pickled or of another shape."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import ARRAY_FILE_VALUES, detach_script
from fuzzer.ir import Case, Graph, Input, IRError, Node, case_to_json, load_case, parse_case, save_case
from fuzzer.values import make_values, pack

ROOT = Path(__file__).resolve().parent.parent


def weighty_case(n: int = 80) -> Case:
    """A linear whose weight holds real values (64 x n), too many for a JSON list; x is drawn from a spec."""
    w = np.random.default_rng(0).normal(0.0, 0.1, size=(64, n))
    return Case(Graph((Input("x", (2, n), "float32", init={"dist": "normal", "seed": 1}),
                       Input("w", (64, n), "float32", role="param", init=pack(w))),
                      (Node("y", "linear", ("x", "w")),), ("y",)), ({"x": pack(np.ones((2, n)))},))


def test_a_case_with_real_weights_keeps_them_in_an_npz_beside_it_and_reads_back_the_same_case(tmp_path: Path) -> None:
    case = weighty_case()
    path = save_case(case, tmp_path / "case.json")
    text = path.read_text()
    assert (tmp_path / "case.npz").is_file() and '"array": "w"' in text
    assert len(text) < 8000, len(text)  # the graph and x's 160 values, not w's 5120
    back = load_case(path)
    assert back.id == case.id and case_to_json(back) == case_to_json(case)
    assert np.array_equal(make_values(back.graph.inputs[1].init, (64, 80), "float32"),
                          make_values(case.graph.inputs[1].init, (64, 80), "float32"))


def test_a_small_case_writes_no_array_file(tmp_path: Path) -> None:
    small = weighty_case(n=8)  # 512 values: listed in the JSON as before
    save_case(small, tmp_path / "case.json")
    assert not (tmp_path / "case.npz").exists() and load_case(tmp_path / "case.json").id == small.id


def _saved(tmp_path: Path) -> Path:
    return save_case(weighty_case(), tmp_path / "case.json")


@pytest.mark.parametrize("harm, said", [
    ("missing", "no such array file"),
    ("elsewhere", "must be a plain .npz name"),
    ("pickled", "not a readable array file"),
    ("ints", "is int64, not float64"),
    ("shape", "has shape [64, 80], the case says [80, 64]"),
    ("key", "no array 'v'"),
])
def test_hostile_array_files_are_refused_in_one_line(tmp_path: Path, harm: str, said: str) -> None:
    path = _saved(tmp_path)
    npz = tmp_path / "case.npz"
    text = path.read_text()
    if harm == "missing":
        npz.unlink()
    elif harm == "elsewhere":
        text = text.replace('"file": "case.npz"', '"file": "../case.npz"')
    elif harm == "pickled":  # an object array: loading it would unpickle, i.e. run code from data
        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        with zipfile.ZipFile(npz, "w") as zf:
            zf.writestr("w.npy", buf.getvalue())
    elif harm == "ints":
        np.savez(npz, w=np.zeros((64, 80), dtype=np.int64))
    elif harm == "shape":
        obj = json.loads(text)
        obj["inputs"][1]["init"]["shape"] = [80, 64]
        text = json.dumps(obj)
    elif harm == "key":
        text = text.replace('"array": "w"', '"array": "v"')
    path.write_text(text)
    with pytest.raises(IRError) as err:
        load_case(path)
    assert said in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_reference_read_from_text_has_no_folder_to_look_in(tmp_path: Path) -> None:
    text = _saved(tmp_path).read_text()
    with pytest.raises(IRError, match="has no folder"):
        parse_case(text)


def test_the_cli_refuses_a_case_whose_array_file_is_gone_with_exit_2(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    (tmp_path / "case.npz").unlink()
    out = subprocess.run([sys.executable, "-m", "fuzzer.cli", "check", str(path), "--executors", "torch/eager"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "no such array file" in out.stderr


def test_a_repro_of_real_weights_reads_them_from_beside_it_and_exits_1(tmp_path: Path) -> None:
    """TVM's DecomposeOpsForTraining layer_norm (the seed bug) on 8192 given values: repro.py reads repro.npz and
    shows the bug in a fresh process; the script holds no base64 and stays short."""
    from fuzzer.artifacts import write_finding
    from oracles.findings import Finding

    seed = load_case(ROOT / "corpus" / "seeds" / "tvm-decompose-layernorm-fp16.json")
    x = make_values({"dist": "alternating", "value": 0.25}, (2, 4096), "float16")
    g = seed.graph
    case = replace(seed, graph=replace(g, inputs=(replace(g.inputs[0], shape=(2, 4096), init=pack(x)),
                                                  *g.inputs[1:])))
    f = Finding("error-bound", "tvm/decompose", ["layer_norm"], [], "bound", "m")
    art = write_finding(tmp_path, case, f, {}, "test", full=False)
    assert art.repro is not None and (tmp_path / "repro.npz").is_file() and (tmp_path / "case.npz").is_file()
    text = art.repro.read_text()
    assert "b64decode" not in text and len(text) < 20000, len(text)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    done = subprocess.run([sys.executable, "-I", "repro.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 1, done.stdout[-800:] + done.stderr[-800:]


def test_a_script_without_packed_arrays_is_left_as_it_is() -> None:
    text = "import numpy as np\nx = np.array([1.0])\n"
    assert detach_script(text) == (text, {})
    assert ARRAY_FILE_VALUES == 4096
