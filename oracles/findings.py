"""Finding values and their stable signatures (what dedup keys on: never the values)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

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
    details: dict[str, Any] = field(default_factory=dict)

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
        """JSON-able form (the findings.jsonl fields are added by the campaign)."""
        out = asdict(self)
        out.update(signature=self.signature, variant=self.variant, backend=self.backend)
        return out


def backend_of(executor: str) -> str:
    """The backend family of an executor name (its part before '/')."""
    return ExecutorName.parse(executor).backend
