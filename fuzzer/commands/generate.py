"""Generate cases (JSON files named by index and case id) from a seed; optionally print coverage and validity as JSON.

`precfuzz generate --count N --seed S --out DIR [--stats]`: case i is generators.graphs.generate_case(S, i),
so the same seed writes the same files, byte for byte. --stats prints op, dtype, op:dtype, distribution
and family counts, the number of seed-bug corner cases, and the fraction of cases that run on the fp64
reference with finite outputs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..ir import save_case
from .common import EXIT_OK, add_force, count_int, fail, nonnegative_int, seed_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz generate`."""
    parser.add_argument("--count", type=count_int, required=True, help="number of cases (at most 1000000)")
    parser.add_argument("--seed", type=seed_int, default=0, help="generator seed (case i is a function of seed and i)")
    parser.add_argument("--start", type=nonnegative_int, default=0, help="index of the first case")
    parser.add_argument("--out", help="directory for the case files (optional with --stats)")
    parser.add_argument("--families", help="comma-separated generator families (default: all)")
    parser.add_argument("--stats", action="store_true", help="print coverage and reference validity as JSON")
    add_force(parser, "an existing case file of the same name")


def run(args: argparse.Namespace) -> int:
    """Write the cases and print the stats."""
    # submodules, not the package: an editable install made before generators/ had an __init__ maps it as a namespace
    from generators.coverage import coverage, reference_problem
    from generators.graphs import ALL_FAMILIES, generate_case

    if args.count < 0 or args.start < 0:
        return fail("generate: --count and --start must be >= 0")
    if args.out is not None and not args.out.strip():
        return fail("generate: --out is empty")
    if not args.out and not args.stats:
        return fail("generate: give --out DIR, --stats, or both")
    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families is not None else None
    if families == []:  # like an empty --executors: not "every family"
        return fail(f"generate: --families names no family (known: {', '.join(ALL_FAMILIES)})")
    unknown = [f for f in families or () if f not in ALL_FAMILIES]
    if unknown:
        return fail(f"generate: unknown family {unknown[0]!r} (known: {', '.join(ALL_FAMILIES)})")
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not out.is_dir():
        return fail(f"generate: --out {out} exists and is not a directory")
    cases = []
    try:
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        for index in range(args.start, args.start + args.count):
            case = generate_case(args.seed, index, families)
            if out is not None:
                save_case(case, out / f"{index:06d}-{case.id}.json", force=args.force)
            cases.append(case)
    except OSError as exc:
        return fail(f"generate: cannot write {exc.filename or out}: {exc.strerror}")
    if args.stats:
        problems = [reference_problem(c) for c in cases]
        stats = {"valid_fraction": (sum(p is None for p in problems) / len(cases)) if cases else 1.0, **coverage(cases)}
        invalid = [f"{c.meta['index']}: {p}" for c, p in zip(cases, problems) if p is not None]
        if invalid:
            stats["invalid"] = invalid[:20]
        print(json.dumps(stats, indent=1, sort_keys=True))
    return EXIT_OK
