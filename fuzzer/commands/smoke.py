"""Nightly CI smoke run: a fixed-seed, bounded campaign that fails only on bugs not in the baseline."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..campaign import Campaign, CampaignError
from ..campaign.minimizer_lane import INTERNAL_ERRORS
from ..campaign.smoke_dir import MARKER, empty, marked, record, strangers
from ..campaign.smoke import compare, junit, load_baseline, markdown, updated_baseline
from ..campaign.store import (
    ARM_RESULTS,
    BUGS,
    FINDINGS,
    LANE_EVENTS,
    LOCK,
    RUNS,
    SCHEDULE,
    STATE,
    DirLock,
    StoreError,
)
from ..outfiles import replace_file
from ..terminal import safe
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    add_force,
    distinct_outputs,
    fail,
    one_line,
    positive_int,
    positive_seconds,
    same_file,
    seed_int,
    writable_file,
)
from .run import (
    DEFAULT_SEEDS,
    add_campaign_arguments,
    check_seeds,
    config_from_args,
    stop_on_signals,
)

DEFAULT_BASELINE = Path(__file__).resolve().parents[2] / "corpus" / "known-findings.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz smoke`."""
    parser.add_argument("--baseline", default=str(DEFAULT_BASELINE), help="known bugs (JSON); '' for none")
    parser.add_argument("--junit", help="write JUnit XML here")
    parser.add_argument("--write-baseline", metavar="PATH",
                        help="after the run, write the baseline plus this run's new bugs here (triage kept)")
    parser.add_argument("--summary", help="write the Markdown summary here (default: OUT/smoke.md)")
    parser.add_argument("--max-tests", type=positive_int, default=1500,
                        help="tests to run (default 1500: the same cases every night)")
    parser.add_argument("--time", type=positive_seconds, default=600.0,
                        help="safety cap in seconds (default 600); a run cut short by it says so")
    parser.add_argument("--seed", type=seed_int, default=20261130, help="fixed generator seed")
    add_force(parser, "an existing --junit, --summary or --write-baseline file")
    parser.add_argument("--out", default="results/smoke",
                        help="campaign directory: a new or empty one, or one an earlier smoke run made (then replaced)")
    add_campaign_arguments(parser, minimize=False)


def fresh_out(out: Path) -> None:
    """Make `out` an empty directory marked as smoke's: create it, or empty one smoke made; else UsageError.

    Nothing else is ever deleted: a directory without smoke's marker (a file with precfuzz's generated header)
    that holds anything is refused, and so is a marked one holding, at any depth, a file its marker does not list
    with its current sha256 (and precfuzz cannot otherwise prove it wrote).
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not marked(out):
            raise UsageError(f"--out {out} is not empty and was not made by precfuzz smoke (no {MARKER} file it "
                             "wrote); give a new or empty directory, or delete this one yourself")
        others = strangers(out)
        if others:
            raise UsageError(f"--out {out} holds {', '.join(repr(one_line(o)) for o in others[:3])}"
                             f"{f' and {len(others) - 3} more' if len(others) > 3 else ''}, which precfuzz smoke did "
                             "not write (or changed since); move them away or delete the folder yourself (smoke "
                             "deletes only the files its last run listed)")
    out.mkdir(parents=True, exist_ok=True)
    with DirLock(out):  # not while another run uses it
        if strangers(out):  # something arrived since the check: keep it, and say so
            raise UsageError(f"--out {out} changed while smoke prepared it; run it again")
        empty(out)
        record(out)


def _not_a_campaign_file(option: str, path: str, out: Path) -> None:
    """UsageError when `path` is one of the files the campaign keeps in --out (the output would replace it)."""
    try:
        rel = Path(path).resolve().relative_to(out.resolve())
    except ValueError:
        return
    names = {STATE, FINDINGS, BUGS, RUNS, LOCK, SCHEDULE, ARM_RESULTS, INTERNAL_ERRORS, LANE_EVENTS, "findings",
             "logs", MARKER}
    if rel.parts and (rel.parts[0] in names or rel.parts[0].removesuffix(".damaged") in names):
        raise UsageError(f"{option} {path} is a file the campaign keeps in --out {out}; give another name")


def run(args: argparse.Namespace) -> int:
    """Fresh campaign, then the baseline verdict; exit 1 only on new bugs."""
    try:
        baseline = load_baseline(Path(args.baseline) if args.baseline else None)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return fail(f"cannot read baseline {args.baseline}: {exc}")
    out = Path(args.out)
    try:
        inputs = (args.baseline,) if args.baseline else ()
        if args.junit:
            writable_file(args.junit, "--junit", keep=inputs, force=args.force)
        if args.summary:
            writable_file(args.summary, "--summary", keep=inputs, force=args.force)
        if args.write_baseline:  # may update the baseline it read in place (its entries are carried over)
            in_place = bool(args.baseline) and same_file(args.write_baseline, args.baseline)
            writable_file(args.write_baseline, "--write-baseline", force=args.force or in_place)
        outputs = (("--junit", args.junit), ("--summary", args.summary or str(out / "smoke.md")),
                   ("--write-baseline", args.write_baseline))
        distinct_outputs(*outputs)  # one would silently overwrite the other
        for option, path in outputs:
            if path:
                _not_a_campaign_file(option, path, out)
        if args.baseline and Path(args.baseline).resolve().is_relative_to(out.resolve()):
            raise UsageError(f"--baseline {args.baseline} lies inside --out {out}, which smoke empties first")
        check_seeds(DEFAULT_SEEDS)
        cfg = config_from_args(args, out, args.seed, args.time, args.max_tests, DEFAULT_SEEDS)
        fresh_out(out)  # only after every other option checked out
        campaign = Campaign(cfg)
    except (UsageError, CampaignError, StoreError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot prepare --out {out}: {exc.strerror or exc}")
    stop_on_signals(campaign)
    try:
        summary = campaign.run()
    finally:
        record(out)  # what this run wrote: the next run deletes only these
    verdict = compare(campaign.store.load_bugs(), baseline)
    info = {"cases": summary.cases, "tests": summary.tests, "elapsed_s": summary.elapsed_s, "seed": cfg.seed,
            "stopped_by": summary.stopped_by}
    if summary.stopped_by == "time":
        print(f"precfuzz smoke: warning: the {args.time:.0f} s cap stopped the run before {args.max_tests} tests; "
              "findings past that point were not looked for", file=sys.stderr)
    md = markdown(verdict, info)
    try:
        replace_file(args.summary or out / "smoke.md", md, sync=False, style="markdown", force=args.force)
        if args.junit:
            replace_file(args.junit, junit(verdict, cfg.executors, summary.elapsed_s), sync=False, style="xml",
                         force=args.force)
    except OSError as exc:  # something took the name while it ran
        return fail(f"cannot write {exc.filename}: {exc.strerror or exc}")
    record(out)  # the summary (and a --junit file) written into --out are the run's too
    print(safe(md), file=sys.stderr)
    if args.write_baseline:
        about = (f"Known bugs of `precfuzz smoke` (seed {cfg.seed}, --max-tests {args.max_tests}, executors "
                 f"{','.join(cfg.executors)}). smoke fails only on bug keys not listed here. triage: what we "
                 "believe each is.")
        entries = updated_baseline(campaign.store.load_bugs(), baseline)
        in_place = bool(args.baseline) and same_file(args.write_baseline, args.baseline)
        try:
            replace_file(args.write_baseline, json.dumps({"about": about, "bugs": entries}, indent=1) + "\n",
                         sync=False, style="json", force=args.force or in_place)
        except OSError as exc:
            return fail(f"cannot write {exc.filename}: {exc.strerror or exc}")
    print(json.dumps({"passed": verdict.passed, "new": [b["key"] for b in verdict.new],
                      "known": len(verdict.known), "missing": len(verdict.missing), **info}))
    return EXIT_OK if verdict.passed else EXIT_FINDING
