"""Check one case: run it on executors and on PyTorch eager (the semantic oracle), then hand the outcomes to the
oracles, whose steps oracles/judging.py orders behind one interface (error bounds, semantics, crashes, precision
hazards, gradients, attribution).

The checker orchestrates and judges nothing itself. Per executor it builds the oracles' view (Subject): its
outcomes, the PyTorch program of its precision policy, the graph of the dtypes it computes in. PyTorch eager
runs each distinct policy program once; the exact answers and ideals of every numeric graph are computed while
the backends run. Backend work the oracles ask for (probes, eager's runs, the rechecks of attribution) goes
through the check's context, which counts it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any


from oracles import judging
from oracles.findings import Finding
from oracles.judging import Numbers, OutputJudgement, Run, Values
from oracles.nodes import rounded_inputs
from oracles.subjects import Subject
from oracles.vocabulary import Kind

from .executors import ORACLE_EXECUTORS, create
from .interpret import evaluate, ideal_values
from .ir import Case, Graph, case_options, input_values
from .isolation import ExecutorPool
from .outcome import Outcome, compile_seconds, compiles
from .tvm_passes import derive_sequence

SEMANTIC_ORACLE = "torch/eager"  # PyTorch eager on the CPU: what status and dtypes are right


@dataclass
class CheckResult:
    """Everything one check produced."""

    case: Case
    outcomes: dict[str, list[Outcome]]
    judgements: dict[str, list[OutputJudgement]]
    findings: list[Finding]
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per executor (IPC included)
    oracle_s: float = 0.0  # reference, ideals, eager runs, probes and oracles
    eager: dict[str, list[Outcome]] = field(default_factory=dict)  # executor -> eager's outcomes on its policy
    notes: list[str] = field(default_factory=list)  # numeric violations no single node explains, and the like
    backward: dict[str, str] = field(default_factory=dict)  # training case: executor -> its gradients in a word
    oracle_backend: dict[str, dict[str, float]] = field(default_factory=dict)  # executor -> compiles, compile_s, run_s
    # the oracles spent on it (probes, eager's policy graphs, attribution rechecks): backend work beyond the tests

    def row(self, name: str) -> dict[str, Any]:
        """Summary of one executor across input sets: worst status, dtypes, errors, verdict."""
        outs = self.outcomes[name]
        worst = next((o for o in outs if not o.ok), outs[0])
        js = self.judgements.get(name, [])
        flagged = [f for f in self.findings if f.executor == name]
        return {
            "status": worst.status, "dtype": ",".join(worst.dtypes or []) if worst.ok else "",
            "max_abs": max((j.stats.max_abs for j in js), default=None),
            "max_ulp": max((j.stats.max_ulp for j in js), default=None),
            "ratio": max((j.stats.ratio for j in js), default=None),
            "verdict": ("FINDING" if any(f.kind == Kind.BACKEND_BUG for f in flagged)
                        else flagged[0].kind if flagged else ("oracle" if name in ORACLE_EXECUTORS else "ok")),
            "detail": worst.summary() if not worst.ok else "",
        }


@dataclass
class CheckContext:
    """The check in progress: the case's options (every run of it uses them) and the backend work the oracles ask
    for beyond the tests, per executor (compiles, compile_s, run_s). A recheck made for attribution shares it."""

    options: dict[str, Any]
    spent: dict[str, dict[str, float]] = field(default_factory=dict)

    def tally(self, name: str, outs: list[Outcome]) -> None:
        """Count backend work the oracles caused."""
        tally = self.spent.setdefault(name, {"compiles": 0.0, "compile_s": 0.0, "run_s": 0.0})
        for k, o in enumerate(outs):
            tally["compiles"] += compiles(o, k)
            tally["compile_s"] += compile_seconds(o, k)
            tally["run_s"] += o.run_s


def pin_passes(case: Case, wanted: bool) -> Case:
    """`case` with its Relax pass sequence written out (when an executor reads one and the case has none).

    The sequence is drawn from the campaign seed and index where the case has them, else from its content, so
    a later edit of the graph (the minimizer's) keeps the sequence the finding was made with.
    """
    if not wanted or case.tvm_passes is not None:
        return case
    seed = case.meta.get("seed"), case.meta.get("index")
    text = f"{seed[0]}:{seed[1]}" if None not in seed else case.id
    return replace(case, tvm_passes=derive_sequence(text, (n.op for n in case.graph.nodes)))


class Checker:
    """Runs cases on a pool of executors and hands the outcomes to the oracles; reuse it across cases (warm workers)."""

    def __init__(self, pool: ExecutorPool, localize_faults: bool = True, side_by_side: bool = False) -> None:
        self.pool = pool
        self.localize_faults = localize_faults
        self.side_by_side = side_by_side  # each worker group's executors in a thread of their own (check, audit)
        self.semantic = SEMANTIC_ORACLE if create(SEMANTIC_ORACLE).availability() is None else None

    @property
    def tested(self) -> list[str]:
        """Executors under test (all but the numpy oracles)."""
        return [n for n in self.pool.names if n not in ORACLE_EXECUTORS]

    def subject(self, name: str, graph: Graph, outcomes: list[Outcome], options: dict[str, Any]) -> Subject:
        """The oracles' view of one executor on one graph."""
        ex = self.pool.executors[name].bind(options)
        return Subject(name, graph, outcomes, ex.policy_graph(graph), ex.numeric_graph(graph), ex.precision,
                       ex.reported_dtypes(), ex.bridged(graph), ex.dtype_contract, ex.judge_numbers,
                       ex.approximations())

    def _oracle_run(self, ctx: CheckContext, name: str, graph: Graph, sets: list[Values],
                    options: dict[str, Any] | None = None) -> list[Outcome]:
        """A backend run the oracles need beyond the tests (a probe, eager on a policy graph): counted in `ctx`."""
        outs = self.pool.run(name, graph, sets, options)
        ctx.tally(name, outs)
        return outs

    def check(self, case: Case, executors: list[str] | None = None, culprits: bool = True,
              within: CheckContext | None = None) -> CheckResult:
        """Run `case` on the executors and judge the outcomes (oracles.judging: its steps, in order).

        A case an executor reads a Relax pass sequence for gets one written out first (pin_passes; the result's
        case carries it). With `culprits`, a backend bug of a pass sequence names the pass whose removal makes it
        disappear, and one of a pipeline variant is checked against the variant's base (oracles.attribution).
        `within`: the context of the check this one is a recheck for (its backend work counts there).
        """
        names = [n for n in (executors or self.tested) if n not in ORACLE_EXECUTORS]
        for name in names:
            self.pool.ensure(name)
        case = pin_passes(case, any(self._reads_passes(n) for n in names))
        ctx = CheckContext(case_options(case), within.spent if within is not None else {})
        graph = case.graph
        refused = judging.refused_policies(names, lambda n: self._programs(n, graph, ctx))
        names = [n for n in names if n not in refused]
        sets = [input_values(case, k) for k in range(len(case.input_sets))]
        outcomes: dict[str, list[Outcome]] = {}  # filled by the backend threads, read after they are joined
        seconds: dict[str, float] = {}

        failed: list[BaseException] = []

        def run_group(group: list[str]) -> None:
            try:
                for name in group:
                    t1 = time.perf_counter()
                    outcomes[name] = self.pool.run(name, graph, sets, ctx.options)
                    seconds[name] = time.perf_counter() - t1
            except BaseException as exc:  # noqa: BLE001 - raised again in the checking thread
                failed.append(exc)

        def run_backends() -> None:
            """One executor after the other; side by side, one thread per worker process (a worker serves one call
            at a time), so a TVM compile and a torch_xla run share the cores of an interactive check."""
            groups = self.pool.groups(names) if self.side_by_side else [names]
            threads = [threading.Thread(target=run_group, args=(g,), name="precfuzz-group", daemon=True)
                       for g in groups[1:]]
            for t in threads:
                t.start()
            run_group(groups[0])
            for t in threads:
                t.join()

        # The backends run one after the other in a thread that mostly waits on its worker processes, while this
        # thread computes what needs no outcome: the exact answers and the ideals of every numeric graph judged,
        # and the precision hazards of each policy (the same values; only the wall time they add goes away).
        numbers: dict[str, Numbers] = {}  # by numeric graph
        answers: dict[str, Numbers] = {}  # by executor
        backends = threading.Thread(target=run_backends, name="precfuzz-backends", daemon=True)
        backends.start()
        early: list[Finding] = []
        try:
            plans = []
            for name in names:
                ex = self.pool.executors[name].bind(ctx.options)
                numeric = ex.numeric_graph(graph) if ex.judge_numbers else None
                if numeric is not None:
                    answers[name] = self._numbers(numeric, sets, numbers)
                plans.append(judging.Plan(name, ex.precision, numeric))
            early = judging.precision_hazards_of(case, plans, sets)
        except BaseException as exc:
            if isinstance(exc, Exception):
                backends.join()
            else:  # Ctrl-C, SIGTERM: the backends' calls in flight (a costly case keeps a worker busy for minutes)
                self.pool.abort()  # are not waited for: killed, the workers answer at once
                backends.join(timeout=5.0)
            raise
        backends.join()
        if failed:
            raise failed[0]
        t2 = time.perf_counter()
        subjects = [self.subject(n, graph, outcomes[n], ctx.options) for n in names]
        keys = {s.name: s.policy.text for s in subjects}
        eager = self._eager(graph, subjects, keys, sets, outcomes, ctx)
        shadow_numbers: dict[str, Numbers] = {}

        def recheck(other: Case, executors: list[str]) -> list[Finding]:
            for name in executors:
                self.pool.ensure(name)
            result = self.check(other, executors, culprits=False, within=ctx)
            for executor, outs in result.outcomes.items():  # a recheck's tests are oracle work here
                ctx.tally(executor, outs)
            return result.findings

        j = judging.Judging(
            case, sets, subjects, outcomes, eager, answers, self.semantic,
            run=lambda name: self._runner(ctx, name),
            subject=lambda name, g, outs: self.subject(name, g, outs, ctx.options),
            numbers=lambda numeric: self._numbers(numeric, sets, shadow_numbers),
            recheck=recheck,
            policy=lambda name, g: self.pool.executors[name].bind(ctx.options).policy_graph(g),
            available=lambda name: create(name).availability() is None,
            reads_passes=self._reads_passes,
            localize_faults=self.localize_faults, culprits=culprits, early=early,
            notes=[f"{n}: not run: its policy makes a program the IR rejects ({why})" for n, why in refused.items()])
        findings = judging.judge(j)
        oracle_s = time.perf_counter() - t2
        spent = {n: {k: round(v, 6) for k, v in t.items()} for n, t in ctx.spent.items()} if within is None else {}
        return CheckResult(case, outcomes, j.judgements, findings, seconds, oracle_s, eager, j.notes, j.backward,
                           spent)

    def _reads_passes(self, name: str) -> bool:
        """Whether an executor reads a case's Relax pass sequence."""
        return "tvm_passes" in self.pool.executors[name].case_options

    def _programs(self, name: str, graph: Graph, ctx: CheckContext) -> tuple[Graph, Graph | None]:
        """An executor's policy graph and numeric graph (None where its numbers are not judged) of `graph`."""
        ex = self.pool.executors[name].bind(ctx.options)
        return ex.policy_graph(graph), ex.numeric_graph(graph) if ex.judge_numbers else None

    def _runner(self, ctx: CheckContext, name: str) -> Run:
        """`name` on one graph and one input set, with the case's options, counted as oracle work (started first
        where the check has not started it)."""
        self.pool.ensure(name)
        return lambda graph, values: self._oracle_run(ctx, name, graph, [values], ctx.options)[0]

    @staticmethod
    def _numbers(numeric: Graph, sets: list[Values], numbers: dict[str, Numbers]) -> Numbers:
        """The exact answers and the ideals of `numeric` on every input set (computed once per numeric graph)."""
        key = numeric.text
        if key not in numbers:
            ins = [rounded_inputs(numeric, v) for v in sets]
            numbers[key] = ([evaluate(numeric, v, rounded=False) for v in ins], [ideal_values(numeric, v) for v in ins])
        return numbers[key]

    # ------------------------------------------------------------ semantic oracle runs

    def _eager(self, graph: Graph, subjects: list[Subject], keys: dict[str, str], sets: list[Values],
               outcomes: dict[str, list[Outcome]], ctx: CheckContext) -> dict[str, list[Outcome]]:
        """PyTorch eager's outcomes on each subject's policy graph (each distinct program run once)."""
        if self.semantic is None:
            return {}
        runs: dict[str, list[Outcome]] = {}
        if self.semantic in outcomes:  # eager under test already ran the case graph
            runs[graph.text] = outcomes[self.semantic]
        self.pool.ensure(self.semantic)
        out = {}
        for s in subjects:
            key = keys[s.name]
            if key not in runs:
                runs[key] = self._oracle_run(ctx, self.semantic, s.policy, [rounded_inputs(s.policy, v) for v in sets])
            out[s.name] = runs[key]
        return out


