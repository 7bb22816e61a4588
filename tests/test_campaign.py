"""Campaigns: findings saved at once with the DESIGN fields, dedup counts, resume, crashes survived, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from campaign_fixtures import fault_stream, hang_stream

from fuzzer.campaign import Campaign, CampaignConfig, CampaignError
from fuzzer.campaign.progress import Progress

FIELDS = {"signature", "oracle", "executor", "variant", "ops", "dtypes", "ratio", "max_ulp", "case", "repro",
          "count", "first_seen_s"}


def config(out: Path, **kw) -> CampaignConfig:
    base = dict(out=out, executors=["debug/faults"], seed=3, max_tests=21, workers=1, minimize=False,
                timeout_s=20.0, generate=fault_stream)
    base.update(kw)
    return CampaignConfig(**base)


def quiet() -> Progress:
    return Progress(stream=open(os.devnull, "w"), live=False)


def findings(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]


def test_findings_are_deduplicated_saved_and_counted(tmp_path: Path) -> None:
    summary = Campaign(config(tmp_path), quiet()).run()
    assert (summary.cases, summary.tests, summary.stopped_by) == (21, 21, "max-tests")
    recs = findings(tmp_path)
    assert {r["oracle"] for r in recs} == {"error-bound", "crash"}
    assert all(FIELDS <= set(r) for r in recs)
    # cases 2, 5, 8, 11, 14, 17 return wrong values: the probe run pins all six on the first node, `mul`
    (bound,) = [r for r in recs if r["oracle"] == "error-bound"]
    assert (bound["ops"], bound["count"], bound["dtypes"]) == (["mul"], 6, ["float32,float32->float32"])
    # cases 6, 20 (mul+exp) and 13 (mul+neg) segfault: a crash is keyed by the graph's op set
    crashes = {tuple(r["ops"]): r for r in recs if r["oracle"] == "crash"}
    assert {k: r["count"] for k, r in crashes.items()} == {("exp", "mul"): 2, ("mul", "neg"): 1}
    assert {r["error_class"] for r in crashes.values()} == {"signal-11"}
    for r in recs:
        assert (tmp_path / r["case"]).exists() and r["first_seen_s"] >= 0
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert len(runs) == 21 and set(runs["status"]) == {"ok", "crash"}


def test_rerun_resumes_generator_position_and_counts(tmp_path: Path) -> None:
    Campaign(config(tmp_path, max_tests=10), quiet()).run()
    first = {r["signature"]: r["count"] for r in findings(tmp_path)}
    state = json.loads((tmp_path / "state.json").read_text())
    assert (state["next_index"], state["tests"]) == (10, 10)
    Campaign(config(tmp_path, max_tests=21), quiet()).run()
    state = json.loads((tmp_path / "state.json").read_text())
    assert (state["next_index"], state["tests"], state["invocations"]) == (21, 21, 2)
    again = {r["signature"]: r["count"] for r in findings(tmp_path)}
    assert set(first) <= set(again) and all(again[s] >= first[s] for s in first)
    one_go = tmp_path / "one-go"
    Campaign(config(one_go), quiet()).run()
    assert again == {r["signature"]: r["count"] for r in findings(one_go)}


def test_resume_with_another_seed_is_refused(tmp_path: Path) -> None:
    Campaign(config(tmp_path, max_tests=2), quiet()).run()
    with pytest.raises(CampaignError, match="seed 3"):
        Campaign(config(tmp_path, seed=4), quiet())


def test_resume_with_other_families_is_refused(tmp_path: Path) -> None:
    """Hostile pass #263: resuming a `--families fp8` campaign without --families silently switched it to every
    family (another seed or schedule was refused). state.json keeps the families; another mix is refused."""
    Campaign(config(tmp_path, max_tests=2), quiet()).run()
    assert json.loads((tmp_path / "state.json").read_text())["families"] == ""
    with pytest.raises(CampaignError, match="--families .every family., not fp8"):
        Campaign(config(tmp_path, families={"fp8": 1.0}), quiet())


def test_parallel_lanes_run_every_case_once(tmp_path: Path) -> None:
    Campaign(config(tmp_path, workers=2), quiet()).run()
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert sorted(runs["item"].astype(int)) == list(range(21))
    assert sum(r["count"] for r in findings(tmp_path)) == 9


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from campaign_fixtures import fault_stream
from fuzzer.campaign import Campaign, CampaignConfig
cfg = CampaignConfig(out=Path({out!r}), executors=["debug/faults"], seed=3, time_s=600, workers=1,
                     minimize=False, generate=fault_stream, flush_s=0.5)
Campaign(cfg).run()
"""


def test_kill_minus_9_loses_no_finding_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "camp"
    code = SCRIPT.format(tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.3)
        state = out / "state.json"
        if state.exists() and json.loads(state.read_text())["cases"] >= 30:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = findings(out)
    state = json.loads((out / "state.json").read_text())
    assert len(before) == 3 and state["cases"] >= 30
    Campaign(config(out, max_tests=state["tests"] + 10), quiet()).run()
    after = {r["signature"]: r for r in findings(out)}
    assert all(r["signature"] in after and after[r["signature"]]["count"] >= r["count"] for r in before)
    resumed = json.loads((out / "state.json").read_text())
    assert resumed["next_index"] >= state["next_index"] and resumed["invocations"] == 2
    assert resumed["tests"] >= state["tests"] + 10


def bugs(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "bugs.jsonl").read_text().splitlines()]


def test_findings_of_one_root_cause_are_one_bug(tmp_path: Path) -> None:
    Campaign(config(tmp_path), quiet()).run()
    live = [b for b in bugs(tmp_path) if not b.get("merged_into")]
    by_class = {b["error_class"]: b for b in live}
    assert set(by_class) == {"accuracy", "signal-11"} or len(live) == 3, live  # crashes keyed per op set until minimized
    assert all(DESIGN_BUG_FIELDS <= set(b) for b in live)
    recs = findings(tmp_path)
    assert all(r["bug"] in {b["bug"] for b in bugs(tmp_path)} for r in recs)
    bound = next(b for b in live if b["error_class"] == "accuracy")
    assert bound["count"] == 6 and bound["kind"] == "backend-bug" and bound["ops"] == ["mul"]


DESIGN_BUG_FIELDS = {"bug", "title", "kind", "backend", "ops", "error_class", "signatures", "executors", "minimized",
                     "repro", "nodes", "first_seen_s", "count"}


@pytest.mark.slow
def test_bugs_are_minimized_first_and_merged_by_their_minimized_key(tmp_path: Path) -> None:
    """The two crash bugs (op sets exp+mul and mul+neg) minimize to `mul` alone: one bug."""
    Campaign(config(tmp_path, minimize=True, minimize_budget_s=60.0), quiet()).run()
    live = bugs(tmp_path)  # bugs.jsonl holds live bugs only; the merged one is named in its survivor's `merged`
    assert len(live) == 2 and not any(b.get("merged_into") for b in live), [b["key"] for b in live]
    for b in live:
        assert b["minimized"] and b["confirmed"] and "fresh workers" in b["note"], b
        assert b["nodes"] == 1 and (tmp_path / b["case"]).exists()  # debug/faults has no script exporter
    crash = next(b for b in live if b["error_class"] == "signal-11")
    assert crash["ops"] == ["mul"] and crash["count"] == 3 and len(crash["signatures"]) == 2
    assert len(crash["merged"]) == 1 and len(crash["aliases"]) >= 2  # both pre-minimization op-set keys lead here
    assert {r["bug"] for r in findings(tmp_path)} <= {b["bug"] for b in live} | set(crash["merged"])


def test_sigterm_stops_after_the_cases_in_flight_and_saves(tmp_path: Path) -> None:
    out = tmp_path / "camp"
    proc = subprocess.Popen([sys.executable, "-m", "fuzzer.cli", "run", "--out", str(out), "--executors", "torch/eager",
                             "--no-seeds", "--workers", "1", "--no-minimize"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if (out / "state.json").exists() and json.loads((out / "state.json").read_text())["cases"] >= 3:
            break
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-2000:]
    assert "SIGTERM: stopping after the cases in flight" in stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    state = json.loads((out / "state.json").read_text())
    assert summary["stopped_by"] == "stopped" and state["pending"] == [] and state["cases"] == summary["cases"]


def test_report_opens_with_the_bug_table_and_links(tmp_path: Path) -> None:
    from fuzzer import markdown as md
    from fuzzer.campaign.report import write_report

    Campaign(config(tmp_path), quiet()).run()
    text = write_report(tmp_path).read_text()
    assert (tmp_path / "error_ratio_heatmap.png").stat().st_size > 1000
    assert (tmp_path / "bugs_over_time.png").stat().st_size > 1000
    assert text.index("## Backend bugs") < text.index("## Model hazards") < text.index("## Coverage gaps") \
        < text.index("## Findings (the detailed record")
    live = [b for b in bugs(tmp_path) if not b.get("merged_into")]
    assert all(r["bug"] in text for r in findings(tmp_path))
    assert all(md.text(b["title"]) in text for b in live)
    rec = findings(tmp_path)[0]
    assert f"](<{rec['case']}>)" in text and rec["signature"] in text


def test_regression_a_merged_bug_vanishes_from_the_records_and_its_id_still_resolves() -> None:
    """Issue 20: records with merged_into set were still listed (and counted by readers of bugs.jsonl). The book
    writes live bugs only; a merged id resolves through the `merged` list of the bug it went into, after a reload."""
    from fuzzer.campaign.bug_book import BugBook

    book = BugBook()
    a, _ = book.add("k1", "s1", "tvm/default", "t", "backend-bug", "tvm", ["mean"], "accuracy", 1.0, True)
    b, _ = book.add("k2", "s2", "tvm/default", "t", "backend-bug", "tvm", ["mean"], "accuracy", 2.0, True)
    assert book.rekey(b, "k1") is a
    records = book.records()
    assert [r["bug"] for r in records] == [a.bug] and records[0]["merged"] == [b.bug]
    again = BugBook(records)
    assert again.holder(b.bug) is again.bugs[a.bug] and again.find("k2") is again.bugs[a.bug]


def test_regression_a_findings_second_hit_under_another_key_counts_into_its_bug() -> None:
    """triage18 be2342037f: a finding filed under one bug was hit again in a case that keyed it otherwise (a
    16-bit-sum bug's batch_norm finding), and the book opened a bug for that hit: bugs.jsonl held a backend-bug
    record with no title, no signature and no case, never minimized. A known signature counts into its bug."""
    from fuzzer.campaign.bug_book import BugBook

    book = BugBook()
    a, opened = book.add("sum-key", "s1", "tvm/decompose", "t", "backend-bug", "tvm", ["mean"], "accuracy", 1.0, True)
    again, opened_again = book.add("batch-norm-key", "s1", "tvm/default", "", "backend-bug", "tvm", ["batch_norm"],
                                   "accuracy", 2.0, False)
    assert opened and not opened_again and again is a and len(book.live()) == 1
    assert a.count == 2 and a.signatures == ["s1"] and a.executors == ["tvm/decompose", "tvm/default"]
    other, opened_other = book.add("batch-norm-key", "s2", "tvm/default", "t", "backend-bug", "tvm", ["batch_norm"],
                                   "accuracy", 3.0, True)  # a new finding of that key opens its bug as before
    assert opened_other and other is not a and len(book.live()) == 2


def test_regression_a_timeout_bug_is_not_minimized_in_the_campaign(tmp_path: Path) -> None:
    """triage17: a TVM timeout (120 s per check) held the minimizer lane for 15 minutes past the campaign's time
    budget, every shrink step, the per-executor re-run and the confirmation each waiting the whole timeout. The lane
    records it as not minimized, says why, and goes on."""
    summary = Campaign(config(tmp_path, generate=hang_stream, max_tests=2, minimize=True, timeout_s=2.0), quiet()).run()
    assert summary.cases == 2
    bugs = [json.loads(line) for line in (tmp_path / "bugs.jsonl").read_text().splitlines()]
    (hang,) = [b for b in bugs if b["error_class"] == "timeout"]
    assert hang["minimize_tried"] and not hang["minimized"] and not hang["confirmed"]
    assert hang["note"].startswith("not minimized: each check of a timeout waits 2 s") and "minimize_s" not in hang


def test_regression_a_hazard_findings_script_shows_the_hazard_in_eager(tmp_path: Path) -> None:
    """triage17 sample: the scripts of model-hazard findings (#6, #13, #16, #20, #22, #23) were the backend's full
    oracle, which passes (the backend is fine; eager raises or loses the answer), so they exited 0 and showed
    nothing of the hazard. A hazard finding's record now points to its short script, which runs eager."""
    from fuzzer.artifacts import run_script
    from fuzzer.ir import load_case

    rope = load_case(Path(__file__).parent / "fixtures" / "rope-positions-float16-3aba8c8efd.json")
    Campaign(config(tmp_path, executors=["torch/eager"], generate=lambda seed, index: rope, max_tests=2), quiet()).run()
    (hazard,) = [r for r in findings(tmp_path) if r["kind"] == "model-hazard"]
    assert hazard["repro"].endswith("/repro.py") and (tmp_path / hazard["repro"]).with_name("repro_full.py").exists()
    status, tail = run_script(tmp_path / hazard["repro"])
    assert status == 1 and "relative RMS error" in tail, tail


def test_the_campaign_package_has_no_import_circle() -> None:
    """Issue 34: the minimizer lane depends on an interface (MinimizerHost), not on the campaign's runner; no module
    of fuzzer/campaign imports one that imports it back, at module level or inside a function."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "fuzzer" / "campaign"
    edges = {f.stem: {n.module.split(".")[0] for n in ast.walk(ast.parse(f.read_text()))
                      if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}
             for f in root.glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and reaches(d, goal, seen | {d})) for d in edges.get(start, ()))

    assert not [m for m in edges if reaches(m, m, {m})]
