"""Fuzz campaigns: parallel lanes of warm executor workers, deduplicated findings saved at once, resumable.

Each lane is a thread owning its own ExecutorPool (its own backend worker processes), or, with `--ray`, a
thread driving one Ray actor that holds such a pool on a cluster node (fuzzer.campaign.ray_lanes); lanes
share the generator position, the dedup table and the store under one lock, on the driver's machine. A new
finding is saved at once, unminimized; one more lane minimizes new findings in order and rewrites their
files, so fuzzing never waits for a minimization (a resumed campaign finishes the ones an earlier run did
not get to). Backends run in subprocesses, so the GIL only serializes generation, the numpy reference and
the oracles. The state needed to resume (generator position, cases handed out but unfinished, counters) is
flushed atomically every few seconds and at every new finding; a case interrupted by `kill -9` is simply run
again on resume, and the case of a lost Ray actor goes back to the queue at once.

The runner wires parts that each own their state: the work queue (work_queue), the schedule's bookkeeping
(schedule_book), the finding and bug books (finding_book, bug_book), the minimizer lane (minimizer_lane), the
store and its repairs on resume (store, recovery), and the lanes (lanes, ray_lanes). Lock order: one lock, the
campaign's, guards the books, the queue and the schedule; no part holds it while a backend runs, a case is
minimized or a script is written; the one lock taken under it is the store's own, innermost (it holds no other).
"""

from __future__ import annotations

import shlex
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator

from oracles.bugs import case_keys, error_family
from oracles.evidence import jsonable
from oracles.findings import Finding
from oracles.vocabulary import Kind, Oracle

from ..artifacts import write_finding
from ..check import CheckResult
from ..executors import create
from ..ir import Case, load_case, save_case
from ..isolation import ExecutorPool
from ..outcome import compile_seconds, compiles
from .bug_book import BugBook
from .finding_book import FindingBook
from .lanes import Lane, LaneLost, Lanes, LocalLanes, RemoteCheckError
from .minimizer_lane import INTERNAL_ERRORS, ORIGINAL, MinimizerLane
from .progress import Progress, Snapshot
from .recovery import check_files, recover_runs, repair_bugs, restore_findings
from .schedule import SCHEDULES
from .schedule_book import ScheduleBook, default_block
from .state import STATE_VERSION, CampaignState
from .store import (
    DAMAGED_FILES,
    LANE_EVENTS,
    RECORD,
    SCHEDULE,
    CampaignStore,
    RunsJournal,
    StoreError,
    atomic_write,
    dumps,
    gone_executors,
)
from .work_queue import WorkQueue

MINIMIZING = "time (minimizing the bugs found)"  # the stop reason while the minimizer has the end of the run


class CampaignError(Exception):
    """A campaign that cannot start (for example a directory holding another campaign)."""


@dataclass
class CampaignConfig:
    """What to run, for how long, and where to write."""

    out: Path
    executors: list[str]
    seed: int = 0
    time_s: float | None = None
    max_tests: int | None = None
    workers: int = 1
    seeds_dir: Path | None = None  # corpus/seeds, run first
    minimize: bool = True
    minimize_budget_s: float = 30.0
    verify_repros: bool = True  # run each bug's repro.py in a fresh process (confirms the bug and the script)
    timeout_s: float = 120.0
    flush_s: float = 5.0
    progress_interval_s: float = 60.0
    max_calls_per_worker: int = 400
    command: str = ""
    generate: Callable[[int, int], Case] | None = None  # (seed, index) -> Case; default: generators.generate_case
    ray: str | None = None  # a Ray cluster address ('auto', 'HOST:PORT'): lanes run as its actors; None: local
    ray_neuron_cores: float = 1.0  # NeuronCores each Ray lane requests when a neuron/* executor is selected
    schedule: str | None = None  # 'adaptive' or 'uniform' (fuzzer.campaign.schedule); None: the stored one on
    schedule_default: str = "uniform"  # resume, else this one
    executors_named: bool = False  # --executors was given: a resume may drop executors state.json names that are gone
    schedule_block: int | None = None  # case indices per planning block of the adaptive schedule (None: BLOCK,
    # or twice the lanes if more, so that lanes seldom wait for the blocks a plan comes from); a resume keeps it
    families: dict[str, float] | None = None  # family -> base weight `generate(seed, index, [family])` can be
    # steered to (the default generator: generators.graphs.FAMILIES); None with a `generate`: not steered


@dataclass
class CampaignSummary:
    """What one invocation did."""

    cases: int
    tests: int
    findings_total: int
    findings_new: int
    bugs_total: int
    bugs_new: int
    elapsed_s: float
    backend_s: float
    per_executor: dict[str, dict[str, float]] = field(default_factory=dict)
    stopped_by: str = ""
    load_s: float = 0.0  # wall seconds the lanes' workers spent loading their backends (summed over lanes)


def lane_env(lane: int, executors: list[str]) -> dict[str, str]:
    """Per-lane environment: on Neuron, each lane gets its own NeuronCore."""
    if any(n.startswith("neuron") or "neuron" in n for n in executors):
        return {"NEURON_RT_VISIBLE_CORES": str(lane)}
    return {}


def _default_generate(seed: int, index: int, families: list[str] | None = None) -> Case:
    from generators.graphs import generate_case

    return generate_case(seed, index, families)


def _base_families() -> dict[str, float]:
    from generators.graphs import FAMILIES

    return {name: float(weight) for name, (weight, _) in FAMILIES.items()}


@dataclass(frozen=True)
class Claimed:
    """A case a lane claimed, its tests reserved: a seed file or a generated index, and the executors to run it on
    (None: all of them)."""

    kind: str  # "seed" | "index"
    item: Any  # the seed file's path, or the case index
    case: Case
    tests: int
    executors: list[str] | None


class NoClaim(Enum):
    """Why a lane got no case: wait for earlier blocks' plans, idle while the minimizer has the end of the run, or
    done (the run's budget is spent)."""

    WAIT = "wait"
    IDLE = "idle"
    DONE = "done"


def astuple_shallow(claim: Claimed) -> tuple[str, Any, Case, int, list[str] | None]:
    """The claim's fields in order (dataclasses.astuple would deep-copy the case)."""
    return claim.kind, claim.item, claim.case, claim.tests, claim.executors


class Campaign:
    """One campaign directory: run() generates, checks, dedups and saves until time or tests run out."""

    def __init__(self, config: CampaignConfig, progress: Progress | None = None) -> None:
        self.cfg = config
        try:  # the directory is ours from here until run() returns (or this object is dropped)
            self.store = CampaignStore(config.out)
            self.store.lock()
        except StoreError as exc:
            raise CampaignError(str(exc)) from None
        self.progress = progress or Progress(interval_s=config.progress_interval_s)
        self.generate = config.generate or _default_generate
        self.steer = config.generate is None or bool(config.families)  # generate can be steered to a family
        self.lock = threading.RLock()  # re-entrant: budget checks count the backlog while a case is claimed
        self.stop = threading.Event()
        self.dirty = False
        self.findings = FindingBook()
        self.described: dict[str, dict[str, Any]] = {}
        self.minimizer = MinimizerLane(self)
        self.new_bugs = 0
        self.backend_s: Counter[str] = Counter()
        self.tests_by_executor: Counter[str] = Counter()
        self.new_findings = 0
        self.internal_errors = 0
        self.lanes_ended = 0  # lanes that ended because their Ray actor was lost for good
        try:
            check_files(self.store)
            self._load()
            self.lanes: Lanes = self._open_lanes()
            families = (self.cfg.families or _base_families()) if self.steer else None
            self.schedule = ScheduleBook(self.store, self.state, self.work, self.cfg.executors, families,
                                         default_block(self.lanes.count, self.cfg.schedule_block), self.lock)
        except BaseException as exc:
            if hasattr(self, "lanes"):
                self.lanes.close()
            self.store.unlock()
            if isinstance(exc, StoreError):
                raise CampaignError(str(exc)) from None
            raise

    def _open_lanes(self) -> Lanes:
        """Local lanes, or Ray lanes started and ready on the cluster (CampaignError if they cannot start)."""
        cfg = self.cfg
        if cfg.ray is None:
            return LocalLanes(max(1, cfg.workers), cfg.executors, cfg.timeout_s, cfg.max_calls_per_worker,
                              self.store.root / "logs", lambda k: lane_env(k, cfg.executors))
        from .ray_lanes import LaneError, RayLanes

        try:
            return RayLanes(cfg.ray, cfg.executors, cfg.workers, cfg.ray_neuron_cores, cfg.timeout_s,
                            cfg.max_calls_per_worker, self.store.root.resolve().name or "campaign", self.progress.warn)
        except LaneError as exc:
            raise CampaignError(str(exc)) from None

    # ------------------------------------------------------------ state

    def _load(self) -> None:
        state = self.store.load_state(known_executors=False)
        gone = gone_executors(state) if state is not None else []
        kept = [e for e in (state or {}).get("executors", []) if e not in gone]
        if gone and not self.cfg.executors_named:
            raise CampaignError(f"{self.store.root / 'state.json'} names executor(s) this precfuzz no longer has: "
                                f"{', '.join(map(repr, gone[:3]))}; name the executors to keep with --executors "
                                f"(say --executors {','.join(kept or self.cfg.executors)}) to resume without them")
        wanted = self.cfg.schedule
        if wanted is not None and wanted not in SCHEDULES:
            raise CampaignError(f"unknown schedule {wanted!r} (known: {', '.join(SCHEDULES)})")
        families = ",".join(sorted(self.cfg.families or ()))
        if state is None:
            self.state = CampaignState(self.cfg.seed, list(self.cfg.executors),
                                       schedule=wanted or self.cfg.schedule_default, schedule_block=0,
                                       families=families)
        else:
            if state.get("version") != STATE_VERSION:
                raise CampaignError(f"{self.store.root}: state version {state.get('version')} is not {STATE_VERSION}")
            if state.get("seed") != self.cfg.seed:
                raise CampaignError(f"{self.store.root} holds a campaign with seed {state.get('seed')}, not "
                                    f"{self.cfg.seed}: resume with the same seed or use another --out")
            self.state = CampaignState.from_json(state)
            if gone:  # the user named the executors to keep: the gone ones are dropped, and that said
                self.state.executors = list(self.cfg.executors)
                self.damaged(f"executor(s) {', '.join(gone[:3])}", self.store.root / "state.json",
                             "named there but no longer in this precfuzz", "dropped: the campaign resumes with "
                             f"--executors {','.join(self.cfg.executors)}")
            if self.state.schedule not in SCHEDULES:
                raise CampaignError(f"{self.store.root}: state.json names an unknown schedule {self.state.schedule!r}")
            if self.state.families != families:  # another family mix would change every case from here on
                raise CampaignError(f"{self.store.root} holds a campaign with --families "
                                    f"{self.state.families or '(every family)'}, not {families or '(every family)'}: "
                                    "resume it with the same --families or use another --out")
            if wanted is not None and wanted != self.state.schedule:
                raise CampaignError(f"{self.store.root} holds a campaign with --schedule {self.state.schedule}, not "
                                    f"{wanted}: resume it with the same schedule (or none) or use another --out")
        self.findings.load(self.store.load_findings(), self.state.counts)
        restore_findings(self.store, self.findings, self.state.counts, self.damaged)
        self.state.counts = self.findings.counts()
        self.state.invocations += 1
        self.book = BugBook(self.store.load_bugs())
        repair_bugs(self.store, self.book, self.findings, self.damaged)
        self.dirty = True
        recover_runs(self.store, self.state, self.damaged)
        self.work = WorkQueue(self.state, sorted(self.cfg.seeds_dir.glob("*.json")) if self.cfg.seeds_dir else [])
        self.stop_reason = ""
        self.t_start = time.monotonic()
        self.elapsed_before = float(self.state.elapsed_s)

    def damaged(self, what: str, path: Path | str | None, problem: str, action: str) -> None:
        """Say that a campaign file is damaged or missing and what was done about it: a warning line and a record in
        damaged-files.jsonl."""
        rec = {"t": round(self.elapsed(), 3) if hasattr(self, "t_start") else 0.0, "what": what,
               "path": str(path) if path is not None else None, "problem": problem, "action": action}
        try:
            self.store.append_record(DAMAGED_FILES, rec)
        except OSError as exc:  # the record is a courtesy: the warning still says it
            problem += f" (and {DAMAGED_FILES} cannot be written: {exc.strerror})"
        self.progress.warn(f"{what}: {problem}; {action} (kept in {DAMAGED_FILES})")

    def elapsed(self) -> float:
        """Campaign seconds across all invocations (first_seen_s is measured on this clock)."""
        return self.elapsed_before + time.monotonic() - self.t_start

    # ------------------------------------------------------------ schedule

    def flush(self, force: bool = False) -> None:
        """Write findings then state, atomically, if anything changed."""
        with self.lock:
            if not (self.dirty or force):
                return
            records = self.findings.in_order()
            bugs = self.book.records()
            self.state.pending = self.work.unfinished()
            self.state.elapsed_s = self.elapsed()
            self.state.counts = self.findings.counts()
            state = self.state.to_json()
            self.dirty = False
        atomic_write(self.store.root / SCHEDULE, dumps(self.schedule.summary()) + "\n")
        self.store.save_findings(records)
        self.store.save_bugs(bugs)
        self.store.save_state(state)

    # ------------------------------------------------------------ work items

    def _budget_left(self) -> str | None:
        if self.stop.is_set():
            return "stopped"
        if self.cfg.time_s is not None and time.monotonic() - self.t_start >= self.cfg.time_s:
            return "time"
        if self.cfg.time_s is not None and self.cfg.minimize and not self.cfg.max_tests:
            # leave the end of the run to minimizing the backend bugs already found: each is worth more than
            # more cases (measured minimization time per bug, 30 s until one is measured)
            left = self.cfg.time_s - (time.monotonic() - self.t_start)
            if left < self.minimizer.backlog() * (self.minimizer.minimize_s_mean() + 5.0):
                return MINIMIZING
        if self.cfg.max_tests is not None and self.state.tests + self.work.reserved >= self.cfg.max_tests:
            return "max-tests"
        return None

    def _next_item(self) -> Claimed | NoClaim:
        """Claim the next case (seed files first, then unfinished indices, then new ones) and reserve its tests.

        Cases are made under the lock, in order, so a --max-tests bound selects the same cases every run. With
        the adaptive schedule the case's family and executors come from its block's plan; WAIT when that plan
        waits for earlier blocks to finish; IDLE while the end of the run is left to the minimizer (fuzzing goes
        on once its backlog is done, if time is left); DONE when the run's budget is spent.
        """
        with self.lock:
            reason = self._budget_left()
            if reason:
                return NoClaim.IDLE if reason == MINIMIZING else NoClaim.DONE
            executors: list[str] | None = None
            kind, item = self.work.peek()
            if kind == "seed":
                case = load_case(item)
            else:
                if self.schedule.adaptive:
                    plan = self.schedule.plan_of(item)
                    if plan is None:
                        return NoClaim.WAIT
                    family = plan.assignments[item % self.schedule.block].family
                    case = self.generate(self.cfg.seed, item, [family]) if self.steer and family else \
                        self.generate(self.cfg.seed, item)
                    executors = self.schedule.planner.executors_for(plan, item, str(case.meta.get("family", "")))
                else:
                    case = self.generate(self.cfg.seed, item)
            tests = len(self.cfg.executors if executors is None else executors) * len(case.input_sets)
            if self.cfg.max_tests is not None and self.state.tests + self.work.reserved + tests > self.cfg.max_tests:
                self.stop_reason = "max-tests"
                return NoClaim.DONE
            self.work.take(kind, item, tests)
            self.dirty = True
            return Claimed(kind, item, case, tests, executors)

    def _requeue(self, kind: str, item: Any, reserved: int) -> None:
        """Put a claimed case back (its lane was lost before it finished): the next claim takes it again."""
        with self.lock:
            self.work.put_back(kind, item, reserved)
            self.dirty = True

    def _items(self, lane: int = 0) -> Iterator[Claimed]:
        """Cases for one lane. Local lanes after the first yield their core to the minimizer while backend bugs
        wait for it: a new bug is worth more than more cases that mostly find known ones. (Ray lanes do not:
        the minimizer runs on the driver's machine, not on theirs.)"""
        local = self.cfg.ray is None
        while True:
            while (local and lane > 0 and self.cfg.minimize and self.minimizer.backlog() and not self.stop.is_set()
                   and self._budget_left() is None):
                time.sleep(0.5)
            claim = self._next_item()
            if claim is NoClaim.WAIT:  # the case's block is planned from earlier blocks still running on other lanes
                time.sleep(0.05)
            elif claim is NoClaim.IDLE:  # the minimizer has the rest of the run for the bugs found; it may finish early
                time.sleep(1.0)
            elif claim is NoClaim.DONE:
                return
            else:
                yield claim

    # ------------------------------------------------------------ lanes

    def _lane(self, lane: int) -> None:
        runner = self.lanes.open(lane)
        journal = self.store.journal()  # a case's rows are written here before its tests are counted
        try:
            for kind, item, case, reserved, executors in map(astuple_shallow, self._items(lane)):
                label = f"seed:{item.name}" if kind == "seed" else str(item)
                try:
                    result = runner.check(case, executors)
                except LaneLost as exc:
                    self._requeue(kind, item, reserved)
                    if not self._lane_lost(lane, label, str(exc), runner):
                        break
                    continue
                except Exception as exc:  # noqa: BLE001 - precfuzz's own bug on one case must not end the campaign
                    result = self._internal_error(label, case, exc)
                journal.append(self._rows(result, label))
                keys = case_keys(result.findings, result.outcomes)
                for finding in result.findings:
                    self._handle(finding, keys[finding.signature], result, runner)
                if kind == "index":
                    self.schedule.record(item, result, keys)
                with self.lock:
                    self.work.finish(kind, item, reserved)
                    self.state.tests += sum(len(v) for v in result.outcomes.values())
                    self.state.cases += 1
                    for name, secs in result.seconds.items():
                        self.backend_s[name] += sum(compile_seconds(o, k) + o.run_s
                                                    for k, o in enumerate(result.outcomes[name]))
                        self.tests_by_executor[name] += len(result.outcomes[name])
                    for name, spent in result.oracle_backend.items():  # probes, eager policy runs, culprit checks
                        self.backend_s[name] += spent["compile_s"] + spent["run_s"]
                    self.dirty = True
                    self.alive[lane] = runner.alive()
                    self.restarts[lane] = runner.restarts()
                    self.load_s[lane] = runner.load_s()
                if len(journal.rows) >= 500 or time.monotonic() - journal.since > 30:
                    self._seal(journal)
            self._seal(journal)
        finally:
            runner.close()

    def _seal(self, journal: RunsJournal) -> None:
        """Save the state (which counts the journal's rows), then turn the journal into a parquet chunk: a chunk
        never holds a row the saved state does not count."""
        if journal.rows:
            self.flush(force=True)
            journal.seal()

    def _lane_lost(self, lane: int, label: str, why: str, runner: Lane) -> bool:
        """Record a lost lane (its case is already re-queued) and replace it; False when the lane ends."""
        self.alive[lane] = 0
        failed = runner.replace()
        rec = {"t": round(self.elapsed(), 3), "lane": lane, "event": "lost", "item": label, "error": why,
               "replaced": failed is None, "why_not": failed or ""}
        self.store.append_record(LANE_EVENTS, rec)
        self.progress.warn(f"lane {lane} lost its Ray actor ({why[:200]}); case {label} goes back to the queue; "
                           + ("a new actor took over" if failed is None else f"the lane ends: {failed}"))
        if failed is None:
            return True
        with self.lock:
            self.lanes_ended += 1
        return False

    def _internal_error(self, label: str, case: Case, exc: Exception) -> CheckResult:
        """Keep a record of precfuzz failing on a case (internal-errors.jsonl) and go on as if it found nothing."""
        import traceback

        if isinstance(exc, RemoteCheckError):  # raised in a Ray lane: its own line and traceback
            error, tb = exc.error, exc.traceback
        else:
            error = f"{type(exc).__name__}: {exc}"
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        rec = {"item": label, "case_id": case.id, "error": error, "traceback": tb[-4000:],
               "t": round(self.elapsed(), 3)}
        self.store.append_record(INTERNAL_ERRORS, rec)
        with self.lock:
            self.internal_errors += 1
        self.progress.warn(f"internal error on case {label} ({rec['error'][:200]}); kept in {INTERNAL_ERRORS}")
        return CheckResult(case, {}, {}, [])

    def _rows(self, result: CheckResult, label: str) -> list[dict[str, Any]]:
        ops = ",".join(sorted({n.op for n in result.case.graph.nodes}))
        family = str(result.case.meta.get("family", "seed" if label.startswith("seed:") else ""))
        rows = []
        fault = {f.executor: f.ops[0] for f in result.findings if f.oracle == Oracle.ERROR_BOUND and f.ops}
        compiled_by: dict[str, str] = {}  # program -> the executor that compiled it in this case
        for name, outs in result.outcomes.items():
            js = result.judgements.get(name, [])
            for k, o in enumerate(outs):
                mine = [j for j in js if j.input_set == k]
                program = str(o.info.get("program") or "")
                made = compiles(o, k)
                if made and program:
                    compiled_by.setdefault(program, name)
                shared = str(o.info.get("shared_with") or (compiled_by.get(program, "") if program and not made else ""))
                rows.append({
                    "t": round(self.elapsed(), 3), "case": result.case.id, "item": label, "family": family,
                    "ops": ops, "fault_op": fault.get(name, ""), "executor": name, "input_set": k, "status": o.status,
                    "dtype": ",".join(o.dtypes or []), "out_dtype": ",".join(j.dtype for j in mine),
                    "max_ulp": max((j.stats.max_ulp for j in mine), default=float("nan")),
                    "ratio": max((j.stats.ratio for j in mine), default=float("nan")),
                    "compile_s": compile_seconds(o, k), "run_s": o.run_s, "compiles": made,
                    "program": program, "shared_with": "" if shared == name else shared,
                    "oracle_compiles": 0, "oracle_backend_s": 0.0,
                })
        # backend work the oracles spent on the case (probes, eager on policy graphs, culprit checks) goes on the
        # executor's first row, or on the case's first row where that executor ran no test of it
        first = {}
        for row in rows:
            first.setdefault(row["executor"], row)
        for name, spent in result.oracle_backend.items():
            row = first.get(name) or (rows[0] if rows else None)
            if row is not None:
                row["oracle_compiles"] += int(spent["compiles"])
                row["oracle_backend_s"] += spent["compile_s"] + spent["run_s"]
        return rows

    # ------------------------------------------------------------ findings and bugs

    def _handle(self, finding: Finding, key: str, result: CheckResult, pool: Lane | ExecutorPool) -> None:
        """Count a finding into its bug; save a new finding at once (raw), and queue a new bug for minimization."""
        sig = finding.signature
        with self.lock:
            seen_s = self.elapsed()
            new_sig = self.findings.hit(sig)  # a new signature is claimed: its record is saved below
            bug, opened = self.book.add(key, sig, finding.executor, "", finding.kind, finding.backend, finding.ops,
                                        error_family(finding), seen_s, new_sig)
            self.dirty = True
            if not new_sig:
                return
        folder = self.store.root / "findings" / finding.short_id
        try:
            original: Path | None = save_case(result.case, folder / ORIGINAL)
        except OSError as exc:  # the finding is still counted and recorded; only its case file is missing
            original = None
            self.damaged(f"finding {finding.short_id}", exc.filename or folder / ORIGINAL,
                          f"its case cannot be saved ({exc.strerror or exc})", "the finding is recorded without it")
        record = self._save(finding, result.case, pool, folder, seen_s, bug.bug, key, original)
        with self.lock:
            self.findings.put(record)
            self.new_findings += 1
            if opened:
                bug.title = record.get("title", "")
                self.new_bugs += 1
                self.minimizer.put(bug)
            self.dirty = True
        self.flush()

    def _save(self, finding: Finding, case: Case, pool: Lane | ExecutorPool, folder: Path, first_seen: float,
              bug: str, key: str, original: Path | None) -> dict[str, Any]:
        """Write the finding's raw case and its full-oracle script (a model hazard's short script too: what eager
        raises or loses, which the backend's script does not show); return its record (count 1)."""
        hazard = finding.kind == Kind.MODEL_HAZARD
        art = write_finding(folder, case, finding, self.describe(finding.executor, pool),
                            f"{self.cfg.command or 'precfuzz run'}  # finding {finding.short_id}",
                            short=hazard)  # (a gradient's or a training flow's raise: the short one only, always)
        rel = lambda p: str(Path(p).relative_to(self.store.root)) if p else None  # noqa: E731
        rec = {
            "signature": finding.signature, "oracle": finding.oracle, "kind": finding.kind, "executor": finding.executor,
            "variant": finding.variant, "backend": finding.backend, "ops": finding.ops, "dtypes": finding.dtypes,
            "error_class": finding.error_class, "against": finding.against, "ratio": finding.ratio,
            "max_ulp": finding.max_ulp, "message": finding.message, "node": finding.node, "title": art.title,
            "case": rel(art.case), "case_id": case.id, "nodes": len(case.graph.nodes), "repro": rel(art.repro or art.repro_full),
            "report": rel(art.report), "original": rel(original), "count": 1,
            "first_seen_s": round(first_seen, 3), "id": finding.short_id, "bug": bug, "bug_key": key,
            "input_set": finding.input_set,
            "details": jsonable(finding.details),  # the whole evidence: Finding.from_record reads it back
        }
        if finding.details.get("grad") is not None:
            rec["grad"] = finding.details["grad"]  # a gradient finding names its tensor (the op is in `ops`)
        desc = self.described.get(finding.executor, {})
        rec.update(settings=desc.get("settings", {}), versions=desc.get("versions", {}))
        if art.errors:
            rec["save_error"] = "; ".join(art.errors)
        try:  # a copy beside the case: a findings.jsonl lost or cut short is rebuilt from these on resume
            atomic_write(folder / RECORD, dumps(rec) + "\n")
        except OSError as exc:
            rec["save_error"] = "; ".join(filter(None, [rec.get("save_error"), f"{RECORD}: {exc.strerror or exc}"]))
        return rec

    def describe(self, executor: str, pool: Lane | ExecutorPool) -> dict[str, Any]:
        """What an executor is (settings, versions), asked of its pool once per campaign."""
        if executor not in self.described:
            self.described[executor] = pool.describe(executor)
        return self.described[executor]

    # ------------------------------------------------------------ main loop

    def snapshot(self) -> Snapshot:
        """Counters for the progress line."""
        with self.lock:
            live = self.book.live()
            return Snapshot(self.elapsed(), self.state.cases, self.state.tests, self.new_findings,
                            len(self.findings), sum(self.alive), self.n_backend_workers, sum(self.restarts),
                            self.new_bugs, len(live), sum(1 for b in live if b.kind == Kind.BACKEND_BUG),
                            sum(1 for b in live if b.minimized))

    def run(self) -> CampaignSummary:
        """Run until the time or test budget is spent (or stop is set); always leaves a flushed state."""
        try:
            return self._run()
        finally:
            try:
                self.lanes.close()
            finally:
                self.store.unlock()

    def _run(self) -> CampaignSummary:
        """The campaign proper (run() holds the directory lock around it)."""
        n = self.lanes.count
        self.alive = [0] * n
        self.restarts = [0] * n
        self.load_s = [0.0] * n
        made = [create(e) for e in self.cfg.executors]
        self.n_backend_workers = n * len({(x.group, tuple(sorted(x.env().items()))) for x in made if x.isolated})
        cases0, tests0 = self.state.cases, self.state.tests
        errors: list[BaseException] = []

        def lane(k: int) -> None:
            try:
                self._lane(k)
            except BaseException as exc:  # noqa: BLE001 - surfaced after the others stop
                errors.append(exc)
                self.stop.set()

        threads = [threading.Thread(target=lane, args=(k,), name=f"lane-{k}", daemon=True) for k in range(n)]
        fuzzing_done = threading.Event()
        if self.cfg.minimize:
            for bug in self.book.live():  # resumed campaign: finish what an earlier run did not minimize
                if not bug.minimized and not bug.extra.get("minimize_tried"):
                    self.minimizer.put(bug)

            def minimizer() -> None:
                try:
                    self.minimizer.run(fuzzing_done)
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)
                    self.stop.set()

            threads.append(threading.Thread(target=minimizer, name="minimizer", daemon=True))
        for t in threads:
            t.start()
        last_flush = time.monotonic()
        try:
            while any(t.is_alive() for t in threads):
                if not any(t.is_alive() for t in threads[:n]):
                    fuzzing_done.set()
                for t in threads:
                    t.join(timeout=0.5 / len(threads))
                self.progress.update(self.snapshot())
                if time.monotonic() - last_flush >= self.cfg.flush_s:
                    self.flush()
                    last_flush = time.monotonic()
        except KeyboardInterrupt:
            self.stop.set()
            for t in threads:
                t.join()
        if self.lanes_ended == n:
            self.stop_reason = self.stop_reason or "lanes lost"
        stopped_by = self._budget_left() or self.stop_reason or "done"
        self.flush(force=True)
        self.progress.update(self.snapshot(), force=True)
        self.progress.close()
        if errors:
            raise errors[0]
        per_exec = {name: {"tests": float(self.tests_by_executor[name]), "backend_s": float(self.backend_s[name])}
                    for name in self.cfg.executors}
        return CampaignSummary(self.state.cases - cases0, self.state.tests - tests0, len(self.findings),
                               self.new_findings, len(self.book.live()), self.new_bugs, time.monotonic() - self.t_start,
                               float(sum(self.backend_s.values())), per_exec, stopped_by, float(sum(self.load_s)))


def command_line(argv: list[str]) -> str:
    """The command that started this campaign, for repro headers."""
    return "precfuzz " + " ".join(shlex.quote(a) for a in argv)
