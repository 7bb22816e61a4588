"""Campaign directories (issue 11, items 3 and 4): one run at a time (a lock naming its holder, stale locks taken
over), temp files unique per writer, and damaged state reported and kept, never silently dropped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from campaign_fixtures import fault_stream

from fuzzer.campaign import Campaign, CampaignConfig, CampaignError
from fuzzer.campaign.progress import Progress
from fuzzer.campaign.report import write_report
from fuzzer.campaign.store import DAMAGED, FINDINGS, LOCK, CampaignStore, StoreError
from fuzzer.cli import main

ROOT = Path(__file__).resolve().parent.parent
HOLD = ("import sys, time; sys.path.insert(0, '.'); from fuzzer.campaign.store import CampaignStore; "
        "s = CampaignStore(sys.argv[1]); s.lock(); print('locked', flush=True); time.sleep(120)")


def config(out: Path, **kw) -> CampaignConfig:
    base = dict(out=out, executors=["debug/faults"], seed=3, max_tests=21, workers=1, minimize=False,
                timeout_s=20.0, generate=fault_stream)
    base.update(kw)
    return CampaignConfig(**base)


def quiet() -> Progress:
    return Progress(stream=open(os.devnull, "w"), live=False)


def holder(out: Path) -> subprocess.Popen:
    """Another process holding the lock of `out`."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_second_run_on_a_locked_directory_refuses_naming_the_holder(tmp_path: Path, capsys) -> None:
    out = tmp_path / "camp"
    proc = holder(out)
    try:
        capsys.readouterr()
        status = main(["run", "--out", str(out), "--executors", "debug/faults", "--no-seeds", "--max-tests", "1",
                       "--no-minimize"])
        err = capsys.readouterr().err
        (line,) = err.strip().splitlines()
        assert status == 2 and line.startswith("precfuzz: error: ") and f"pid {proc.pid} " in line
        assert "in use by another precfuzz run" in line and not (out / "state.json").exists()
    finally:
        proc.kill()
        proc.wait()
    # the holder died with its lock file in place: the next campaign takes it over
    assert f"pid {proc.pid} " in (out / LOCK).read_text()
    summary = Campaign(config(out, max_tests=2), quiet()).run()
    assert summary.tests == 2 and not (out / LOCK).exists()


def test_lock_in_one_process_refuses_a_second_store_and_is_released_after_run(tmp_path: Path) -> None:
    campaign = Campaign(config(tmp_path, max_tests=2), quiet())
    with pytest.raises(CampaignError, match=f"pid {os.getpid()} "):
        Campaign(config(tmp_path, max_tests=2), quiet())
    campaign.run()
    Campaign(config(tmp_path, max_tests=4), quiet()).run()  # released: a resume works
    assert json.loads((tmp_path / "state.json").read_text())["invocations"] == 2


def test_stale_lock_of_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(f"pid {dead.pid} on host {os.uname().nodename} since 2026-01-01 00:00:00\n")
    assert Campaign(config(tmp_path, max_tests=2), quiet()).run().tests == 2


def test_refused_resume_releases_the_lock(tmp_path: Path) -> None:
    Campaign(config(tmp_path, max_tests=2), quiet()).run()
    with pytest.raises(CampaignError, match="seed 3"):
        Campaign(config(tmp_path, seed=4), quiet())
    store = CampaignStore(tmp_path)
    store.lock()
    store.unlock()


def test_parallel_writers_never_share_a_temp_file_or_a_part(tmp_path: Path) -> None:
    stores = [CampaignStore(tmp_path), CampaignStore(tmp_path)]

    def write(store: CampaignStore, k: int) -> None:
        for j in range(15):
            store.append_runs([{"writer": k, "chunk": j, "x": float(i)} for i in range(50)])

    threads = [threading.Thread(target=write, args=(s, k)) for k, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert len(runs) == 2 * 15 * 50 and len(list((tmp_path / "runs.parquet").glob("part-*.parquet"))) == 30
    assert not list((tmp_path / "runs.parquet").glob(".*"))


def test_damaged_findings_lines_are_quarantined_and_kept(tmp_path: Path, capsys) -> None:
    Campaign(config(tmp_path, max_tests=10), quiet()).run()
    good = (tmp_path / FINDINGS).read_text().splitlines()
    bad = ['{"signature": "torn', '{"signature": 5, "oracle": "x"}', "[]",
           '{"signature": "s", "oracle": "o", "executor": "e", "ops": [], "dtypes": [], "id": "../../escape"}']
    (tmp_path / FINDINGS).write_text("\n".join(good[:1] + bad + good[1:]) + "\n")
    capsys.readouterr()
    Campaign(config(tmp_path, max_tests=21), quiet()).run()
    err = capsys.readouterr().err
    assert f"4 line(s) could not be read; kept in {tmp_path / DAMAGED}" in err
    assert (tmp_path / DAMAGED).read_text().splitlines() == bad
    sigs = {json.loads(line)["signature"] for line in (tmp_path / FINDINGS).read_text().splitlines()}
    assert {json.loads(line)["signature"] for line in good} <= sigs
    Campaign(config(tmp_path, max_tests=22), quiet()).run()  # a later load does not quarantine them twice
    assert (tmp_path / DAMAGED).read_text().splitlines() == bad


def test_damaged_state_is_one_line_exit_2_for_run_and_report(tmp_path: Path, capsys) -> None:
    Campaign(config(tmp_path, max_tests=2), quiet()).run()
    for text in ["{", "[1, 2]", '{"seed": 3, "counts": []}', '{"seed": 3, "pending": ["x"]}']:
        (tmp_path / "state.json").write_text(text)
        for argv in (["run", "--out", str(tmp_path), "--executors", "debug/faults", "--no-seeds", "--max-tests", "3",
                      "--seed", "3"], ["report", str(tmp_path)]):
            capsys.readouterr()
            status = main(argv)
            (line,) = capsys.readouterr().err.strip().splitlines()
            assert status == 2 and "state.json" in line and "move it away" in line, line
        assert (tmp_path / "state.json").read_text() == text


def test_report_skips_a_damaged_parquet_chunk_with_a_warning(tmp_path: Path, capsys) -> None:
    Campaign(config(tmp_path, max_tests=5), quiet()).run()
    (tmp_path / "runs.parquet" / "part-00099.parquet").write_bytes(b"PAR1 not really")
    capsys.readouterr()
    text = write_report(tmp_path).read_text()
    assert "part-00099.parquet cannot be read" in capsys.readouterr().err
    assert "## Outcomes per executor" in text


INJECTED = "x\n## INJECTED HEADING\n<script>alert(1)</script> | col | [link](javascript:x) `"


def test_regression_case_data_in_records_stays_inert_text_in_report_md(tmp_path: Path) -> None:
    """Adversarial #323/#328: titles, messages and names holding newlines, headings, HTML and '|' landed raw in
    report.md (a heading of their own, a <script> tag, a table row split in two)."""
    Campaign(config(tmp_path, max_tests=5), quiet()).run()
    for name in ("findings.jsonl", "bugs.jsonl"):
        recs = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        for r in recs:
            r["title"] = INJECTED
            if "message" in r:
                r["message"], r["ops"] = INJECTED, [INJECTED]
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = write_report(tmp_path).read_text()
    assert "INJECTED HEADING" in text
    assert not any(line.startswith("## INJECTED") for line in text.splitlines())
    assert "<script>" not in text and not re.search(r"(?<!\\)\]\(javascript", text)
    rows = [line for line in text.splitlines() if "INJECTED" in line and line.startswith("|")]
    assert rows and all(line.count(" | ") - line.count("\\|") == rows[0].count(" | ") - rows[0].count("\\|")
                        for line in rows if line.count(" | ") == rows[0].count(" | "))


def test_regression_a_bug_report_draft_keeps_case_data_inert() -> None:
    """The upstream draft (bugs/<id>/report.md): a node id or value name with newlines and HTML became a heading
    and a tag; a script printing a fence closed the code block early."""
    from fuzzer.ir import load_case
    from fuzzer.report_draft import render
    from oracles.findings import Finding

    case = load_case(ROOT / "corpus" / "seeds" / "tvm-decompose-layernorm-fp16.json")
    finding = Finding("error-bound", "tvm/decompose", ["layer_norm"], ["float16"], "bound", INJECTED, ratio=3.0,
                      max_ulp=9.0)
    draft = render(case, finding, {"versions": {"tvm": INJECTED}}, "print('```')\n# not a heading", "cmd `x`",
                   INJECTED, output="```\n# out")
    lines = draft.splitlines()
    assert lines[0].startswith("# x ## INJECTED HEADING &lt;script&gt;")
    assert not any(line.startswith("## INJECTED") for line in lines) and "<script>" not in draft
    fences = [line for line in lines if line.startswith("````")]  # the content's own ``` stays inside
    assert fences == ["````", "````", "````python", "````"], fences
    assert "\n```\n# out\n````" in draft


def test_store_refuses_a_file_as_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        CampaignStore(tmp_path / "f")


@pytest.mark.slow
def test_two_real_runs_on_one_directory(tmp_path: Path) -> None:
    out = tmp_path / "camp"
    argv = [sys.executable, "-m", "fuzzer.cli", "run", "--out", str(out), "--executors", "debug/faults", "--no-seeds",
            "--no-minimize", "--workers", "1", "--time", "120"]
    first = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "state.json").exists():
        time.sleep(0.2)
    second = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-2000:]
    (line,) = second.stderr.strip().splitlines()
    assert second.returncode == 2 and f"pid {first.pid} " in line
    write_report(out)
