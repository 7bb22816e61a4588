"""The minimizer lane of a campaign: new bugs queued by kind, each minimized, keyed again, written and confirmed.

It owns its queue; the bug book, the finding book and the store are the campaign's (fuzzer.campaign.runner), which
it reaches through its host. Lock order: the host's lock guards the books; the lane takes it only around reading or
updating them, never while it minimizes, writes files or runs a script, and holds no lock of its own.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from oracles.bugs import case_keys
from oracles.findings import Finding, backend_of
from oracles.vocabulary import ErrorClass, ExecutorName, Kind

from ..artifacts import REPRO_FULL, Artifacts, confirm_scripts, rewrite_report, write_finding
from ..check import Checker
from ..executors import ORACLE_EXECUTORS
from ..ir import Case, IRError, case_options, input_values, load_case
from ..isolation import ExecutorPool
from ..minimize import Target, minimize, recheck
from ..outfiles import not_regular
from .bug_book import KIND_ORDER, Bug, BugBook
from .finding_book import FindingBook
from .store import CampaignStore

INTERNAL_ERRORS = "internal-errors.jsonl"  # cases precfuzz itself failed on (its own bugs), one record each
ORIGINAL = "original.json"  # findings/<id>/original.json: a finding's case as generated


class MinimizerConfig(Protocol):
    """The campaign settings the minimizer lane reads."""

    minimize: bool
    time_s: float | None
    minimize_budget_s: float
    timeout_s: float
    command: str
    verify_repros: bool
    executors: list[str]
    max_calls_per_worker: int


class MinimizerHost(Protocol):
    """What the minimizer lane uses of its campaign, and nothing more (issue 34: the lane depends on this interface,
    not on fuzzer.campaign.runner.Campaign, which provides it; no import between the two)."""

    cfg: MinimizerConfig
    book: BugBook
    findings: FindingBook
    store: CampaignStore
    lock: threading.RLock
    stop: threading.Event
    t_start: float
    dirty: bool
    internal_errors: int
    progress: Any  # .warn(text)
    lanes: Any  # .minimizer_env() -> the environment of the lane's workers

    def flush(self, force: bool = False) -> None: ...

    def elapsed(self) -> float: ...

    def damaged(self, what: str, path: Path | str | None, problem: str, action: str) -> None: ...

    def describe(self, executor: str, pool: Any) -> dict[str, Any]: ...


class MinimizerLane:
    """Minimizes a campaign's new bugs one at a time, beside the fuzzing lanes, with a pool of its own."""

    def __init__(self, host: MinimizerHost) -> None:
        self.c = host
        self.queue: queue.PriorityQueue[tuple[int, int, str]] = queue.PriorityQueue()  # (kind, order, bug id)
        self.queued = 0

    def minimize_s_mean(self) -> float:
        """Mean seconds a bug's minimization (and confirmation) took in this run; 30 until one is measured."""
        with self.c.lock:
            done = [float(b.extra["minimize_s"]) for b in self.c.book.live() if "minimize_s" in b.extra]
        return sum(done) / len(done) if done else 30.0

    def backlog(self) -> int:
        """Backend bugs found but not yet minimized (the minimizer lane's queue)."""
        with self.c.lock:
            return sum(1 for b in self.c.book.live() if b.kind == Kind.BACKEND_BUG and not b.extra.get("minimize_tried"))

    def put(self, bug: Bug) -> None:
        """Queue a bug for minimization: backend bugs first, then hazards, then coverage gaps; in discovery order."""
        if self.c.cfg.minimize:
            self.queued += 1
            self.queue.put((KIND_ORDER.get(bug.kind, 3), self.queued, bug.bug))

    def _left(self) -> float:
        """Seconds the campaign has left (inf without a time limit)."""
        if self.c.cfg.time_s is None:
            return float("inf")
        return self.c.cfg.time_s - (time.monotonic() - self.c.t_start)

    def minimize_bug(self, bid: str, checker: Checker, pool: ExecutorPool) -> None:
        """Minimize a bug's representative finding, key it again, write its repro and confirm it in a fresh process."""
        with self.c.lock:
            bug = self.c.book.bugs[bid]
            if bug.merged_into or bug.minimized:
                return
            recs = [dict(self.c.findings[s]) for s in self.c.book.representatives(bug, self.c.findings.records)]
        budget = min(self.c.cfg.minimize_budget_s, self._left())
        if budget < 5.0:
            return
        if bug.error_class == ErrorClass.TIMEOUT:  # every check of it waits the whole timeout: the lane would stall
            self._leave(bid, f"not minimized: each check of a timeout waits {self.c.cfg.timeout_s:g} s (triage17: one "
                             "held the minimizer lane for 23 minutes); `precfuzz minimize` can take it offline")
            return
        t0 = time.monotonic()
        found = self._original(bid, recs)
        if found is None:
            return
        rec, original = found
        if original.graph.wrt:  # a training case's check runs backward and a gradient reference too: twice the time
            budget = min(budget * 2, self._left())  # (triage23 b0a5795659: cut short, its script 82 lines)
        finding: Finding | None = None
        try:
            hint = rec["signature"] + ("|vs:" + rec["against"] if rec.get("against") else "")
            result = minimize(original, hint, checker, budget_s=budget, fresh_recheck=False)
            finding, case, note = result.finding, result.case, result.note
        except Exception as exc:  # noqa: BLE001 - the raw finding is saved; minimizing is a bonus
            case, note = original, f"minimizing failed: {type(exc).__name__}: {exc}"
        update: dict[str, Any] = {"note": note}
        key = None
        if finding is None:
            update.update(minimized=False, confirmed=False, note=note or "the minimizer did not reproduce it")
        else:
            key, variant, same, garbage = self._minimized_key(finding, case, checker)
            worst = result.worst if result.worst is not None and result.worst.error_class == ErrorClass.NONFINITE else None
            finding = replace(finding, details={**finding.details, "garbage": garbage,
                                                **({"worst_nonfinite": result.worst_elements} if worst else {})})
            folder = self.c.store.root / "bugs" / bid
            executors = list(dict.fromkeys([*bug.executors, *same]))
            describe = self.c.describe(finding.executor, pool)
            command = f"{self.c.cfg.command or 'precfuzz run'}  # bug {bid}"
            art = write_finding(folder, case, finding, describe, command, variant=variant, executors=executors)
            update["executors"] = executors
            update["reproduces_on"] = same
            confirmed, how, script = self._confirm(art, case, finding, pool)
            if script is not None and script == art.repro_full and art.repro is not None:  # the draft inlines it
                art.errors += rewrite_report(folder, case, finding, describe, command, variant, executors)
            rel = lambda p: str(Path(p).relative_to(self.c.store.root)) if p else None  # noqa: E731
            lines = art.repro_lines if script == art.repro else len(Path(script).read_text().splitlines())
            update.update(minimized=True, confirmed=confirmed, note=how, title=art.title, repro=rel(script),
                          repro_full=rel(art.repro_full), report=rel(art.report), case=rel(art.case),
                          nodes=len(case.graph.nodes), repro_lines=lines, ops=finding.ops,
                          minimized_signature=finding.signature)
            if art.errors:
                update["save_error"] = "; ".join(art.errors)
        update["minimize_s"] = round(time.monotonic() - t0, 2)  # minimizing, writing and confirming
        with self.c.lock:
            bug = self.c.book.bugs[bid]
            for k, v in update.items():
                if k in Bug.__dataclass_fields__:
                    setattr(bug, k, v)
                else:
                    bug.extra[k] = v
            bug.extra["minimize_tried"] = True
            if key is not None:
                self.c.book.rekey(bug, key)
            self.c.dirty = True
        self.c.flush()

    def _leave(self, bid: str, note: str) -> None:
        """Record that a bug is not minimized, and why."""
        with self.c.lock:
            bug = self.c.book.bugs[bid]
            bug.minimized, bug.confirmed, bug.note = False, False, note
            bug.extra["minimize_tried"] = True
            self.c.dirty = True
        self.c.flush()

    def _original(self, bid: str, recs: list[dict[str, Any]]) -> tuple[dict[str, Any], Case] | None:
        """The first of a bug's findings (`recs`, its representative first) whose original case loads, with that
        case; each one that does not is said (damaged-files.jsonl). None when none does: the bug is set aside, not
        minimized, and the campaign goes on."""
        problems = []
        for rec in recs:
            path, problem = self._original_path(rec)
            if path is not None:
                what = not_regular(path)
                if what is not None:  # a FIFO would block the read, a device never end it
                    problem = f"{path.relative_to(self.c.store.root)} is {what}"
                else:
                    try:
                        case = load_case(path)
                    except IRError as exc:
                        problem = str(exc)[:300]
                    else:
                        if rec["signature"] != recs[0]["signature"]:
                            self.c.damaged(f"bug {bid}", path.parent, f"its representative's case cannot be read "
                                          f"({problems[-1] if problems else 'no finding record'})",
                                          f"minimizing another of its findings ({rec['signature']})")
                        with self.c.lock:
                            self.c.book.bugs[bid].representative = rec["signature"]
                        return rec, case
            problems.append(problem)
        note = (f"not minimized: no finding of it has a readable case ({'; '.join(problems[:3])})" if problems else
                "not minimized: findings.jsonl holds none of its findings")
        self.c.damaged(f"bug {bid}", self.c.store.root / "findings", note.removeprefix("not minimized: "),
                      "set aside without minimizing (its raw findings stay recorded)")
        with self.c.lock:
            bug = self.c.book.bugs[bid]
            bug.note = note
            bug.extra["minimize_tried"] = True
            self.c.dirty = True
        self.c.flush()
        return None

    def _original_path(self, rec: dict[str, Any]) -> tuple[Path | None, str]:
        """Where a finding's original case is (findings/<id>/original.json), or None and why not."""
        root = self.c.store.root
        if isinstance(rec.get("id"), str):
            path = root / "findings" / rec["id"] / ORIGINAL
        elif isinstance(rec.get("original"), str):
            path = root / rec["original"]
            try:
                path.resolve().relative_to(root.resolve())
            except (ValueError, OSError, RuntimeError):
                return None, f"finding {rec['signature'][:80]}: its case path {rec['original'][:80]!r} is outside " \
                             "the campaign directory"
        else:
            return None, f"finding {rec['signature'][:80]} names no case file"
        if not path.exists() and not path.is_symlink():
            return None, f"{path.relative_to(root)} is missing"
        return path, ""

    def _minimized_key(self, finding: Finding, case: Case, checker: Checker) -> tuple[str, str, list[str], bool]:
        """(bug key, variant, executors it reproduces on, garbage) of a minimized finding.

        The minimized case runs on every executor of the finding's backend (a TVM pipeline's finding beside the
        default pipeline, which decides whether it is the pipeline's): the record lists each executor where the
        same bug shows (issue 20). The finding's executor runs it twice: outputs that differ between two runs of
        the same input are garbage, not an accuracy ratio."""
        family = ExecutorName.parse(finding.executor).family
        names = [n for n in checker.pool.names if ExecutorName.parse(n).family == family and n not in ORACLE_EXECUTORS]
        result = checker.check(case, names)
        found = [finding] + [f for f in result.findings if f.executor != finding.executor]
        keys = case_keys(found, names)
        key = keys[finding.signature]
        same = sorted({f.executor for f in found if keys.get(f.signature) == key} | {finding.executor})
        garbage = False
        first = result.outcomes.get(finding.executor, [])
        if first and first[0].ok and finding.error_class in (ErrorClass.BOUND, ErrorClass.NONFINITE):
            again = checker.pool.run(finding.executor, case.graph, [input_values(case, 0)], case_options(case))
            garbage = bool(again and again[0].ok and any(
                not np.array_equal(a, b, equal_nan=True) for a, b in zip(first[0].outputs or [], again[0].outputs or [])))
        return key, key.rsplit("|", 1)[-1], same, garbage

    def _confirm(self, art: Artifacts, case: Case, finding: Finding,
                 pool: ExecutorPool) -> tuple[bool, str, Path | None]:
        """(confirmed, how, the record's repro) of a minimized bug: confirmed where a written script exits 1 in a fresh
        process (repro.py, else repro_full.py, which then is the record's repro: artifacts.confirm_scripts). Only a
        bug no script was run for (none renders, or verify_repros is off) is confirmed by a re-check on fresh workers.
        """
        if self.c.cfg.verify_repros and (art.repro or art.repro_full):
            shown = confirm_scripts(art, ask_isa=backend_of(finding.executor) in ("torch", "torch_xla"))
            if shown.script is not None:
                return True, shown.note, shown.script
            fallback = art.repro_full or art.repro
            why = f"{shown.note}; not confirmed: no script exits 1 (the record's repro is {Path(fallback).name})"
            return False, why + self._recheck_says(case, finding, pool), fallback
        why = "no script was run" if not self.c.cfg.verify_repros else "no script renders for it"
        target = Target.of(finding, case.graph)
        try:
            again = recheck(case, target, pool)
        except Exception as exc:  # noqa: BLE001
            return False, f"{why}; the fresh re-check failed: {type(exc).__name__}: {exc}", art.repro or art.repro_full
        script = art.repro or art.repro_full
        if again is not None:
            return True, f"{why}; a re-check on fresh workers reproduces it (see {REPRO_FULL})", script
        return False, f"{why}; a re-check on fresh workers does not reproduce it", script

    @staticmethod
    def _recheck_says(case: Case, finding: Finding, pool: ExecutorPool) -> str:
        """What a re-check on fresh workers says of a bug whose scripts do not show it (the scripts', or the bug's,
        fault)."""
        try:
            again = recheck(case, Target.of(finding, case.graph), pool)
        except Exception as exc:  # noqa: BLE001
            return f"; the fresh re-check failed: {type(exc).__name__}: {exc}"
        return "; a re-check on fresh workers " + ("reproduces it" if again is not None else "does not reproduce it")

    def run(self, fuzzing_done: threading.Event) -> None:
        """Minimize new bugs one at a time, beside the fuzzing lanes, with a pool of its own."""
        with ExecutorPool(self.c.cfg.executors, timeout=self.c.cfg.timeout_s, max_calls=self.c.cfg.max_calls_per_worker,
                          log_dir=self.c.store.root / "logs", extra_env=self.c.lanes.minimizer_env()) as pool:
            checker = Checker(pool)
            while True:
                if self.c.stop.is_set() or (self.c.cfg.time_s is not None
                                          and time.monotonic() - self.c.t_start >= self.c.cfg.time_s):
                    return
                try:
                    _, _, bid = self.queue.get(timeout=0.5)
                except queue.Empty:
                    if fuzzing_done.is_set():
                        return
                    continue
                try:
                    self.minimize_bug(bid, checker, pool)
                except Exception as exc:  # noqa: BLE001 - one bug's trouble must not end the campaign
                    self.set_aside(bid, exc)

    def set_aside(self, bid: str, exc: Exception) -> None:
        """A bug whose minimization failed unexpectedly: kept unminimized (not queued again), its traceback in
        internal-errors.jsonl."""
        import traceback

        error = f"{type(exc).__name__}: {exc}"
        self.c.store.append_record(INTERNAL_ERRORS, {"item": f"minimize bug {bid}", "error": error, "t": round(self.c.elapsed(), 3),
                                                   "traceback": "".join(traceback.format_exception(exc))[-4000:]})
        with self.c.lock:
            self.c.internal_errors += 1
            bug = self.c.book.bugs.get(bid)
            if bug is not None:
                bug.note = f"not minimized: minimizing failed ({error[:200]})"
                bug.extra["minimize_tried"] = True
            self.c.dirty = True
        self.c.progress.warn(f"minimizing bug {bid} failed ({error[:200]}); it stays unminimized, kept in {INTERNAL_ERRORS}")
        self.c.flush()
