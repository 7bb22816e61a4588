"""Check one case: run it on executors, then let every oracle judge the outcomes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from oracles import dtype_outcomes
from oracles import status as status_oracle
from oracles.error_bounds import OutputJudgement, bound_findings, judge_outputs, localize, node_signature, probe_outputs
from oracles.findings import Finding

from .dtypes import round_to
from .executors import ORACLE_EXECUTORS
from .interpret import evaluate, ideal_values
from .ir import Case, Graph, TypedGraph, canonical, graph_to_json, infer, input_values
from .isolation import ExecutorPool
from .outcome import Outcome


@dataclass
class CheckResult:
    """Everything one check produced."""

    case: Case
    outcomes: dict[str, list[Outcome]]
    judgements: dict[str, list[OutputJudgement]]
    findings: list[Finding]
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per executor (IPC included)
    oracle_s: float = 0.0  # reference, ideal and oracles

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
            "verdict": "FINDING" if flagged else ("oracle" if name in ORACLE_EXECUTORS else "ok"),
            "detail": worst.summary() if not worst.ok else "",
        }


def _policy_inputs(policy: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs re-rounded to the dtypes a policy graph declares (e.g. params cast to bf16)."""
    out = dict(inputs)
    for inp in policy.inputs:
        if inp.kind == "tensor":
            out[inp.name] = round_to(inputs[inp.name], inp.dtype)
    return out


def _explained_bounds_dropped(findings: list[Finding]) -> list[Finding]:
    """An error-bound finding that an effective-precision finding explains (same executor) says less: drop it."""
    explained = {f.executor for f in findings if f.oracle == "effective-precision"}
    return [f for f in findings if not (f.oracle == "error-bound" and f.executor in explained)]


class Checker:
    """Runs cases on a pool of executors and applies the oracles; reuse it across cases (warm workers)."""

    def __init__(self, pool: ExecutorPool, localize_faults: bool = True) -> None:
        self.pool = pool
        self.localize_faults = localize_faults

    @property
    def tested(self) -> list[str]:
        """Executors under test (all but the numpy oracles)."""
        return [n for n in self.pool.names if n not in ORACLE_EXECUTORS]

    def check(self, case: Case, executors: list[str] | None = None) -> CheckResult:
        """Run `case` on the executors and judge the outcomes."""
        graph = case.graph
        names = [n for n in (executors or self.tested) if n not in ORACLE_EXECUTORS]
        t0 = time.perf_counter()
        sets = [input_values(case, k) for k in range(len(case.input_sets))]
        expected = [evaluate(graph, s, rounded=False) for s in sets]
        oracle_s = time.perf_counter() - t0
        outcomes: dict[str, list[Outcome]] = {}
        seconds: dict[str, float] = {}
        for name in names:
            t1 = time.perf_counter()
            outcomes[name] = self.pool.run(name, graph, sets)
            seconds[name] = time.perf_counter() - t1
        t2 = time.perf_counter()
        ideal_cache: dict[str, list[dict[str, list[np.ndarray]]]] = {}
        policies: dict[str, TypedGraph] = {}
        policy_graphs: dict[str, Graph] = {}
        judgements: dict[str, list[OutputJudgement]] = {}
        findings: list[Finding] = []
        notes: set[str] = set()
        for name in names:
            policy = policy_graphs[name] = self.pool.executors[name].policy_graph(graph)
            key = canonical(graph_to_json(policy))
            if key not in ideal_cache:
                ideal_cache[key] = [ideal_values(policy, _policy_inputs(policy, s), notes) for s in sets]
            policies[name] = infer(policy)
            judgements[name] = judge_outputs(graph, policies[name], outcomes[name], expected, ideal_cache[key])
            findings += bound_findings(name, graph, policies[name], judgements[name])
        findings += status_oracle.judge(graph, outcomes)
        findings += dtype_outcomes.judge(graph, infer(graph), outcomes, policy_graphs, expected)
        findings = _explained_bounds_dropped(findings)
        if "underflow" in notes:  # flush-to-zero and denormal handling: its own class, easy to triage apart
            findings = [replace(f, error_class="underflow") if f.oracle == "error-bound" and f.error_class == "bound"
                        else f for f in findings]
        if self.localize_faults:
            probes: dict[tuple[str, int], Outcome] = {}
            for k, f in enumerate(findings):
                if f.oracle == "error-bound" or (f.oracle == "dtype-divergence" and f.error_class == "reported-vs-policy"):
                    key = canonical(graph_to_json(policy_graphs[f.executor]))
                    findings[k] = self._localize(f, graph, policy_graphs[f.executor], sets[f.input_set],
                                                 expected[f.input_set], ideal_cache[key][f.input_set], probes)
        oracle_s += time.perf_counter() - t2
        return CheckResult(case, outcomes, judgements, findings, seconds, oracle_s)

    def _localize(self, finding: Finding, graph: Graph, policy: Graph, inputs: dict[str, np.ndarray],
                  expected: dict[str, np.ndarray], ideal: dict[str, list[np.ndarray]],
                  probes: dict[tuple[str, int], Outcome]) -> Finding:
        """Pin a finding on the first node whose own output shows it, from one probe run outputting every node.

        Error bounds: the first node whose result breaks the bound. Dtype divergences: the first node whose
        reported dtype differs from the policy's. Fusion may differ in a probe; if no node shows it, the
        finding keeps the output it was seen on (details: localized False).
        """
        probe_names = probe_outputs(graph)
        if len(probe_names) <= 1:
            return finding
        probe = Graph(graph.inputs, graph.nodes, tuple(probe_names))
        slot = (finding.executor, finding.input_set)
        if slot not in probes:
            probes[slot] = self.pool.run(finding.executor, probe, [inputs])[0]
        outcome = probes[slot]
        typed = infer(policy)
        if finding.oracle == "error-bound":
            node = localize(probe, typed, outcome, expected, ideal)
        else:
            node = next((n for n, d in zip(probe_names, outcome.dtypes or []) if d != typed.values[n].dtype), None) \
                if outcome.ok else None
        if node is None:
            return replace(finding, details={**finding.details, "localized": False})
        ops, dtypes = node_signature(graph, typed, node)
        if finding.oracle == "dtype-divergence":
            reported = dict(zip(probe_names, outcome.dtypes or []))[node]
            dtypes = [typed.values[node].dtype, reported]
        return replace(finding, ops=ops, dtypes=dtypes, node=node, details={**finding.details, "localized": True})
