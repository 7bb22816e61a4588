"""Fuzz campaigns: parallel lanes of warm executor workers, deduplicated findings saved at once, resumable.

Each lane is a thread owning its own ExecutorPool (its own backend worker processes); lanes share the
generator position, the dedup table and the store under one lock. A new finding is saved at once,
unminimized; one more lane minimizes new findings in order and rewrites their files, so fuzzing never waits
for a minimization (a resumed campaign finishes the ones an earlier run did not get to). Backends run in subprocesses, so the
GIL only serializes generation, the numpy reference and the oracles. The state needed to resume (generator
position, cases handed out but unfinished, counters) is flushed atomically every few seconds and at
every new finding; a case interrupted by `kill -9` is simply run again on resume.
"""

from __future__ import annotations

import queue
import shlex
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from oracles.findings import Finding

from . import report_draft
from .check import Checker, CheckResult
from .executors import create
from .export import render_script
from .ir import Case, load_case, save_case
from .isolation import ExecutorPool
from .minimize import minimize
from .progress import Progress, Snapshot
from .store import CampaignStore, StoreError

STATE_VERSION = 1


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
    timeout_s: float = 120.0
    flush_s: float = 5.0
    progress_interval_s: float = 60.0
    max_calls_per_worker: int = 400
    command: str = ""
    generate: Callable[[int, int], Case] | None = None  # (seed, index) -> Case; default: generators.generate_case


@dataclass
class CampaignSummary:
    """What one invocation did."""

    cases: int
    tests: int
    findings_total: int
    findings_new: int
    elapsed_s: float
    backend_s: float
    per_executor: dict[str, dict[str, float]] = field(default_factory=dict)
    stopped_by: str = ""


def lane_env(lane: int, executors: list[str]) -> dict[str, str]:
    """Per-lane environment: on Neuron, each lane gets its own NeuronCore."""
    if any(n.startswith("neuron") or "neuron" in n for n in executors):
        return {"NEURON_RT_VISIBLE_CORES": str(lane)}
    return {}


def _default_generate(seed: int, index: int) -> Case:
    from generators.graphs import generate_case

    return generate_case(seed, index)


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
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.dirty = False
        self.records: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.claimed: dict[str, int] = {}  # signatures being minimized/saved -> hits meanwhile
        self.described: dict[str, dict[str, Any]] = {}
        self.to_minimize: queue.Queue[str] = queue.Queue()
        self.backend_s: Counter[str] = Counter()
        self.tests_by_executor: Counter[str] = Counter()
        self.new_findings = 0
        try:
            self._load()
        except BaseException as exc:
            self.store.unlock()
            if isinstance(exc, StoreError):
                raise CampaignError(str(exc)) from None
            raise

    # ------------------------------------------------------------ state

    def _load(self) -> None:
        state = self.store.load_state()
        if state is None:
            self.state: dict[str, Any] = {
                "version": STATE_VERSION, "seed": self.cfg.seed, "next_index": 0, "pending": [],
                "seeds_done": [], "cases": 0, "tests": 0, "elapsed_s": 0.0, "counts": {}, "invocations": 0,
                "executors": self.cfg.executors,
            }
        else:
            if state.get("version") != STATE_VERSION:
                raise CampaignError(f"{self.store.root}: state version {state.get('version')} is not {STATE_VERSION}")
            if state.get("seed") != self.cfg.seed:
                raise CampaignError(f"{self.store.root} holds a campaign with seed {state.get('seed')}, not "
                                    f"{self.cfg.seed}: resume with the same seed or use another --out")
            self.state = state
        for rec in self.store.load_findings():
            sig = rec["signature"]
            rec["count"] = max(int(rec.get("count", 1)), int(self.state["counts"].get(sig, 0)))
            self.records[sig] = rec
            self.order.append(sig)
        self.state["counts"] = {s: r["count"] for s, r in self.records.items()}
        self.state["invocations"] = int(self.state.get("invocations", 0)) + 1
        self.todo_pending: list[int] = sorted(int(i) for i in self.state.get("pending", []))
        self.in_flight: set[int] = set()
        seeds = sorted(self.cfg.seeds_dir.glob("*.json")) if self.cfg.seeds_dir else []
        self.todo_seeds = [p for p in seeds if p.name not in set(self.state["seeds_done"])]
        self.reserved = 0  # tests of cases claimed but not finished
        self.stop_reason = ""
        self.t_start = time.monotonic()
        self.elapsed_before = float(self.state.get("elapsed_s", 0.0))

    def elapsed(self) -> float:
        """Campaign seconds across all invocations (first_seen_s is measured on this clock)."""
        return self.elapsed_before + time.monotonic() - self.t_start

    def flush(self, force: bool = False) -> None:
        """Write findings then state, atomically, if anything changed."""
        with self.lock:
            if not (self.dirty or force):
                return
            records = [self.records[s] for s in self.order]
            self.state["pending"] = sorted(self.in_flight | set(self.todo_pending))
            self.state["elapsed_s"] = self.elapsed()
            self.state["counts"] = {s: r["count"] for s, r in self.records.items()}
            state = dict(self.state)
            self.dirty = False
        self.store.save_findings(records)
        self.store.save_state(state)

    # ------------------------------------------------------------ work items

    def _budget_left(self) -> str | None:
        if self.stop.is_set():
            return "stopped"
        if self.cfg.time_s is not None and time.monotonic() - self.t_start >= self.cfg.time_s:
            return "time"
        if self.cfg.max_tests is not None and self.state["tests"] + self.reserved >= self.cfg.max_tests:
            return "max-tests"
        return None

    def _next_item(self) -> tuple[str, Any, Case, int] | None:
        """Claim the next case (seed files first, then unfinished indices, then new ones) and reserve its tests.

        Cases are made under the lock, in order, so a --max-tests bound selects the same cases every run.
        """
        with self.lock:
            if self._budget_left():
                return None
            if self.todo_seeds:
                kind, item = "seed", self.todo_seeds[0]
                case = load_case(item)
            else:
                kind = "index"
                item = self.todo_pending[0] if self.todo_pending else int(self.state["next_index"])
                case = self.generate(self.cfg.seed, item)
            tests = len(self.cfg.executors) * len(case.input_sets)
            if self.cfg.max_tests is not None and self.state["tests"] + self.reserved + tests > self.cfg.max_tests:
                self.stop_reason = "max-tests"
                return None
            if kind == "seed":
                self.todo_seeds.pop(0)
            elif self.todo_pending:
                self.todo_pending.pop(0)
            else:
                self.state["next_index"] = item + 1
            if kind == "index":
                self.in_flight.add(item)
            self.reserved += tests
            self.dirty = True
            return (kind, item, case, tests)

    def _items(self) -> Iterator[tuple[str, Any, Case, int]]:
        while True:
            item = self._next_item()
            if item is None:
                return
            yield item

    # ------------------------------------------------------------ lanes

    def _lane(self, lane: int) -> None:
        env = lane_env(lane, self.cfg.executors)
        log_dir = self.store.root / "logs"
        with ExecutorPool(self.cfg.executors, timeout=self.cfg.timeout_s, max_calls=self.cfg.max_calls_per_worker,
                          log_dir=log_dir, extra_env=env) as pool:
            checker = Checker(pool)
            rows: list[dict[str, Any]] = []
            last_rows = time.monotonic()
            for kind, item, case, reserved in self._items():
                label = f"seed:{item.name}" if kind == "seed" else str(item)
                result = checker.check(case)
                rows += self._rows(result, label)
                for finding in result.findings:
                    self._handle(finding, result, checker, pool)
                with self.lock:
                    self.reserved -= reserved
                    self.state["tests"] += sum(len(v) for v in result.outcomes.values())
                    self.state["cases"] += 1
                    for name, secs in result.seconds.items():
                        self.backend_s[name] += sum(o.compile_s + o.run_s for o in result.outcomes[name][:1]) + \
                            sum(o.run_s for o in result.outcomes[name][1:])
                        self.tests_by_executor[name] += len(result.outcomes[name])
                    if kind == "seed":
                        self.state["seeds_done"].append(item.name)
                    else:
                        self.in_flight.discard(item)
                    self.dirty = True
                    self.alive[lane] = pool.alive()
                    self.restarts[lane] = pool.restarts()
                if len(rows) >= 500 or time.monotonic() - last_rows > 30:
                    self.store.append_runs(rows)
                    rows, last_rows = [], time.monotonic()
            self.store.append_runs(rows)

    def _rows(self, result: CheckResult, label: str) -> list[dict[str, Any]]:
        ops = ",".join(sorted({n.op for n in result.case.graph.nodes}))
        family = str(result.case.meta.get("family", "seed" if label.startswith("seed:") else ""))
        rows = []
        fault = {f.executor: f.ops[0] for f in result.findings if f.oracle == "error-bound" and f.ops}
        for name, outs in result.outcomes.items():
            js = result.judgements.get(name, [])
            for k, o in enumerate(outs):
                mine = [j for j in js if j.input_set == k]
                rows.append({
                    "t": round(self.elapsed(), 3), "case": result.case.id, "item": label, "family": family,
                    "ops": ops, "fault_op": fault.get(name, ""), "executor": name, "input_set": k, "status": o.status,
                    "dtype": ",".join(o.dtypes or []), "out_dtype": ",".join(j.dtype for j in mine),
                    "max_ulp": max((j.stats.max_ulp for j in mine), default=float("nan")),
                    "ratio": max((j.stats.ratio for j in mine), default=float("nan")),
                    "compile_s": o.compile_s if k == 0 else 0.0, "run_s": o.run_s,
                })
        return rows

    # ------------------------------------------------------------ findings

    def _handle(self, finding: Finding, result: CheckResult, checker: Checker, pool: ExecutorPool) -> None:
        """Count a repeat, or save a new finding at once (raw), then minimize it and update its files."""
        sig = finding.signature
        with self.lock:
            if sig in self.records:
                self.records[sig]["count"] += 1
                self.dirty = True
                return
            if sig in self.claimed:
                self.claimed[sig] += 1
                return
            self.claimed[sig] = 1
            first_seen = self.elapsed()
        folder = self.store.root / "findings" / finding.short_id
        save_case(result.case, folder / "original.json")
        record = self._save(finding, result.case, pool, folder, first_seen, None)
        with self.lock:
            record["count"] = self.claimed.pop(sig)
            self.records[sig] = record
            self.order.append(sig)
            self.new_findings += 1
            self.dirty = True
        self.flush()
        if self.cfg.minimize:
            self.to_minimize.put(sig)

    def _minimize_one(self, sig: str, checker: Checker, pool: ExecutorPool) -> None:
        """Minimize a saved finding from its original case and update its files and record."""
        with self.lock:
            rec = dict(self.records[sig])
        budget = self.cfg.minimize_budget_s
        if self.cfg.time_s is not None:
            budget = min(budget, self.cfg.time_s - (time.monotonic() - self.t_start))
        if budget < 5.0:
            return
        folder = self.store.root / "findings" / rec["id"]
        try:
            original = load_case(folder / "original.json")
            hint = f"{sig}|vs:{rec['against']}" if rec.get("against") else sig  # which comparator to run
            # the re-check on fresh workers starts new backends (seconds): only when the campaign has time for it
            fresh = self.cfg.time_s is None or self.cfg.time_s - (time.monotonic() - self.t_start) > budget + 60
            outcome = minimize(original, hint, checker, budget_s=budget, fresh_recheck=fresh)
        except Exception as exc:  # noqa: BLE001 - the raw finding is saved; minimizing is a bonus
            update = {"minimize_error": f"{type(exc).__name__}: {exc}"}
        else:
            if outcome.finding is None:
                update = {"minimized": outcome.summary()}
            else:
                update = self._save(outcome.finding, outcome.case, pool, folder, rec["first_seen_s"], outcome.summary())
                update["minimized_signature"] = outcome.finding.signature
                for key in ("signature", "count", "first_seen_s", "oracle", "executor", "variant", "id"):
                    update.pop(key, None)
        with self.lock:
            self.records[sig].update(update)
            self.dirty = True
        self.flush()

    def _minimizer_lane(self, fuzzing_done: threading.Event) -> None:
        """Minimize new findings one at a time, beside the fuzzing lanes, with a pool of its own."""
        with ExecutorPool(self.cfg.executors, timeout=self.cfg.timeout_s, max_calls=self.cfg.max_calls_per_worker,
                          log_dir=self.store.root / "logs",
                          extra_env=lane_env(max(1, self.cfg.workers), self.cfg.executors)) as pool:
            checker = Checker(pool)
            while True:
                if self.stop.is_set() or (self.cfg.time_s is not None
                                          and time.monotonic() - self.t_start >= self.cfg.time_s):
                    return
                try:
                    sig = self.to_minimize.get(timeout=0.5)
                except queue.Empty:
                    if fuzzing_done.is_set():
                        return
                    continue
                self._minimize_one(sig, checker, pool)

    def _save(self, finding: Finding, case: Case, pool: ExecutorPool, folder: Path, first_seen: float,
              minimized: dict[str, Any] | None) -> dict[str, Any]:
        """Write case.json, repro.py and report.md for a finding; return its record (count 1)."""
        case_path = save_case(case, folder / "case.json")
        repro_path = report_path = None
        describe: dict[str, Any] = {}
        extra: dict[str, Any] = {"minimized": minimized, "original": str(folder / "original.json")}
        try:
            if finding.executor not in self.described:
                self.described[finding.executor] = pool.describe(finding.executor)
            describe = self.described[finding.executor]
            try:
                parts = create(finding.executor).repro_parts(case.graph)
            except NotImplementedError:
                parts = None
            if parts is not None:
                parts = type(parts)(**{**parts.__dict__, "describe": describe})
                set_index = finding.input_set if finding.input_set < len(case.input_sets) else 0
                command = f"{self.cfg.command or 'precfuzz run'}  # finding {finding.short_id}"
                script = render_script(case, parts, command, set_index, report_draft.title(finding))
                repro_path = folder / "repro.py"
                repro_path.write_text(script)
                repro_path.chmod(0o755)
                report_path = folder / "report.md"
                row = {"status": "", "max_abs": finding.details.get("max_abs")}
                report_path.write_text(report_draft.render(case, finding, describe, row, script,
                                                           f"python {repro_path.name}", repro_path.name))
        except Exception as exc:  # noqa: BLE001 - a failing export must not lose the finding
            extra["save_error"] = f"{type(exc).__name__}: {exc}"
        return self._record(finding, case, case_path, repro_path, report_path, first_seen, extra, describe)

    def _record(self, finding: Finding, case: Case, case_path: Path | None, repro: Path | None,
                report: Path | None, first_seen: float, extra: dict[str, Any],
                describe: dict[str, Any] | None = None) -> dict[str, Any]:
        rel = lambda p: str(Path(p).relative_to(self.store.root)) if p else None  # noqa: E731
        rec = {
            "signature": finding.signature, "oracle": finding.oracle, "executor": finding.executor,
            "variant": finding.variant, "ops": finding.ops, "dtypes": finding.dtypes,
            "error_class": finding.error_class, "against": finding.against, "ratio": finding.ratio,
            "max_ulp": finding.max_ulp, "message": finding.message, "case": rel(case_path),
            "case_id": case.id, "nodes": len(case.graph.nodes), "repro": rel(repro), "report": rel(report),
            "count": 1, "first_seen_s": round(first_seen, 3), "id": finding.short_id,
            "settings": (describe or {}).get("settings", {}), "versions": (describe or {}).get("versions", {}),
        }
        rec.update({k: (rel(v) if k == "original" and v else v) for k, v in extra.items()})
        return rec

    # ------------------------------------------------------------ main loop

    def snapshot(self) -> Snapshot:
        """Counters for the progress line."""
        with self.lock:
            return Snapshot(self.elapsed(), self.state["cases"], self.state["tests"], self.new_findings,
                            len(self.records), sum(self.alive), self.n_backend_workers, sum(self.restarts))

    def run(self) -> CampaignSummary:
        """Run until the time or test budget is spent (or stop is set); always leaves a flushed state."""
        try:
            return self._run()
        finally:
            self.store.unlock()

    def _run(self) -> CampaignSummary:
        """The campaign proper (run() holds the directory lock around it)."""
        n = max(1, self.cfg.workers)
        self.alive = [0] * n
        self.restarts = [0] * n
        made = [create(e) for e in self.cfg.executors]
        self.n_backend_workers = n * len({(x.group, tuple(sorted(x.env().items()))) for x in made if x.isolated})
        cases0, tests0 = self.state["cases"], self.state["tests"]
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
            for rec in self.records.values():  # resumed campaign: finish what an earlier run did not minimize
                if rec.get("minimized") is None and "minimize_error" not in rec:
                    self.to_minimize.put(rec["signature"])

            def minimizer() -> None:
                try:
                    self._minimizer_lane(fuzzing_done)
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
        stopped_by = self._budget_left() or self.stop_reason or "done"
        self.flush(force=True)
        self.progress.update(self.snapshot(), force=True)
        self.progress.close()
        if errors:
            raise errors[0]
        per_exec = {name: {"tests": float(self.tests_by_executor[name]), "backend_s": float(self.backend_s[name])}
                    for name in self.cfg.executors}
        return CampaignSummary(self.state["cases"] - cases0, self.state["tests"] - tests0, len(self.records),
                               self.new_findings, time.monotonic() - self.t_start, float(sum(self.backend_s.values())),
                               per_exec, stopped_by)


def command_line(argv: list[str]) -> str:
    """The command that started this campaign, for repro headers."""
    return "precfuzz " + " ".join(shlex.quote(a) for a in argv)
