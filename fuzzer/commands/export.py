"""Write a standalone repro script (and optionally a bug-report draft) for a case on one executor.

The script is the short one (the graph as plain backend code, the numbers printed) for the executor's first
finding on the case; with --full, or when the case shows no finding there, the full-oracle one (the pasted
fp64 reference, the ideal implementations and the bound).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace

from ..artifacts import REPRO, REPRO_FULL, render_finding, write_file, write_script
from ..arrays import detach_script
from ..check import Checker
from ..executors import create
from ..export import render_script
from ..ir import case_options
from ..isolation import ExecutorPool
from ..terminal import safe
from .common import (
    EXIT_OK,
    UsageError,
    add_force,
    fail,
    nonnegative_int,
    read_case,
    select_executors,
    writable_file,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz export`."""
    parser.add_argument("case", help="case JSON file")
    parser.add_argument("--executor", required=True, help="executor to reproduce on, e.g. tvm/decompose")
    parser.add_argument("--out", required=True, help="path of the repro script to write")
    parser.add_argument("--report", help="also write a Markdown bug-report draft here")
    parser.add_argument("--full", action="store_true", help="the full-oracle script instead of the short one")
    parser.add_argument("--set", type=nonnegative_int, default=None,
                        help="input set to embed (default: the one that fails)")
    add_force(parser, "an existing --out/--report file")


def run(args: argparse.Namespace) -> int:
    """Check the case on the executor, then write the script of its finding."""
    try:
        case = read_case(args.case)
        names = select_executors(args.executor)
        if len(names) != 1:
            raise UsageError(f"--executor names one executor, not {len(names)} ({', '.join(names)})")
        (name,) = names
        if args.set is not None and args.set >= len(case.input_sets):
            raise UsageError(f"input set {args.set} out of range (the case has {len(case.input_sets)})")
        out = writable_file(args.out, "--out", keep=(args.case,), force=args.force)
        report = writable_file(args.report, "--report", keep=(args.case, args.out), force=args.force) \
            if args.report else None
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    command = "precfuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[0].endswith("precfuzz") else \
        f"precfuzz export {shlex.quote(args.case)} --executor {name} --out {shlex.quote(args.out)}"
    with ExecutorPool([name]) as pool:
        result = Checker(pool).check(case, [name])
        case = result.case  # with its Relax pass sequence written out, where the executor reads one
        describe = pool.describe(name)
    mine = [f for f in result.findings if f.executor == name]
    try:
        if not mine:
            print(f"{name} shows no finding on this case: writing the full-oracle script"
                  + (f" (no bug report drafted: {report} not written)" if report is not None else ""), file=sys.stderr)
            try:
                parts = replace(create(name).bind(case_options(result.case)).repro_parts(case.graph),
                                describe=describe)
            except NotImplementedError as exc:
                return fail(str(exc))
            text, held = detach_script(render_script(case, parts, command, args.set or 0))
            write_script(out, text, held, args.force)
            print(f"wrote {out}")
            return EXIT_OK
        finding = mine[0] if args.set is None else replace(mine[0], input_set=args.set)
        texts = render_finding(case, finding, describe, command, short=not args.full, script_name=out.name)
        script = texts.repro_full if args.full or texts.repro is None else texts.repro
        if script is None:
            return fail("; ".join(texts.errors) or f"{name} has no script exporter")
        write_script(out, script, texts.arrays.get(REPRO_FULL if script is texts.repro_full else REPRO), args.force)
        print(safe(f"wrote {out}: {texts.title}"))
        if report is not None and texts.report is not None:
            write_file(report, texts.report, "markdown", force=args.force)
            print(f"wrote {report}")
    except OSError as exc:
        return fail(f"cannot write {exc.filename or out}: {exc.strerror or exc}")
    return EXIT_OK
