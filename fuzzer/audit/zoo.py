"""The audit zoo (`corpus/zoo/`): every model audited in its own process, one verdict table, JUnit, op inventory.

Each model file is audited with `precfuzz audit MODEL.py --json --no-minimize` in a child process of its own
(its own session: a timeout ends the audit and every backend worker it started) and, unless asked not to, its
op inventory is taken (`python -m fuzzer.audit.inventory`, also a child). Results are values: a model that
fails to load, export, translate or finish in time is a row with its exit status and one-line error.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable
from xml.sax.saxutils import escape, quoteattr

from .. import markdown as md
from .inventory import FORMS, MAX_CALLS, Inventory
from .load import _children, _end_orphans, _subreaper

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "corpus" / "zoo"
BUDGET_S = 120.0  # issue 22: each zoo model audits end to end in at most 2 minutes on 2 cores
TRAIN_BUDGET_S = 180.0  # issue 36: a zoo model's training step (audit --train) in at most 3 minutes
PASSING_EXITS = (0, 1)  # clean, or hazards/bugs found: either way the audit ran end to end


@dataclass
class ZooEntry:
    """One zoo model: its audit's exit status, seconds, verdict (--json object) or error, and op inventory."""

    model: str  # the file's stem
    path: str
    title: str  # the docstring's head: what the model is
    exit: int | None = None  # the audit's exit status; None when it ran past the timeout
    seconds: float = 0.0
    verdict: dict[str, Any] | None = None
    error: str = ""
    inventory: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """The audit ran end to end: exit 0 or 1 with a verdict table."""
        return self.exit in PASSING_EXITS and bool(self.verdict and self.verdict.get("table"))

    @property
    def outcome(self) -> str:
        """`clean`, `hazards or bugs`, `timeout`, `bad input` or `internal error`, in a word or three."""
        if self.exit is None:
            return "timeout"
        if self.passed:
            return "clean" if self.exit == 0 else "hazards or bugs"
        return {2: "bad input", 3: "internal error"}.get(self.exit, f"exit {self.exit}")


def discover(directory: Path, names: list[str] | None = None) -> list[Path]:
    """The zoo's model files (`*.py` not starting with `_`), sorted; only `names` (stems) when given.

    ValueError naming what is wrong (no such directory, no models, an unknown name).
    """
    if not directory.is_dir():
        raise ValueError(f"{directory}: not a directory")
    files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_") and p.is_file())
    if names:
        known = {p.stem: p for p in files}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"no zoo model {', '.join(map(repr, unknown))} in {directory} "
                             f"(known: {', '.join(known) or 'none'})")
        files = [known[n] for n in names]
    if not files:
        raise ValueError(f"{directory}: no model files (*.py)")
    return files


def title_of(path: Path) -> str:
    """What the model is: its docstring up to the first parenthesis, comma or period."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    except (SyntaxError, OSError, ValueError):
        return ""
    head = " ".join(doc.split())
    for stop in (" (", ", ", ". "):
        head = head.split(stop)[0]
    return head[:100]


def run_child(cmd: list[str], timeout: float) -> tuple[int | None, str, str, float]:
    """Run `cmd` from the repository root in its own session; (exit status or None on timeout, stdout, stderr, s).

    On timeout, or when this process is interrupted or terminated, the whole session is killed (the audit's backend
    workers too), and so is every process it left (this process reaps its descendants' orphans meanwhile: a model's
    process in a session of its own). Its output goes to files, not pipes: nothing it left holding them is waited on.
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    ours = _children()  # this process's children before the audit's: never touched
    reaper = _subreaper(True)
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out_file, stderr=err_file,
                                start_new_session=True)
        code: int | None = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # whatever the outcome: the session, and every process it left, ends here
            _kill_session(proc)
            proc.wait()
            _end_orphans(ours | {proc.pid})
            if reaper:
                _subreaper(False)
        out, err = (_read(f) for f in (out_file, err_file))
    return code, out, err, time.monotonic() - t0


def _read(fh: Any) -> str:
    """What a child wrote to a temporary file, as text."""
    fh.seek(0)
    return fh.read().decode(errors="replace")


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the child's session (its process group: the audit and the backend workers it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def error_line(stderr: str) -> str:
    """precfuzz's one-line error from a child's stderr (else its last line)."""
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    mine = [x for x in lines if x.startswith("precfuzz: ")]
    return (mine or lines or [""])[-1]


def _json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = json.loads(text[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def trains(path: Path) -> bool:
    """True when the model file defines `loss(output, *inputs)`: the zoo audits its training step too (--train)."""
    try:
        tree = ast.parse(path.read_text())
    except (SyntaxError, OSError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "loss" for n in tree.body)


def audit_model(path: Path, out_dir: Path, timeout: float, executors: str | None = None,
                train: bool = False) -> ZooEntry:
    """`precfuzz audit PATH --json --no-minimize [--train]` in a child process; the entry (never raises for the
    model). A training audit's entry is named `<model>+train`."""
    name = f"{path.stem}+train" if train else path.stem
    cmd = [sys.executable, "-m", "fuzzer.cli", "audit", str(path), "--json", "--no-minimize",
           "--out", str(out_dir / name)] + ["--train"] * train
    if executors:
        cmd += ["--executors", executors]
    code, out, err, seconds = run_child(cmd, timeout)
    entry = ZooEntry(name, str(path), title_of(path) + " (one training step)" * train, code, round(seconds, 1))
    if code is None:
        entry.error = f"the audit did not finish within {timeout:g} s (stopped)"
    elif code in PASSING_EXITS:
        entry.verdict = _json_object(out)
        if not entry.passed:
            entry.error = f"exit {code} without a verdict table: {error_line(err)}"
    else:
        entry.error = error_line(err)
    return entry


def inventory_model(path: Path, timeout: float) -> dict[str, Any]:
    """`python -m fuzzer.audit.inventory PATH` in a child process; its JSON object (an error inventory if none)."""
    code, out, err, _ = run_child([sys.executable, "-m", "fuzzer.audit.inventory", str(path)], timeout)
    found = _json_object(out)
    if found is not None:
        return found
    why = "timed out" if code is None else f"exit {code}: {error_line(err)}"
    return Inventory(str(path), stage="load", error=f"inventory {why}").to_json()


def run_zoo(paths: list[Path], out_dir: Path, timeout: float, executors: str | None = None,
            inventory: bool = True, log: Callable[[str], None] = lambda _: None) -> list[ZooEntry]:
    """Audit (and take the inventory of) every model, one after the other."""
    entries = []
    for k, path in enumerate(paths, 1):
        log(f"[{k}/{len(paths)}] {path.stem}: auditing")
        entry = audit_model(path, out_dir, timeout, executors)
        log(f"[{k}/{len(paths)}] {path.stem}: {entry.outcome} (exit {entry.exit}, {entry.seconds:.0f} s)"
            + (f": {entry.error[:200]}" if entry.error else ""))
        if inventory:
            entry.inventory = inventory_model(path, timeout)
        entries.append(entry)
        if trains(path):  # the training zoo (issue 36): the same model's step, its file's loss()
            log(f"[{k}/{len(paths)}] {path.stem}: auditing one training step (--train)")
            step = audit_model(path, out_dir, timeout, executors, train=True)
            log(f"[{k}/{len(paths)}] {step.model}: {step.outcome} (exit {step.exit}, {step.seconds:.0f} s)"
                + (f": {step.error[:200]}" if step.error else ""))
            entries.append(step)
    return entries


# ---------------------------------------------------------------- outputs


def _cell(value: Any) -> str:
    return md.text(value if value is not None else "")


def _cell_text(c: dict[str, Any]) -> str:
    ratio, status = c.get("ratio"), str(c.get("status"))
    text = f"runs {ratio:.2g}" if status == "runs" and isinstance(ratio, (int, float)) else status
    return text + (" BUG" if c.get("bug") else "")


def _coverage(entry: ZooEntry) -> str:
    inv = Inventory.from_json(entry.inventory) if entry.inventory else None
    return f"{inv.translated()}/{inv.met()}" if inv and inv.ops() else "-"


def summary(entries: list[ZooEntry]) -> dict[str, Any]:
    """Counts over the zoo: models, passed, over the time budget, ops translated / met by occurrence."""
    invs = [Inventory.from_json(e.inventory) for e in entries if e.inventory]
    return {"models": len(entries), "passed": sum(e.passed for e in entries),
            "failed": sum(not e.passed for e in entries),
            "over_budget": [e.model for e in entries if e.exit is None
                            or e.seconds > (TRAIN_BUDGET_S if e.model.endswith("+train") else BUDGET_S)],
            "seconds": round(sum(e.seconds for e in entries), 1), "budget_s": BUDGET_S,
            "ops_met": sum(i.met() for i in invs), "ops_translated": sum(i.translated() for i in invs)}


def to_json(entries: list[ZooEntry]) -> dict[str, Any]:
    """The zoo.json object: the summary and every entry."""
    return {"summary": summary(entries), "models": [asdict(e) | {"passed": e.passed, "outcome": e.outcome}
                                                    for e in entries]}


def markdown(entries: list[ZooEntry]) -> str:
    """zoo.md: the models (exit, seconds, op coverage, error), then the model x policy x backend verdicts."""
    s = summary(entries)
    lines = ["# precfuzz zoo", "",
             f"{s['passed']} of {s['models']} models audited end to end (exit 0 or 1 with a verdict table) in "
             f"{s['seconds']:.0f} s; budget {BUDGET_S:.0f} s per model"
             + (f", over it: {', '.join(s['over_budget'])}" if s["over_budget"] else "") + ". "
             f"ATen ops translated / met (export form, by occurrence): {s['ops_translated']}/{s['ops_met']}.", "",
             "| model | what | outcome | exit | seconds | ops translated / met | error |",
             "|---|---|---|---|---|---|---|"]
    for e in entries:
        lines.append(f"| {_cell(e.model)} | {_cell(e.title)} | {e.outcome} | {'-' if e.exit is None else e.exit} | "
                     f"{e.seconds:.1f} | {_coverage(e)} | {_cell(e.error[:300])} |")
    audited = [e for e in entries if e.passed]
    if audited:
        cols = list(dict.fromkeys(c["backend"] for e in audited for c in e.verdict["table"]))
        lines += ["", "## Verdicts: model x policy x backend", "",
                  "runs R: max error / allowed error on the outputs (R <= 1 within the bound); raises: the policy "
                  "fails; BUG: a backend bug.", "",
                  "| model | policy | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
        for e in audited:
            table = e.verdict["table"]
            for row in dict.fromkeys(c["row"] for c in table):
                grid = {c["backend"]: _cell_text(c) for c in table if c["row"] == row}
                lines.append(f"| {_cell(e.model)} | {_cell(row)} | " + " | ".join(grid.get(k, "-") for k in cols) + " |")
        found = [(e, h) for e in audited for h in e.verdict.get("hazards", [])]
        if found:
            lines += ["", "## Model hazards", ""]
            lines += [f"- {e.model}: the {h.get('param_dtype')} {h.get('op')} of parameter `{h.get('node')}` "
                      f"({h.get('update')}, under {', '.join(h.get('rows', []))}); fix: {_cell(h.get('fix'))}"
                      if h.get("update") else
                      f"- {e.model}: {h.get('op')} at {h.get('where')} {md.code(h.get('code') or '')} gets "
                      f"{h.get('activation_dtype')} (under {', '.join(h.get('rows', []))}); fix: {_cell(h.get('fix'))}"
                      for e, h in found]
        bugs = [(e, b) for e in audited for b in e.verdict.get("bugs", [])]
        if bugs:
            lines += ["", "## Backend bugs", ""]
            lines += [f"- {e.model}: [{b.get('oracle')}] {b.get('executor')} at {b.get('where')}: "
                      f"{_cell(b.get('message'))}" for e, b in bugs]
    return "\n".join(lines) + "\n"


def junit(entries: list[ZooEntry]) -> str:
    """JUnit XML: one testcase per model, failing when its audit did not run end to end (exit 2/3, timeout)."""
    cases = []
    for e in entries:
        body = ""
        if not e.passed:
            body = (f"<failure message={quoteattr(f'{e.outcome}: {e.error}'[:500])}>"
                    f"{escape(e.error)}</failure>")
        out = f"<system-out>{escape(f'{e.title}; exit {e.exit}; {e.outcome}')}</system-out>"
        cases.append(f'  <testcase classname="precfuzz.zoo" name={quoteattr(e.model)} time="{e.seconds:.1f}">'
                     f"{body}{out}</testcase>")
    failures = sum(not e.passed for e in entries)
    total = sum(e.seconds for e in entries)
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="precfuzz-zoo" tests="{len(entries)}" '
            f'failures="{failures}" errors="0" time="{total:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def ops_markdown(entries: list[ZooEntry]) -> str:
    """The op inventory (bench/ZOO_OPS.md's tables): every ATen overload the table lacks, by count per model."""
    invs = {e.model: Inventory.from_json(e.inventory) for e in entries if e.inventory}
    models = list(invs)
    lines = ["## Per model", "",
             "Ops met / translated as they are (an op record's overload, a pass-through, getitem), by occurrence, "
             "in each form of the graph (FORMS in "
             "fuzzer/audit/inventory.py); values: parameter, buffer and input values held inline.", "",
             "| model | export | values | " + " | ".join(f"{f}: translated / met" for f in FORMS)
             + " | missing overloads (export) | lifted constants |", "|---|---|---|" + "---|" * len(FORMS) + "---|---|"]
    for name, inv in invs.items():
        missing = [o for o in inv.ops() if not o.translated]
        consts = "; ".join(f"{c.target} {c.dtype}{c.shape} -> {', '.join(c.users)}" for c in inv.constants)
        state = "ok" if inv.stage == "done" else f"failed at {inv.stage}: {_cell(inv.error[:200])}"
        lines.append(f"| {name} | {state} | {inv.values} | "
                     + " | ".join(f"{inv.translated(f)}/{inv.met(f)}" if inv.ops(f) else "-" for f in FORMS)
                     + f" | {len(missing)} | {_cell(consts) or '-'} |")
    for form, title in FORMS.items():
        rows: dict[str, dict[str, int]] = {}
        info: dict[str, tuple[set[str], int, int, bool, bool]] = {}
        for name, inv in invs.items():
            for o in inv.ops(form):
                if o.translated:
                    continue
                rows.setdefault(o.op, {})[name] = o.count
                dts, free, dead, _, _ = info.get(o.op, (set(), 0, 0, o.core, o.decomposable))
                info[o.op] = (dts | set(o.dtypes), free + o.input_free, dead + o.dead, o.core, o.decomposable)
        order = sorted(rows, key=lambda op: (-sum(rows[op].values()), op))
        yes = lambda flag: "yes" if flag else "no"  # noqa: E731
        lines += ["", f"## Missing overloads: {title}", "",
                  "count: occurrences over the zoo; input-free: of them, fed by no model input (constants, "
                  "parameters, buffers only); dead: of them, reaching no output; core: a core-ATen op "
                  "(run_decompositions() keeps it); decomposes: torch.export's default table decomposes it (the "
                  "translation tries that when no record takes it).", "",
                  "| op | count | models | input-free | dead | core | decomposes | dtypes | "
                  + " | ".join(models) + " |",
                  "|---|---|---|---|---|---|---|---|" + "---|" * len(models)]
        for op in order:
            dts, free, dead, core, decomposes = info[op]
            lines.append(f"| `{op}` | {sum(rows[op].values())} | {len(rows[op])} | {free} | {dead} | {yes(core)} | "
                         f"{yes(decomposes)} | {', '.join(sorted(dts))} | "
                         + " | ".join(str(rows[op].get(m, "")) for m in models) + " |")
    lines += ["", "## How the missing overloads are called", "",
              "Distinct calls per model (tensors as dtype[shape]; at most "
              f"{MAX_CALLS} per model), from the first form holding the op (export, then functional, then core).", ""]
    missing = {o.op for inv in invs.values() for f in FORMS for o in inv.ops(f) if not o.translated}
    for op in sorted(missing):
        lines.append(f"- `{op}`:")
        for name, inv in invs.items():
            found = next((o for f in FORMS for o in inv.ops(f) if o.op == op), None)
            if found is not None:
                lines += [f"  - {name}: {md.code(c)}" for c in found.calls]
    errors = [(e.model, e.exit, e.error) for e in entries if e.error]
    if errors:
        lines += ["", "## `precfuzz audit` errors, exactly", ""]
        for model, code, text in errors:
            lines += [f"### {model} (exit {code})", "", "```", text, "```", ""]
    return "\n".join(lines).rstrip() + "\n"
