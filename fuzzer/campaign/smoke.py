"""Nightly smoke verdicts: a campaign's bugs against the triaged list of known bugs; JUnit XML and Markdown.

The baseline (corpus/known-findings.json) lists known bugs by their key (oracles.bugs: kind, backend, op,
class, dtype class, variant), each with a line of triage and, where one exists, the upstream issue. A bug
of the run is known when its key or one of its aliases (keys it had before minimization) is listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr
from oracles.vocabulary import Kind

from .. import markdown as md
from ..outfiles import not_regular

MAX_BASELINE_BYTES = 16 * 2**20


@dataclass(frozen=True)
class SmokeVerdict:
    """Bugs split by the baseline."""

    new: list[dict[str, Any]]
    known: list[dict[str, Any]]
    missing: list[dict[str, Any]]  # baseline entries not seen this run (fixed, or not reached)

    @property
    def passed(self) -> bool:
        """True when every bug is in the baseline."""
        return not self.new


def load_baseline(path: Path | None) -> list[dict[str, Any]]:
    """Known-bug entries ({key, title, triage, upstream}); an absent path is an empty baseline."""
    if path is None:
        return []
    what = not_regular(path)
    if what is not None:  # opening a FIFO blocks until someone writes to it; a device may never end
        raise ValueError(f"{path} is {what}, not a file")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BASELINE_BYTES + 1)
    if len(raw) > MAX_BASELINE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_BASELINE_BYTES // 2**20} MiB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    entries = data.get("bugs") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of known bugs (or an object with one under 'bugs')")
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            raise ValueError(f"{path}: baseline entry without a bug key: {str(e)[:80]}")
    return entries


# first triage line of a bug nobody has looked at yet, by kind (oracles.bugs kinds)
DEFAULT_TRIAGE = {
    Kind.BACKEND_BUG: "not yet triaged: the backend departs from PyTorch eager on the CPU (status, dtype or accuracy)",
    Kind.MODEL_HAZARD: "model-side: PyTorch itself raises or promotes the same way under this policy (a cast fixes it)",
    "unsupported": "coverage: the backend declares this dtype/op unsupported; recorded, not a bug",
}


def updated_baseline(bugs: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The baseline after a run: entries the run saw (triage kept) plus the run's new bugs; sorted by key.

    Entries not seen this run are kept too (a bug not reached tonight is not fixed); a new bug gets a
    triage line by kind, to be replaced by a person's.
    """
    merged = {e["key"]: dict(e) for e in baseline}
    for b in bugs:
        if b.get("merged_into") or any(k in merged for k in _keys(b)):
            continue
        merged[b["key"]] = {"key": b["key"], "title": b.get("title", ""),
                            "triage": DEFAULT_TRIAGE.get(str(b.get("kind")), "not yet triaged"), "upstream": ""}
    return [merged[k] for k in sorted(merged)]


def _keys(bug: dict[str, Any]) -> list[str]:
    return [bug["key"], *bug.get("aliases", [])]


def compare(bugs: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> SmokeVerdict:
    """Split the run's live bugs into new and known; list baseline entries not seen."""
    by_key = {e["key"]: e for e in baseline}
    live = [b for b in bugs if not b.get("merged_into")]
    new, known, seen = [], [], set()
    for b in live:
        entry = next((by_key[k] for k in _keys(b) if k in by_key), None)
        if entry is None:
            new.append(b)
        else:
            known.append({**b, "triage": entry.get("triage", ""), "upstream": entry.get("upstream", "")})
            seen.add(entry["key"])
    missing = [e for e in baseline if e["key"] not in seen]
    return SmokeVerdict(new, known, missing)


def junit(verdict: SmokeVerdict, executors: list[str], seconds: float) -> str:
    """JUnit XML: one test per known bug (passing), one per new bug (failing), one per executor (its new bugs)."""
    cases = []
    for b in verdict.known:
        cases.append(f'  <testcase classname="precfuzz.known" name={quoteattr(b["key"])}>'
                     f"<system-out>{escape(b.get('triage', ''))}</system-out></testcase>")
    for b in verdict.new:
        text = f"{b.get('title')}\n{b['key']}\nrepro: {b.get('repro')}"
        cases.append(f'  <testcase classname="precfuzz.new" name={quoteattr(b["key"])}>'
                     f"<failure message={quoteattr('new bug: ' + str(b.get('title', ''))[:200])}>{escape(text)}</failure>"
                     "</testcase>")
    for name in executors:
        mine = [b for b in verdict.new if name in b.get("executors", [])]
        body = f"<failure message={quoteattr(f'{len(mine)} new bug(s)')}/>" if mine else ""
        cases.append(f'  <testcase classname="precfuzz.executor" name={quoteattr(name)}>{body}</testcase>')
    failures = len(verdict.new) + sum(1 for name in executors if any(name in b.get("executors", []) for b in verdict.new))
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="precfuzz-smoke" tests="{len(cases)}" '
            f'failures="{failures}" errors="0" time="{seconds:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def markdown(verdict: SmokeVerdict, summary: dict[str, Any]) -> str:
    """A short Markdown summary for the CI page."""
    cell = lambda v: md.text(v or "")  # noqa: E731
    lines = [f"# precfuzz smoke: {'PASS' if verdict.passed else 'FAIL'}", "",
             f"{summary.get('cases', 0)} cases, {summary.get('tests', 0)} tests in {summary.get('elapsed_s', 0):.0f} s "
             f"(seed {summary.get('seed')}).", ""]
    if verdict.new:
        lines += ["## New bugs (not in the baseline)", "", "| kind | title | key | repro |", "|---|---|---|---|"]
        lines += [f"| {b.get('kind')} | {cell(b.get('title'))} | {md.code(b['key'], cell=True)} | {cell(b.get('repro'))} |" for b in verdict.new]
        lines.append("")
    if verdict.known:
        lines += ["## Known bugs", "", "| kind | key | hits | triage | upstream |", "|---|---|---|---|---|"]
        lines += [f"| {b.get('kind')} | {md.code(b['key'], cell=True)} | {b.get('count', 1)} | {cell(b.get('triage'))} | "
                  f"{cell(b.get('upstream'))} |" for b in verdict.known]
        lines.append("")
    if verdict.missing:
        lines += ["## Known bugs not seen this run", ""]
        lines += [f"- {md.code(e['key'])}: {cell(e.get('triage'))}" for e in verdict.missing]
    return "\n".join(lines) + "\n"
