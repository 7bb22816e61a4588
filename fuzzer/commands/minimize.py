"""Shrink failing cases to the smallest graph, shapes, dtypes and values that still show their finding.

Exit status: 0 when every case showed its finding and was minimized, 1 when one did not (a case that shows no
finding has nothing to minimize: one line says so, and no file is written), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from ..artifacts import write_finding
from ..check import Checker
from ..ir import Case, save_case
from ..isolation import ExecutorPool
from ..minimize import MinimizeError, MinimizeResult, Target, minimize
from ..outfiles import replace_file
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    fail,
    one_line,
    positive_int,
    positive_seconds,
    read_case,
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
    parser.add_argument("--timeout", type=timeout_seconds, default=120.0, help="seconds per executor call (at least 1)")
    parser.add_argument("--export", action="store_true", help="also write a repro script beside each minimized case")
    parser.add_argument("--json", action="store_true", help="print each summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="do not print the accepted steps")


def output_path(case_path: str, out: str | None, several: bool) -> Path:
    """Where the minimized case of `case_path` goes."""
    stem = Path(case_path).name.removesuffix(".json") + ".min.json"
    if out is None:
        return Path(case_path).with_name(stem)
    target = Path(out)
    if several or target.is_dir() or out.endswith("/"):
        return target / stem
    return target


def _export(result: MinimizeResult, pool: ExecutorPool, path: Path, command: str) -> Path | None:
    """Write the short repro script of a minimized finding beside its case (the full-oracle one as .full.py)."""
    finding = result.finding
    assert finding is not None
    with tempfile.TemporaryDirectory() as tmp:
        art = write_finding(Path(tmp), result.case, finding, pool.describe(finding.executor), command)
        out = None
        for made, suffix in ((art.repro, ".py"), (art.repro_full, ".full.py")):
            if made is not None:
                target = path.with_name(path.name.removesuffix(".json") + suffix)
                replace_file(target, made.read_text(), mode=0o755, sync=False)
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
        for path, _ in cases:
            out = output_path(path, args.out, several)
            if several or (args.out and (Path(args.out).is_dir() or args.out.endswith("/"))):
                writable_dir(str(out.parent), "--out")
            writable_file(str(out), "--out" if args.out else "the minimized case", keep=tuple(p for p, _ in cases))
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    status = EXIT_OK
    command = "precfuzz minimize " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "precfuzz minimize"
    progress = None if args.quiet or args.json else (lambda line: print(line, flush=True))
    with ExecutorPool(names, timeout=args.timeout) as pool:
        pool.prime()  # the first check runs them all: their workers load side by side
        checker = Checker(pool)
        for path, case in cases:
            print(f"{path}: minimizing ({len(case.graph.nodes)} nodes)", flush=True,
                  file=sys.stderr if args.json else sys.stdout)  # --json: stdout is JSON only
            try:
                result = minimize(case, args.signature, checker, budget_s=args.max_seconds,
                                  max_checks=args.max_checks, progress=progress)
            except MinimizeError as exc:
                print(f"{path}: not minimized: {one_line(str(exc))}", file=sys.stderr)
                status = max(status, EXIT_FINDING)
                continue
            if not result.confirmed:
                status = max(status, EXIT_FINDING)
            out = output_path(path, args.out, several)
            save_case(result.case, out)
            summary = {**result.summary(), "case": str(out)}
            if args.export and result.finding is not None:
                script = _export(result, pool, out, f"{command}  # {path}")
                summary["repro"] = str(script) if script else None
            if args.json:
                print(json.dumps(summary, indent=1))
            else:
                print("\n".join(result.lines()))
                print(f"  wrote {out}" + (f" and {summary['repro']}" if summary.get("repro") else ""), flush=True)
    return status
