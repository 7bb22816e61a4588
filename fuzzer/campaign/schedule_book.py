"""The schedule's bookkeeping in a campaign: the planner, each finished case's result (arm-results.jsonl and in
memory), the blocks folded into the statistics, and the plans of the blocks to come (fuzzer.campaign.schedule
holds the policy itself). It takes no lock of its own: the campaign's lock guards it (`lock`)."""

from __future__ import annotations

import threading
from typing import Any

from oracles.vocabulary import ExecutorName

from ..check import SEMANTIC_ORACLE, CheckResult
from ..executors import ORACLE_EXECUTORS
from .schedule import BLOCK, LAG, BlockPlan, CaseResult, Planner, Stats, valid_result
from .state import CampaignState
from .store import ARM_RESULTS, CampaignStore, StoreError
from .work_queue import WorkQueue

MAX_LOST = 1_000_000  # finished cases whose results may be missing from arm-results.jsonl (each is run again)


def lost_indices(results: dict[int, Any], next_index: int, pending: set[int], where: str = "state.json") -> list[int]:
    """Indices below next_index with neither a result nor a pending run, counted before any is listed: the
    work is O(results + pending + lost), never O(next_index); StoreError when more than MAX_LOST are lost."""
    known = len(results) + sum(1 for i in pending if i not in results)  # all below next_index
    missing = next_index - known
    if missing > MAX_LOST:
        raise StoreError(f"{where} is damaged: next_index {next_index} but only {known} case results are kept "
                         f"({ARM_RESULTS}); move state.json away to start the campaign over (findings.jsonl is kept)")
    if missing <= 0:
        return []
    lost, i, taken = [], 0, sorted(set(results) | pending)
    for k in taken + [next_index]:  # the gaps between kept indices
        lost.extend(range(i, k))
        i = k + 1
    return lost


class ScheduleBook:
    """The planner, the finished cases' results and the block plans of one campaign."""

    def __init__(self, store: CampaignStore, state: CampaignState, work: WorkQueue, executors: list[str],
                 families: dict[str, float] | None, block: int, lock: threading.RLock) -> None:
        """Read back the results of finished case indices (adaptive: a lost one is queued to run again, later
        blocks are planned from it) and fold them. `block` is the block size of a new campaign (a resume keeps
        the one state.json holds)."""
        self.store, self.state, self.lock = store, state, lock
        self.steered = families is not None  # the generator is steered to the plan's family
        if state.schedule_block < 1:
            state.schedule_block = block
        self.block = state.schedule_block
        tested = [e for e in executors if e not in ORACLE_EXECUTORS]
        requires = {e: base for e in tested if (base := ExecutorName.parse(e).base) is not None}
        self.planner = Planner(state.seed, tested, families, pinned=[SEMANTIC_ORACLE], requires=requires,
                               block_size=self.block)
        self.adaptive = state.schedule == "adaptive"
        self.stats = Stats()
        self.plans: dict[int, BlockPlan] = {}
        pending = set(work.pending)
        self.results: dict[int, CaseResult] = {}
        for rec in store.load_records(ARM_RESULTS, valid_result):
            i = rec["index"]
            if i < state.next_index and i not in pending:
                self.results[i] = CaseResult.from_json(rec)  # a case run twice (killed before a flush): the last
        if self.adaptive:
            work.add_pending(lost_indices(self.results, state.next_index, pending, str(store.root / "state.json")))
        self.fold()

    def plan_of(self, index: int) -> BlockPlan | None:
        """The plan of the block holding case `index` (adaptive), None while earlier blocks are still running."""
        return self.plans.get(index // self.block)

    def fold(self) -> None:
        """Fold every whole block of finished cases not folded yet, in block order, planning the block each one
        completes the data of (block k is planned from blocks <= k - LAG); call under the lock."""
        if self.adaptive and self.stats.blocks == 0 and not self.plans:
            for k in range(LAG):
                self.plans[k] = self.planner.plan(k, self.stats)
        while True:
            first = self.stats.blocks * self.block
            block = [self.results.get(i) for i in range(first, first + self.block)]
            if any(r is None for r in block):
                return
            self.stats.fold([r for r in block if r is not None])
            self.plans.pop(self.stats.blocks - 1, None)  # every case of it is done
            if self.adaptive:
                self.plans[self.stats.blocks + LAG - 1] = self.planner.plan(self.stats.blocks + LAG - 1, self.stats)

    def record(self, index: int, result: CheckResult, keys: dict[str, str]) -> None:
        """Keep a finished case's result (`keys`: its findings' bug keys): arm-results.jsonl first, then in memory."""
        found: dict[str, list[tuple[str, str]]] = {}
        for f in result.findings:
            found.setdefault(f.executor, []).append((f.signature, keys[f.signature]))
        family = str(result.case.meta.get("family", ""))
        rec = CaseResult(index, family, tuple(result.outcomes), {e: tuple(v) for e, v in found.items()})
        self.store.append_record(ARM_RESULTS, rec.to_json(), sync=False)  # a lost line re-runs its case
        with self.lock:
            self.results[index] = rec
            self.fold()

    def summary(self) -> dict[str, Any]:
        """What schedule.json holds."""
        with self.lock:
            return {"schedule": self.state.schedule, "block": self.block, "lag": LAG, "steered": self.steered,
                    "cases_recorded": len(self.results), **self.planner.summary(self.stats)}


def default_block(lanes: int, wanted: int | None) -> int:
    """A new campaign's block size: `wanted`, else BLOCK, at least two cases per lane."""
    return max(1, int(wanted or max(BLOCK, 2 * lanes)))
