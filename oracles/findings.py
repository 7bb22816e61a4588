"""Finding values and their stable signatures (what dedup keys on: never the values)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from .evidence import Evidence, jsonable, read
from .vocabulary import ExecutorName, Kind

# What a person does with a finding: report it upstream, fix the model, or note a coverage gap.
KINDS = tuple(k.value for k in Kind)


@dataclass
class Finding:
    """One oracle verdict against one executor on one case."""

    oracle: str  # error-bound | status-divergence | dtype-divergence | silent-downcast | model-hazard | coverage | ...
    executor: str
    ops: list[str]  # ops at fault (localized where possible)
    dtypes: list[str]  # dtypes at fault: operand dtypes -> output dtype
    error_class: str  # e.g. bound, nonfinite, dtype-mismatch, crash-signal-11, timeout
    message: str
    kind: str = Kind.BACKEND_BUG
    against: str = ""  # what it was compared with (e.g. "eager" for the semantic oracle)
    ratio: float | None = None  # observed / allowed error, where it applies
    max_ulp: float | None = None
    input_set: int = 0
    output: str = ""
    node: str = ""  # node id at fault, when localized
    details: Evidence = field(default_factory=Evidence)  # typed per detector: oracles/evidence.py

    @property
    def variant(self) -> str:
        """The configuration part of the executor name (after 'backend/')."""
        return ExecutorName.parse(self.executor).variant

    @property
    def backend(self) -> str:
        """The backend family: torch_xla, tvm, torch or neuron."""
        return backend_of(self.executor)

    @property
    def signature(self) -> str:
        """Stable dedup key: oracle, executor, ops and dtypes at fault, error class (not the executor compared with)."""
        return "|".join([self.oracle, self.executor, "+".join(self.ops), ",".join(self.dtypes), self.error_class])

    @property
    def short_id(self) -> str:
        """Short hash of the signature, for file names."""
        return hashlib.sha256(self.signature.encode()).hexdigest()[:10]

    def record(self) -> dict[str, Any]:
        """JSON-able form (the findings.jsonl fields are added by the campaign); `from_record` reads it back whole."""
        out = asdict(self)
        out.update(signature=self.signature, variant=self.variant, backend=self.backend,
                   details=jsonable(self.details))
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Finding:
        """The Finding a record describes (`record`'s form, or a findings.jsonl line); its evidence checked against
        the schema (oracles.evidence.EvidenceError on a misfit)."""
        def num(x: Any) -> float | None:
            return None if x is None else float(x)

        return cls(str(rec["oracle"]), str(rec["executor"]), [str(o) for o in rec["ops"]],
                   [str(d) for d in rec["dtypes"]], str(rec.get("error_class", "")), str(rec.get("message", "")),
                   kind=str(rec.get("kind", Kind.BACKEND_BUG)), against=str(rec.get("against", "")),
                   ratio=num(rec.get("ratio")), max_ulp=num(rec.get("max_ulp")), input_set=int(rec.get("input_set", 0)),
                   output=str(rec.get("output", "")), node=str(rec.get("node", "")),
                   details=read(rec.get("details") or {}))


def backend_of(executor: str) -> str:
    """The backend family of an executor name (its part before '/')."""
    return ExecutorName.parse(executor).backend
