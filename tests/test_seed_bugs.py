"""The two motivating bugs, end to end through the CLI: check, export, and the exported scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TVM_SEED = ROOT / "corpus" / "seeds" / "tvm-decompose-layernorm-fp16.json"
XLA_SEED = ROOT / "corpus" / "seeds" / "xla-bf16-schedule-upcast.json"


def precfuzz(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuzzer.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


@pytest.mark.slow
def test_check_flags_tvm_decompose_only() -> None:
    proc = precfuzz("check", str(TVM_SEED), "--executors", "torch/eager,tvm/default,tvm/decompose", "--json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    flagged = {f["executor"] for f in out["findings"]}
    assert flagged == {"tvm/decompose"}
    (finding,) = out["findings"]
    assert finding["oracle"] == "error-bound" and finding["ops"] == ["layer_norm"]
    assert finding["ratio"] > 100 and finding["max_ulp"] > 500
    assert out["outcomes"]["tvm/decompose"]["max_abs"] == pytest.approx(0.414, abs=0.001)
    assert out["outcomes"]["tvm/default"]["verdict"] == "ok" and out["outcomes"]["torch/eager"]["verdict"] == "ok"


@pytest.mark.slow
def test_check_names_the_schedule_upcast_on_every_policy() -> None:
    proc = precfuzz("check", str(XLA_SEED), "--executors", "torch/eager,xla/native,xla/bf16-model,xla/autocast,xla/legacy-bf16", "--json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    o = out["outcomes"]
    assert (o["torch/eager"]["status"], o["xla/native"]["status"]) == ("error", "error")
    assert (o["xla/autocast"]["status"], o["xla/autocast"]["dtype"]) == ("ok", "bfloat16")
    assert (o["xla/legacy-bf16"]["status"], o["xla/legacy-bf16"]["dtype"]) == ("ok", "float32")
    (hazard,) = out["findings"]  # eager raises too: a model hazard, not a backend divergence
    assert (hazard["oracle"], hazard["kind"], hazard["ops"]) == ("model-hazard", "model-hazard", ["conv3d"])
    assert hazard["details"]["culprits"] == ["sigma"] and hazard["details"]["fix"] == "noisy.to(torch.bfloat16) before out"
    assert set(hazard["details"]["reactions"]["raised"]) == {"torch/eager", "xla/native", "xla/bf16-model"}
    assert o["xla/legacy-bf16"]["verdict"] == "ok"  # XLA_USE_BF16 computes in bf16, as documented


@pytest.mark.slow
def test_exported_tvm_script_fails_alone_and_passes_on_the_default_pipeline(tmp_path: Path) -> None:
    script = tmp_path / "repro.py"
    report = tmp_path / "report.md"
    proc = precfuzz("export", str(TVM_SEED), "--executor", "tvm/decompose", "--out", str(script), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "import precfuzz" not in text and "from fuzzer" not in text and "from oracles" not in text
    run = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 1 and "-1.414" in run.stdout and "BUG REPRODUCED" in run.stdout
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace('PASSES = ["DecomposeOpsForTraining"]', "PASSES = []"))
    assert fixed.read_text() != text
    run = subprocess.run([sys.executable, "-I", str(fixed)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    header, draft = report.read_text().split("\n", 1)  # precfuzz's generated header, then the draft
    assert header.startswith("<!-- precfuzz-generated sha256:")
    assert draft.startswith("# [TVM] float16 layer_norm") and "(tvm/decompose)" in draft.splitlines()[0] and "## Steps to reproduce" in draft and "tvm" in draft
