"""The one interface of judging (issue 34): a check's evidence (Judging) and the ordered steps every oracle is.

Each step is `step(j: Judging, found: list[Finding]) -> list[Finding]`: it gets the findings of the steps before
and returns them with its own added (a detector: bounds, semantics, crashes, hazards, gradients) or reviewed (a
review: a finding eager is as far off on, a number a dtype finding explains, the component a backend bug belongs
to). STEPS is their order, in one place; BEFORE_OUTCOMES the steps that need no backend outcome (they run while
the backends do). The checker (fuzzer/check.py) runs the backends, builds the Judging and runs the steps: it
judges nothing itself. Backend work a step asks for (probes, eager's runs, rechecks) goes through the Judging's
callables, which the checker counts as the oracles' work.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

import numpy as np

from fuzzer.dtypes import LOW_PRECISION
from fuzzer.gradients import reference as grad_reference
from fuzzer.ir import Case, Graph, IRError, infer, input_values, redeclare
from fuzzer.outcome import Outcome
from fuzzer.policy import Policy

from . import attribution, crashes, gradients, localize, precision_hazards, semantics, training_hazards
from .error_bounds import OutputJudgement, bound_findings, judge_outputs
from .errors import message_key
from .findings import Finding
from .nodes import rounded_inputs, undefined_casts
from .subjects import Subject
from .vocabulary import Kind, Oracle

CPU_AUTOCAST, XLA_AUTOCAST = "torch/autocast", "xla/autocast"  # one autocast, two devices

Values = dict[str, np.ndarray]
Numbers = tuple[list[Values], list[dict[str, list[np.ndarray]]]]  # exact answers and ideals, per input set
Run = localize.Run


class Plan(NamedTuple):
    """An executor's programs before it runs: its policy's label, its numeric graph (None: numbers not judged)."""

    name: str
    label: Policy
    numeric: Graph | None


@dataclass
class Judging:
    """One check's evidence, as every oracle step sees it, and what judging reports besides findings.

    The callables run backends for the oracles (the checker counts that work): `run(name)` one executor on one
    graph and one input set with the case's options; `subject(name, graph, outcomes)` an executor's view on a
    graph; `numbers(numeric)` the exact answers and ideals of a numeric graph on the input sets (cached);
    `recheck(case, names)` the findings of another case on these executors (no attribution); `policy(name, graph)`
    the program an executor's policy makes of a graph; `available(name)`
    whether an executor can run here; `reads_passes(name)` whether it reads a case's Relax pass sequence.
    """

    case: Case
    sets: list[Values]
    subjects: list[Subject]
    outcomes: dict[str, list[Outcome]]
    eager: dict[str, list[Outcome]]  # executor -> PyTorch eager's outcomes on its policy program
    answers: dict[str, Numbers]  # executor -> exact answers and ideals of its numeric graph
    semantic: str | None  # the semantic oracle's executor (PyTorch eager), None where it cannot run
    run: Callable[[str], Run]
    subject: Callable[[str, Graph, list[Outcome]], Subject]
    numbers: Callable[[Graph], Numbers]
    recheck: Callable[[Case, list[str]], list[Finding]]
    policy: Callable[[str, Graph], Graph]
    available: Callable[[str], bool]
    reads_passes: Callable[[str], bool]
    localize_faults: bool = True
    culprits: bool = True
    early: list[Finding] = field(default_factory=list)  # findings of BEFORE_OUTCOMES
    notes: list[str] = field(default_factory=list)  # numeric violations no single node explains, and the like
    judgements: dict[str, list[OutputJudgement]] = field(default_factory=dict)  # executor -> its outputs judged
    backward: dict[str, str] = field(default_factory=dict)  # training case: executor -> its gradients in a word

    @property
    def graph(self) -> Graph:
        """The case graph."""
        return self.case.graph

    @property
    def keys(self) -> dict[str, str]:
        """Executor -> the text of its policy program (executors running one program share it)."""
        return {s.name: s.policy.text for s in self.subjects}

    def of(self, name: str) -> Subject:
        """The subject of one executor."""
        return next(s for s in self.subjects if s.name == name)


Step = Callable[[Judging, list[Finding]], list[Finding]]


# ------------------------------------------------------------------ steps that need no outcome


def precision_hazards_of(case: Case, plans: list[Plan], sets: list[Values]) -> list[Finding]:
    """A precision hazard per distinct numeric graph whose ideal already loses the float32 model's outputs, and the
    optimizer steps whose 16-bit update rounds away (oracles.precision_hazards, oracles.training_hazards).

    Needs no backend outcome (it judges the policy, not a backend): it runs while the backends do. A policy
    whose program PyTorch rejects (a chain break) runs nowhere and is not judged.
    """
    model = case.with_graph(redeclare(case.graph, LOW_PRECISION, "float32"))
    model_sets = [input_values(model, k) for k in range(len(case.input_sets))]
    seen: set[str] = set()
    out: list[Finding] = []
    for plan in plans:
        numeric = plan.numeric
        if numeric is None or numeric.text in seen:
            continue
        seen.add(numeric.text)
        typed = infer(numeric)
        if typed.chain_breaks() or not any(v.dtype in LOW_PRECISION for v in typed.values.values()):
            continue
        stepped: set[str] = set()
        for k, values in enumerate(sets):  # each optimizer step once, at the first input set losing its update
            for loss in training_hazards.judge(numeric, rounded_inputs(numeric, values)):
                if loss.node not in stepped:
                    stepped.add(loss.node)
                    out.append(training_hazards.finding(plan.name, plan.label, numeric, loss, k))
        if training_hazards.steps(numeric):
            continue  # an optimizer step's output is judged by its update (above), not by the weight's value
        model32 = redeclare(numeric, LOW_PRECISION, "float32")
        for k, values in enumerate(sets):
            lost = precision_hazards.judge(numeric, model32, rounded_inputs(numeric, values),
                                           rounded_inputs(model32, model_sets[k]))
            if lost is not None:
                out.append(precision_hazards.finding(plan.name, plan.label, numeric, lost, k))
                break
    return out


# ------------------------------------------------------------------ detectors and reviews, in order


def error_bounds(j: Judging, found: list[Finding]) -> list[Finding]:
    """Detector: each judged executor's outputs against the ideal implementations' bound, pinned on the node at
    fault (oracles.localize.bound); outputs an integer cast leaves undefined are not judged (a note says so)."""
    out = list(found)
    for s in j.subjects:
        if not s.judge_numbers:
            continue
        expected, ideal = j.answers[s.name]
        j.judgements[s.name] = judge_outputs(j.graph, s.typed("numeric"), s.outcomes, expected, ideal,
                                             max(s.approximate.values(), default=0.0), s.numeric)
        undefined = undefined_casts(s.numeric, s.typed("numeric"), expected, ideal, j.sets)
        if undefined:
            j.judgements[s.name] = [x for x in j.judgements[s.name]
                                    if x.output not in undefined.get(x.input_set, ((), set()))[1]]
            for k, (hit, reached) in sorted(undefined.items()):
                note = (f"input set {k}: {', '.join(hit)} casts NaN, inf or values beyond the int type to an "
                        f"integer, which C and PyTorch leave undefined; "
                        f"{', '.join(o for o in j.graph.outputs if o in reached) or 'no output'} not judged there")
                if note not in j.notes:
                    j.notes.append(note)
        bounds = bound_findings(s.name, j.graph, s.typed("numeric"), j.judgements[s.name])
        if bounds and j.localize_faults:
            run = j.run(s.name)
            bounds = [f2 for f in bounds if (f2 := localize.bound(f, s, j.sets[f.input_set], run, j.notes)) is not None]
        out += bounds
    return out


def eager_shadow(j: Judging, found: list[Finding]) -> dict[str, list[Finding]]:
    """PyTorch eager's own localized accuracy findings on each program an accuracy finding's executor runs, where
    eager is not under test, or ran another program under test (it ran those programs as the semantic oracle): what
    as_inaccurate_as_eager weighs (triage21 b5d7db0caa: tvm/train's batch_norm uses batch statistics, a program
    eager under test never ran, and eager's bfloat16 kernel is exactly as far off on it)."""
    if j.semantic is None:
        return {}
    keys = j.keys
    own = keys.get(j.semantic)  # eager's own findings judge the program it ran under test
    wanted = {keys[f.executor] for f in found if f.executor in keys and f.oracle == Oracle.ERROR_BOUND
              and f.error_class in localize.SHARED_WITH_EAGER}
    out: dict[str, list[Finding]] = {}
    for s in j.subjects:
        key = keys[s.name]
        if key not in wanted or key in out or key == own or s.name not in j.eager:
            continue
        e = j.subject(j.semantic, s.policy, j.eager[s.name])
        expected, ideal = j.numbers(e.numeric)
        judged = judge_outputs(e.graph, e.typed("numeric"), e.outcomes, expected, ideal, 0.0, e.numeric)
        run = j.run(j.semantic)
        out[key] = [g2 for g in bound_findings(j.semantic, e.graph, e.typed("numeric"), judged)
                    if (g2 := localize.bound(g, e, j.sets[g.input_set], run, [])) is not None]
    return out


def as_eager(j: Judging, found: list[Finding]) -> list[Finding]:
    """Review: an accuracy finding PyTorch eager is as far off on, on the same program, is not the backend's bug
    (oracles.localize.as_inaccurate_as_eager)."""
    return localize.as_inaccurate_as_eager(found, j.keys, j.semantic, j.notes, eager_shadow(j, found))


def pin_semantic(j: Judging, finding: Finding) -> Finding:
    """A semantic finding pinned on its node (oracles.localize), by the kind of divergence."""
    s = j.of(finding.executor)
    run, inputs = j.run(s.name), j.sets[finding.input_set]
    if finding.oracle == Oracle.DTYPE_DIVERGENCE:
        eager = j.run(j.semantic) if j.semantic is not None else None
        return localize.dtype(finding, s, inputs, run, eager)
    if finding.oracle == Oracle.SILENT_DOWNCAST:
        return localize.downcast(finding, s, inputs, run)
    if finding.oracle == Oracle.STATUS_DIVERGENCE:
        return localize.status(finding, s, inputs, run)
    return finding


def cpu_autocast_too(j: Judging, f: Finding) -> Finding:
    """Mark a torch_xla autocast error that torch.autocast("cpu") raises too on the graph: PyTorch's own autocast
    (triage11 b71511808d, where the schedule had not run torch/autocast on the case; triage18 #12, where it had,
    and the finding still said eager runs the program): its message says so, and its title names PyTorch."""
    if f.oracle != Oracle.STATUS_DIVERGENCE or f.executor != XLA_AUTOCAST:
        return f
    if CPU_AUTOCAST in j.outcomes:
        o = j.outcomes[CPU_AUTOCAST][f.input_set]
    elif j.available(CPU_AUTOCAST):
        o = j.run(CPU_AUTOCAST)(j.graph, j.sets[f.input_set])
    else:
        return f
    if o.status == "error" and message_key(o.message) == f.details.get("error_key"):
        said = (f"{f.message}; torch.autocast on the CPU raises the same error: the fault is PyTorch's autocast "
                "(at::autocast), which torch_xla's autocast runs too")
        return replace(f, message=said, details={**f.details, "cpu_autocast_raises": True})
    return f


def dtypes_and_status(j: Judging, found: list[Finding]) -> list[Finding]:
    """Detector and review: status and dtype outcomes against PyTorch eager's on each policy program
    (oracles.semantics), pinned on their node; an executor with a dtype finding keeps no accuracy finding (the
    dtype says it all)."""
    keys = j.keys
    semantic = semantics.judge(j.graph, j.subjects, {keys[n]: j.eager[n] for n in j.eager}, keys)
    if j.localize_faults:
        semantic = [pin_semantic(j, f) for f in semantic]
    semantic = [cpu_autocast_too(j, f) for f in semantic]
    explained = {f.executor for f in semantic if f.oracle in (Oracle.SILENT_DOWNCAST, Oracle.DTYPE_DIVERGENCE)}
    return [f for f in found if f.executor not in explained] + semantic


def crashed(j: Judging, found: list[Finding]) -> list[Finding]:
    """Detector: a worker that died or hung (oracles.crashes)."""
    return found + crashes.judge(j.graph, j.outcomes)


def hazards(j: Judging, found: list[Finding]) -> list[Finding]:
    """Detector: the findings of the steps that need no outcome (precision hazards, lost optimizer updates)."""
    return found + j.early


def underflow_hazards(s: Subject, ins: list[Values], refs: list[Any], run: Run) -> list[Finding]:
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


def backward(j: Judging, found: list[Finding]) -> list[Finding]:
    """Detector: the gradients of a training case (oracles.gradients), per executor: status, then dtype, then bound;
    the float64 reference gradients computed once per numeric graph and input set; `j.backward` gets each
    executor's gradients in a word (the worst ratio to the bound, `raises`, or `-` where it took none)."""
    if not j.graph.wrt:
        return found
    refs: dict[str, list[gradients.Reference | None]] = {}
    out: list[Finding] = []
    for s in j.subjects:
        raised = next((o.backward_error for o in s.outcomes if o.backward_error is not None), None)
        j.backward[s.name] = "raises" if raised else "-"
        mine = j.eager.get(s.name, [])
        got = gradients.status(s.name, s.graph, s.outcomes, mine) if mine else []
        if not got and mine and s.dtype_contract:
            got = gradients.dtypes(s.name, s.graph, s.outcomes, mine, s.reported)
        if not got and s.judge_numbers and any(o.grads is not None for o in s.outcomes) and all(
                e.ok for e in mine):  # a program eager raises on is a model hazard, judged by the forward
            ins = [rounded_inputs(s.numeric, v) for v in j.sets]
            if s.numeric.text not in refs:
                refs[s.numeric.text] = [grad_reference(s.numeric, v) for v in ins]
                out += underflow_hazards(s, ins, refs[s.numeric.text], j.run(s.name))
            judged = gradients.judge(s.outcomes, refs[s.numeric.text], [s.numeric.input(n) for n in s.numeric.wrt])
            worst = max((x.stats.ratio for x in judged), default=0.0)
            j.backward[s.name] = ("-" if not judged else "non-finite" if worst == float("inf") else f"{worst:.3g}x")
            run = j.run(s.name) if j.localize_faults else None
            forward_bug = any(f.executor == s.name and f.kind == Kind.BACKEND_BUG for f in found)
            eager_run = j.run(j.semantic) if run is not None and j.semantic else None
            got = gradients.bound(s.name, s.graph, s.numeric, s.outcomes, refs[s.numeric.text], ins, run,
                                  mine or None, j.notes, forward_bug, eager_run)
        out += got
    return found + out


def attribute(j: Judging, found: list[Finding]) -> list[Finding]:
    """Review: the culprit pass of a pass sequence's backend bug, and the ablation of a pipeline variant's
    (oracles.attribution, issue 26)."""
    if not j.culprits:
        return found
    out = []
    for f in found:
        if f.kind == Kind.BACKEND_BUG:
            case = attribution.at_departure(f, j.case)
            if case.tvm_passes and j.reads_passes(f.executor):
                f = attribution.culprit_pass(f, case, j.recheck)
            if f.executor in attribution.ABLATED:
                f = attribution.ablate(f, case, j.policy(f.executor, case.graph), j.recheck)
        out.append(f)
    return out


STEPS: tuple[tuple[str, Step], ...] = (
    ("error bounds", error_bounds),
    ("as far off as eager", as_eager),
    ("dtypes and status", dtypes_and_status),
    ("crashes", crashed),
    ("precision hazards", hazards),
    ("gradients", backward),
    ("attribution", attribute),
)


def judge(j: Judging) -> list[Finding]:
    """Every step of STEPS in order: the case's findings."""
    found: list[Finding] = []
    for _, step in STEPS:
        found = step(j, found)
    return found


def refused_policies(names: list[str], programs: Callable[[str], tuple[Graph, Graph | None]]) -> dict[str, str]:
    """Executors whose policy turns the case into a program the IR rejects, and why (triage16: model.to(bfloat16)
    makes scaled_mm's float32 scales bfloat16, which torch._scaled_mm refuses): not run, said in the notes, where
    building their programs raised and lost the whole case. `programs(name)`: its policy and numeric graphs."""
    out = {}
    for name in names:
        try:
            policy, numeric = programs(name)
            infer(policy)
            if numeric is not None:
                infer(numeric)
        except IRError as exc:
            out[name] = str(exc)
    return out
