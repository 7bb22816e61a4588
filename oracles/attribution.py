"""Which component a backend bug belongs to, found by checking the case again without it (pure: the checker's
recheck callable runs the backends).

- culprit_pass: the first pass of a Relax pass sequence whose removal makes the finding disappear;
- ablate: a pipeline variant's finding (ToMixedPrecision, the torch.export frontend, a decomposition) against
  the variant's base running the variant's own program: the variant is named only where the base runs it clean.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from fuzzer.ir import Case, Graph, forward_inputs
from fuzzer.tvm_passes import PassSequenceError, check_sequence

from .bugs import same_cause
from .findings import Finding
from .vocabulary import Kind

Recheck = Callable[[Case, list[str]], list[Finding]]  # the findings of a case on these executors (no attribution)

# pipeline variants and the base each finding of theirs is checked against
ABLATED = {"tvm/mixed-precision": "tvm/default", "tvm/frontend": "tvm/default", "tvm/decompose": "tvm/default",
           "tvm/decompose-inference": "tvm/default", "tvm/passes": "tvm/default"}


def at_departure(finding: Finding, case: Case) -> Case:
    """What attribution rechecks: for a finding that names an earlier node whose dtype or shape departed from
    PyTorch's (a later node then raised on it), the case cut after that node, which it returns; else the case.

    The departure itself is the bug: a pass whose removal merely stops the later node from raising (triage9
    b7c8652ad3: FuseTransposeMatmul, after attention's float32 result) is not its culprit.
    """
    ids = [n.id for n in case.graph.nodes]
    if not finding.details.get("raised_at") or finding.node not in ids:
        return case
    prefix = case.graph.nodes[:ids.index(finding.node) + 1]
    return replace(case, graph=Graph(forward_inputs(case.graph), prefix, (finding.node,)))


def same_verdict(a: Finding, b: Finding) -> bool:
    """True when two findings of one executor are the same verdict (oracle, executor, ops, class; dtypes aside)."""
    return (a.oracle, a.executor, a.ops, a.error_class) == (b.oracle, b.executor, b.ops, b.error_class)


def culprit_pass(finding: Finding, case: Case, recheck: Recheck) -> Finding:
    """The finding with the first pass of the case's sequence whose removal makes it disappear (if any)."""
    passes = case.tvm_passes or ()
    tried: list[str] = []
    for k, name in enumerate(passes):
        try:
            rest = check_sequence(passes[:k] + passes[k + 1:])
        except PassSequenceError:
            continue  # e.g. LegalizeOps while fusion passes remain
        tried.append(name)
        if not any(same_verdict(f, finding) for f in recheck(replace(case, tvm_passes=rest), [finding.executor])):
            return replace(finding, message=f"{finding.message} (after {name}: gone without it)",
                           details={**finding.details, "culprit_pass": name, "passes": list(passes)})
    return replace(finding, details={**finding.details, "culprit_pass": None, "passes": list(passes),
                                     "culprits_tried": tried})


def ablate(finding: Finding, case: Case, policy: Graph, recheck: Recheck) -> Finding:
    """A variant's finding against its base on the variant's own policy graph (issue 26).

    The base (tvm/default, the hand lowering through TVM's default pipeline) runs what the variant was handed:
    the float16 program ToMixedPrecision made, the graph the frontend imported, the batch_norm mode a
    decomposition promises. Where it shows the same cause, the bug is the base's (variant_specific False: keyed
    and titled without the variant); where it runs clean, the variant's passes or importer are at fault.
    """
    base = ABLATED[finding.executor]
    again = [f for f in recheck(replace(case, graph=policy, tvm_passes=None), [base])
             if f.executor == base and f.kind == Kind.BACKEND_BUG]
    shown = any(same_cause(finding, f) for f in again)
    note = (f"{base} shows it too on the same program: a bug of the {base} lowering" if shown else
            f"{base} runs the same program clean: the {finding.variant} step is at fault")
    return replace(finding, details={**finding.details, "variant_specific": not shown, "ablation": note})
