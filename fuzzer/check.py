"""Check one case: run it on executors and on PyTorch eager (the semantic oracle), then hand the outcomes to the
oracles (oracles/: semantics, error bounds, per-node judging, localization, precision hazards, attribution).

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

import numpy as np

from oracles import attribution, crashes, gradients, localize, precision_hazards, semantics, training_hazards
from oracles.error_bounds import OutputJudgement, bound_findings, judge_outputs
from oracles.errors import message_key
from oracles.findings import Finding
from oracles.nodes import rounded_inputs, undefined_casts
from oracles.subjects import Subject
from oracles.vocabulary import ErrorClass, Kind, Oracle

from .dtypes import LOW_PRECISION
from .executors import ORACLE_EXECUTORS, create
from .gradients import reference as grad_reference
from .interpret import evaluate, ideal_values
from .ir import (
    Case,
    Graph,
    IRError,
    case_options,
    infer,
    input_values,
    redeclare,
)
from .isolation import ExecutorPool
from .outcome import Outcome, compile_seconds, compiles
from .tvm_passes import derive_sequence

CPU_AUTOCAST, XLA_AUTOCAST = "torch/autocast", "xla/autocast"  # one autocast, two devices

SEMANTIC_ORACLE = "torch/eager"  # PyTorch eager on the CPU: what status and dtypes are right
Values = dict[str, np.ndarray]
Numbers = tuple[list[Values], list[dict[str, list[np.ndarray]]]]  # exact answers and ideals, per input set


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
        return Subject(name, graph, outcomes, ex.policy_graph(graph), ex.numeric_graph(graph), ex.policy,
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
        """Run `case` on the executors and judge the outcomes.

        A case an executor reads a Relax pass sequence for gets one written out first (pin_passes; the result's
        case carries it). With `culprits`, a backend bug of a pass sequence names the pass whose removal makes it
        disappear, and one of a pipeline variant is checked against the variant's base (oracles.attribution).
        `within`: the context of the check this one is a recheck for (its backend work counts there).
        """
        names = [n for n in (executors or self.tested) if n not in ORACLE_EXECUTORS]
        for name in names:
            self.pool.ensure(name)
        case = pin_passes(case, any("tvm_passes" in self.pool.executors[n].case_options for n in names))
        ctx = CheckContext(case_options(case), within.spent if within is not None else {})
        graph = case.graph
        refused = self._refused_policies(graph, names, ctx)
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
        hazards: list[Finding] = []
        try:
            for name in names:
                ex = self.pool.executors[name].bind(ctx.options)
                if ex.judge_numbers:
                    answers[name] = self._numbers(ex.numeric_graph(graph), sets, numbers)
            hazards = self._precision_hazards(case, names, sets, answers, ctx)
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
        findings: list[Finding] = []
        judgements: dict[str, list[OutputJudgement]] = {}
        notes: list[str] = [f"{n}: not run: its policy makes a program the IR rejects ({why})" for n, why in refused.items()]
        for s in subjects:
            if not s.judge_numbers:
                continue
            expected, ideal = answers[s.name]
            judgements[s.name] = judge_outputs(graph, s.typed("numeric"), s.outcomes, expected, ideal,
                                               max(s.approximate.values(), default=0.0), s.numeric)
            undefined = undefined_casts(s.numeric, s.typed("numeric"), expected, ideal, sets)
            if undefined:
                judgements[s.name] = [j for j in judgements[s.name]
                                      if j.output not in undefined.get(j.input_set, ((), set()))[1]]
                for k, (hit, reached) in sorted(undefined.items()):
                    note = (f"input set {k}: {', '.join(hit)} casts NaN, inf or values beyond the int type to an "
                            f"integer, which C and PyTorch leave undefined; "
                            f"{', '.join(o for o in graph.outputs if o in reached) or 'no output'} not judged there")
                    if note not in notes:
                        notes.append(note)
            found = bound_findings(s.name, graph, s.typed("numeric"), judgements[s.name])
            if found and self.localize_faults:
                run = self._runner(ctx, s.name)
                found = [f2 for f in found if (f2 := localize.bound(f, s, sets[f.input_set], run, notes)) is not None]
            findings += found
        shadow = self._eager_bounds(subjects, keys, eager, sets, ctx, findings)
        findings = localize.as_inaccurate_as_eager(findings, keys, self.semantic, notes, shadow)
        semantic = semantics.judge(graph, subjects, {keys[n]: eager[n] for n in eager}, keys)
        if self.localize_faults:
            semantic = [self._localize(f, subjects, sets, ctx) for f in semantic]
        semantic = [self._cpu_autocast_too(f, graph, sets, ctx, names, outcomes) for f in semantic]
        explained = {f.executor for f in semantic if f.oracle in (Oracle.SILENT_DOWNCAST, Oracle.DTYPE_DIVERGENCE)}
        findings = [f for f in findings if f.executor not in explained] + semantic  # the dtype says it all
        findings += crashes.judge(graph, outcomes) + hazards
        backward: dict[str, str] = {}
        if graph.wrt:
            findings += self._gradients(subjects, eager, sets, ctx, notes, backward, findings)
        if culprits:
            findings = [self._attribute(f, case, ctx) if f.kind == Kind.BACKEND_BUG else f for f in findings]
        oracle_s = time.perf_counter() - t2
        spent = {n: {k: round(v, 6) for k, v in t.items()} for n, t in ctx.spent.items()} if within is None else {}
        return CheckResult(case, outcomes, judgements, findings, seconds, oracle_s, eager, notes, backward, spent)

    def _refused_policies(self, graph: Graph, names: list[str], ctx: CheckContext) -> dict[str, str]:
        """Executors whose policy turns the case into a program the IR rejects, and why (triage16: model.to(bfloat16)
        makes scaled_mm's float32 scales bfloat16, which torch._scaled_mm refuses): not run, said in the notes, where
        building their programs raised and lost the whole case."""
        out = {}
        for name in names:
            ex = self.pool.executors[name].bind(ctx.options)
            try:
                infer(ex.policy_graph(graph))
                if ex.judge_numbers:
                    infer(ex.numeric_graph(graph))
            except IRError as exc:
                out[name] = str(exc)
        return out

    def _gradients(self, subjects: list[Subject], eager: dict[str, list[Outcome]], sets: list[Values],
                   ctx: CheckContext, notes: list[str], summary: dict[str, str],
                   forward: list[Finding]) -> list[Finding]:
        """The gradient oracles of a training case (oracles.gradients), per executor: status, then dtype, then bound;
        the float64 reference gradients computed once per numeric graph and input set. `summary` gets each
        executor's gradients in a word (the worst ratio to the bound, `raises`, or `-` where it took none)."""
        refs: dict[str, list[gradients.Reference | None]] = {}
        out: list[Finding] = []
        for s in subjects:
            raised = next((o.backward_error for o in s.outcomes if o.backward_error is not None), None)
            summary[s.name] = "raises" if raised else "-"
            mine = eager.get(s.name, [])
            found = gradients.status(s.name, s.graph, s.outcomes, mine) if mine else []
            if not found and mine and s.dtype_contract:
                found = gradients.dtypes(s.name, s.graph, s.outcomes, mine, s.reported)
            if not found and s.judge_numbers and any(o.grads is not None for o in s.outcomes) and all(
                    e.ok for e in mine):  # a program eager raises on is a model hazard, judged by the forward
                ins = [rounded_inputs(s.numeric, v) for v in sets]
                if s.numeric.text not in refs:
                    refs[s.numeric.text] = [grad_reference(s.numeric, v) for v in ins]
                    out += self._underflow_hazards(s, ins, refs[s.numeric.text], self._runner(ctx, s.name))
                judged = gradients.judge(s.outcomes, refs[s.numeric.text], [s.numeric.input(n) for n in s.numeric.wrt])
                worst = max((j.stats.ratio for j in judged), default=0.0)
                summary[s.name] = ("-" if not judged else "non-finite" if worst == float("inf") else f"{worst:.3g}x")
                run = self._runner(ctx, s.name) if self.localize_faults else None
                found = gradients.bound(s.name, s.graph, s.numeric, s.outcomes, refs[s.numeric.text], ins, run,
                                        mine or None, notes, any(f.executor == s.name and f.kind == Kind.BACKEND_BUG
                                                                 for f in forward),
                                        self._runner(ctx, self.semantic) if run is not None and self.semantic else None)
            out += found
        return out

    @staticmethod
    def _underflow_hazards(s: Subject, ins: list[Values], refs: list[Any], run: localize.Run) -> list[Finding]:
        """Gradients a 16-bit program's ideal backward loses to underflow, where the executor's own backward loses
        them too, with the loss scale that gives them back on the executor itself (`run`: the scaled program there),
        or what no scale reaches (oracles.training_hazards): once per numeric graph, at the first input set showing
        each."""
        out: list[Finding] = []
        seen: set[str] = set()
        for k, (values, ref) in enumerate(zip(ins, refs)):
            mine = s.outcomes[k] if k < len(s.outcomes) else None
            if ref is None or mine is None or not mine.ok or mine.grads is None:
                continue
            exact, ideals, floors = ref
            scaled: dict[float, Any] = {}
            for loss in training_hazards.gradient_underflow(s.numeric, values, exact, ideals[0], floors):
                if loss.wrt in seen:
                    continue
                i = s.numeric.wrt.index(loss.wrt)
                own = training_hazards.gradient_lost(exact[i], mine.grads[i], floors[i])
                left = None
                if loss.scale and own >= training_hazards.GRAD_LOSS:
                    if loss.scale not in scaled:  # one run of the scaled program for every gradient it checks
                        scaled[loss.scale] = run(training_hazards.scaled_loss(s.graph, loss.scale), values)
                    got = scaled[loss.scale]
                    if got.ok and got.grads is not None:
                        left = training_hazards.gradient_lost(
                            exact[i], np.asarray(got.grads[i], np.float64) / loss.scale, floors[i])
                shown = training_hazards.on_backend(
                    loss, s.name, own, left, lambda w=loss.wrt: training_hazards.obstacle(s.numeric, values, w))
                if shown is not None:
                    seen.add(loss.wrt)
                    out.append(training_hazards.gradient_finding(s.name, s.label, s.numeric, shown, k))
        return out

    def _eager_bounds(self, subjects: list[Subject], keys: dict[str, str], eager: dict[str, list[Outcome]],
                      sets: list[Values], ctx: CheckContext, findings: list[Finding]) -> dict[str, list[Finding]]:
        """PyTorch eager's own localized accuracy findings on each program an accuracy finding's executor runs, where
        eager is not under test, or ran another program under test (it ran those programs as the semantic oracle): what
        as_inaccurate_as_eager weighs (triage21 b5d7db0caa: tvm/train's batch_norm uses batch statistics, a program
        eager under test never ran, and eager's bfloat16 kernel is exactly as far off on it)."""
        if self.semantic is None:
            return {}
        own = keys.get(self.semantic)  # eager's own findings judge the program it ran under test
        wanted = {keys[f.executor] for f in findings if f.executor in keys and f.oracle == Oracle.ERROR_BOUND
                  and f.error_class in localize.SHARED_WITH_EAGER}
        out: dict[str, list[Finding]] = {}
        numbers: dict[str, Numbers] = {}
        for s in subjects:
            key = keys[s.name]
            if key not in wanted or key in out or key == own or s.name not in eager:
                continue
            e = self.subject(self.semantic, s.policy, eager[s.name], ctx.options)
            expected, ideal = self._numbers(e.numeric, sets, numbers)
            judged = judge_outputs(e.graph, e.typed("numeric"), e.outcomes, expected, ideal, 0.0, e.numeric)
            run = self._runner(ctx, self.semantic)
            out[key] = [g2 for g in bound_findings(self.semantic, e.graph, e.typed("numeric"), judged)
                        if (g2 := localize.bound(g, e, sets[g.input_set], run, [])) is not None]
        return out

    def _cpu_autocast_too(self, f: Finding, graph: Graph, sets: list[Values], ctx: CheckContext,
                          names: list[str], outcomes: dict[str, list[Outcome]]) -> Finding:
        """Mark a torch_xla autocast error that torch.autocast("cpu") raises too on the graph: PyTorch's own autocast
        (triage11 b71511808d, where the schedule had not run torch/autocast on the case; triage18 #12, where it had,
        and the finding still said eager runs the program): its message says so, and its title names PyTorch."""
        if f.oracle != Oracle.STATUS_DIVERGENCE or f.executor != XLA_AUTOCAST:
            return f
        if CPU_AUTOCAST in names:
            o = outcomes[CPU_AUTOCAST][f.input_set]
        elif create(CPU_AUTOCAST).availability() is None:
            self.pool.ensure(CPU_AUTOCAST)
            (o,) = self._oracle_run(ctx, CPU_AUTOCAST, graph, [sets[f.input_set]], ctx.options)
        else:
            return f
        if o.status == "error" and message_key(o.message) == f.details.get("error_key"):
            said = (f"{f.message}; torch.autocast on the CPU raises the same error: the fault is PyTorch's autocast "
                    "(at::autocast), which torch_xla's autocast runs too")
            return replace(f, message=said, details={**f.details, "cpu_autocast_raises": True})
        return f

    def _runner(self, ctx: CheckContext, name: str) -> localize.Run:
        """`name` on one graph and one input set, with the case's options, counted as oracle work."""
        return lambda graph, values: self._oracle_run(ctx, name, graph, [values], ctx.options)[0]

    def _localize(self, finding: Finding, subjects: list[Subject], sets: list[Values], ctx: CheckContext) -> Finding:
        """A semantic finding pinned on its node (oracles.localize), by the kind of divergence."""
        s = next(x for x in subjects if x.name == finding.executor)
        run, inputs = self._runner(ctx, s.name), sets[finding.input_set]
        if finding.oracle == Oracle.DTYPE_DIVERGENCE:
            eager = self._runner(ctx, self.semantic) if self.semantic is not None else None
            return localize.dtype(finding, s, inputs, run, eager)
        if finding.oracle == Oracle.SILENT_DOWNCAST:
            return localize.downcast(finding, s, inputs, run)
        if finding.oracle == Oracle.STATUS_DIVERGENCE:
            return localize.status(finding, s, inputs, run)
        return finding

    def _attribute(self, finding: Finding, case: Case, ctx: CheckContext) -> Finding:
        """The culprit pass of a pass sequence's finding, and the ablation of a pipeline variant's (issue 26)."""
        def recheck(other: Case, executors: list[str]) -> list[Finding]:
            for name in executors:
                self.pool.ensure(name)
            result = self.check(other, executors, culprits=False, within=ctx)
            for executor, outs in result.outcomes.items():  # a recheck's tests are oracle work here
                ctx.tally(executor, outs)
            return result.findings

        case = attribution.at_departure(finding, case)
        if case.tvm_passes and "tvm_passes" in self.pool.executors[finding.executor].case_options:
            finding = attribution.culprit_pass(finding, case, recheck)
        if finding.executor in attribution.ABLATED:
            policy = self.pool.executors[finding.executor].bind(ctx.options).policy_graph(case.graph)
            finding = attribution.ablate(finding, case, policy, recheck)
        return finding

    @staticmethod
    def _numbers(numeric: Graph, sets: list[Values], numbers: dict[str, Numbers]) -> Numbers:
        """The exact answers and the ideals of `numeric` on every input set (computed once per numeric graph)."""
        key = numeric.text
        if key not in numbers:
            ins = [rounded_inputs(numeric, v) for v in sets]
            numbers[key] = ([evaluate(numeric, v, rounded=False) for v in ins], [ideal_values(numeric, v) for v in ins])
        return numbers[key]

    def _precision_hazards(self, case: Case, names: list[str], sets: list[Values], answers: dict[str, Numbers],
                           ctx: CheckContext) -> list[Finding]:
        """A precision hazard per distinct numeric graph whose ideal already loses the float32 model's outputs.

        Needs no backend outcome (it judges the policy, not a backend): it runs while the backends do. A policy
        whose program PyTorch rejects (a chain break) runs nowhere and is not judged.
        """
        model = case.with_graph(redeclare(case.graph, LOW_PRECISION, "float32"))
        model_sets = [input_values(model, k) for k in range(len(case.input_sets))]
        seen: set[str] = set()
        out: list[Finding] = []
        for name in names:
            if name not in answers:
                continue
            ex = self.pool.executors[name].bind(ctx.options)
            numeric = ex.numeric_graph(case.graph)
            key = numeric.text
            if key in seen:
                continue
            seen.add(key)
            typed = infer(numeric)
            if typed.chain_breaks() or not any(v.dtype in LOW_PRECISION for v in typed.values.values()):
                continue
            stepped: set[str] = set()
            for k, values in enumerate(sets):  # each optimizer step once, at the first input set losing its update
                for loss in training_hazards.judge(numeric, rounded_inputs(numeric, values)):
                    if loss.node not in stepped:
                        stepped.add(loss.node)
                        out.append(training_hazards.finding(name, ex.policy, numeric, loss, k))
            if training_hazards.steps(numeric):
                continue  # an optimizer step's output is judged by its update (above), not by the weight's value
            model32 = redeclare(numeric, LOW_PRECISION, "float32")
            for k, values in enumerate(sets):
                lost = precision_hazards.judge(numeric, model32, rounded_inputs(numeric, values),
                                               rounded_inputs(model32, model_sets[k]))
                if lost is not None:
                    out.append(precision_hazards.finding(name, ex.policy, numeric, lost, k))
                    break
        return out

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


