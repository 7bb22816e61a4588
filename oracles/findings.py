"""Finding values and their stable signatures (what dedup keys on: never the values)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Finding:
    """One oracle verdict against one executor on one case."""

    oracle: str  # error-bound | status | dtype-chain | effective-precision | dtype-divergence | crash
    executor: str
    ops: list[str]  # ops at fault (localized where possible)
    dtypes: list[str]  # dtypes at fault: operand dtypes -> output dtype
    error_class: str  # e.g. bound, nonfinite, dtype-mismatch, crash-signal-11, timeout
    message: str
    against: str = ""  # the other executor, for divergence oracles
    ratio: float | None = None  # observed / allowed error, where it applies
    max_ulp: float | None = None
    input_set: int = 0
    output: str = ""
    node: str = ""  # node id at fault, when localized
    details: dict[str, Any] = field(default_factory=dict)
    per_op: bool = True  # False: one root cause whatever op shows it (the signature leaves the ops out)

    @property
    def variant(self) -> str:
        """The configuration part of the executor name (after 'backend/')."""
        return self.executor.split("/", 1)[1] if "/" in self.executor else ""

    @property
    def signature(self) -> str:
        """Stable dedup key: oracle, executor, ops and dtypes at fault, error class (not the executor compared with)."""
        ops = "+".join(self.ops) if self.per_op else "*"
        body = "|".join([self.oracle, self.executor, ops, ",".join(self.dtypes), self.error_class])
        return body

    @property
    def short_id(self) -> str:
        """Short hash of the signature, for file names."""
        return hashlib.sha256(self.signature.encode()).hexdigest()[:10]

    def record(self) -> dict[str, Any]:
        """JSON-able form (the findings.jsonl fields are added by the campaign)."""
        out = asdict(self)
        out.update(signature=self.signature, variant=self.variant)
        return out
