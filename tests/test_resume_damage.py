"""Long campaigns never die (issue 24): a resume and the minimizer lane survive one bug's damaged files, re-deriving
what they can (a representative from another finding of the bug, bugs.jsonl from findings.jsonl) and setting the
rest aside with a warning and a record; every test state.json counts has its row in runs.parquet after kill -9;
campaign files and folders are checked before any case runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from campaign_fixtures import fault_stream, twin_stream

from fuzzer.campaign import Campaign, CampaignConfig
from fuzzer.campaign.progress import Progress
from fuzzer.cli import main

TWIN_SIGS = ["error-bound|debug/faults|mul|float16,float32->float32|bound",
             "error-bound|debug/faults|mul|bfloat16,float32->float32|bound"]


class Warnings(Progress):
    """A quiet progress sink that keeps the warnings."""

    def __init__(self) -> None:
        super().__init__(stream=open(os.devnull, "w"), live=False)
        self.lines: list[str] = []

    def warn(self, message: str) -> None:
        self.lines.append(message)


def config(out: Path, **kw) -> CampaignConfig:
    base = dict(out=out, executors=["debug/faults"], seed=3, max_tests=4, workers=1, minimize=False, timeout_s=20.0,
                generate=twin_stream)
    base.update(kw)
    return CampaignConfig(**base)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def live_bugs(out: Path) -> list[dict]:
    return [b for b in lines(out / "bugs.jsonl") if not b.get("merged_into")]


@pytest.fixture()
def twins(tmp_path: Path) -> Path:
    """A campaign of 4 cases: one bug with two findings (float16 and bfloat16), not minimized yet."""
    out = tmp_path / "camp"
    Campaign(config(out), Warnings()).run()
    (bug,) = live_bugs(out)
    assert bug["signatures"] == TWIN_SIGS and bug["representative"] == TWIN_SIGS[0] and not bug["minimized"]
    return out


def resume_minimizing(out: Path) -> tuple[Warnings, dict]:
    """Resume with the minimizer lane on and nothing more to fuzz; (its warnings, the one live bug)."""
    seen = Warnings()
    Campaign(config(out, minimize=True, minimize_budget_s=60.0), seen).run()
    (bug,) = live_bugs(out)
    return seen, bug


# ---------------------------------------------------------------- the minimizer lane on damaged files


def test_minimizer_takes_another_finding_when_the_representatives_line_was_quarantined(twins: Path) -> None:
    """The representative's findings.jsonl line was unreadable: the lane raised KeyError and every resume died
    (exit 3); now the bug is represented by its other finding and minimized."""
    text = (twins / "findings.jsonl").read_text().splitlines()
    assert json.loads(text[0])["signature"] == TWIN_SIGS[0]
    (twins / "findings.jsonl").write_text("{cut short by a full disk\n" + "\n".join(text[1:]) + "\n")
    (twins / "findings" / json.loads(text[0])["id"] / "finding.json").unlink()  # else it is restored from there
    seen, bug = resume_minimizing(twins)
    assert bug["minimized"] and bug["representative"] == TWIN_SIGS[1], bug
    assert (twins / "findings.jsonl.damaged").read_text().startswith("{cut short")
    records = lines(twins / "damaged-files.jsonl")
    assert any("represented by another of its findings" in r["action"] for r in records), records
    assert any("its representative finding is not in findings.jsonl" in w for w in seen.lines)


@pytest.mark.parametrize("damage", ["missing", "device", "fifo", "directory", "not-json"])
def test_minimizer_sets_aside_a_bug_whose_cases_cannot_be_read_and_goes_on(damage: str, twins: Path) -> None:
    """original.json missing, a link to a device, a FIFO, a directory or not JSON, for every finding of the bug: the
    resume died (exit 3) and the bug was queued again on every later resume; now it is set aside (a warning, a
    record, a note), the campaign finishes, and a later resume does not try it again."""
    for rec in lines(twins / "findings.jsonl"):
        path = twins / rec["original"]
        path.unlink()
        if damage == "device":
            path.symlink_to("/dev/zero")
        elif damage == "fifo":
            os.mkfifo(path)
        elif damage == "directory":
            path.mkdir()
        elif damage == "not-json":
            path.write_text("{")
    seen, bug = resume_minimizing(twins)
    assert not bug["minimized"] and bug["minimize_tried"] and bug["note"].startswith("not minimized: no finding of it "
                                                                                     "has a readable case"), bug
    (record,) = [r for r in lines(twins / "damaged-files.jsonl") if r["what"] == f"bug {bug['bug']}"]
    assert "set aside" in record["action"] and any("set aside" in w for w in seen.lines)
    again, _ = resume_minimizing(twins)
    assert not again.lines and len(lines(twins / "damaged-files.jsonl")) == 1


def test_minimizer_uses_the_other_finding_when_the_representatives_case_is_gone(twins: Path) -> None:
    first = lines(twins / "findings.jsonl")[0]
    (twins / first["original"]).unlink()
    seen, bug = resume_minimizing(twins)
    assert bug["minimized"] and bug["representative"] == TWIN_SIGS[1]
    assert any("minimizing another of its findings" in w for w in seen.lines), seen.lines


def test_a_case_path_outside_the_campaign_is_not_read(twins: Path) -> None:
    recs = lines(twins / "findings.jsonl")
    for rec in recs:
        rec.pop("id")
        rec["original"] = "../../../../etc/passwd"
    (twins / "findings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    _, bug = resume_minimizing(twins)
    assert not bug["minimized"] and "outside the campaign directory" in bug["note"]


def test_minimizer_goes_on_when_the_bugs_folder_is_taken_by_a_file(twins: Path) -> None:
    """bugs/<id> taken by a file: the bug is minimized and confirmed, what could not be written is named."""
    (bug,) = live_bugs(twins)
    (twins / "bugs").mkdir(exist_ok=True)
    (twins / "bugs" / bug["bug"]).write_text("in the way")
    _, bug = resume_minimizing(twins)
    assert bug["minimized"] and "case.json: cannot write" in bug["save_error"], bug
    assert (twins / "bugs" / bug["bug"]).read_text() == "in the way"


@pytest.mark.slow
def test_regression_a_deleted_bugs_folder_is_minimized_again(twins: Path) -> None:
    """bugs/ deleted after its bug was minimized: the resume said nothing and bugs.jsonl pointed at missing files."""
    _, bug = resume_minimizing(twins)
    assert bug["minimized"] and (twins / bug["case"]).is_file()
    import shutil

    shutil.rmtree(twins / "bugs")
    seen, again = resume_minimizing(twins)
    assert again["minimized"] and (twins / again["case"]).is_file(), again
    assert any("its minimized files are missing" in w and "minimized again" in w for w in seen.lines), seen.lines


@pytest.mark.parametrize("how", ["deleted", "cut-short"])
def test_regression_a_lost_findings_jsonl_is_restored_from_the_finding_folders(how: str, twins: Path) -> None:
    """findings.jsonl deleted (or its last line lost) went unnoticed: the resume counted fewer findings than state.json
    and the bug lost its findings; each finding's folder now keeps its record, and the resume says what it restored."""
    before = lines(twins / "findings.jsonl")
    if how == "deleted":
        (twins / "findings.jsonl").unlink()
    else:
        (twins / "findings.jsonl").write_text(json.dumps(before[0]) + "\n")
    seen = Warnings()
    Campaign(config(twins), seen).run()
    after = lines(twins / "findings.jsonl")
    assert sorted(r["signature"] for r in after) == sorted(r["signature"] for r in before)
    assert {r["signature"]: r["count"] for r in after} == {r["signature"]: r["count"] for r in before}
    assert any("findings.jsonl lacks them" in w and "restored" in w for w in seen.lines), seen.lines
    (bug,) = live_bugs(twins)
    assert sorted(bug["signatures"]) == sorted(TWIN_SIGS)


def test_regression_findings_lost_with_their_folders_are_said_to_be_lost(twins: Path) -> None:
    import shutil

    (twins / "findings.jsonl").unlink()
    shutil.rmtree(twins / "findings")
    seen = Warnings()
    Campaign(config(twins), seen).run()
    assert any("no findings/<id>/finding.json holds them" in w for w in seen.lines), seen.lines


# ---------------------------------------------------------------- bugs.jsonl re-derived from findings.jsonl


@pytest.mark.parametrize("how", ["deleted", "emptied", "line-damaged", "old-findings-without-keys"])
def test_a_lost_bugs_jsonl_is_rebuilt_from_findings(how: str, tmp_path: Path) -> None:
    """A resume after bugs.jsonl was lost reported 0 bugs while findings.jsonl named 3."""
    out = tmp_path / "camp"
    Campaign(config(out, generate=fault_stream, max_tests=21), Warnings()).run()
    before = {b["bug"]: b for b in live_bugs(out)}
    assert len(before) == 3
    if how == "deleted":
        (out / "bugs.jsonl").unlink()
    elif how == "emptied":
        (out / "bugs.jsonl").write_text("")
    elif how == "line-damaged":
        (out / "bugs.jsonl").write_text("\n".join("{" + line[1:40] for line in (out / "bugs.jsonl").read_text().splitlines()))
    else:
        (out / "bugs.jsonl").unlink()
        recs = lines(out / "findings.jsonl")
        (out / "findings.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "bug_key"}) + "\n"
                                                    for r in recs))
    seen = Warnings()
    Campaign(config(out, generate=fault_stream, max_tests=21), seen).run()
    after = {b["bug"]: b for b in live_bugs(out)}
    assert set(after) == set(before)
    for bid, b in after.items():
        for field in ("key", "kind", "backend", "ops", "error_class", "signatures", "executors", "count"):
            assert b[field] == before[bid][field], (field, b, before[bid])
    assert any("bugs.jsonl lacks them" in w and "rebuilt" in w for w in seen.lines), seen.lines


def test_a_bug_merged_into_a_missing_bug_is_live_again(tmp_path: Path) -> None:
    from fuzzer.campaign.bug_book import BugBook

    rec = {"bug": "b1", "key": "k1", "title": "", "kind": "backend-bug", "backend": "torch", "ops": ["mul"],
           "error_class": "accuracy", "representative": "s", "signatures": ["s"], "executors": ["torch/eager"],
           "count": 1}
    book = BugBook([{**rec, "merged_into": "gone"}, {**rec, "bug": "b2", "key": "k2", "merged_into": "b3"},
                    {**rec, "bug": "b3", "key": "k3", "merged_into": "b2"}])
    assert sorted(book.revived) == ["b1", "b2"] and [b.bug for b in book.live()] == ["b1", "b2"]
    assert book.find("k3").bug == "b2" and book.find("gone") is None  # the loop is cut once; its keys still lead


@pytest.mark.parametrize("field, value", [("title", 5), ("minimized", "yes"), ("aliases", "k"), ("merged_into", 3),
                                          ("signatures", [1]), ("first_seen_s", "x")])
def test_a_bug_line_with_a_wrong_field_type_is_quarantined(field: str, value: object, tmp_path: Path) -> None:
    from fuzzer.campaign.store import CampaignStore

    rec = {"bug": "b1", "key": "k1", "title": "", "kind": "backend-bug", "backend": "torch", "ops": ["mul"],
           "error_class": "accuracy", "representative": "s", "signatures": ["s"], "executors": ["torch/eager"],
           "count": 1}
    (tmp_path / "bugs.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps({**rec, field: value}) + "\n")
    assert len(CampaignStore(tmp_path, warn=lambda _: None).load_bugs()) == 1
    assert len((tmp_path / "bugs.jsonl.damaged").read_text().splitlines()) == 1


# ---------------------------------------------------------------- kill -9: every counted test has its row


KILLED = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from campaign_fixtures import fault_stream
from fuzzer.campaign import Campaign, CampaignConfig
cfg = CampaignConfig(out=Path({out!r}), executors=["debug/faults"], seed=3, time_s=600, workers={workers},
                     minimize=False, generate=fault_stream, flush_s=0.5)
Campaign(cfg).run()
"""


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])  # two lanes: the slow tier
def test_kill_minus_9_at_random_moments_every_counted_test_has_its_row(workers: int, tmp_path: Path) -> None:
    """Random kills of a campaign, each followed by a resume that runs nothing more: state.json counted 86 tests
    while runs.parquet held 82 rows (rows were written every 500 rows or 30 s, counted at once). Now each case's
    rows are journaled before its tests are counted, and a resume seals the journal."""
    out = tmp_path / "camp"
    code = KILLED.format(tests=str(Path(__file__).parent), out=str(out), workers=workers)
    rng = random.Random(24 + workers)
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        start = json.loads((out / "state.json").read_text())["cases"] if (out / "state.json").exists() else 0
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if (out / "state.json").exists() and json.loads((out / "state.json").read_text())["cases"] > start:
                break
        time.sleep(rng.uniform(0.0, 2.0))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        counted = json.loads((out / "state.json").read_text())["tests"]
        seen = Warnings()
        Campaign(config(out, generate=fault_stream, max_tests=counted), seen).run()  # runs nothing more
        assert len(pd.read_parquet(out / "runs.parquet")) == counted
        assert json.loads((out / "state.json").read_text())["tests"] == counted
        assert not [w for w in seen.lines if "runs.parquet holds" in w], seen.lines
    assert not list((out / "runs.parquet").glob(".journal-*"))


def test_a_state_counting_rows_that_are_gone_is_recounted(tmp_path: Path) -> None:
    """A campaign killed by an older precfuzz (rows lost) or a chunk deleted: the resume counts the rows kept."""
    out = tmp_path / "camp"
    Campaign(config(out, generate=fault_stream, max_tests=21), Warnings()).run()
    for part in sorted((out / "runs.parquet").glob("part-*.parquet")):
        part.unlink()
    seen = Warnings()
    Campaign(config(out, generate=fault_stream, max_tests=25), seen).run()
    rows = len(pd.read_parquet(out / "runs.parquet"))
    assert rows == json.loads((out / "state.json").read_text())["tests"] == 25  # 0 kept, then 25 more run
    assert any("counts 21 tests but runs.parquet holds 0 rows" in w for w in seen.lines), seen.lines


def test_a_parquet_chunk_that_cannot_be_read_is_set_aside_and_not_counted(tmp_path: Path) -> None:
    """A damaged chunk made pandas.read_parquet(DIR/runs.parquet) fail for good; it is set aside (a dot file,
    which readers skip), recorded, and its rows are no longer counted."""
    out = tmp_path / "camp"
    Campaign(config(out, generate=fault_stream, max_tests=21), Warnings()).run()
    (part,) = sorted((out / "runs.parquet").glob("part-*.parquet"))
    part.write_bytes(b"PAR1 not parquet")
    seen = Warnings()
    Campaign(config(out, generate=fault_stream, max_tests=25), seen).run()
    assert (out / "runs.parquet" / f".damaged-{part.name}").read_bytes() == b"PAR1 not parquet"
    assert len(pd.read_parquet(out / "runs.parquet")) == json.loads((out / "state.json").read_text())["tests"] == 25
    assert any("a chunk cannot be read" in w for w in seen.lines), seen.lines


# ---------------------------------------------------------------- checked at start


@pytest.mark.parametrize("name", ["findings", "bugs", "logs"])
def test_a_campaign_folder_replaced_by_a_file_is_refused_before_any_case_runs(name: str, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A findings/ replaced by a file was found only at the first save, after cases ran."""
    out = tmp_path / "camp"
    out.mkdir()
    (out / name).write_text("not a folder")
    status = main(["run", "--out", str(out), "--executors", "debug/faults", "--no-seeds", "--max-tests", "3",
                   "--no-minimize"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and f"{name} is a file, not a directory" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.mark.parametrize("name", ["findings", "bugs", "logs"])
def test_regression_a_campaign_folder_that_links_elsewhere_is_refused(name: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Adversarial pass 2 #433: logs/ replaced by a link to a user's folder; the resume wrote its worker logs there."""
    out, theirs = tmp_path / "camp", tmp_path / "user-docs"
    out.mkdir()
    theirs.mkdir()
    (out / name).symlink_to(theirs)
    status = main(["run", "--out", str(out), "--executors", "debug/faults", "--no-seeds", "--max-tests", "3",
                   "--no-minimize"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "is a symbolic link to" in err[0], err
    assert list(theirs.iterdir()) == []


def test_a_finding_whose_folder_is_taken_is_recorded_without_its_case(tmp_path: Path) -> None:
    """findings/<id> taken by a file: the finding is still counted and recorded, with a warning and a record."""
    out = tmp_path / "camp"
    (out / "findings").mkdir(parents=True)
    from oracles.findings import Finding

    short = Finding("error-bound", "debug/faults", ["mul"], ["float16,float32->float32"], "bound", "").short_id
    (out / "findings" / short).write_text("in the way")
    seen = Warnings()
    Campaign(config(out), seen).run()
    recs = {r["signature"]: r for r in lines(out / "findings.jsonl")}
    assert set(recs) == set(TWIN_SIGS) and recs[TWIN_SIGS[0]]["original"] is None
    assert any(f"finding {short}" in w for w in seen.lines), seen.lines


def test_the_finding_book_counts_hits_on_a_claim_and_keeps_discovery_order() -> None:
    """The runner's finding bookkeeping as a part of its own (issue 21): a hit on a signature being saved is counted
    on its claim, and a resume takes the larger count of findings.jsonl and state.json."""
    from fuzzer.campaign.finding_book import FindingBook

    book = FindingBook()
    assert book.hit("a") and not book.hit("a") and book.hit("b")
    book.put({"signature": "b"})
    book.put({"signature": "a"})
    assert [r["signature"] for r in book.in_order()] == ["b", "a"] and book.counts() == {"a": 2, "b": 1}
    assert not book.hit("a") and book["a"]["count"] == 3
    again = FindingBook()
    again.load([{"signature": "a", "count": 3}], {"a": 5, "c": 1})
    assert again.counts() == {"a": 5} and again.lost({"a": 5, "c": 1}) == ["c"]


def test_regression_fuzzing_goes_on_once_the_minimizer_is_done_with_the_end_of_the_run(tmp_path: Path) -> None:
    """triage13: the lanes stopped fuzzing to leave the rest of a 20-minute run to the minimizer (11 bugs at the
    assumed 30 s each) and never came back: it minimized everything in 10 minutes and the campaign ended at 898 s of
    1200 with 30 cases. A lane now idles while the minimizer has the end of the run, and claims cases again once
    the backlog is done."""
    import time as clock

    from fuzzer.campaign.bug_book import Bug
    from fuzzer.campaign.runner import Claimed, NoClaim

    camp = Campaign(config(tmp_path / "camp", generate=twin_stream, max_tests=None, time_s=60.0, minimize=True), Warnings())
    try:
        camp.t_start = clock.monotonic() - 50.0  # 10 s left: less than one bug's assumed 30 s of minimizing
        camp.book.bugs["b1"] = Bug("b1", "k1", "", "backend-bug", "debug", ["mul"], "accuracy", "s")
        assert camp._next_item() is NoClaim.IDLE
        camp.book.bugs["b1"].extra["minimize_tried"] = True  # the minimizer is done with it
        claim = camp._next_item()
        assert isinstance(claim, Claimed) and (claim.kind, claim.item, claim.tests) == ("index", 0, 1)
        camp.t_start = clock.monotonic() - 61.0
        assert camp._next_item() is NoClaim.DONE  # the run's time is up: the lanes end
    finally:
        camp.lanes.close()
        camp.store.unlock()


def test_regression_a_resume_drops_an_executor_that_no_longer_exists_when_told_the_ones_to_keep(
        tmp_path: Path) -> None:
    """A state.json naming an executor that no longer exists was called damaged, "start over" the only advice, even
    when --executors named the ones to keep; now that resume drops it (said, and recorded), and without
    --executors the one line names the option."""
    from fuzzer.campaign import CampaignError

    out = tmp_path / "camp"
    Campaign(config(out), Warnings()).run()
    state = json.loads((out / "state.json").read_text())
    (out / "state.json").write_text(json.dumps({**state, "executors": ["debug/faults", "tvm/gone"]}))
    with pytest.raises(CampaignError, match="no longer has: 'tvm/gone'; name the executors to keep with --executors "
                                            r"\(say --executors debug/faults\)"):
        Campaign(config(out, max_tests=8), Warnings()).run()
    warnings = Warnings()
    summary = Campaign(config(out, max_tests=8, executors_named=True), warnings).run()
    assert summary.tests > 0 and json.loads((out / "state.json").read_text())["executors"] == ["debug/faults"]
    assert any("tvm/gone" in w and "dropped" in w for w in warnings.lines), warnings.lines
    assert main(["report", str(out)]) in (0, 1)  # a report still reads the campaign
