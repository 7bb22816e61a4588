"""Nightly smoke verdicts: compare a campaign's findings with the triaged baseline; JUnit XML and Markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

MAX_BASELINE_BYTES = 16 * 2**20


@dataclass(frozen=True)
class SmokeVerdict:
    """Findings split by the baseline."""

    new: list[dict[str, Any]]
    known: list[dict[str, Any]]
    missing: list[dict[str, Any]]  # baseline entries not seen this run (fixed, or not reached)

    @property
    def passed(self) -> bool:
        """True when every finding is in the baseline."""
        return not self.new


def load_baseline(path: Path | None) -> list[dict[str, Any]]:
    """Baseline entries ({signature, triage}); an absent path is an empty baseline."""
    if path is None:
        return []
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BASELINE_BYTES + 1)
    if len(raw) > MAX_BASELINE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_BASELINE_BYTES // 2**20} MiB")
    data = json.loads(raw.decode("utf-8"))
    entries = data.get("findings") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of findings (or an object with one under 'findings')")
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("signature"), str):
            raise ValueError(f"{path}: baseline entry without a signature: {str(e)[:80]}")
    return entries


def compare(findings: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> SmokeVerdict:
    """Split findings into new and known; list baseline entries not seen."""
    known_sigs = {e["signature"]: e for e in baseline}
    seen = {f["signature"] for f in findings}
    new = [f for f in findings if f["signature"] not in known_sigs]
    known = [{**f, "triage": known_sigs[f["signature"]].get("triage", "")} for f in findings if f["signature"] in known_sigs]
    missing = [e for e in baseline if e["signature"] not in seen]
    return SmokeVerdict(new, known, missing)


def junit(verdict: SmokeVerdict, executors: list[str], seconds: float) -> str:
    """JUnit XML: one test per executor (failing on its new findings), one per known signature (passing)."""
    cases = []
    for name in executors:
        mine = [f for f in verdict.new if f["executor"] == name]
        body = ""
        if mine:
            text = "\n".join(f"{f['signature']}: {f['message']} (repro: {f.get('repro')})" for f in mine)
            body = f"<failure message={quoteattr(f'{len(mine)} new finding(s)')}>{escape(text)}</failure>"
        cases.append(f'  <testcase classname="precfuzz.smoke" name={quoteattr(name)}>{body}</testcase>')
    for f in verdict.known:
        cases.append(f'  <testcase classname="precfuzz.known" name={quoteattr(f["signature"])}>'
                     f"<system-out>{escape(f.get('triage', ''))}</system-out></testcase>")
    failures = sum(1 for name in executors if any(f["executor"] == name for f in verdict.new))
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="precfuzz-smoke" tests="{len(cases)}" '
            f'failures="{failures}" errors="0" time="{seconds:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def markdown(verdict: SmokeVerdict, summary: dict[str, Any]) -> str:
    """A short Markdown summary for the CI page."""
    lines = [f"# precfuzz smoke: {'PASS' if verdict.passed else 'FAIL'}", "",
             f"{summary.get('cases', 0)} cases, {summary.get('tests', 0)} tests in {summary.get('elapsed_s', 0):.0f} s "
             f"(seed {summary.get('seed')}).", ""]
    if verdict.new:
        lines += ["## New findings (not in the baseline)", "", "| signature | message | repro |", "|---|---|---|"]
        lines += [f"| `{f['signature']}` | {f['message']} | {f.get('repro') or ''} |" for f in verdict.new]
        lines.append("")
    if verdict.known:
        lines += ["## Known findings", "", "| signature | count | triage |", "|---|---|---|"]
        lines += [f"| `{f['signature']}` | {f.get('count', 1)} | {f.get('triage', '')} |" for f in verdict.known]
        lines.append("")
    if verdict.missing:
        lines += ["## Baseline entries not seen this run", ""]
        lines += [f"- `{e['signature']}`: {e.get('triage', '')}" for e in verdict.missing]
    return "\n".join(lines) + "\n"
