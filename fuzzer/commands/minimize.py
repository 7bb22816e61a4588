"""Shrink failing cases to the smallest graph, shapes, dtypes and values that still show their finding.

Exit status: 0 when every case showed its finding and was minimized, 1 when one did not (a case that shows no
finding has nothing to minimize: one line says so, and no file is written), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..artifacts import REPRO, REPRO_FULL, render_finding, write_script
from ..check import Checker
from ..ir import Case, save_case
from ..isolation import ExecutorPool
from ..minimize import MinimizeError, MinimizeResult, Target, minimize
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    add_force,
    distinct_outputs,
    fail,
    one_line,
    positive_int,
    positive_seconds,
    read_case,
    safe,
    select_executors,
    timeout_seconds,
    writable_dir,
    writable_file,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz minimize`."""
    parser.add_argument("cases", nargs="+", metavar="CASE", help="case JSON file(s)")
    parser.add_argument("--signature", help="finding signature to preserve (default: each case's first finding)")
    parser.add_argument("--out", help="minimized case path (one case), or a directory (default: CASE.min.json beside CASE)")
    parser.add_argument("--executors", help="executors to look for the finding with (default: all available)")
    parser.add_argument("--max-seconds", type=positive_seconds, default=300.0, help="search budget per case in seconds")
    parser.add_argument("--max-checks", type=positive_int, default=2000, help="search budget per case in executor checks")
    parser.add_argument("--timeout", type=timeout_seconds, default=120.0, help="seconds per executor call (at least 1; a worker's start-up, importing its backend, "
                        "has a clock of its own)")
    parser.add_argument("--export", action="store_true", help="also write a repro script beside each minimized case")
    parser.add_argument("--json", action="store_true", help="print each summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="do not print the accepted steps")
    add_force(parser, "an existing minimized case (and, with --export, script)")


def output_path(case_path: str, out: str | None, several: bool) -> Path:
    """Where the minimized case of `case_path` goes."""
    stem = Path(case_path).name.removesuffix(".json") + ".min.json"
    if out is None:
        return Path(case_path).with_name(stem)
    target = Path(out)
    if several or target.is_dir() or out.endswith("/"):
        return target / stem
    return target


def script_paths(case_out: Path) -> tuple[Path, Path]:
    """Where --export writes the short script and the full-oracle one for the minimized case at `case_out`."""
    stem = case_out.name.removesuffix(".json")
    return case_out.with_name(stem + ".py"), case_out.with_name(stem + ".full.py")


def _export(result: MinimizeResult, pool: ExecutorPool, path: Path, command: str, force: bool) -> Path | None:
    """Write the short repro script of a minimized finding beside its case (the full-oracle one as .full.py)."""
    finding = result.finding
    assert finding is not None
    short, full = script_paths(path)
    texts = render_finding(result.case, finding, pool.describe(finding.executor), command)
    out = None
    for text, target, kind in ((texts.repro, short, REPRO), (texts.repro_full, full, REPRO_FULL)):
        if text is not None:
            write_script(target, text, texts.arrays.get(kind), force)
            out = out or target
    return out


def run(args: argparse.Namespace) -> int:
    """Minimize every case; exit 0 when all reproduce minimized, 1 when one does not, 2 on bad input."""
    try:
        for option, value in (("--out", args.out), ("--signature", args.signature), ("--executors", args.executors)):
            if value is not None and not value.strip():  # empty is not "the default"
                raise UsageError(f"{option} is empty")
        cases: list[tuple[str, Case]] = [(p, read_case(p)) for p in args.cases]
        if args.signature:
            names = Target.parse(args.signature).executors
            select_executors(",".join(names))
        else:
            names = select_executors(args.executors)
        several = len(cases) > 1
        targets = [output_path(p, args.out, several) for p, _ in cases]
        distinct_outputs(*((f"the minimized case of {p}", str(t)) for (p, _), t in zip(cases, targets)))
        for path, _ in cases:
            out = output_path(path, args.out, several)
            if several or (args.out and (Path(args.out).is_dir() or args.out.endswith("/"))):
                writable_dir(str(out.parent), "--out")
            inputs = tuple(p for p, _ in cases)
            writable_file(str(out), "--out" if args.out else "the minimized case", keep=inputs, force=args.force)
            if args.export:
                for script in script_paths(out):
                    writable_file(str(script), "--export's script", keep=inputs, force=args.force)
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    status = EXIT_OK
    command = "precfuzz minimize " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "precfuzz minimize"
    progress = None if args.quiet or args.json else (lambda line: print(safe(line), flush=True))
    with ExecutorPool(names, timeout=args.timeout) as pool:
        pool.prime()  # the first check runs them all: their workers load side by side
        checker = Checker(pool)
        for path, case in cases:
            print(f"{one_line(path)}: minimizing ({len(case.graph.nodes)} nodes)", flush=True,
                  file=sys.stderr if args.json else sys.stdout)  # --json: stdout is JSON only
            try:
                result = minimize(case, args.signature, checker, budget_s=args.max_seconds,
                                  max_checks=args.max_checks, progress=progress)
            except MinimizeError as exc:
                print(f"{one_line(path)}: not minimized: {one_line(str(exc))}", file=sys.stderr)
                status = max(status, EXIT_FINDING)
                continue
            if result.finding is None and result.checks <= 1:  # the original did not show it: nothing to write
                print(f"{one_line(path)}: not minimized: {one_line(result.note or 'the original case does not show the signature')}"
                      f" ({one_line(result.target.signature)})", file=sys.stderr)
                status = max(status, EXIT_FINDING)
                continue
            if not result.confirmed:
                status = max(status, EXIT_FINDING)
            out = output_path(path, args.out, several)
            try:
                save_case(result.case, out, force=args.force)
                summary = {**result.summary(), "case": str(out)}
                if args.export and result.finding is not None:
                    script = _export(result, pool, out, f"{command}  # {path}", args.force)
                    summary["repro"] = str(script) if script else None
            except OSError as exc:  # something took the name while it minimized: kept, and this case not written
                print(f"precfuzz: error: {one_line(f'cannot write {exc.filename or out}: {exc.strerror or exc}')}",
                      file=sys.stderr)
                status = max(status, EXIT_BAD_INPUT)
                continue
            if args.json:
                print(json.dumps(summary, indent=1))
            else:
                print(safe("\n".join(result.lines())))
                print(safe(f"  wrote {out}" + (f" and {summary['repro']}" if summary.get("repro") else "")), flush=True)
    return status
