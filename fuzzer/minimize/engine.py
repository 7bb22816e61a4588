"""The minimizer: shrink a failing case to the smallest graph, shapes, dtypes and values that still show its finding.

The algorithm is a greedy, pass-based shrinker in the style of Hypothesis's ``Shrinker`` and PyTorch's
FX minifier. The one thing it preserves is the *target*: the signature of the finding (oracle, executor,
ops and dtypes at fault, error class, and the executor it was compared against). A case is *interesting*
when a check of it, run on only the executors the target needs, yields a finding that matches the target
(``target.Target.matches``: exact for localized findings; for crash/timeout and other whole-graph
signatures, same oracle/executor/error class with the op and dtype sets allowed to shrink).

Every case has a *size* (``size.Size``), a tuple of natural numbers compared lexicographically: nodes,
outputs, inputs, operands, elements, dims, distinct dtypes, dtype narrowness, input sets, overrides,
value complexity, explicit attributes. A *pass* is a pure, deterministic function from a case to candidate cases in a fixed
order; it only offers candidates that type-check and are strictly smaller than the case it was given
(``candidates.offer``). The minimizer accepts a candidate only when it is interesting, so every accepted
step strictly decreases the size. Lexicographic order on fixed-length tuples of naturals is well-founded,
hence the search terminates whatever the passes do, and a pass that made no progress cannot succeed again
on the same case: it has nothing smaller left to offer that was not already refuted (refutations are cached
by case id, so asking again costs nothing).

The loop runs the passes in ``passes.PASSES`` order, structure first (outputs, truncation to an
intermediate, bypassing nodes, replacing small subgraphs by their recorded values, optional operands,
unused inputs, input sets), then shapes (dims to 1, halved, tied dims moved together, size-1 dims
dropped), dtypes (merged, widened), values (constants, alternating patterns, rounded parameters) and
attributes (back to the op's defaults).
Within a pass the first interesting candidate is accepted, the pass is asked again about the new case and
the scan resumes at the index where it stopped (the candidates before it were just refuted in a slightly
larger context; they get another chance in the next round). Rounds repeat until a whole round accepts
nothing: the result is then 1-minimal with respect to every pass. Structural passes come first because
they make every later check cheaper.

The search is bounded by a budget (seconds and checks); when it runs out the smallest interesting case so
far is the result. Given the same predicate answers the search is deterministic; with a time budget the
point where it stops depends on the machine. Warm workers can carry state between checks, so the result
is re-checked from scratch on a fresh pool of worker processes; if it does not reproduce there, the last
few accepted cases and finally the original are tried, and the first one that reproduces is returned.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from oracles.findings import Finding
from oracles.vocabulary import ErrorClass, Kind

from ..check import SEMANTIC_ORACLE, Checker, pin_passes
from ..ir import Case, canonical, infer
from ..isolation import ExecutorPool
from .candidates import Pass
from .graph_passes import isolate
from .passes import PASSES
from .size import Size, size
from .target import Predicate, Target

FALLBACKS = 3  # accepted cases re-checked (newest first) when the final one does not reproduce on fresh workers


class MinimizeError(ValueError):
    """The case cannot be minimized (no finding to preserve, executor missing from the pool)."""


@dataclass(frozen=True)
class Step:
    """One accepted shrink step."""

    pass_name: str
    label: str
    size: Size
    case: Case


@dataclass
class MinimizeResult:
    """The minimized case, its finding from a fresh re-check, and what the search did."""

    case: Case
    finding: Finding | None  # the re-checked finding on `case` (None when nothing reproduced)
    original: Case
    target: Target
    confirmed: bool  # `case` showed the target on its final check (fresh workers unless fresh_recheck=False)
    steps: list[Step] = field(default_factory=list)
    tried: int = 0  # candidates asked about (cache hits included)
    checks: int = 0  # checks that ran executors
    cache_hits: int = 0
    seconds: float = 0.0  # search and re-check
    check_s: float = 0.0  # seconds inside the search's checks
    static_refutes: int = 0  # candidates refuted without a check (Predicate.admits)
    exhausted: bool = False  # the budget ran out before a fixpoint
    note: str = ""
    worst: Finding | None = None  # the worst manifestation the search saw (inf/nan over a ratio), with its case size
    worst_elements: int = 0

    @property
    def accepted(self) -> int:
        """Number of accepted steps."""
        return len(self.steps)

    def summary(self) -> dict[str, Any]:
        """What was removed and what it cost, as a JSON-able dict."""
        before, after = _stats(self.original), _stats(self.case)
        removed = Counter(n.op for n in self.original.graph.nodes) - Counter(n.op for n in self.case.graph.nodes)
        out: dict[str, Any] = {k: [before[k], after[k]] for k in before}
        out.update(
            signature=self.target.signature, final_signature=self.finding.signature if self.finding else None,
            confirmed=self.confirmed, ops_removed=sorted(removed.elements()), accepted=self.accepted,
            tried=self.tried, checks=self.checks, cache_hits=self.cache_hits, seconds=round(self.seconds, 2),
            check_s=round(self.check_s, 2), static_refutes=self.static_refutes,
            exhausted=self.exhausted, passes=dict(Counter(s.pass_name for s in self.steps)),
            steps=[f"{s.pass_name}: {s.label}" for s in self.steps], case_id=self.case.id,
        )
        if self.note:
            out["note"] = self.note
        return out

    def lines(self) -> list[str]:
        """The summary as printed lines."""
        s = self.summary()
        removed = f" (removed {', '.join(s['ops_removed'])})" if s["ops_removed"] else ""
        lines = [f"target {s['signature']}",
                 f"  nodes {s['nodes'][0]} -> {s['nodes'][1]}{removed}",
                 f"  elements {s['elements'][0]} -> {s['elements'][1]}; inputs {s['inputs'][0]} -> {s['inputs'][1]}; "
                 f"outputs {s['outputs'][0]} -> {s['outputs'][1]}; input sets {s['input_sets'][0]} -> {s['input_sets'][1]}; "
                 f"dtypes {s['dtypes'][0]} -> {s['dtypes'][1]}",
                 f"  steps accepted {s['accepted']} / tried {s['tried']} ({s['checks']} checks, {s['cache_hits']} cached); "
                 f"{s['seconds']:.1f} s{' (budget exhausted)' if s['exhausted'] else ''}",
                 f"  fresh re-check: {'reproduces ' + s['final_signature'] if s['confirmed'] else 'NOT reproduced'}"]
        if self.note:
            lines.append(f"  note: {self.note}")
        return lines


def _stats(case: Case) -> dict[str, Any]:
    typed = infer(case.graph)
    dtypes = sorted({v.dtype for v in typed.values.values() if v.kind != "scalar"})
    return {"nodes": len(case.graph.nodes), "inputs": len(case.graph.inputs), "outputs": len(case.graph.outputs),
            "elements": size(case).elements, "input_sets": len(case.input_sets), "dtypes": ",".join(dtypes)}


@dataclass
class Search:
    """Greedy pass-based shrinking of one case under any predicate (deterministic given its answers)."""

    current: Case
    interesting: Callable[[Case], bool]
    budget_spent: Callable[[], bool] = lambda: False
    progress: Callable[[str], None] | None = None
    steps: list[Step] = field(default_factory=list)
    tried: int = 0
    exhausted: bool = False
    refuted: set = field(default_factory=set)  # (pass, label, structure) of refuted candidates

    def out_of_budget(self) -> bool:
        """True (for good) once the budget is spent."""
        self.exhausted = self.exhausted or self.budget_spent()
        return self.exhausted

    def run_pass(self, shrink: Pass) -> bool:
        """Run one pass to its fixpoint (resuming after each accepted step); True if it accepted anything."""
        start, accepted = 0, False
        while not self.exhausted:
            for index, cand in enumerate(shrink(self.current)):
                if index < start:
                    continue
                memo = (shrink.__name__, cand.label, structure(self.current))
                if memo in self.refuted:
                    continue  # refuted before on a case that differed only in values or attributes
                if self.out_of_budget():
                    return accepted
                self.tried += 1
                if not self.interesting(cand.case):
                    self.refuted.add(memo)
                else:
                    self.current = cand.case
                    step = Step(shrink.__name__, cand.label, size(cand.case), cand.case)
                    self.steps.append(step)
                    if self.progress:
                        self.progress(f"  {step.pass_name}: {step.label} -> {len(cand.case.graph.nodes)} nodes, "
                                      f"{step.size.elements} elements")
                    start, accepted = index, True
                    break
            else:
                return accepted
        return accepted

    def run(self, passes: Sequence[Pass] = PASSES) -> "Search":
        """Rounds of every pass until a round accepts nothing or the budget runs out."""
        while not self.exhausted:
            progressed = False
            for shrink in passes:
                progressed |= self.run_pass(shrink)
                if self.exhausted:
                    return self
            if not progressed:
                return self
        return self


def structure(case: Case) -> str:
    """The case without its values and attributes: inputs (names, shapes, dtypes), wiring, outputs, passes."""
    g = case.graph
    return canonical([[(i.name, i.shape, i.dtype, i.role, i.kind) for i in g.inputs],
                      [(n.id, n.op, n.inputs) for n in g.nodes], g.outputs, case.tvm_passes])


def _pool_of(checker: Checker | ExecutorPool) -> tuple[Checker, ExecutorPool]:
    if isinstance(checker, ExecutorPool):
        return Checker(checker), checker
    return checker, checker.pool


def fresh_pool(target: Target, pool: ExecutorPool) -> ExecutorPool:
    """A pool of new worker processes for the target's executors (and eager, the checker's semantic oracle),
    primed: they load their backends now, while the search runs, and have run no case of it."""
    fresh = ExecutorPool(target.executors, timeout=pool.timeout)
    fresh.prime(target.executors + [SEMANTIC_ORACLE] * (Checker(fresh).semantic is not None))
    return fresh


def recheck(case: Case, target: Target, pool: ExecutorPool, localize_faults: bool = True,
            fresh: ExecutorPool | None = None) -> Finding | None:
    """The matching finding of `case` on a fresh pool of worker processes (None if it does not reproduce).

    The full check (every oracle, eager included, and the culprit pass): what a user's re-check would say.
    `fresh`: a pool made by fresh_pool that has run nothing yet (closed here); default: a new one.
    """
    with fresh or ExecutorPool(target.executors, timeout=pool.timeout) as fresh:
        result = Checker(fresh, localize_faults).check(case, target.executors)
    return next((f for f in result.findings if target.matches(f)), None)


KIND_VALUE = {Kind.BACKEND_BUG: 0, Kind.MODEL_HAZARD: 1, Kind.UNSUPPORTED: 2}


def most_valuable(findings: Sequence[Finding]) -> Finding:
    """The finding a user means when they name none: a backend bug before a hazard before a coverage gap, then the
    largest error ratio (non-finite values first), then the first found (issue 20: the first finding of the TVM
    seed padded with elementwise ops was an xla/bf16-model effective-precision one)."""
    def rank(item: tuple[int, Finding]) -> tuple[int, float, int]:
        k, f = item
        ratio = float("inf") if f.error_class == ErrorClass.NONFINITE else (f.ratio or 0.0)
        return KIND_VALUE.get(f.kind, 3), -ratio, k

    return min(enumerate(findings), key=rank)[1]


def minimize(case: Case, signature: str | Finding | None = None, checker: Checker | ExecutorPool | None = None,
             budget_s: float = 120.0, max_checks: int = 1000, passes: Sequence[Pass] = PASSES,
             progress: Callable[[str], None] | None = None, fresh_recheck: bool = True) -> MinimizeResult:
    """Shrink `case` while it still shows `signature` (default: its most valuable finding, most_valuable); see the
    module docstring.

    `checker` is a Checker or an ExecutorPool holding at least the target's executors (and, without a
    signature, the executors to look for a finding with). The search stops after `budget_s` seconds or
    `max_checks` executor checks; the final case is then re-checked on fresh workers (`fresh_recheck`).
    """
    if checker is None:
        raise MinimizeError("minimize needs a Checker or ExecutorPool")
    checker, pool = _pool_of(checker)
    t0 = time.monotonic()
    if signature is None:
        findings = checker.check(case).findings
        if not findings:
            raise MinimizeError(f"case {case.id} shows no finding on {', '.join(checker.tested)}")
        signature = most_valuable(findings)
    target = Target.of(signature, case.graph) if isinstance(signature, Finding) else Target.parse(signature, case.graph)
    missing = [n for n in target.executors if n not in pool.names]
    if missing:
        raise MinimizeError(f"the pool lacks executor(s) {', '.join(missing)} needed by {target.signature}")
    # a sequence derived from the graph would change with every edit: write it out once, before the first edit
    case = pin_passes(case, any("tvm_passes" in pool.ensure(n).case_options for n in target.executors))
    predicate = Predicate(checker, target)
    result = MinimizeResult(case, None, case, target, False)
    first = predicate(case)
    if first is None:
        result.note = "the original case does not show the signature"
        result.checks, result.seconds = predicate.checks, time.monotonic() - t0
        return result
    target = predicate.target = result.target = target.refined(first, case.graph)
    deadline = t0 + budget_s
    spent = lambda: predicate.checks >= max_checks or time.monotonic() >= deadline  # noqa: E731
    if not target.whole_graph and target.ops and passes is PASSES:
        # the node at fault alone first, fed the values it saw, then the graph cut after it: the biggest cuts
        passes = (isolate(target.ops, first.node if first.node in {n.id for n in case.graph.nodes} else ""),) + tuple(passes)
    fresh = fresh_pool(target, pool) if fresh_recheck else None  # loads while the search runs
    try:
        search = Search(case, lambda c: predicate(c) is not None, spent, progress).run(passes)
    except BaseException:
        if fresh is not None:
            fresh.close()
        raise
    result.steps, result.tried, result.exhausted = search.steps, search.tried, search.exhausted
    result.checks, result.cache_hits = predicate.checks, predicate.hits
    result.worst, result.worst_elements = predicate.worst, predicate.worst_elements
    result.check_s, result.static_refutes = predicate.check_s, predicate.static_refutes
    if fresh is None:  # the final finding from the full check (the predicate's skips the culprit-pass search)
        full = checker.check(search.current, target.executors).findings
        found = next((f for f in full if target.matches(f)), None) or predicate(search.current)
        result.case, result.finding, result.confirmed = search.current, found, True
        result.case = _annotated(result.case, case, target)
        result.seconds = time.monotonic() - t0
        return result
    tries = [search.current] + [s.case for s in reversed(search.steps[:-1])][:FALLBACKS] + [case]
    unique = list({c.id: c for c in tries}.values())  # first occurrence order
    for k, cand in enumerate(unique):
        finding = recheck(cand, target, pool, checker.localize_faults, fresh if k == 0 else None)
        if finding is not None:
            result.case, result.finding, result.confirmed = cand, finding, True
            if k:
                result.note = f"the smallest case did not reproduce on fresh workers; fell back {k} step(s)"
            break
    else:
        result.note = "no case reproduced on fresh workers"
    result.case = _annotated(result.case, case, target)
    result.seconds = time.monotonic() - t0
    return result


def _annotated(case: Case, original: Case, target: Target) -> Case:
    """`case` with its provenance in meta (meta is not part of the case id)."""
    if case.id == original.id:
        return case
    return replace(case, meta={**case.meta, "minimized": {"from": original.id, "signature": target.signature}})
