"""Write a standalone repro script (and optionally a bug-report draft) for a case on one executor."""

from __future__ import annotations

import argparse
import shlex
import sys

from .. import report_draft
from ..check import Checker
from ..executors import create
from ..export import render_script
from ..isolation import ExecutorPool
from .common import EXIT_OK, UsageError, fail, nonnegative_int, read_case, select_executors, writable_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz export`."""
    parser.add_argument("case", help="case JSON file")
    parser.add_argument("--executor", required=True, help="executor to reproduce on, e.g. tvm/decompose")
    parser.add_argument("--out", required=True, help="path of the repro script to write")
    parser.add_argument("--report", help="also write a Markdown bug-report draft here")
    parser.add_argument("--set", type=nonnegative_int, default=None, help="input set to embed (default: the one that fails)")


def run(args: argparse.Namespace) -> int:
    """Render the script; with --report, check the case on the executor for the numbers."""
    try:
        case = read_case(args.case)
        names = select_executors(args.executor)
        if len(names) != 1:
            raise UsageError(f"--executor names one executor, not {len(names)} ({', '.join(names)})")
        (name,) = names
        if args.set is not None and args.set >= len(case.input_sets):
            raise UsageError(f"input set {args.set} out of range (the case has {len(case.input_sets)})")
        out = writable_file(args.out, "--out", keep=(args.case,))
        report = writable_file(args.report, "--report", keep=(args.case, args.out)) if args.report else None
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    command = "precfuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[0].endswith("precfuzz") else \
        f"precfuzz export {shlex.quote(args.case)} --executor {name} --out {shlex.quote(args.out)}"
    finding, row, describe = None, {}, create(name).describe()
    set_index = args.set
    if args.report or set_index is None:
        with ExecutorPool([name]) as pool:
            result = Checker(pool).check(case, [name])
            describe = pool.describe(name)
        mine = [f for f in result.findings if f.executor == name]
        finding = mine[0] if mine else None
        row = result.row(name)
        if set_index is None:
            set_index = finding.input_set if finding else 0
    if not 0 <= set_index < len(case.input_sets):
        return fail(f"input set {set_index} out of range (the case has {len(case.input_sets)})")
    try:
        parts = create(name).repro_parts(case.graph)
    except NotImplementedError as exc:
        return fail(str(exc))
    parts = type(parts)(**{**parts.__dict__, "describe": describe})
    script = render_script(case, parts, command, set_index, report_draft.title(finding) if finding else "")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(script)
        out.chmod(0o755)
        print(f"wrote {out}")
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(report_draft.render(case, finding, describe, row, script, command, out.name))
            print(f"wrote {report}")
    except OSError as exc:
        return fail(f"cannot write {exc.filename or out}: {exc.strerror or exc}")
    return EXIT_OK
