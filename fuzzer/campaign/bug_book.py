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

from oracles.bugs import bug_id, bug_key, error_family
from oracles.findings import Finding
from oracles.vocabulary import Kind

KIND_ORDER = {Kind.BACKEND_BUG: 0, Kind.MODEL_HAZARD: 1, Kind.UNSUPPORTED: 2}


@dataclass
class Bug:
    """One root cause: what bugs.jsonl holds per line (see ARCHITECTURE.md, Contracts)."""

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
    merged: list[str] = field(default_factory=list)  # ids of the bugs merged into this one (their findings name them)
    merged_into: str | None = None  # set on a merged bug while the campaign runs; bugs.jsonl holds live bugs only
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
        self.revived: list[str] = []  # bugs merged into one that is missing (or into themselves): live again
        for rec in records or []:
            bug = Bug.from_record(rec)
            self.bugs[bug.bug] = bug
        for bug in self.bugs.values():
            seen = {bug.bug}
            bid = bug.merged_into
            while bid is not None and bid in self.bugs and bid not in seen:
                seen.add(bid)
                bid = self.bugs[bid].merged_into
            if bid is not None:  # a chain that ends nowhere, or loops: no live bug would hold its keys
                bug.merged_into = None
                self.revived.append(bug.bug)
        for bug in self.bugs.values():
            if bug.merged_into is None:
                for k in [bug.key, *bug.aliases]:
                    self.by_key[k] = bug.bug
        for bug in self.bugs.values():  # a merged bug's keys lead to the bug it is in (find follows merged_into)
            for k in [bug.key, *bug.aliases]:
                self.by_key.setdefault(k, bug.bug)
        self.redirect: dict[str, str] = {m: b.bug for b in self.live() for m in b.merged if m not in self.bugs}

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
        """Count one finding of `key`; (its bug, True when the bug is new).

        A signature seen before counts into the bug that holds it, whatever `key` its new case gives (a finding
        belongs to one bug: triage18's be2342037f was opened for a second hit of a finding already filed, and
        bugs.jsonl got a backend-bug record with no title, no signature and nothing to minimize)."""
        bug = self.find(key)
        if not new_signature and (bug is None or signature not in bug.signatures):  # the scan only when it matters
            bug = self.holding(signature) or bug
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

    def holding(self, signature: str) -> Bug | None:
        """The live bug whose findings include `signature`."""
        return next((b for b in self.live() if signature in b.signatures), None)

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
        other.merged += [m for m in [bug.bug, *bug.merged] if m not in other.merged]
        if not other.minimized and bug.minimized:  # the merged bug brings the minimized case along
            for name in ("minimized", "confirmed", "note", "repro", "repro_full", "report", "case", "nodes",
                         "repro_lines", "representative", "title"):
                setattr(other, name, getattr(bug, name))
        return other

    def records(self) -> list[dict[str, Any]]:
        """The live bugs as JSON-able records (issue 20: a merged record vanishes; its id stays resolvable through
        the `merged` list of the bug it went into, its keys through that bug's aliases)."""
        return [b.record() for b in self.live()]

    def holder(self, bid: str) -> Bug | None:
        """The live bug that bug `bid` is (or was merged into); None when the book has no such bug."""
        bug = self.bugs.get(bid) or self.bugs.get(self.redirect.get(bid, ""))
        while bug is not None and bug.merged_into is not None:
            bug = self.bugs.get(bug.merged_into)
        return bug

    def rebuild(self, findings: list[dict[str, Any]]) -> list[str]:
        """Open the bugs that findings.jsonl names (each finding names its bug) but the book lacks (bugs.jsonl lost,
        or a line of it quarantined), from their findings in discovery order; the ids opened."""
        known = {s for b in self.bugs.values() for s in b.signatures}
        groups: dict[str, list[dict[str, Any]]] = {}
        for rec in findings:
            if rec["signature"] in known or self.holder(str(rec.get("bug", ""))) is not None:
                continue
            finding = finding_of(rec)
            key = str(rec.get("bug_key") or key_for(finding, str(rec.get("bug", ""))))
            other = self.find(key) if not rec.get("bug") else None
            if other is not None:  # a finding recorded without its bug's id, of a bug the book has
                other.signatures.append(rec["signature"])
                other.count += int(rec.get("count", 1))
                continue
            groups.setdefault(str(rec.get("bug") or bug_id(key)), []).append({**rec, "bug_key": key})
        for bid, recs in groups.items():
            first = finding_of(recs[0])
            keys = list(dict.fromkeys(r["bug_key"] for r in recs))
            bug = Bug(bid, keys[0], str(recs[0].get("title", "")), first.kind, first.backend, list(first.ops),
                      error_family(first), recs[0]["signature"], [r["signature"] for r in recs],
                      list(dict.fromkeys(r["executor"] for r in recs)),
                      first_seen_s=min(float(r.get("first_seen_s", 0.0)) for r in recs),
                      count=sum(int(r.get("count", 1)) for r in recs), aliases=keys[1:])
            bug.note = "rebuilt from findings.jsonl (bugs.jsonl lacked it)"
            self.bugs[bid] = bug
            for k in keys:
                self.by_key.setdefault(k, bid)
        return list(groups)

    def representatives(self, bug: Bug, findings: dict[str, dict[str, Any]]) -> list[str]:
        """Signatures of `bug`'s findings that `findings` (signature -> record) holds, its representative first, then
        the others in the bug's order, then findings that name the bug but that its list lacks."""
        out = [bug.representative, *bug.signatures]
        out += [s for s, r in findings.items() if self.holder(str(r.get("bug", ""))) is bug]
        return [s for s in dict.fromkeys(out) if s in findings]


def finding_of(rec: dict[str, Any]) -> Finding:
    """The Finding a findings.jsonl record describes (enough of it to key it and title it)."""
    return Finding.from_record(rec)


def key_for(finding: Finding, bid: str) -> str:
    """The bug key of a finding recorded without one: the key whose id is `bid` (the bug it was counted into, keyed
    pipeline-specific or not), else its key without the pipeline test."""
    keys = [bug_key(finding, specific) for specific in (None, True, False)]
    return next((k for k in keys if bug_id(k) == bid), keys[0])
