"""Write a standalone repro script (and optionally a bug-report draft) for a case on one executor.

The script is the short one (the graph as plain backend code, the numbers printed) for the executor's first
finding on the case; with --full, or when the case shows no finding there, the full-oracle one (the pasted
fp64 reference, the ideal implementations and the bound).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from ..artifacts import REPORT, REPRO, REPRO_FULL, write_finding
from ..check import Checker
from ..executors import create
from ..export import render_script
from ..isolation import ExecutorPool
from .common import EXIT_OK, UsageError, fail, read_case, select_executors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz export`."""
    parser.add_argument("case", help="case JSON file")
    parser.add_argument("--executor", required=True, help="executor to reproduce on, e.g. tvm/decompose")
    parser.add_argument("--out", required=True, help="path of the repro script to write")
    parser.add_argument("--report", help="also write a Markdown bug-report draft here")
    parser.add_argument("--full", action="store_true", help="the full-oracle script instead of the short one")


def run(args: argparse.Namespace) -> int:
    """Check the case on the executor, then write the script of its finding."""
    try:
        case = read_case(args.case)
        names = select_executors(args.executor)
        if len(names) != 1:
            raise UsageError(f"--executor names {len(names)} executors ({', '.join(names)}); give exactly one")
        (name,) = names
    except UsageError as exc:
        return fail(str(exc))
    command = "precfuzz export " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "precfuzz export"
    with ExecutorPool([name]) as pool:
        result = Checker(pool).check(case, [name])
        describe = pool.describe(name)
    mine = [f for f in result.findings if f.executor == name]
    out = Path(args.out)
    if not mine:
        print(f"{name} shows no finding on this case: writing the full-oracle script", file=sys.stderr)
        try:
            text = render_script(case, create(name).repro_parts(case.graph), command)
        except NotImplementedError as exc:
            return fail(str(exc))
        _place(out, text)
        print(f"wrote {out}")
        return EXIT_OK
    with tempfile.TemporaryDirectory() as tmp:
        art = write_finding(Path(tmp), case, mine[0], describe, command, short=not args.full)
        if art.errors and not (art.repro or art.repro_full):
            return fail("; ".join(art.errors))
        _place(out, (Path(tmp) / (REPRO_FULL if args.full or art.repro is None else REPRO)).read_text())
        print(f"wrote {out}: {art.title}")
        if args.report:
            _place(Path(args.report), (Path(tmp) / REPORT).read_text().replace(f"`{REPRO}`", f"`{out.name}`"), False)
            print(f"wrote {args.report}")
    return EXIT_OK


def _place(path: Path, text: str, executable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(0o755)
