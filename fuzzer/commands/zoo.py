"""Audit every model of the zoo (corpus/zoo: tiny real-library models) and write one verdict table and JUnit.

Each model is audited in a process of its own (`precfuzz audit MODEL.py --json --no-minimize`, stopped at
--timeout) and its ATen ops are counted (what the audit translates, what it lacks). Writes OUT/zoo.md (models,
exit status, seconds, ops translated / met; the model x policy x backend table), OUT/zoo.json, OUT/ops.md (the
op inventory) and OUT/junit.xml (one testcase per model: passing when the audit ran end to end, exit 0 or 1).
Exit 0 when every model audited end to end, 1 when one did not, 2 bad input. The zoo's libraries are the
optional extra `zoo` (`make zoo` installs them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..outfiles import replace_file
from ..terminal import safe
from ..terminating import raised_on_termination
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    add_force,
    fail,
    select_executors,
    timeout_seconds,
    writable_dir,
    writable_file,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz zoo`."""
    from ..audit.zoo import DEFAULT_DIR

    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="directory of model files (default corpus/zoo)")
    parser.add_argument("--models", help="comma-separated model names (file stems) to audit (default: all)")
    parser.add_argument("--out", default="results/zoo", help="output directory (default results/zoo)")
    parser.add_argument("--junit", help="JUnit XML path (default OUT/junit.xml)")
    parser.add_argument("--timeout", type=timeout_seconds, default=600.0,
                        help="seconds per model's audit before it is stopped (default 600)")
    parser.add_argument("--executors", help="comma-separated executor names for the audits (default: all available)")
    parser.add_argument("--no-inventory", action="store_true", help="skip the op inventory (audits only)")
    add_force(parser, "an existing zoo.md, zoo.json, ops.md or --junit file")


def run(args: argparse.Namespace) -> int:
    """Audit the zoo; exit 0 when every model audited end to end, else 1."""
    from ..audit.zoo import (
        discover,
        junit,
        markdown,
        ops_markdown,
        run_zoo,
        summary,
        to_json,
    )

    try:
        names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models is not None else None
        if names is not None and not names:
            raise UsageError("--models names no model")
        if args.executors is not None:
            select_executors(args.executors)  # a bad name is one line here, not twelve failed audits
        paths = discover(Path(args.dir), names)
        out = writable_dir(args.out, "--out")
        junit_path = Path(args.junit) if args.junit else out / "junit.xml"
        outputs = [out / "zoo.json", out / "zoo.md"] + ([] if args.no_inventory else [out / "ops.md"]) + [junit_path]
        for path in outputs:  # refused before any audit: a file precfuzz cannot prove it wrote is kept
            writable_file(str(path), "--junit" if path == junit_path and args.junit else "--out", force=args.force)
    except ValueError as exc:
        return fail(str(exc))
    except UsageError as exc:
        return fail(str(exc))
    log = (lambda line: print(safe(f"[zoo] {line}"), file=sys.stderr, flush=True))
    with raised_on_termination():  # SIGTERM, SIGHUP: the audit running in its own session is ended too
        entries = run_zoo([p.resolve() for p in paths], out.resolve() / "audit", args.timeout, args.executors,
                          inventory=not args.no_inventory, log=log)
    out.mkdir(parents=True, exist_ok=True)
    write = (lambda path, text, style: replace_file(path, text, sync=False, style=style, force=args.force))
    write(out / "zoo.json", json.dumps(to_json(entries), indent=1, default=str) + "\n", "json")
    write(out / "zoo.md", markdown(entries), "markdown")
    if not args.no_inventory:
        write(out / "ops.md", "# precfuzz zoo: ATen op inventory\n\n" + ops_markdown(entries), "markdown")
    write(junit_path, junit(entries), "xml")
    s = summary(entries)
    print(json.dumps(s))
    log(f"wrote {out / 'zoo.md'}, zoo.json{', ops.md' if not args.no_inventory else ''} and {junit_path}")
    return EXIT_OK if s["failed"] == 0 else EXIT_FINDING
