"""Write a standalone repro script (and optionally a bug-report draft) for a case on one executor."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .. import report_draft
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
    parser.add_argument("--set", type=int, default=None, help="input set to embed (default: the one that fails)")


def run(args: argparse.Namespace) -> int:
    """Render the script; with --report, check the case on the executor for the numbers."""
    try:
        case = read_case(args.case)
        (name,) = select_executors(args.executor)
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    command = "precfuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[0].endswith("precfuzz") else \
        f"precfuzz export {args.case} --executor {name} --out {args.out}"
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
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(script)
    out.chmod(0o755)
    print(f"wrote {out}")
    if args.report:
        Path(args.report).write_text(report_draft.render(case, finding, describe, row, script, command, out.name))
        print(f"wrote {args.report}")
    return EXIT_OK
