"""Nightly smoke: fails only on bugs missing from the baseline; JUnit XML and Markdown summary."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fuzzer.campaign.smoke import (
    compare,
    junit,
    load_baseline,
    markdown,
    updated_baseline,
)

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "corpus" / "known-findings.json"


def bug(key: str, executors: tuple[str, ...] = ("tvm/decompose",), **kw) -> dict:
    return {"key": key, "kind": "backend-bug", "title": f"title of {key}", "executors": list(executors),
            "repro": "bugs/b1/repro.py", "count": 2, **kw}


def test_verdict_splits_new_known_and_missing() -> None:
    baseline = [{"key": "a", "triage": "known bug", "upstream": "https://x/1"}, {"key": "gone", "triage": "fixed?"}]
    v = compare([bug("a"), bug("b", ("xla/native",)), bug("c", merged_into="b1"), bug("d", aliases=["gone"])], baseline)
    assert not v.passed and [b["key"] for b in v.new] == ["b"]  # merged bugs do not count; an alias is known
    assert v.known[0]["triage"] == "known bug" and v.known[0]["upstream"] == "https://x/1" and v.missing == []
    xml = ET.fromstring(junit(v, ["tvm/decompose", "xla/native"], 12.0))
    assert xml.get("failures") == "2" and xml.get("tests") == "5"  # 2 known + 1 new + 2 executors
    failing = [c.get("name") for c in xml.iter("testcase") if c.find("failure") is not None]
    assert failing == ["b", "xla/native"]
    text = markdown(v, {"cases": 3, "tests": 9, "elapsed_s": 12.0, "seed": 1})
    assert text.startswith("# precfuzz smoke: FAIL") and "`b`" in text and "known bug" in text
    assert compare([bug("a")], baseline).passed and [e["key"] for e in compare([bug("a")], baseline).missing] == ["gone"]


def test_updated_baseline_keeps_triage_adds_new_bugs_and_keeps_unseen_ones() -> None:
    baseline = [{"key": "a", "title": "A", "triage": "looked at: real", "upstream": "https://x/1"},
                {"key": "gone", "title": "G", "triage": "not reached tonight"}]
    run = [bug("a"), bug("b"), bug("c", merged_into="b1"), bug("d", aliases=["gone"]),
           bug("h", kind="model-hazard")]
    out = updated_baseline(run, baseline)
    assert [e["key"] for e in out] == ["a", "b", "gone", "h"]  # merged bugs and aliases of known keys add nothing
    assert out[0]["triage"] == "looked at: real" and out[0]["upstream"] == "https://x/1"
    assert out[1]["triage"].startswith("not yet triaged") and out[1]["title"] == "title of b"
    assert out[3]["triage"].startswith("model-side")
    assert compare(run, out).passed


def test_committed_baseline_has_a_triage_line_for_every_bug() -> None:
    entries = load_baseline(BASELINE)
    assert entries and all(e.get("triage", "").strip() and e.get("title", "").strip() for e in entries)
    assert len({e["key"] for e in entries}) == len(entries)


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
    # the same run's bugs against an empty baseline are new: the verdict fails and JUnit says so (judged from this
    # run's bugs.jsonl by the functions the command calls; a second campaign would cost a minute for the same answer)
    from fuzzer.campaign.store import CampaignStore

    bugs = CampaignStore(tmp_path / "known" / "smoke").load_bugs()
    verdict = compare(bugs, load_baseline(_empty(tmp_path)))
    assert bugs and not verdict.passed and verdict.new
    assert int(ET.fromstring(junit(verdict, ["torch/eager"], 1.0)).get("failures")) >= 1


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty.json"
    empty.write_text('{"bugs": []}')
    return empty


# ---- --out is never a directory smoke did not make (issue 11, item 2)


def test_smoke_out_is_created_or_emptied_only_when_smoke_made_it(tmp_path: Path) -> None:
    from fuzzer.commands.common import UsageError
    from fuzzer.campaign.smoke_dir import record
    from fuzzer.commands.smoke import MARKER, fresh_out

    new = tmp_path / "new"
    fresh_out(new)
    assert [p.name for p in new.iterdir()] == [MARKER]
    (new / "state.json").write_text("{}")
    (new / "findings").mkdir()
    (new / "findings" / "x.json").write_text("{}")
    record(new)  # what an earlier run lists in its marker when it ends (issue 38: only those are deleted)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    (new / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UsageError, match="'link', which precfuzz smoke did not write"):  # issue 24: not smoke's
        fresh_out(new)
    (new / "link").unlink()
    fresh_out(new)  # a directory an earlier smoke run made: emptied of the campaign's files
    assert [p.name for p in new.iterdir()] == [MARKER] and (outside / "keep.txt").read_text() == "precious"
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh_out(empty)
    assert (empty / MARKER).exists()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "a.txt").write_text("keep")
    with pytest.raises(UsageError, match="not empty and was not made by precfuzz smoke"):
        fresh_out(precious)
    assert [p.name for p in precious.iterdir()] == ["a.txt"]


def test_smoke_does_not_empty_a_directory_another_run_holds(tmp_path: Path) -> None:
    from fuzzer.campaign.store import CampaignStore, StoreError
    from fuzzer.campaign.smoke_dir import record
    from fuzzer.commands.smoke import fresh_out

    out = tmp_path / "smoke"
    fresh_out(out)
    (out / "state.json").write_text("{}")
    record(out)
    store = CampaignStore(out)
    store.lock()
    try:
        with pytest.raises(StoreError, match="in use"):
            fresh_out(out)
        assert (out / "state.json").exists()
    finally:
        store.unlock()


def test_a_baseline_that_is_a_fifo_or_device_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Issue 24's hostile pass: `smoke --baseline FIFO` blocked until killed (no answer in 60 s)."""
    import os

    from fuzzer.campaign.smoke import load_baseline

    os.mkfifo(tmp_path / "kf.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name, what in (("kf.json", "a FIFO"), ("zero.json", "a device")):
        with pytest.raises(ValueError, match=f"is {what}, not a file"):
            load_baseline(tmp_path / name)
