"""What a campaign does with its directory before it runs a case: refuse files that are not files (or folders
that are not folders), and on resume re-derive what a damaged or deleted file lost (findings from their folders,
bugs from their findings, the runs a killed run journaled), saying each repair through `damaged`."""

from __future__ import annotations

import json
from typing import Any, Callable

from ..outfiles import MANIFEST, kind_of, not_regular
from .bug_book import BugBook
from .finding_book import FindingBook
from .minimizer_lane import INTERNAL_ERRORS
from .state import CampaignState
from .store import (
    ARM_RESULTS,
    BUGS,
    DAMAGED_FILES,
    FINDINGS,
    FOLDERS,
    LANE_EVENTS,
    RECORD,
    SCHEDULE,
    CampaignStore,
    StoreError,
    valid_record,
)

Damaged = Callable[[str, Any, str, str], None]  # (what, path, problem, action): Campaign.damaged


def check_files(store: CampaignStore) -> None:
    """Before any case runs: each campaign file that exists is a regular file and each campaign folder a
    directory (a directory, FIFO or device in a file's place, or a file in a folder's, would only fail, or
    block, when first written, after the work it records was done); StoreError says which and what to do."""
    root = store.root
    for name in (SCHEDULE, ARM_RESULTS, INTERNAL_ERRORS, LANE_EVENTS, DAMAGED_FILES, MANIFEST,  # the store
                 *(f"{n}.damaged" for n in (FINDINGS, BUGS, ARM_RESULTS))):  # checks state and findings
        what = not_regular(root / name)
        if what is not None:
            raise StoreError(f"{root / name} is {what}, not a regular file; move it away to go on")
    for name in FOLDERS:
        path = root / name
        if path.is_symlink() and path.is_dir():  # its files would be written in someone else's folder (#433)
            raise StoreError(f"{path} is a symbolic link to {path.resolve()}; precfuzz writes the campaign's "
                             f"{FOLDERS[name]} there: put the folder itself there (or move the link away) to go on")
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            what = "a link to nothing" if not path.exists() else (
                "a file" if path.is_file() else kind_of(path.stat().st_mode))
            raise StoreError(f"{path} is {what}, not a directory (it holds the campaign's {FOLDERS[name]}); "
                             "move it away to go on")


def restore_findings(store: CampaignStore, findings: FindingBook, counts: dict[str, int], damaged: Damaged) -> None:
    """Findings state.json counts (`counts`) that findings.jsonl lacks (the file deleted, cut short or a line
    quarantined): restored from their findings/<id>/finding.json, else said to be lost."""
    lost = findings.lost(counts)
    if not lost:
        return
    saved: dict[str, dict[str, Any]] = {}
    folder = store.root / "findings"
    for path in sorted(folder.glob(f"*/{RECORD}")) if folder.is_dir() else []:
        try:
            rec = json.loads(path.read_text()) if not path.is_symlink() else None
        except (OSError, ValueError, RecursionError):
            continue
        if valid_record(rec):
            saved.setdefault(rec["signature"], rec)
    back = [s for s in lost if s in saved]
    findings.load([saved[s] for s in back], counts)
    gone = [s for s in lost if s not in saved]
    if back:
        damaged(f"{len(back)} finding(s)", store.root / FINDINGS, "state.json counts them but findings.jsonl lacks "
                "them", f"restored from findings/<id>/{RECORD} (as first saved)")
    if gone:
        damaged(f"{len(gone)} finding(s)", store.root / FINDINGS, "state.json counts them but findings.jsonl lacks "
                f"them and no findings/<id>/{RECORD} holds them ({gone[0]}{', ...' if len(gone) > 1 else ''})",
                "their counts are dropped; a new hit records them again")


def repair_bugs(store: CampaignStore, book: BugBook, findings: FindingBook, damaged: Damaged) -> None:
    """Re-derive what a resume can: bugs findings.jsonl names that bugs.jsonl lacks (rebuilt from their
    findings), a representative whose finding record is gone (another finding of the bug), a merge into a bug
    that is gone (live again), a minimized bug whose files are gone (minimized again)."""
    for bid in book.revived:
        damaged(f"bug {bid}", store.root / BUGS, "it was merged into a bug bugs.jsonl lacks",
                "it is a bug of its own again")
    rebuilt = book.rebuild(findings.in_order())
    if rebuilt:
        damaged(f"{len(rebuilt)} bug(s)", store.root / BUGS,
                f"findings.jsonl names them but bugs.jsonl lacks them ({', '.join(rebuilt[:5])}"
                f"{', ...' if len(rebuilt) > 5 else ''})", "rebuilt from their findings (they are minimized again)")
    for bug in book.live():
        if bug.representative in findings:
            continue
        others = book.representatives(bug, findings.records)
        if others:
            damaged(f"bug {bug.bug}", store.root / FINDINGS,
                    f"its representative finding is not in findings.jsonl ({bug.representative})",
                    f"represented by another of its findings ({others[0]})")
            bug.representative = others[0]
    for bug in book.live():
        missing = [p for p in (bug.case, bug.repro) if bug.minimized and p and not (store.root / p).is_file()]
        if missing:
            damaged(f"bug {bug.bug}", store.root / missing[0], "its minimized files are missing",
                    "it is minimized again")
            bug.minimized = bug.confirmed = False
            bug.note = "minimized files were missing on resume; minimized again"
            bug.extra.pop("minimize_tried", None)


def recover_runs(store: CampaignStore, state: CampaignState, damaged: Damaged) -> None:
    """Seal the per-test rows a killed run journaled (the rows of cases the saved state counts; the others run
    again), then make state.json's test count the rows runs.parquet holds."""
    pending = {str(i) for i in state.pending}
    done = {f"seed:{name}" for name in state.seeds_done}

    def counted(item: str) -> bool:
        if item.startswith("seed:"):
            return item in done
        return item.isdigit() and int(item) < state.next_index and item not in pending

    store.recover_runs(counted)
    if state.invocations > 1 or store.runs_dir.exists():
        rows, aside = store.count_runs()
        for path, why in aside:
            damaged("runs.parquet", path, f"a chunk cannot be read ({why})", f"set aside as {path.name}, its rows not "
                    "counted")
        if rows != state.tests:
            damaged("state.json", store.root / "state.json", f"it counts {state.tests} tests but runs.parquet holds "
                    f"{rows} rows", f"counting {rows}, the rows kept")
            state.tests = rows
