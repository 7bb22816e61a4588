"""The adaptive schedule: a bandit over (op family x executor) arms that spends tests where new bugs come from.

Pure logic, no I/O (the campaign driver, fuzzer.campaign.runner, stores the per-case results and calls this).

An arm is (family of the case, executor). A case's result says which executors ran it and which finding signatures and bug
keys (oracles.bugs.case_keys) each found; a key no earlier case had is worth 1 to the arms
that found it (shared between them), a new signature of a known key SIGNATURE_REWARD. Results are folded in
blocks of BLOCK case indices, in index order, so what is "new" does not depend on which lane finished first.

Determinism: the plan of block k (for each of its cases: the family the generator is steered to, and one
uniform number per executor) is drawn from random.Random(seed, k), and the weights it uses come only from
the folded results of blocks <= k - LAG. A lane that wants a case of block k waits until those blocks are all
finished (a campaign's blocks are at least twice its lanes, so lanes rarely wait). So the schedule is a pure function of (seed, results of earlier blocks), results are a pure function
of the cases, and lane count, timing, interruption and resume change nothing (on resume the stored results
are folded again).

Weights: an arm's rate of reward per test is (rewards + PRIOR_REWARD) / (tests + PRIOR_TESTS) over its
recent tests (both decayed by DECAY per block, so an arm that went quiet is retried as its counts fade). An
executor runs a case of family f with probability rate(f, e) / (best rate over all arms), never below
EXECUTOR_FLOOR (pinned executors, the semantic oracle torch/eager among them, always run). The generator is
steered to family f with probability proportional to its base weight (generators.graphs.FAMILIES) times its
own reward rate per case relative to the mean, never below FAMILY_FLOOR. Before LAG blocks have finished,
every arm is at the prior: every executor runs, families keep their base weights.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

SCHEDULES = ("adaptive", "uniform")
BLOCK = 8  # case indices per planning block (at least; a campaign of many lanes takes 2 per lane)
LAG = 2  # block k is planned from the results of blocks <= k - LAG
DECAY = 0.9  # per block: the weight of older results (the "recent window" is ~ BLOCK / (1 - DECAY) cases)
PRIOR_REWARD = 1.0  # an untested arm counts as PRIOR_REWARD new bugs in PRIOR_TESTS tests (optimism)
PRIOR_TESTS = 8.0
SIGNATURE_REWARD = 0.2  # a new finding signature of a bug key already seen
EXECUTOR_FLOOR = 0.25  # each executor runs at least 1 case in 4 of every family
FAMILY_FLOOR = 0.04  # each family gets at least 4% of the cases (below every base share, so the start is unchanged)


@dataclass(frozen=True)
class CaseResult:
    """What one finished case (by index) told the schedule: its family, the executors run, and what each found."""

    index: int
    family: str
    executors: tuple[str, ...]
    found: Mapping[str, tuple[tuple[str, str], ...]]  # executor -> (finding signature, bug key) of its findings

    def to_json(self) -> dict[str, Any]:
        """The record arm-results.jsonl holds."""
        return {"index": self.index, "family": self.family, "executors": list(self.executors),
                "found": {e: [list(p) for p in v] for e, v in self.found.items()}}

    @classmethod
    def from_json(cls, rec: Mapping[str, Any]) -> "CaseResult":
        """A record read back (valid_result checked it)."""
        return cls(int(rec["index"]), str(rec["family"]), tuple(rec["executors"]),
                   {e: tuple((str(s), str(k)) for s, k in v) for e, v in rec["found"].items()})


def valid_result(rec: Any) -> bool:
    """True for a well-formed arm-results.jsonl record."""
    def pairs(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                           for p in v)

    return (isinstance(rec, dict) and isinstance(rec.get("index"), int) and not isinstance(rec["index"], bool)
            and rec["index"] >= 0 and isinstance(rec.get("family"), str) and isinstance(rec.get("executors"), list)
            and all(isinstance(e, str) for e in rec["executors"]) and isinstance(rec.get("found"), dict)
            and all(isinstance(e, str) and pairs(v) for e, v in rec["found"].items()))


@dataclass
class Stats:
    """Folded results: decayed and total tests and rewards per arm and per family, and the keys seen so far."""

    blocks: int = 0  # blocks folded (0 .. blocks-1)
    tests: dict[tuple[str, str], float] = field(default_factory=dict)  # decayed
    rewards: dict[tuple[str, str], float] = field(default_factory=dict)
    family_cases: dict[str, float] = field(default_factory=dict)
    family_rewards: dict[str, float] = field(default_factory=dict)
    total_tests: dict[tuple[str, str], int] = field(default_factory=dict)  # undecayed, for the report
    total_rewards: dict[tuple[str, str], float] = field(default_factory=dict)
    new_keys: dict[tuple[str, str], int] = field(default_factory=dict)
    seen_keys: set[str] = field(default_factory=set)
    seen_signatures: set[str] = field(default_factory=set)

    def fold(self, block: Sequence[CaseResult]) -> None:
        """Fold one whole block (its results in index order) after decaying what came before."""
        for table in (self.tests, self.rewards, self.family_cases, self.family_rewards):
            for k in table:
                table[k] *= DECAY
        for r in sorted(block, key=lambda r: r.index):
            f = r.family
            self.family_cases[f] = self.family_cases.get(f, 0.0) + 1.0
            for e in r.executors:
                self.tests[(f, e)] = self.tests.get((f, e), 0.0) + 1.0
                self.total_tests[(f, e)] = self.total_tests.get((f, e), 0) + 1
            gained: dict[str, list[str]] = {}  # new key -> executors that found it in this case
            reward: dict[str, float] = {}
            for e, pairs in r.found.items():
                for sig, key in dict.fromkeys(pairs):
                    if key not in self.seen_keys:
                        if e not in gained.setdefault(key, []):
                            gained[key].append(e)
                    elif sig not in self.seen_signatures:
                        reward[e] = reward.get(e, 0.0) + SIGNATURE_REWARD
            for key, finders in gained.items():
                for e in finders:
                    reward[e] = reward.get(e, 0.0) + 1.0 / len(finders)
                    self.new_keys[(f, e)] = self.new_keys.get((f, e), 0) + 1
            for e, v in reward.items():
                self.rewards[(f, e)] = self.rewards.get((f, e), 0.0) + v
                self.total_rewards[(f, e)] = self.total_rewards.get((f, e), 0.0) + v
                self.family_rewards[f] = self.family_rewards.get(f, 0.0) + v
            self.seen_keys.update(gained)
            for pairs in r.found.values():
                self.seen_signatures.update(sig for sig, _ in pairs)
        self.blocks += 1


def rate(rewards: float, tests: float) -> float:
    """Posterior-mean reward per test with the optimistic prior."""
    return (rewards + PRIOR_REWARD) / (tests + PRIOR_TESTS)


def with_floor(weights: Mapping[str, float], floor: float) -> dict[str, float]:
    """Normalized weights, each at least `floor` (the others scaled down to make room)."""
    names = list(weights)
    if not names:
        return {}
    floor = min(floor, 1.0 / len(names))
    fixed: set[str] = set()
    while True:
        free = [n for n in names if n not in fixed]
        room = 1.0 - floor * len(fixed)
        total = sum(max(weights[n], 0.0) for n in free)
        out = {n: floor for n in fixed}
        for n in free:
            out[n] = room * (max(weights[n], 0.0) / total if total > 0 else 1.0 / len(free))
        low = [n for n in free if out[n] < floor - 1e-12]
        if not low:
            return {n: out[n] for n in names}  # the input's order: plans draw from the cumulative weights in it
        fixed.update(low)


@dataclass(frozen=True)
class Assignment:
    """One case's part of a plan: the family to steer the generator to (None: its own choice), and the draws."""

    family: str | None
    draws: tuple[float, ...]  # one uniform number per executor (the planner's order)


@dataclass(frozen=True)
class BlockPlan:
    """One block's plan: per case an assignment, and the run probabilities its executor choice uses."""

    block: int
    assignments: tuple[Assignment, ...]
    probabilities: Mapping[tuple[str, str], float]  # (family, executor) -> run probability
    unseen: Mapping[str, float]  # executor -> run probability for a family no result has shown yet
    family_weights: Mapping[str, float]


class Planner:
    """Plans blocks of cases for one campaign (seed, executors, families); pure given the folded Stats."""

    def __init__(self, seed: int, executors: Sequence[str], families: Mapping[str, float] | None = None,
                 pinned: Iterable[str] = (), requires: Mapping[str, str] | None = None,
                 block_size: int = BLOCK) -> None:
        self.seed = seed
        self.executors = list(executors)
        self.families = dict(families or {})  # family -> base weight; empty: the generator is not steered
        self.pinned = set(pinned) & set(self.executors)
        self.requires = {e: b for e, b in (requires or {}).items() if e in self.executors and b in self.executors}
        self.block_size = block_size

    # ---- weights

    def arm_families(self, stats: Stats) -> list[str]:
        """Families the arms range over: the steerable ones and any seen in results."""
        return list(dict.fromkeys([*self.families, *sorted({f for f, _ in stats.tests})]))

    def best_rate(self, stats: Stats) -> float:
        """The best arm's rate (untested arms are at the prior)."""
        fams = self.arm_families(stats) or [""]
        return max(rate(stats.rewards.get((f, e), 0.0), stats.tests.get((f, e), 0.0))
                   for f in fams for e in self.executors)

    def run_probability(self, stats: Stats, family: str, executor: str, best: float | None = None) -> float:
        """How likely `executor` runs a case of `family` under these stats."""
        if executor in self.pinned:
            return 1.0
        best = self.best_rate(stats) if best is None else best
        r = rate(stats.rewards.get((family, executor), 0.0), stats.tests.get((family, executor), 0.0))
        return min(1.0, max(EXECUTOR_FLOOR, r / best))

    def family_weights(self, stats: Stats) -> dict[str, float]:
        """Steering weights (normalized, floored) of the families."""
        if not self.families:
            return {}
        rates = {f: rate(stats.family_rewards.get(f, 0.0), stats.family_cases.get(f, 0.0)) for f in self.families}
        mean = sum(rates.values()) / len(rates)
        return with_floor({f: self.families[f] * rates[f] / mean for f in self.families}, FAMILY_FLOOR)

    # ---- plans

    def plan(self, block: int, stats: Stats) -> BlockPlan:
        """Block `block`'s plan from `stats` (the folded blocks <= block - LAG), drawn from random.Random((seed, block))."""
        rng = random.Random(f"precfuzz-schedule:{self.seed}:{block}")
        weights = self.family_weights(stats)
        names, cum = list(weights), []
        acc = 0.0
        for n in names:
            acc += weights[n]
            cum.append(acc)
        out = []
        for _ in range(self.block_size):
            family = None
            if names:
                u = rng.random() * acc
                family = next((n for n, c in zip(names, cum) if u < c), names[-1])
            out.append(Assignment(family, tuple(rng.random() for _ in self.executors)))
        best = self.best_rate(stats)
        probs = {(f, e): self.run_probability(stats, f, e, best) for f in self.arm_families(stats) for e in self.executors}
        unseen = {e: self.run_probability(Stats(), "", e, best) for e in self.executors}
        return BlockPlan(block, tuple(out), probs, unseen, weights)

    def executors_for(self, plan: BlockPlan, index: int, family: str) -> list[str]:
        """The executors that run case `index` of the plan's block, whose generated case has family `family`.

        Pinned executors always run; an executor a chosen one requires (tvm/default beside another TVM pipeline,
        which decides whether a bug is pipeline-specific) runs too; at least one unpinned executor runs.
        """
        draws = plan.assignments[index % self.block_size].draws
        probs = [plan.probabilities.get((family, e), plan.unseen[e]) for e in self.executors]
        chosen = {e for e, u, p in zip(self.executors, draws, probs) if u < p}
        if not chosen - self.pinned and len(self.executors) > len(self.pinned):
            chosen.add(min((u / p, e) for e, u, p in zip(self.executors, draws, probs) if e not in self.pinned)[1])
        chosen |= {self.requires[e] for e in chosen if e in self.requires}
        return [e for e in self.executors if e in chosen]

    def summary(self, stats: Stats) -> dict[str, Any]:
        """Per arm and per family: tests, rewards, new keys, and the weights the next block would use."""
        best = self.best_rate(stats)
        fams = self.arm_families(stats)
        weights = self.family_weights(stats)
        arms = []
        for f in fams:
            for e in self.executors:
                arms.append({"family": f, "executor": e, "tests": stats.total_tests.get((f, e), 0),
                             "new_keys": stats.new_keys.get((f, e), 0),
                             "reward": round(stats.total_rewards.get((f, e), 0.0), 3),
                             "p_run": round(self.run_probability(stats, f, e, best), 4)})
        families = [{"family": f, "tests": sum(stats.total_tests.get((f, e), 0) for e in self.executors),
                     "reward": round(sum(stats.total_rewards.get((f, e), 0.0) for e in self.executors), 3),
                     "weight": round(weights[f], 4) if f in weights else None} for f in fams]
        return {"blocks_folded": stats.blocks, "bug_keys_seen": len(stats.seen_keys), "families": families,
                "arms": arms}
