"""What the minimizer preserves: a finding's signature, matched against the findings of smaller cases, with a cache."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, replace

from oracles.error_bounds import node_signature
from oracles.findings import Finding, backend_of
from oracles.vocabulary import ErrorClass, Oracle

from ..analysis import promoted_breaks
from ..check import Checker
from ..executors import ORACLE_EXECUTORS, REGISTRY
from ..ir import Case, Graph, IRError, case_options, infer

WHOLE_GRAPH_ORACLES = (Oracle.CRASH, Oracle.TIMEOUT)  # their signatures name every op and input dtype of the graph
EAGER_FREE_ORACLES = (Oracle.ERROR_BOUND, Oracle.EFFECTIVE_PRECISION, Oracle.CRASH, Oracle.TIMEOUT)  # judged without PyTorch eager


# Slippage (Hypothesis's word for shrinking into another bug): a reduction keeps an out-of-bound finding only while
# its ratio stays above a tenth of the original's, asked at most 10x (triage15 baf9062a49: ToMixedPrecision dropping
# attention's mask and scale was 785x the bound; minimized to an all-True mask and the default scale, 2.56x, it
# showed only float16 attention's rounding)
SLIP = 10.0


@dataclass(frozen=True)
class Target:
    """A parsed finding signature: oracle|executor|ops|dtypes|error_class, plus an optional `|vs:against` hint.

    `against` (a divergence's comparator) is not part of the signature: it only says which other executor a
    check must run for the divergence to show; any comparator that runs matches.

    `whole_graph` marks signatures whose ops and dtypes describe the whole graph rather than the node at
    fault (crashes, timeouts, unlocalized verdicts): those match when oracle, executor, error class and
    `against` agree and the ops of the smaller case are a subset of the original ones (the dtypes may change).
    Localized signatures match exactly. `promotion` (set from the original finding) demands that a chain
    break still comes from a type promotion inside the graph: an activation that merely arrives in the
    wrong dtype as an input is a user error, not the bug.
    """

    oracle: str
    executor: str
    ops: tuple[str, ...]
    dtypes: str
    error_class: str
    against: str = ""
    whole_graph: bool = False
    promotion: bool = False
    min_ratio: float = 0.0  # an out-of-bound finding must keep this much of the original's ratio (no slipping)
    error_key: str = ""  # a status divergence's error message class: with it, the dtypes may change (a crash in
    # float32 too is no 16-bit bug; sample30 ba89e10fb7: rms_norm over every axis, kept and titled bfloat16)

    @classmethod
    def parse(cls, signature: str, graph: Graph | None = None) -> "Target":
        """Parse a signature; `graph` (the case it came from) decides whether it names the whole graph."""
        parts = signature.split("|")
        against = ""
        if len(parts) == 6 and parts[5].startswith("vs:"):
            against = parts.pop()[3:]
        if len(parts) != 5:
            raise ValueError(f"malformed signature {signature!r} (expected oracle|executor|ops|dtypes|error_class[|vs:other])")
        oracle, executor, ops, dtypes, error_class = parts
        op_list = tuple(o for o in ops.split("+") if o)
        whole = oracle in WHOLE_GRAPH_ORACLES
        if graph is not None and not whole and "->" not in dtypes:
            graph_ops = tuple(sorted({n.op for n in graph.nodes}))
            whole = len(graph_ops) > 1 and op_list == graph_ops
        return cls(oracle, executor, op_list, dtypes, error_class, against, whole)

    @classmethod
    def of(cls, finding: Finding, graph: Graph) -> "Target":
        """The target of a finding on `graph`."""
        target = replace(cls.parse(finding.signature, graph), against=finding.against)
        if finding.details.get("whole_graph"):
            target = replace(target, whole_graph=True)
        return target.refined(finding, graph)

    def refined(self, finding: Finding, graph: Graph) -> "Target":
        """This target plus what the original finding's details add (a promotion behind the node at fault)."""
        at_fault = {n for n in finding.node.split(",") if n}
        floor = min(finding.ratio, SLIP**2) / SLIP if finding.error_class == ErrorClass.BOUND and finding.ratio else 0.0
        key = str(finding.details.get("error_key") or "") if finding.oracle == Oracle.STATUS_DIVERGENCE else ""
        # (set here, not in `of`: a campaign minimizes a signature, refined by the original case's own finding;
        # triage32 ba89e10fb7 kept its float16 so)
        return replace(self, promotion=bool(at_fault & promoted_breaks(graph)), min_ratio=floor, error_key=key)

    def admits(self, graph: Graph) -> bool:
        """The static part of the match, decided without running anything."""
        return not self.promotion or bool(promoted_breaks(graph))

    @property
    def needs_eager(self) -> bool:
        """True when a check must run PyTorch eager (the semantic oracle) for this target's finding to show."""
        # a node of another shape than PyTorch's is also found where eager saw a later node raise or change dtype
        # (localize.status and localize.dtype): its finding needs eager (triage12 bf3bf1182a was never minimized)
        # a gradient out of bound is a backend's bug only where eager's on the same program is not as far off
        # (triage25 bd18a077ac, b32559a80d: minimized without eager into PyTorch's own bf16 div gradient, bit-equal)
        # and so is a forward value out of bound (triage31 b61e19a7b7: torch_xla's float32 attention minimized into a
        # case whose error PyTorch's math path shares bit for bit, filed as torch_xla's, its script exiting 1 anyway)
        numeric = self.oracle == Oracle.ERROR_BOUND and self.error_class != ErrorClass.UNDERFLOW
        return (self.oracle not in EAGER_FREE_ORACLES or self.error_class == "shape" or self.against == "eager"
                or (numeric and backend_of(self.executor) != "torch"))

    def node_shown(self, numeric: Graph) -> bool:
        """For a localized error-bound target: some node of `numeric` (the executor's numeric graph) has the
        target's op and operand -> result dtypes, which a matching finding must name. Other targets: True."""
        if self.oracle != Oracle.ERROR_BOUND or self.whole_graph or "->" not in self.dtypes:
            return True
        typed = infer(numeric)
        return any(n.op in self.ops and (tuple(o), ",".join(d)) == (self.ops, self.dtypes)
                   for n in numeric.nodes for o, d in [node_signature(numeric, typed, n.id)])

    @property
    def signature(self) -> str:
        """The signature text."""
        return "|".join([self.oracle, self.executor, "+".join(self.ops), self.dtypes, self.error_class])

    @property
    def executors(self) -> list[str]:
        """The executors a check must run: the one at fault and the one it is compared against."""
        names = [self.executor]
        if self.against in REGISTRY and self.against not in ORACLE_EXECUTORS and self.against != self.executor:
            names.append(self.against)
        return names

    def matches(self, finding: Finding) -> bool:
        """True when `finding` shows the same bug."""
        if (finding.oracle, finding.executor, finding.error_class) != (self.oracle, self.executor, self.error_class):
            return False
        if self.min_ratio and finding.error_class == ErrorClass.BOUND and not (finding.ratio or 0.0) >= self.min_ratio:
            return False  # a 785x error shrunk to 2.56x is another mechanism (triage15 baf9062a49: the mask went)
        dtypes = ",".join(finding.dtypes)
        if self.whole_graph:  # the op set may shrink; the dtypes may change (a crash may not need bfloat16 at all)
            return set(finding.ops) <= set(self.ops)
        same_error = bool(self.error_key) and finding.details.get("error_key") == self.error_key
        return tuple(finding.ops) == self.ops and (dtypes == self.dtypes or same_error)


class Predicate:
    """Does a case still show the target? Checks run only the target's executors; results are cached by case id.

    A check runs PyTorch eager only when the target's oracle needs it (a numeric or crash finding does not),
    and never the culprit-pass search (not part of the signature; the fresh re-check names the culprit).
    A localized error-bound target is refuted without running anything when no node of the candidate has
    its op and dtypes in the executor's numeric graph (`static_refutes` counts those).
    """

    def __init__(self, checker: Checker, target: Target) -> None:
        self.full_checker = checker
        self.target = target
        self.cache: dict[str, Finding | None] = {}
        self.checks = 0  # checks that ran executors
        self.hits = 0  # answers from the cache
        self.errors = 0  # checks that raised in-process (counted as not interesting)
        self.check_s = 0.0
        self.static_refutes = 0
        self.worst: Finding | None = None  # the worst manifestation of the target's op seen (issue 26: titles)
        self.worst_elements = 0

    @property
    def target(self) -> Target:
        """The target matched against."""
        return self._target

    @target.setter
    def target(self, target: Target) -> None:
        self._target = target
        self.checker = self.full_checker
        if not target.needs_eager and self.full_checker.semantic is not None:
            self.checker = copy.copy(self.full_checker)
            self.checker.semantic = None

    def admits(self, case: Case) -> bool:
        """The static part of the match (Target.admits, and the node the finding must name)."""
        if not self.target.admits(case.graph):
            return False
        ex = self.checker.pool.executors.get(self.target.executor)
        if ex is None:
            return True
        try:
            numeric = ex.bind(case_options(case)).numeric_graph(case.graph)
            return self.target.node_shown(numeric)
        except (IRError, ValueError, KeyError, TypeError):  # the check itself will say
            return True

    def __call__(self, case: Case) -> Finding | None:
        """The matching finding of `case`, or None."""
        key = case.id
        if key in self.cache:
            self.hits += 1
            return self.cache[key]
        if not self.admits(case):
            self.static_refutes += 1
            self.cache[key] = None
            return None
        t0 = time.perf_counter()
        self.checks += 1
        try:
            findings = self.checker.check(case, self.target.executors, culprits=False).findings
        except Exception:  # noqa: BLE001 - an in-process failure (policy rewrite, reference) refutes the candidate
            self.errors += 1
            findings = []
        self.check_s += time.perf_counter() - t0
        found = next((f for f in findings if self.target.matches(f)), None)
        self.cache[key] = found
        self._note_worst(case, findings)
        return found

    def _note_worst(self, case: Case, findings: list[Finding]) -> None:
        """Keep the worst finding of the target's oracle, executor and ops: non-finite values beat any ratio."""
        def badness(f: Finding) -> float:
            return float("inf") if f.error_class == ErrorClass.NONFINITE else (f.ratio or 0.0)

        same = [f for f in findings if (f.oracle, f.executor, tuple(f.ops)) ==
                (self.target.oracle, self.target.executor, self.target.ops)]
        for f in same:
            if self.worst is None or badness(f) > badness(self.worst):
                self.worst = f
                self.worst_elements = sum(math.prod(i.shape) for i in case.graph.inputs)
