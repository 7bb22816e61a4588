"""The finding book: one record per finding signature, in order of discovery, with hit counts (pure bookkeeping).

A signature is first *claimed* by the lane that found it (its case and scripts are written outside the campaign
lock; hits meanwhile are counted on the claim), then *recorded*. state.json keeps the counts, findings.jsonl the
records; a resume takes the larger count of the two, and restores records state.json counts but findings.jsonl
lacks from the copies kept beside each finding's case.
"""

from __future__ import annotations

from typing import Any, Iterable


class FindingBook:
    """Finding records by signature: recorded (in discovery order) or claimed (being saved)."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.claimed: dict[str, int] = {}  # signatures being saved -> hits meanwhile

    def __len__(self) -> int:
        return len(self.records)

    def __contains__(self, signature: object) -> bool:
        return signature in self.records

    def __getitem__(self, signature: str) -> dict[str, Any]:
        return self.records[signature]

    def load(self, records: Iterable[dict[str, Any]], counts: dict[str, int]) -> None:
        """Take records read back, each counted as the larger of its record and `counts` (state.json's)."""
        for rec in records:
            sig = rec["signature"]
            rec["count"] = max(int(rec.get("count", 1)), int(counts.get(sig, 0)))
            if sig not in self.records:
                self.order.append(sig)
            self.records[sig] = rec

    def lost(self, counts: dict[str, int]) -> list[str]:
        """Signatures `counts` holds that no record has (findings.jsonl deleted, cut short, a line quarantined)."""
        return [s for s in counts if s not in self.records]

    def hit(self, signature: str) -> bool:
        """Count a hit; True when the signature is new (the caller then saves it and calls `put`)."""
        if signature in self.records:
            self.records[signature]["count"] += 1
            return False
        if signature in self.claimed:
            self.claimed[signature] += 1
            return False
        self.claimed[signature] = 1
        return True

    def put(self, record: dict[str, Any]) -> None:
        """Record a claimed signature, with the hits its claim counted."""
        sig = record["signature"]
        record["count"] = self.claimed.pop(sig, 1)
        self.records[sig] = record
        self.order.append(sig)

    def in_order(self) -> list[dict[str, Any]]:
        """The records in order of discovery."""
        return [self.records[s] for s in self.order]

    def counts(self) -> dict[str, int]:
        """Signature -> hits (what state.json keeps)."""
        return {s: r["count"] for s, r in self.records.items()}
