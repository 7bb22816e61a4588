"""What the oracles see of one executor on one case: its outcomes and the contract of its precision policy."""

from __future__ import annotations

from dataclasses import dataclass, field

from fuzzer.ir import Graph, TypedGraph, infer
from fuzzer.outcome import Outcome
from fuzzer.policy import DECLARED, Policy


@dataclass
class Subject:
    """One executor under test on one case.

    `policy` is the PyTorch program its precision policy runs (explicit casts where autocast or
    model.to(bf16) would cast): PyTorch eager on the CPU runs it too, and that run defines which status and
    dtypes are right. `numeric` declares the dtypes the executor computes in, which sets its error bound
    (the policy graph itself, except where a documented mode computes narrower than it reports, e.g.
    XLA_USE_BF16). `report` maps a dtype to the one the policy reports for it.
    """

    name: str
    graph: Graph  # the case graph the executor ran
    outcomes: list[Outcome]
    policy: Graph
    numeric: Graph
    label: Policy = DECLARED  # its precision policy (str(): the label records carry)
    report: dict[str, str] = field(default_factory=dict)
    bridged: frozenset[str] = frozenset()  # chain breaks our own lowering bridges (Relax has no promotion)
    dtype_contract: bool = True  # False: the reported dtypes are not judged (a documented mode relabels them)
    judge_numbers: bool = True  # False: the numbers are not judged (a documented mode's own arithmetic)
    approximate: dict[str, float] = field(default_factory=dict)  # op -> relative error budget (approximate math)
    _typed: dict[str, TypedGraph] = field(default_factory=dict, repr=False)

    def typed(self, which: str = "policy") -> TypedGraph:
        """The typed policy or numeric graph (cached)."""
        if which not in self._typed:
            self._typed[which] = infer(self.policy if which == "policy" else self.numeric)
        return self._typed[which]

    def reported(self, dtype: str) -> str:
        """The dtype this policy reports for a tensor PyTorch eager would report as `dtype`."""
        return self.report.get(dtype, dtype)
