"""Check one case: run it on executors and on PyTorch eager (the semantic oracle), then let every oracle judge.

Per executor the checker builds the oracles' view (oracles.subjects.Subject): its outcomes, the PyTorch
program of its precision policy, and the graph of the dtypes it computes in. PyTorch eager on the CPU runs
each distinct policy program once; the numbers of each executor are judged against the exact answer and
the ideal implementations of its own numeric graph, on the inputs rounded as that graph declares them.
A numeric finding is then pinned on one node: a probe run outputs every node, and each node is judged on
the backend's own operand values.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from oracles import crashes, precision_hazards, semantics
from oracles.bounds import SLACK_ULPS, ErrorStats, error_stats
from oracles.error_bounds import (
    OutputJudgement,
    at_fault,
    bound_findings,
    judge_outputs,
    node_signature,
)
from oracles.errors import classify_error, message_key
from oracles.bugs import same_cause
from oracles.findings import Finding
from oracles.precision import device_narrower, narrower_format
from oracles.subjects import Subject

from .dtypes import FLOAT_FORMATS, LOW_PRECISION, cast_undefined, is_float, round_to
from .executors import ORACLE_EXECUTORS, create
from .interpret import evaluate, ideal_values
from .ir import (
    Case,
    Graph,
    Input,
    IRError,
    Node,
    canonical,
    case_options,
    graph_to_json,
    infer,
    input_values,
    op_attrs,
    redeclare,
)
from .isolation import ExecutorPool
from .ops import OPS, is_cast, tagged
from .outcome import Outcome, compile_seconds, compiles
from .tvm_passes import PassSequenceError, check_sequence, derive_sequence

SEMANTIC_ORACLE = "torch/eager"  # PyTorch eager on the CPU: what status and dtypes are right
# pipeline variants and the base each finding of theirs is checked against (Checker._ablate)
ABLATED = {"tvm/mixed-precision": "tvm/default", "tvm/frontend": "tvm/default", "tvm/decompose": "tvm/default",
           "tvm/decompose-inference": "tvm/default"}
GATED = tagged(OPS, "gated")  # judged at their operand's magnitude (see fuzzer.ops.base TAGS)
GATE_ULPS = 2.0  # what a float kernel's gate may add, in ULPs at the operand's magnitude (its own rounding, the product)
Values = dict[str, np.ndarray]


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
    oracle_backend: dict[str, dict[str, float]] = field(default_factory=dict)  # executor -> compiles, compile_s, run_s
    # the oracles spent on it (probes, eager's policy graphs, culprit-pass checks): backend work beyond the tests

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
            "verdict": ("FINDING" if any(f.kind == "backend-bug" for f in flagged)
                        else flagged[0].kind if flagged else ("oracle" if name in ORACLE_EXECUTORS else "ok")),
            "detail": worst.summary() if not worst.ok else "",
        }


def same_verdict(a: Finding, b: Finding) -> bool:
    """True when two findings of one executor are the same verdict (oracle, executor, ops, class; dtypes aside)."""
    return (a.oracle, a.executor, a.ops, a.error_class) == (b.oracle, b.executor, b.ops, b.error_class)


def rounded_inputs(graph: Graph, values: Values) -> Values:
    """Input values rounded to the dtypes `graph` declares (a policy may declare params in bf16)."""
    return {i.name: (round_to(values[i.name], i.dtype) if i.kind == "tensor" else np.asarray(values[i.name]))
            for i in graph.inputs}


def node_graph(graph: Graph, node_id: str) -> Graph:
    """The one-node graph computing `node_id` from its operands, each an input of its own."""
    typed = infer(graph)
    node = graph.node(node_id)
    inputs = []
    for operand in dict.fromkeys(o for o in node.inputs if isinstance(o, str)):
        info = typed.values[operand]
        inputs.append(Input(operand, info.shape if info.kind != "scalar" else (), info.dtype,
                            kind="scalar" if info.kind == "scalar" else "tensor"))
    return Graph(tuple(inputs), (node,), (node_id,))


def int_casts(graph: Graph, typed: Any) -> list[Node]:
    """The nodes casting a float tensor to an int dtype."""
    return [n for n in graph.nodes if is_cast(n.op) and not is_float(typed.values[n.id].dtype)
            and isinstance(n.inputs[0], str) and is_float(typed.values[n.inputs[0]].dtype)]


def undefined_casts(graph: Graph, typed: Any, expected: list[Values],
                    ideal: list[dict[str, list[np.ndarray]]]) -> dict[int, tuple[list[str], set[str]]]:
    """Per input set: the float->int casts meeting NaN, inf or a value beyond the int type (in the reference or
    an ideal implementation), and every value computed from them. C and PyTorch leave such a conversion
    undefined, so whatever int a backend returns there (PyTorch eager's included) is not a wrong answer."""
    casts = int_casts(graph, typed)
    out: dict[int, tuple[list[str], set[str]]] = {}
    for k in range(len(expected)):
        hit = [n.id for n in casts
               if any(cast_undefined(a, typed.values[n.id].dtype).any()
                      for a in [expected[k][n.inputs[0]], *ideal[k].get(n.inputs[0], [])])]
        if hit:
            reached = set(hit)
            for node in graph.nodes:
                if any(isinstance(o, str) and o in reached for o in node.inputs):
                    reached.add(node.id)
            out[k] = (hit, reached)
    return out


@dataclass(frozen=True)
class NodeVerdict:
    """One node of a probe run judged on the backend's own operands."""

    node: str
    stats: ErrorStats
    underflow: bool  # the error goes away when subnormal operands and results are flushed to zero
    narrow: str | None  # a narrower format all its values lie on (effective-precision evidence)
    device: str | None  # the element type the device reports for it
    excess: bool = False  # judged fused with its 16-bit producers computing in float32 (XLA's excess precision)


def judge_nodes(numeric: Graph, inputs: Values, observed: dict[str, np.ndarray],
                device: dict[str, str | None] | None = None,
                approximate: dict[str, float] | None = None) -> list[NodeVerdict]:
    """Judge every observed node of `numeric` on its own operands: observed values where there are, else ideal ones.

    `approximate` (op -> relative error budget) widens the bound of those ops (documented approximate math).
    """
    typed = infer(numeric)
    env: dict[str, Any] = dict(rounded_inputs(numeric, inputs))
    casts = {n.id for n in int_casts(numeric, typed)}
    verdicts = []
    for node in numeric.nodes:
        dtype = typed.values[node.id].dtype
        if node.id not in observed or typed.values[node.id].kind == "scalar":
            env[node.id] = _ideal_value(node, typed, env)
            continue
        if node.id in casts and cast_undefined(env[node.inputs[0]], dtype).any():  # no int is wrong there
            env[node.id] = np.asarray(observed[node.id], dtype=np.float64)
            continue
        sub = node_graph(numeric, node.id)
        sub_inputs = {i.name: env[i.name] for i in sub.inputs}
        exact = evaluate(sub, sub_inputs, rounded=False)[node.id]
        ideal = ideal_values(sub, sub_inputs)[node.id]
        actual = observed[node.id]
        gated = node.op in GATED
        floor = np.asarray(sub_inputs[node.inputs[0]], dtype=np.float64) if gated else None
        slack = slack_ulps(dtype, (approximate or {}).get(node.op, 0.0)) + (GATE_ULPS if gated else 0.0)
        st = error_stats(actual, exact, ideal, dtype, slack_ulps=slack, floor=floor)
        excess = False
        if st.ratio > 1.0:
            carried = excess_precision_stats(numeric, typed, node, sub, sub_inputs, env, actual, dtype)
            if carried is not None and carried.ratio < st.ratio:  # either reading is allowed: the kinder one
                st, excess = carried, True
        narrow = narrower_format(actual, exact, dtype) if st.ratio > 1.0 else None
        underflow = st.ratio > 1.0 and flushing_explains(sub, sub_inputs, actual, dtype)
        verdicts.append(NodeVerdict(node.id, st, underflow, narrow, (device or {}).get(node.id), excess))
        env[node.id] = np.asarray(actual, dtype=np.float64)
    return verdicts


def excess_precision_stats(numeric: Graph, typed: Any, node: Any, sub: Graph, sub_inputs: Values,
                           env: dict[str, Any], actual: np.ndarray, dtype: str) -> ErrorStats | None:
    """The node judged fused with its 16-bit producers, which then compute in float32 (None: it has none).

    XLA keeps a fused intermediate in float32 where the program rounds it to bf16/fp16 (its documented
    xla_allow_excess_precision, on by default): the next op then sees a more precise operand than the one a
    probe observes, and judging it on the observed one blames it for the rounding XLA skipped. The fused
    graph starts from the producers' own (observed) operands, so its ideals feel the float32 rounding of the
    intermediate too.
    """
    producers = {n.id: n for n in numeric.nodes}

    def producer(name: str) -> Any:
        """The 16-bit node an operand comes from, through a widening cast (None: not one)."""
        prod, info = producers.get(name), typed.values[name]
        if prod is None or info.kind == "scalar":
            return None
        if is_cast(prod.op) and info.dtype == "float32" and isinstance(prod.inputs[0], str):
            return producer(prod.inputs[0])
        return prod if info.dtype in LOW_PRECISION else None

    inputs: dict[str, Input] = {}
    nodes: list[Node] = []
    operands: list[Any] = []
    for o in node.inputs:
        prod = producer(o) if isinstance(o, str) else None
        if prod is None:
            if isinstance(o, str) and o not in inputs:
                inputs[o] = next(i for i in sub.inputs if i.name == o)
            operands.append(o)
            continue
        args: list[Any] = []
        for a in prod.inputs:
            if not isinstance(a, str):
                args.append(a)
                continue
            info = typed.values[a]
            inputs.setdefault(a, Input(a, info.shape if info.kind != "scalar" else (), info.dtype,
                                       kind="scalar" if info.kind == "scalar" else "tensor"))
            if info.kind != "scalar" and info.dtype in LOW_PRECISION:
                nodes.append(Node(f"{a}__f32", "astype", (a,), {"dtype": "float32"}))
                args.append(f"{a}__f32")
            else:
                args.append(a)
        nodes.append(Node(f"{prod.id}__f32", prod.op, tuple(args), dict(prod.attrs)))
        operands.append(f"{prod.id}__f32")
    if not any(isinstance(o, str) and o.endswith("__f32") for o in operands):
        return None
    nodes.append(Node(node.id, node.op, tuple(operands), dict(node.attrs)))
    fused = Graph(tuple(inputs.values()), tuple(dict((n.id, n) for n in nodes).values()), (node.id,))
    try:
        if infer(fused).values[node.id].dtype != dtype:
            return None
    except IRError:  # a fused form the IR does not type is not an explanation
        return None
    values = {name: env[name] for name in inputs}
    exact = evaluate(fused, values, rounded=False)[node.id]
    return error_stats(actual, exact, ideal_values(fused, values)[node.id], dtype)


def slack_ulps(dtype: str, budget: float) -> float:
    """The bound's slack in ULPs of `dtype`, plus a relative error budget expressed in those ULPs."""
    if not budget or dtype not in FLOAT_FORMATS:
        return SLACK_ULPS
    return SLACK_ULPS + budget * 2.0 ** (FLOAT_FORMATS[dtype].mantissa_bits + 1)


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


def flush(values: Any, dtype: str) -> np.ndarray:
    """`values` with every number below the smallest normal of `dtype` set to zero (what FTZ/DAZ hardware does)."""
    v = np.asarray(values, dtype=np.float64)
    if dtype not in FLOAT_FORMATS:
        return v
    return np.where(np.abs(v) < 2.0 ** FLOAT_FORMATS[dtype].min_exponent, 0.0, v)


def flushing_explains(sub: Graph, inputs: Values, actual: np.ndarray, dtype: str) -> bool:
    """True when the backend's result is within the bound of an ideal one-node computation whose subnormal
    operands and results are flushed to zero: the error comes from flush-to-zero, not from the op."""
    flushed = {i.name: (flush(inputs[i.name], i.dtype) if i.kind == "tensor" else inputs[i.name]) for i in sub.inputs}
    if all(np.array_equal(flushed[k], inputs[k]) for k in flushed):
        exact = evaluate(sub, inputs, rounded=False)[sub.outputs[0]]
        if np.array_equal(flush(exact, dtype), exact):
            return False  # nothing subnormal anywhere: flushing cannot explain anything
    out = sub.outputs[0]
    shape = np.shape(actual)
    if all(np.shape(np.broadcast_to(v, shape)) == shape for v in flushed.values()) and np.ndim(actual) > 0:
        # elementwise: the elements flushing does not touch must be within the bound on their own (triage: a
        # normal-range tanh(1e-4) = 0 next to subnormal elements was filed as flushing)
        touched = np.zeros(shape, dtype=bool)
        for i in sub.inputs:
            if i.kind == "tensor":
                v = np.broadcast_to(np.asarray(inputs[i.name], dtype=np.float64), shape)
                touched |= np.broadcast_to(flush(v, i.dtype) != v, shape)
        plain = evaluate(sub, inputs, rounded=False)[out]
        touched |= flush(plain, dtype) != plain
        keep = ~touched
        if keep.any():
            rest = error_stats(np.asarray(actual)[keep], np.asarray(plain)[keep],
                               [np.broadcast_to(i, shape)[keep] for i in ideal_values(sub, inputs)[out]], dtype)
            if rest.ratio > 1.0:
                return False
    exact = flush(evaluate(sub, flushed, rounded=False)[out], dtype)
    ideal = [flush(i, dtype) for i in ideal_values(sub, flushed)[out]]
    return error_stats(actual, exact, ideal, dtype).ratio <= 1.0


def _ideal_value(node: Any, typed: Any, env: dict[str, Any]) -> np.ndarray:
    """A node's value computed exactly from `env` and rounded to its dtype (Python scalars stay exact)."""
    args = [env[o] if isinstance(o, str) else o for o in node.inputs]
    attrs = op_attrs(node)
    with np.errstate(all="ignore"):
        value = np.asarray(OPS[node.op].reference(*args, **attrs), dtype=np.float64)
    info = typed.values[node.id]
    return value if info.kind == "scalar" else round_to(np.broadcast_to(value, info.shape), info.dtype)


class Checker:
    """Runs cases on a pool of executors and applies the oracles; reuse it across cases (warm workers)."""

    def __init__(self, pool: ExecutorPool, localize_faults: bool = True) -> None:
        self.pool = pool
        self.localize_faults = localize_faults
        self.semantic = SEMANTIC_ORACLE if create(SEMANTIC_ORACLE).availability() is None else None
        self._spent: dict[str, dict[str, float]] = {}  # the check in progress: its oracle_backend

    @property
    def tested(self) -> list[str]:
        """Executors under test (all but the numpy oracles)."""
        return [n for n in self.pool.names if n not in ORACLE_EXECUTORS]

    def subject(self, name: str, graph: Graph, outcomes: list[Outcome]) -> Subject:
        """The oracles' view of one executor on one graph."""
        ex = self.pool.executors[name].bind(self._options)
        return Subject(name, graph, outcomes, ex.policy_graph(graph), ex.numeric_graph(graph), ex.policy,
                       ex.reported_dtypes(), ex.bridged(graph), ex.dtype_contract, ex.judge_numbers,
                       ex.approximations())

    _options: dict[str, Any] = {}  # the case options of the check in progress (probes run with them too)

    def _oracle_run(self, name: str, graph: Graph, sets: list[Values], options: dict[str, Any] | None = None) -> list[Outcome]:
        """A backend run the oracles need beyond the tests (a probe, eager on a policy graph): counted in _spent."""
        outs = self.pool.run(name, graph, sets, options)
        self._tally(name, outs)
        return outs

    def _tally(self, name: str, outs: list[Outcome]) -> None:
        """Add backend work the oracles caused to the check in progress."""
        tally = self._spent.setdefault(name, {"compiles": 0.0, "compile_s": 0.0, "run_s": 0.0})
        for k, o in enumerate(outs):
            tally["compiles"] += compiles(o, k)
            tally["compile_s"] += compile_seconds(o, k)
            tally["run_s"] += o.run_s

    def check(self, case: Case, executors: list[str] | None = None, culprits: bool = True) -> CheckResult:
        """Run `case` on the executors and judge the outcomes.

        A case an executor reads a Relax pass sequence for gets one written out first (pin_passes; the result's
        case carries it). With `culprits`, a finding of such an executor names the pass whose removal makes it
        disappear (details["culprit_pass"]).
        """
        names = [n for n in (executors or self.tested) if n not in ORACLE_EXECUTORS]
        for name in names:
            self.pool.ensure(name)
        case = pin_passes(case, any("tvm_passes" in self.pool.executors[n].case_options for n in names))
        self._options = case_options(case)
        if culprits:
            self._spent = {}
        graph = case.graph
        sets = [input_values(case, k) for k in range(len(case.input_sets))]
        outcomes: dict[str, list[Outcome]] = {}
        seconds: dict[str, float] = {}

        failed: list[BaseException] = []

        def run_backends() -> None:
            try:
                for name in names:
                    t1 = time.perf_counter()
                    outcomes[name] = self.pool.run(name, graph, sets, self._options)
                    seconds[name] = time.perf_counter() - t1
            except BaseException as exc:  # noqa: BLE001 - raised again in the checking thread
                failed.append(exc)

        # The backends run one after the other in a thread that mostly waits on its worker processes, while this
        # thread computes what needs no outcome: the exact answers and the ideals of every numeric graph judged
        # (the same values, in the same order; only the wall time they add goes away).
        numbers: dict[str, tuple[list[Values], list[dict[str, list[np.ndarray]]]]] = {}  # by numeric graph
        answers: dict[str, tuple[list[Values], list[dict[str, list[np.ndarray]]]]] = {}  # by executor
        backends = threading.Thread(target=run_backends, name="precfuzz-backends", daemon=True)
        backends.start()
        hazards: list[Finding] = []
        try:
            for name in names:
                ex = self.pool.executors[name].bind(self._options)
                if ex.judge_numbers:
                    answers[name] = self._numbers(ex.numeric_graph(graph), sets, numbers)
            hazards = self._precision_hazards(case, names, sets, answers)
        finally:
            backends.join()
        if failed:
            raise failed[0]
        t2 = time.perf_counter()
        subjects = [self.subject(n, graph, outcomes[n]) for n in names]
        keys = {s.name: canonical(graph_to_json(s.policy)) for s in subjects}
        eager = self._eager(graph, subjects, keys, sets, outcomes)
        findings: list[Finding] = []
        judgements: dict[str, list[OutputJudgement]] = {}
        notes: list[str] = []
        for s in subjects:
            if not s.judge_numbers:
                continue
            expected, ideal = answers[s.name]
            judgements[s.name] = judge_outputs(graph, s.typed("numeric"), s.outcomes, expected, ideal,
                                               max(s.approximate.values(), default=0.0))
            undefined = undefined_casts(s.numeric, s.typed("numeric"), expected, ideal)
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
                found = [f2 for f in found if (f2 := self._localize(f, s, sets, notes)) is not None]
            findings += found
        semantic = semantics.judge(graph, subjects, {keys[n]: eager[n] for n in eager}, keys)
        if self.localize_faults:
            semantic = [self._localize_dtype(f, subjects, sets) if f.oracle == "dtype-divergence"
                        else self._localize_downcast(f, subjects, sets) if f.oracle == "silent-downcast"
                        else self._localize_status(f, subjects, sets) if f.oracle == "status-divergence" else f
                        for f in semantic]
        explained = {f.executor for f in semantic if f.oracle in ("silent-downcast", "dtype-divergence")}
        findings = [f for f in findings if f.executor not in explained] + semantic  # the dtype says it all
        findings += crashes.judge(graph, outcomes) + hazards
        if culprits and case.tvm_passes:
            findings = [self._culprit(f, case) if "tvm_passes" in self.pool.executors[f.executor].case_options
                        and f.kind == "backend-bug" else f for f in findings]
        if culprits:
            findings = [self._ablate(f, case) if f.executor in ABLATED and f.kind == "backend-bug" else f
                        for f in findings]
        oracle_s = time.perf_counter() - t2
        spent = {n: {k: round(v, 6) for k, v in t.items()} for n, t in self._spent.items()} if culprits else {}
        return CheckResult(case, outcomes, judgements, findings, seconds, oracle_s, eager, notes, spent)

    @staticmethod
    def _numbers(numeric: Graph, sets: list[Values],
                 numbers: dict[str, tuple[list[Values], list[dict[str, list[np.ndarray]]]]]
                 ) -> tuple[list[Values], list[dict[str, list[np.ndarray]]]]:
        """The exact answers and the ideals of `numeric` on every input set (computed once per numeric graph)."""
        key = canonical(graph_to_json(numeric))
        if key not in numbers:
            ins = [rounded_inputs(numeric, v) for v in sets]
            numbers[key] = ([evaluate(numeric, v, rounded=False) for v in ins], [ideal_values(numeric, v) for v in ins])
        return numbers[key]

    def _precision_hazards(self, case: Case, names: list[str], sets: list[Values],
                           answers: dict[str, tuple[list[Values], list[dict[str, list[np.ndarray]]]]]) -> list[Finding]:
        """A precision hazard per distinct numeric graph whose ideal already loses the float32 model's outputs.

        Needs no backend outcome (it judges the policy, not a backend): it runs while the backends do. A policy
        whose program PyTorch rejects (a chain break) runs nowhere and is not judged.
        """
        model = case.with_graph(redeclare(case.graph, LOW_PRECISION, "float32"))
        model_sets = [input_values(model, k) for k in range(len(case.input_sets))]
        seen: set[str] = set()
        out: list[Finding] = []
        for name in names:
            ex = self.pool.executors[name].bind(self._options)
            if name not in answers:
                continue
            numeric = ex.numeric_graph(case.graph)
            key = canonical(graph_to_json(numeric))
            if key in seen:
                continue
            seen.add(key)
            typed = infer(numeric)
            if typed.chain_breaks() or not any(v.dtype in LOW_PRECISION for v in typed.values.values()):
                continue
            model32 = redeclare(numeric, LOW_PRECISION, "float32")
            for k, values in enumerate(sets):
                lost = precision_hazards.judge(numeric, model32, rounded_inputs(numeric, values),
                                               rounded_inputs(model32, model_sets[k]))
                if lost is not None:
                    out.append(precision_hazards.finding(name, ex.policy, numeric, lost, k))
                    break
        return out

    # ------------------------------------------------------------ pass sequences

    def _culprit(self, finding: Finding, case: Case) -> Finding:
        """The finding with the first pass of the case's sequence whose removal makes it disappear (if any)."""
        passes = case.tvm_passes or ()
        tried: list[str] = []
        for k, name in enumerate(passes):
            try:
                rest = check_sequence(passes[:k] + passes[k + 1:])
            except PassSequenceError:
                continue  # e.g. LegalizeOps while fusion passes remain
            tried.append(name)
            without = replace(case, tvm_passes=rest)
            rechecked = self.check(without, [finding.executor], culprits=False)
            for executor, outs in rechecked.outcomes.items():  # the tests of a culprit check are oracle work here
                self._tally(executor, outs)
            again = rechecked.findings
            self._options = case_options(case)
            if not any(same_verdict(f, finding) for f in again):
                return replace(finding, message=f"{finding.message} (after {name}: gone without it)",
                               details={**finding.details, "culprit_pass": name, "passes": list(passes)})
        return replace(finding, details={**finding.details, "culprit_pass": None, "passes": list(passes),
                                         "culprits_tried": tried})

    def _ablate(self, finding: Finding, case: Case) -> Finding:
        """A pipeline variant's finding, checked against the variant's base on the same program (issue 26).

        The base (tvm/default, the hand lowering through TVM's default pipeline) runs the variant's own policy
        graph: the float16 program ToMixedPrecision was handed, the graph the frontend imported, the batch_norm
        mode a decomposition promises. Where it shows the same cause, the bug is the base's (variant_specific
        False, keyed and titled without the variant); where it runs clean, the variant's passes or importer are.
        """
        base = ABLATED[finding.executor]
        policy = self.pool.executors[finding.executor].bind(self._options).policy_graph(case.graph)
        self.pool.ensure(base)
        rechecked = self.check(replace(case, graph=policy, tvm_passes=None), [base], culprits=False)
        for executor, outs in rechecked.outcomes.items():  # ablation runs are oracle work
            self._tally(executor, outs)
        self._options = case_options(case)
        again = [f for f in rechecked.findings if f.executor == base and f.kind == "backend-bug"]
        shown = any(same_cause(finding, f) for f in again)
        note = (f"{base} shows it too on the same program: a bug of the {base} lowering" if shown else
                f"{base} runs the same program clean: the {finding.variant} step is at fault")
        return replace(finding, details={**finding.details, "variant_specific": not shown, "ablation": note})

    # ------------------------------------------------------------ semantic oracle runs

    def _eager(self, graph: Graph, subjects: list[Subject], keys: dict[str, str], sets: list[Values],
               outcomes: dict[str, list[Outcome]]) -> dict[str, list[Outcome]]:
        """PyTorch eager's outcomes on each subject's policy graph (each distinct program run once)."""
        if self.semantic is None:
            return {}
        runs: dict[str, list[Outcome]] = {}
        if self.semantic in outcomes:  # eager under test already ran the case graph
            runs[canonical(graph_to_json(graph))] = outcomes[self.semantic]
        self.pool.ensure(self.semantic)
        out = {}
        for s in subjects:
            key = keys[s.name]
            if key not in runs:
                runs[key] = self._oracle_run(self.semantic, s.policy, [rounded_inputs(s.policy, v) for v in sets])
            out[s.name] = runs[key]
        return out

    # ------------------------------------------------------------ localization

    def _probe(self, s: Subject, inputs: Values, k: int = -1) -> tuple[dict[str, np.ndarray], dict[str, str | None], dict[str, str]] | None:
        """The executor's values, device dtypes and reported dtypes of every tensor node of the case graph.

        Where the graph already outputs every tensor node, the outcome of input set `k` is the probe.
        """
        typed = infer(s.graph)
        names = [n.id for n in s.graph.nodes if typed.values[n.id].kind != "scalar"]
        if not names:
            return None
        if 0 <= k < len(s.outcomes) and list(s.graph.outputs) == names:
            outcome = s.outcomes[k]
        else:
            (outcome,) = self._oracle_run(s.name, Graph(s.graph.inputs, s.graph.nodes, tuple(names)), [inputs],
                                       self._options)
        if not outcome.ok or outcome.outputs is None:
            return None
        device = dict(zip(names, outcome.info.get("device_dtypes") or [None] * len(names)))
        return dict(zip(names, outcome.outputs)), device, dict(zip(names, outcome.dtypes or []))

    def _localize(self, finding: Finding, s: Subject, sets: list[Values], notes: list[str]) -> Finding | None:
        """Pin a numeric finding on the first node that is out of bound on its own operands (None: no node is).

        A violation of the whole graph that no node explains on its own (each op within its bound on the
        backend's own operands) is not something a maintainer can act on: it is noted, not reported.
        """
        inputs = sets[finding.input_set]
        probe = self._probe(s, inputs, finding.input_set)
        if probe is None:
            return replace(finding, details={**finding.details, "localized": False})
        observed, device, _ = probe
        verdicts = judge_nodes(s.numeric, inputs, observed, device, s.approximate)
        node = at_fault([(v.node, v.stats) for v in verdicts])
        if node is None:
            notes.append(f"{s.name}: {finding.message} (no single node is out of bound on its own operands)")
            return None
        v = next(v for v in verdicts if v.node == node)
        typed = s.typed("numeric")
        ops, dtypes = node_signature(s.numeric, typed, node)
        declared = typed.values[node].dtype
        narrow = v.narrow or (v.device if device_narrower(v.device, declared) else None)
        details = {**finding.details, "localized": True, "excess_precision": v.excess, "output_ratio": finding.ratio,
                   "max_abs": v.stats.max_abs, "worst_index": v.stats.worst_index}
        if narrow is not None:
            evidence = f"the device holds {v.device}" if v.device == narrow else f"every value of {node} is a {narrow} number"
            return Finding("effective-precision", s.name, ops, [declared, narrow], f"{declared}-carries-{narrow}",
                           f"{node} ({ops[0]}) declares {declared} but computes in {narrow}: {evidence} "
                           f"({v.stats.ratio:.3g}x the {declared} bound)", ratio=v.stats.ratio,
                           max_ulp=v.stats.max_ulp, input_set=finding.input_set, node=node,
                           details={**details, "evidence": evidence})
        st = v.stats
        cls = "underflow" if v.underflow else ("nonfinite" if st.nonfinite_mismatch else "bound")
        if cls == "underflow":  # flushing subnormals is a documented choice of many backends: a coverage note
            return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=cls, kind="unsupported",
                           message=f"{node} ({ops[0]}, {dtypes[0]}): {st.ratio:.3g}x the allowed error where an operand "
                                   f"or the result is subnormal (below the smallest normal {declared})",
                           ratio=st.ratio, max_ulp=st.max_ulp, details=details)
        if st.nonfinite_mismatch:
            msg = (f"{node} ({ops[0]}, {dtypes[0]}): {st.nonfinite_mismatch} non-finite value(s) where the reference "
                   f"is finite (or the reverse), on its own operands")
        else:
            own = ("fused with its float16/bfloat16 producers, which the backend kept in float32 (excess precision)"
                   if v.excess else "on its own operands")
            msg = (f"{node} ({ops[0]}, {dtypes[0]}): max error {st.max_abs:.4g} ({st.max_ulp:.1f} ULP) is "
                   f"{st.ratio:.3g}x the allowed error, {own}")
        return replace(finding, ops=ops, dtypes=dtypes, node=node, error_class=cls, message=msg, ratio=st.ratio,
                       max_ulp=st.max_ulp, details=details)

    def _localize_status(self, finding: Finding, subjects: list[Subject], sets: list[Values]) -> Finding:
        """Name the first node whose prefix of the graph raises the same error (bisection over prefixes, each with
        every tensor node as an output, so a longer prefix keeps whatever a shorter one raised on)."""
        s = next(x for x in subjects if x.name == finding.executor)
        typed = infer(s.graph)
        nodes = list(s.graph.nodes)
        wanted = (finding.error_class, finding.details.get("error_key"))

        def raises(k: int) -> bool:
            outs = tuple(n.id for n in nodes[:k + 1] if typed.values[n.id].kind != "scalar")
            if not outs:
                return False
            (o,) = self._oracle_run(s.name, Graph(s.graph.inputs, tuple(nodes[:k + 1]), outs),
                                    [sets[finding.input_set]], self._options)
            return o.status in ("error", "unsupported") and (classify_error(o), message_key(o.message)) == wanted

        if not nodes or not raises(len(nodes) - 1):
            return finding  # the error needs the graph as it is (its outputs, a fusion): the whole graph stays
        lo, hi = 0, len(nodes) - 1  # hi raises
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if raises(mid) else (mid + 1, hi)
        node = nodes[hi]
        return replace(finding, ops=[node.op], node=node.id,
                       dtypes=sorted({typed.values[o].dtype for o in node.inputs if isinstance(o, str)}
                                     | {typed.values[node.id].dtype}),
                       message=f"{node.id} ({node.op}): {finding.message}",
                       details={**finding.details, "localized": True, "whole_graph": False})

    def _localize_downcast(self, finding: Finding, subjects: list[Subject], sets: list[Values]) -> Finding:
        """Name the first mixed-dtype node whose own result is narrower than the promotion (one probe)."""
        s = next(x for x in subjects if x.name == finding.executor)
        probe = self._probe(s, sets[finding.input_set], finding.input_set)
        if probe is None:
            return finding
        _, _, reported = probe
        numeric = s.typed("numeric")
        for node_id, brk in s.typed().chain_breaks().items():
            got = reported.get(node_id)
            want = s.reported(numeric.values[node_id].dtype)
            if node_id in s.bridged or got is None or not semantics.narrower(got, want):
                continue
            op = s.graph.node(node_id).op
            lost = brk.activation_dtype if semantics.narrower(brk.param_dtype, brk.activation_dtype) else brk.param_dtype
            return replace(finding, ops=[op], dtypes=[brk.activation_dtype, brk.param_dtype, got], node=node_id,
                           message=f"{s.name} runs {node_id} ({op}) on a {brk.activation_dtype} activation with "
                                   f"{brk.param_dtype} parameters, where PyTorch raises, and returns {got} instead of "
                                   f"the promoted {want}: the {lost} operand was silently downcast",
                           details={**finding.details, "localized": True})
        return finding

    def _localize_dtype(self, finding: Finding, subjects: list[Subject], sets: list[Values]) -> Finding:
        """Name the first node whose reported dtype differs from what eager reports for it (one probe each)."""
        s = next(x for x in subjects if x.name == finding.executor)
        probe = self._probe(s, sets[finding.input_set], finding.input_set)
        if probe is None or self.semantic is None:
            return finding
        _, _, reported = probe
        names = tuple(reported)
        (e,) = self._oracle_run(self.semantic, Graph(s.policy.inputs, s.policy.nodes, names),
                             [rounded_inputs(s.policy, sets[finding.input_set])])
        if not e.ok:
            return finding
        for name, want in zip(names, e.dtypes or []):
            got = reported[name]
            if s.reported(want) != got:
                op = s.graph.node(name).op
                return replace(finding, ops=[op], dtypes=[s.reported(want), got], node=name,
                               message=f"{name} ({op}): {s.name} returns {got} where PyTorch eager on the CPU returns "
                                       f"{s.reported(want)} ({s.label})",
                               details={**finding.details, "localized": True})
        return finding
