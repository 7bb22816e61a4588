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
from .arrays import detach_script, npz_bytes
from .executors import create
from .export import render_script
from .ir import Case, case_options, save_case
from .outfiles import replace_file
from .repro import render as render_short
from .repro import training_only

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


@dataclass
class Rendered:
    """The texts of a finding's files (None where not rendered), its title, and what failed."""

    title: str = ""
    repro: str | None = None  # the short script
    repro_full: str | None = None  # the full-oracle script
    report: str | None = None  # the bug-report draft, naming the script it inlines
    errors: list[str] = field(default_factory=list)
    arrays: dict[str, dict[str, Any]] = field(default_factory=dict)  # a script's large arrays (REPRO or REPRO_FULL ->
    # name -> float64 array), which it reads from the .npz of its own name beside it (fuzzer.arrays)


def write_file(path: Path, text: str, style: str, executable: bool = False, force: bool = False) -> Path:
    """Write a script, report or case in place of `path`, with precfuzz's generated header: never over a device or
    FIFO, nor over a file precfuzz did not write unless `force` (outfiles.NotOurs)."""
    replace_file(path, text, mode=0o755 if executable else None, sync=False, style=style, force=force)
    return path


def write_script(path: Path, text: str, arrays: dict[str, Any] | None = None, force: bool = False) -> Path:
    """Write a repro script (executable) and, where it reads large arrays, the .npz of its name beside it, first."""
    if arrays:
        replace_file(path.with_suffix(".npz"), npz_bytes(arrays), sync=False, manifest=True, force=force)
    return write_file(path, text, "python", executable=True, force=force)


def render_finding(case: Case, finding: Finding, describe: dict[str, Any], command: str, short: bool = True,
                   full: bool = True, variant: str = "*", executors: Iterable[str] = (),
                   script_name: str | None = None) -> Rendered:
    """The scripts of `finding` (on `case`) and the draft; the draft tells to save its script as `script_name`
    (default: repro.py, or repro_full.py where only that one rendered)."""
    out = Rendered()
    executor = create(finding.executor).bind(case_options(case))  # the case's own pass sequence, where it has one
    names = list(executors) or [finding.executor]
    out.title = report_draft.title(finding, names, describe, variant)
    set_index = finding.input_set if finding.input_set < len(case.input_sets) else 0
    if short or training_only(case, finding, executor):
        try:
            out.repro = render_short(case, finding, executor, out.title, set_index)
        except Exception as exc:  # noqa: BLE001 - a failing export must not lose the finding
            out.errors.append(f"repro.py: {type(exc).__name__}: {exc}")
    if full and not training_only(case, finding, executor):  # the full oracle judges a forward: these show in the short one
        try:
            parts = replace(executor.repro_parts(case.graph), describe=describe)
            out.repro_full = render_script(case, parts, command, set_index, out.title)
        except Exception as exc:  # noqa: BLE001 - e.g. an executor without an exporter
            out.errors.append(f"repro_full.py: {type(exc).__name__}: {exc}")
    for kind in (REPRO, REPRO_FULL):  # real weights as an array file beside the script, not megabytes of base64
        attr = "repro" if kind == REPRO else "repro_full"
        if getattr(out, attr) is not None:
            text, held = detach_script(getattr(out, attr))
            setattr(out, attr, text)
            if held:
                out.arrays[kind] = held
    script = out.repro or out.repro_full
    if script:
        name = script_name or (REPRO if out.repro else REPRO_FULL)
        beside = Path(name).with_suffix(".npz").name if out.arrays.get(REPRO if out.repro else REPRO_FULL) else None
        out.report = report_draft.render(case, finding, describe, script, command, out.title, name, names,
                                         arrays_file=beside)
    return out


def write_finding(folder: Path, case: Case, finding: Finding, describe: dict[str, Any], command: str,
                  short: bool = True, full: bool = True, variant: str = "*", executors: Iterable[str] = (),
                  force: bool = False) -> Artifacts:
    """Write the case and the scripts of `finding` (on `case`) into `folder`; a file that cannot be written (a
    directory in its place, a file precfuzz did not write, unless `force`) is named in `errors`, the others are
    written."""
    texts = render_finding(case, finding, describe, command, short, full, variant, executors)
    out = Artifacts(title=texts.title, errors=list(texts.errors))
    out.repro_lines = len(texts.repro.splitlines()) if texts.repro else None

    def put(name: str, write: Any) -> Path | None:
        try:
            return write(folder / name)
        except OSError as exc:
            out.errors.append(f"{name}: cannot write {exc.filename or folder / name}: {exc.strerror or exc}")
            return None

    out.case = put(CASE, lambda p: save_case(case, p, force))
    if texts.repro is not None:
        out.repro = put(REPRO, lambda p: write_script(p, texts.repro, texts.arrays.get(REPRO), force))
        if out.repro is not None:  # as written: the generated header is a line too (triage20: one short)
            out.repro_lines = len(Path(out.repro).read_text(encoding="utf-8").splitlines())
    if texts.repro_full is not None:
        out.repro_full = put(REPRO_FULL, lambda p: write_script(p, texts.repro_full, texts.arrays.get(REPRO_FULL),
                                                                force))
    if texts.report is not None:
        out.report = put(REPORT, lambda p: write_file(p, texts.report, "markdown", force=force))
    return out


def rewrite_report(folder: Path, case: Case, finding: Finding, describe: dict[str, Any], command: str,
                   variant: str = "*", executors: Iterable[str] = ()) -> list[str]:
    """Write the draft again inlining repro_full.py (the record's repro where the short script does not show the bug);
    what failed, as `write_finding` names it."""
    texts = render_finding(case, finding, describe, command, short=False, variant=variant, executors=executors,
                           script_name=REPRO_FULL)
    if texts.report is None:
        return texts.errors
    try:
        write_file(folder / REPORT, texts.report, "markdown")
    except OSError as exc:
        return [*texts.errors, f"{REPORT}: cannot write {exc.filename or folder / REPORT}: {exc.strerror or exc}"]
    return texts.errors


@dataclass(frozen=True)
class Confirmation:
    """Which written script shows a finding in a fresh process (exit 1), and what the runs said."""

    script: Path | None  # the record's repro: the short script if it exits 1, else the full-oracle one if it does
    note: str
    ran: bool  # some script was run
    cpu_dependent: bool | None = None  # the confirmed script exits 0 with the CPU's ISA limited (LOWER_ISA); None: not asked


# The kernels oneDNN, ATen and XLA:CPU pick by the CPU's ISA, limited to AVX2 (no avx512_bf16, avx512_fp16 or AMX): a
# bug that goes away under them is the kernel this CPU selects (triage29: oneDNN's avx512_bf16 dot flushing subnormal
# products; without AMX, _scaled_mm's emulated path), and the record says so
LOWER_ISA = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}


def confirm_scripts(art: Artifacts, timeout_s: float = 300.0, ask_isa: bool = False) -> Confirmation:
    """Run the short script, and where it does not exit 1 the full-oracle one, each in a fresh process: the first that
    exits 1 confirms the finding and becomes the record's repro (a short script whose expected value or check misses
    the bug never stands for it: triage, 3 of 33 exited 0 while the bug was there). `ask_isa`: the confirmed script
    runs once more with the CPU's ISA limited (LOWER_ISA); exiting 0 there, the bug is this CPU's kernel's."""
    said: list[str] = []
    for name, path in ((REPRO, art.repro), (REPRO_FULL, art.repro_full)):
        if path is None:
            continue
        status, tail = run_script(path, timeout_s)
        if status == 1:
            how = f"{name} reproduces it in a fresh process: {tail}"
            if said:
                how = f"{'; '.join(said)}; the record's repro is {REPRO_FULL} instead: it {how.split(' ', 1)[1]}"
            dependent = None
            if ask_isa:
                limited, _ = run_script(path, timeout_s, LOWER_ISA)
                dependent = limited == 0
                if dependent:
                    how += ("; CPU-dependent: with the ISA limited to AVX2 (" + " ".join(
                        f"{k}={v}" for k, v in LOWER_ISA.items()) + f") {path.name} exits 0: the kernel this CPU's ISA "
                        "selects is at fault, another CPU may not show it")
            return Confirmation(path, how, True, dependent)
        said.append(f"{name} exits {status} ({tail})")
    return Confirmation(None, "; ".join(said) or "no script was written", bool(said))


def run_script(path: Path, timeout_s: float = 300.0, extra_env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run a repro script as a user would (`python -I`, a clean environment, plus `extra_env`): (exit status or None,
    last output)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")} | (extra_env or {})
    path = Path(path).resolve()
    try:
        done = subprocess.run([sys.executable, "-I", path.name], cwd=path.parent, env=env, capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout_s:.0f} s"
    tail = (done.stdout.strip().splitlines() or [""])[-3:] + (done.stderr.strip().splitlines() or [""])[-1:]
    return done.returncode, " / ".join(t for t in tail if t)[-400:]
