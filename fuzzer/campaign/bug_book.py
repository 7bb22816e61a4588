"""The bug book: findings grouped into one record per root cause (pure bookkeeping, no I/O).

A finding arrives with the bug key of its case (oracles.bugs.case_keys). The first finding of a key opens a
bug and becomes its representative; later findings of the key add their signature, executor and count.
When the minimizer shrinks a bug's representative, the key is computed again from the minimized finding
(the op at fault may turn out to be another one); the bug then moves to the new key, or merges into the
bug that already holds it. Old keys stay as aliases, so later raw findings still reach their bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oracles.bugs import bug_id

KIND_ORDER = {"backend-bug": 0, "model-hazard": 1, "unsupported": 2}


@dataclass
class Bug:
    """One root cause: what bugs.jsonl holds per line (see DESIGN.md, Bug record)."""

    bug: str  # stable id (from the key it was opened with)
    key: str
    title: str
    kind: str
    backend: str
    ops: list[str]
    error_class: str
    representative: str  # signature of the finding that is minimized for it
    signatures: list[str] = field(default_factory=list)
    executors: list[str] = field(default_factory=list)
    first_seen_s: float = 0.0
    count: int = 0
    minimized: bool = False
    confirmed: bool = False
    note: str = ""  # why it is unconfirmed, or how it was confirmed
    repro: str | None = None
    repro_full: str | None = None
    report: str | None = None
    case: str | None = None
    nodes: int | None = None
    repro_lines: int | None = None
    aliases: list[str] = field(default_factory=list)
    merged_into: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON-able record."""
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        out.update(self.extra)
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "Bug":
        """A Bug from its JSON record (unknown fields kept in extra)."""
        known = {k: rec[k] for k in cls.__dataclass_fields__ if k in rec and k != "extra"}
        extra = {k: v for k, v in rec.items() if k not in cls.__dataclass_fields__}
        return cls(**known, extra=extra)


class BugBook:
    """Bugs by key, in discovery order."""

    def __init__(self, records: list[dict[str, Any]] | None = None) -> None:
        self.bugs: dict[str, Bug] = {}
        self.by_key: dict[str, str] = {}
        for rec in records or []:
            bug = Bug.from_record(rec)
            self.bugs[bug.bug] = bug
            if bug.merged_into is None:
                for k in [bug.key, *bug.aliases]:
                    self.by_key[k] = bug.bug

    def live(self) -> list[Bug]:
        """Bugs not merged into another, in discovery order."""
        return [b for b in self.bugs.values() if b.merged_into is None]

    def find(self, key: str) -> Bug | None:
        """The live bug holding `key` (its own or an alias)."""
        bid = self.by_key.get(key)
        while bid is not None and self.bugs[bid].merged_into:
            bid = self.bugs[bid].merged_into
        return self.bugs.get(bid) if bid else None

    def add(self, key: str, signature: str, executor: str, title: str, kind: str, backend: str, ops: list[str],
            error_class: str, seen_s: float, new_signature: bool) -> tuple[Bug, bool]:
        """Count one finding of `key`; (its bug, True when the bug is new)."""
        bug = self.find(key)
        opened = bug is None
        if bug is None:
            bid = bug_id(key)
            while bid in self.bugs:  # a key once merged away and seen again: a fresh id
                bid = bug_id(bid + key)
            bug = Bug(bid, key, title, kind, backend, list(ops), error_class, signature, first_seen_s=round(seen_s, 3))
            self.bugs[bid] = bug
            self.by_key[key] = bid
        bug.count += 1
        if new_signature and signature not in bug.signatures:
            bug.signatures.append(signature)
        if executor not in bug.executors:
            bug.executors.append(executor)
        return bug, opened

    def rekey(self, bug: Bug, key: str) -> Bug:
        """Move `bug` to `key` (its minimized key); merge into the bug already holding it. Returns the live bug."""
        if key == bug.key:
            return bug
        other = self.find(key)
        if other is None or other is bug:
            bug.aliases.append(bug.key)
            bug.key = key
            self.by_key[key] = bug.bug
            return bug
        other.signatures += [s for s in bug.signatures if s not in other.signatures]
        other.executors += [e for e in bug.executors if e not in other.executors]
        other.count += bug.count
        other.first_seen_s = min(other.first_seen_s, bug.first_seen_s)
        other.aliases += [k for k in [bug.key, *bug.aliases] if k not in other.aliases and k != other.key]
        for k in [bug.key, *bug.aliases]:
            self.by_key[k] = other.bug
        bug.merged_into = other.bug
        if not other.minimized and bug.minimized:  # the merged bug brings the minimized case along
            for name in ("minimized", "confirmed", "note", "repro", "repro_full", "report", "case", "nodes",
                         "repro_lines", "representative", "title"):
                setattr(other, name, getattr(bug, name))
        return other

    def records(self) -> list[dict[str, Any]]:
        """Every bug (merged ones too, so ids stay resolvable) as JSON-able records."""
        return [b.record() for b in self.bugs.values()]
