"""Nightly smoke: fails only on signatures missing from the baseline; JUnit XML and Markdown summary."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fuzzer.smoke import compare, junit, load_baseline, markdown

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "corpus" / "known-findings.json"


def finding(sig: str, executor: str = "tvm/decompose") -> dict:
    return {"signature": sig, "executor": executor, "message": "m", "repro": "r.py", "count": 2}


def test_verdict_splits_new_known_and_missing() -> None:
    baseline = [{"signature": "a", "triage": "known bug"}, {"signature": "gone", "triage": "fixed?"}]
    v = compare([finding("a"), finding("b", "xla/native")], baseline)
    assert not v.passed and [f["signature"] for f in v.new] == ["b"]
    assert v.known[0]["triage"] == "known bug" and [e["signature"] for e in v.missing] == ["gone"]
    xml = ET.fromstring(junit(v, ["tvm/decompose", "xla/native"], 12.0))
    assert xml.get("failures") == "1" and xml.get("tests") == "3"
    failing = [c.get("name") for c in xml.iter("testcase") if c.find("failure") is not None]
    assert failing == ["xla/native"]
    text = markdown(v, {"cases": 3, "tests": 9, "elapsed_s": 12.0, "seed": 1})
    assert text.startswith("# precfuzz smoke: FAIL") and "`b`" in text and "known bug" in text
    assert compare([finding("a")], baseline).passed


def test_committed_baseline_has_a_triage_line_for_every_signature() -> None:
    entries = load_baseline(BASELINE)
    assert entries and all(e.get("triage", "").strip() for e in entries)
    assert len({e["signature"] for e in entries}) == len(entries)


def smoke(tmp_path: Path, baseline: str) -> tuple[subprocess.CompletedProcess, Path]:
    junit_path = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "fuzzer.cli", "smoke", "--max-tests", "150", "--out", str(tmp_path / "smoke"),
         "--junit", str(junit_path), "--baseline", baseline], capture_output=True, text=True, cwd=ROOT, timeout=900)
    return proc, junit_path


@pytest.mark.slow
def test_smoke_passes_on_the_committed_baseline_and_fails_on_an_empty_one(tmp_path: Path) -> None:
    proc, junit_path = smoke(tmp_path / "known", str(BASELINE))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["passed"]
    assert ET.parse(junit_path).getroot().get("failures") == "0"
    empty = tmp_path / "empty.json"
    empty.write_text('{"findings": []}')
    proc, junit_path = smoke(tmp_path / "none", str(empty))
    assert proc.returncode == 1
    assert int(ET.parse(junit_path).getroot().get("failures")) >= 1
