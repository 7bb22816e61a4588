"""What precfuzz writes for a finding, in one place: case.json, repro.py (short), repro_full.py, report.md.

Used by campaigns (one folder per bug, and the full script per finding), `precfuzz export` and `precfuzz minimize`.
Writing never raises for a backend's sake: what could not be rendered is named in `errors`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from oracles.findings import Finding

from . import report_draft
from .executors import create
from .export import render_script
from .ir import Case, case_options, save_case
from .outfiles import replace_file
from .repro import render as render_short

REPRO, REPRO_FULL, REPORT, CASE = "repro.py", "repro_full.py", "report.md", "case.json"


@dataclass
class Artifacts:
    """Paths written (None where not), the short script's length, and what failed."""

    case: Path | None = None
    repro: Path | None = None
    repro_full: Path | None = None
    report: Path | None = None
    repro_lines: int | None = None
    title: str = ""
    errors: list[str] = field(default_factory=list)


def write_file(path: Path, text: str, executable: bool = False) -> Path:
    """Write a script or report in place of `path` (never over a device or FIFO), executable if asked."""
    replace_file(path, text, mode=0o755 if executable else None, sync=False)
    return path


def write_finding(folder: Path, case: Case, finding: Finding, describe: dict[str, Any], command: str,
                  short: bool = True, full: bool = True, variant: str = "*", executors: Iterable[str] = ()) -> Artifacts:
    """Write the case and the scripts of `finding` (on `case`) into `folder`."""
    out = Artifacts()
    executor = create(finding.executor).bind(case_options(case))  # the case's own pass sequence, where it has one
    names = list(executors) or [finding.executor]
    out.title = report_draft.title(finding, names, describe, variant)
    set_index = finding.input_set if finding.input_set < len(case.input_sets) else 0
    out.case = save_case(case, folder / CASE)
    script = ""
    if short:
        try:
            script = render_short(case, finding, executor, out.title, set_index)
            out.repro = write_file(folder / REPRO, script, executable=True)
            out.repro_lines = len(script.splitlines())
        except Exception as exc:  # noqa: BLE001 - a failing export must not lose the finding
            out.errors.append(f"repro.py: {type(exc).__name__}: {exc}")
    if full:
        try:
            parts = replace(executor.repro_parts(case.graph), describe=describe)
            text = render_script(case, parts, command, set_index, out.title)
            out.repro_full = write_file(folder / REPRO_FULL, text, executable=True)
            script = script or text
        except Exception as exc:  # noqa: BLE001 - e.g. an executor without an exporter
            out.errors.append(f"repro_full.py: {type(exc).__name__}: {exc}")
    if script:
        name = (out.repro or out.repro_full or Path(REPRO)).name
        out.report = write_file(folder / REPORT, report_draft.render(case, finding, describe, script, command, out.title,
                                                                 name, names))
    return out


def run_script(path: Path, timeout_s: float = 300.0) -> tuple[int | None, str]:
    """Run a repro script as a user would (`python -I`, a clean environment): (exit status or None, last output)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    path = Path(path).resolve()
    try:
        done = subprocess.run([sys.executable, "-I", path.name], cwd=path.parent, env=env, capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout_s:.0f} s"
    tail = (done.stdout.strip().splitlines() or [""])[-3:] + (done.stderr.strip().splitlines() or [""])[-1:]
    return done.returncode, " / ".join(t for t in tail if t)[-400:]
