"""Run a fuzz campaign: generate cases, run every executor, save deduplicated findings; resumable."""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..executors import create
from ..campaign import Campaign, CampaignConfig, CampaignError, command_line
from ..campaign.ray_lanes import RAY_HINT, ray_missing
from ..campaign.schedule import SCHEDULES
from ..campaign.store import STATE, StoreError, read_state
from .common import (
    EXIT_OK,
    UsageError,
    fail,
    nonnegative_seconds,
    positive_int,
    positive_number,
    positive_seconds,
    read_case,
    seed_int,
    select_executors,
    timeout_seconds,
    workers_int,
    writable_dir,
)

DEFAULT_SEEDS = Path(__file__).resolve().parents[2] / "corpus" / "seeds"


def add_campaign_arguments(parser: argparse.ArgumentParser, minimize: bool = True) -> None:
    """Options shared by `run` and `smoke` (minimizing on by default for run, opt-in for smoke)."""
    parser.add_argument("--executors", help="comma-separated executors (default: every available one)")
    parser.add_argument("--workers", type=workers_int, default=None, help="parallel lanes (default: the cores available)")
    parser.add_argument("--timeout", type=timeout_seconds, default=120.0,
                        help="seconds per executor call before it counts as a hang (at least 1; a worker's start-up "
                             "has a clock of its own)")
    if minimize:
        parser.add_argument("--no-minimize", action="store_true", help="save findings without minimizing them")
    else:
        parser.add_argument("--minimize", dest="no_minimize", action="store_false",
                            help="also minimize each new finding (slower)")
    parser.add_argument("--minimize-budget", type=nonnegative_seconds, default=30.0,
                        help="seconds to minimize each new finding (it is saved unminimized first)")
    parser.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="run the lanes as actors of the Ray cluster at ADDRESS (HOST:PORT, or 'auto' for the "
                             "one this machine belongs to); --workers then defaults to as many as the cluster holds. "
                             "Needs pip install -e '.[ray]'")
    parser.add_argument("--ray-neuron-cores", type=positive_number, default=1.0,
                        help="NeuronCores each Ray lane requests when a neuron/* executor is selected (default 1)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz run`."""
    parser.add_argument("--out", required=True, help="campaign directory (created, or resumed if it exists)")
    parser.add_argument("--time", type=positive_seconds, default=None,
                        help="seconds to run (default: until --max-tests or Ctrl-C)")
    parser.add_argument("--max-tests", type=positive_int, default=None,
                        help="stop after this many tests (executor x input set)")
    parser.add_argument("--seed", type=seed_int, default=0, help="generator seed")
    parser.add_argument("--no-seeds", action="store_true", help="skip the seed corpus (corpus/seeds) at the start")
    parser.add_argument("--seeds-dir", default=str(DEFAULT_SEEDS), help="seed corpus directory")
    parser.add_argument("--schedule", choices=SCHEDULES, default=None,
                        help="adaptive: a bandit over (op family x executor) steers the generator and skips executors "
                             "whose recent tests found no new bug on a family (never below 1 case in 4; torch/eager "
                             "always runs), deterministic per seed; uniform: every executor runs every case. "
                             "Default: the one a resumed campaign was started with, else adaptive")
    parser.add_argument("--families", default=None,
                        help="comma-separated generator families the cases come from, with their base weights "
                             "(default: all; a resume takes the same list again)")
    parser.add_argument("--train", action=argparse.BooleanOptionalAction, default=None,
                        help="training cases (the default for a new campaign over every family): a fifth of the cases "
                             "are a block, a loss head and the gradients of its inputs and parameters (family "
                             "`training`), a tenth one optimizer step (SGD, momentum, Adam, AdamW; family "
                             "`optimizer`), and tvm/train (TVM's training flow) joins the default executors. "
                             "--no-train: forward cases only (the families and draws of a forward-only campaign); "
                             "with --families, only --train adds them; a resume takes what it was started with")
    add_campaign_arguments(parser)


def _generate_among(names: list[str], seed: int, index: int, families: list[str] | None = None) -> Any:
    """generate_case from `names` (the adaptive schedule's one family, when it steers)."""
    from generators.graphs import generate_case

    return generate_case(seed, index, families or names)


TRAINING_SHARE = 0.2  # of the cases, under --train: gradients of a block's loss (family `training`)
OPTIMIZER_SHARE = 0.1  # and optimizer steps (family `optimizer`)
TRAIN_FAMILIES = {"training": TRAINING_SHARE, "optimizer": OPTIMIZER_SHARE}


def with_training(families: dict[str, float] | None) -> dict[str, float]:
    """The family weights with `training` and `optimizer` added at their shares of the draws (every forward family
    when None)."""
    from generators.graphs import FAMILIES

    base = {k: v for k, v in (families or {f: float(w) for f, (w, _) in FAMILIES.items()}).items()
            if k not in TRAIN_FAMILIES}
    if not base:
        return {k: v / sum(TRAIN_FAMILIES.values()) for k, v in TRAIN_FAMILIES.items()}
    rest = 1 - sum(TRAIN_FAMILIES.values())
    return {**base, **{k: round(sum(base.values()) * share / rest, 3) for k, share in TRAIN_FAMILIES.items()}}


def wants_training(train: bool | None, families: str | None, out: Path) -> bool:
    """Whether the campaign draws training cases: --train / --no-train as said; unsaid, a new campaign over every
    family does, and a resumed one does what it was started with."""
    if train is not None:
        return train
    if families is not None:
        return False
    try:
        state = read_state(out / STATE)
    except StoreError:
        return True  # damaged: the campaign's store reports it
    return not isinstance(state, dict) or any(f in str(state.get("families", "")).split(",") for f in TRAIN_FAMILIES)


def families_from(text: str | None) -> dict[str, float] | None:
    """--families as {family: base weight} (None: every family); UsageError naming an unknown one."""
    if text is None:
        return None
    from generators.graphs import ALL_FAMILIES

    names = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in names if f not in ALL_FAMILIES]
    if not names or unknown:
        raise UsageError(f"--families: {'unknown ' + ', '.join(unknown) if unknown else 'no family named'} "
                         f"(known: {', '.join(ALL_FAMILIES)})")
    return {f: float(ALL_FAMILIES[f][0]) for f in names}


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def config_from_args(args: argparse.Namespace, out: Path, seed: int, time_s: float | None, max_tests: int | None,
                     seeds_dir: Path | None) -> CampaignConfig:
    """A CampaignConfig from parsed options (UsageError on bad values)."""
    writable_dir(str(out), "--out")
    executors = select_executors(args.executors)
    ray = getattr(args, "ray", None)
    if ray is not None:
        if not ray.strip():
            raise UsageError("--ray needs a cluster address (HOST:PORT, or 'auto')")
        if ray_missing():
            raise UsageError(RAY_HINT)
    workers = args.workers if args.workers is not None else (0 if ray is not None else default_workers())
    if workers < 1 and ray is None:
        raise UsageError("--workers must be at least 1")
    if time_s is not None and time_s <= 0:
        raise UsageError("--time must be positive")
    return CampaignConfig(out=out, executors=executors, seed=seed, time_s=time_s,
                          max_tests=max_tests, workers=workers, seeds_dir=seeds_dir,
                          minimize=not args.no_minimize, minimize_budget_s=args.minimize_budget,
                          timeout_s=args.timeout, command=command_line(sys.argv[1:]),
                          ray=ray.strip() if ray is not None else None,
                          ray_neuron_cores=getattr(args, "ray_neuron_cores", 1.0),
                          executors_named=args.executors is not None)


def check_seeds(seeds_dir: Path | None) -> None:
    """UsageError naming the first seed case that does not load (a campaign would stop on it)."""
    for path in sorted(seeds_dir.glob("*.json")) if seeds_dir is not None else []:
        read_case(str(path))


def stop_on_signals(campaign: Campaign) -> None:
    """SIGINT/SIGTERM: finish the cases in flight, save, exit; a second one saves and exits at once."""
    def handler(signum: int, frame: object) -> None:
        if campaign.stop.is_set():
            campaign.flush(force=True)  # unfinished cases stay pending: a rerun runs them again
            raise SystemExit(128 + signum)
        print(f"\nprecfuzz: {signal.Signals(signum).name}: stopping after the cases in flight "
              "(send it again to stop at once)", file=sys.stderr)
        campaign.stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def run(args: argparse.Namespace) -> int:
    """Run (or resume) the campaign and print a summary."""
    try:
        if not args.no_seeds and not args.seeds_dir:
            raise UsageError("--seeds-dir needs a directory name")  # Path("") is the working directory
        seeds_dir = None if args.no_seeds else Path(args.seeds_dir)
        if seeds_dir is not None and not seeds_dir.is_dir():
            raise UsageError(f"seed corpus {seeds_dir} is not a directory")
        check_seeds(seeds_dir)
        if not args.out:
            raise UsageError("--out needs a directory name")  # Path("") is the working directory
        cfg = config_from_args(args, Path(args.out), args.seed, args.time, args.max_tests, seeds_dir)
        cfg.schedule, cfg.schedule_default = args.schedule, "adaptive"
        cfg.families = families_from(args.families)
        if wants_training(args.train, args.families, cfg.out):
            cfg.families = with_training(cfg.families)
            if args.executors is None and "tvm/train" not in cfg.executors and not create("tvm/train").availability():
                cfg.executors = [*cfg.executors, "tvm/train"]
        if cfg.families:  # uniform: cases from these families only; adaptive: steered among them
            cfg.generate = functools.partial(_generate_among, list(cfg.families))
        existed = cfg.out.exists()
        try:
            campaign = Campaign(cfg)
        except CampaignError:
            if not existed:  # refused before it started (say, no Ray head): leave no empty directory behind
                try:
                    cfg.out.rmdir()  # only ever an empty directory this call made
                except OSError:
                    pass
            raise
    except (UsageError, CampaignError) as exc:
        return fail(str(exc))
    print(f"campaign {cfg.out}: executors {', '.join(cfg.executors)}; {campaign.lanes.describe()}; seed {cfg.seed}; "
          f"{campaign.state.schedule} schedule"
          + (f"; resuming at case {campaign.state.next_index}" if campaign.state.invocations > 1 else ""),
          file=sys.stderr)
    stop_on_signals(campaign)
    summary = campaign.run()
    print(json.dumps({"out": str(cfg.out), "cases": summary.cases, "tests": summary.tests,
                      "bugs_new": summary.bugs_new, "bugs_total": summary.bugs_total,
                      "findings_new": summary.findings_new, "findings_total": summary.findings_total,
                      "elapsed_s": round(summary.elapsed_s, 1), "stopped_by": summary.stopped_by}))
    # pandas and matplotlib: imported when a report is written
    from ..campaign.report import write_report

    try:  # the report a person reads first, rendered as the run ends (issue 20)
        report = f"report: {write_report(cfg.out)}"
    except (OSError, StoreError) as exc:  # a report.md precfuzz did not write, a damaged file: the campaign stands
        report = f"report not written ({str(exc)[:200]}); precfuzz report {cfg.out} renders it"
    print(f"bugs: {cfg.out / 'bugs.jsonl'}; findings: {cfg.out / 'findings.jsonl'}; {report}", file=sys.stderr)
    if summary.tests == 0 and summary.stopped_by == "max-tests":
        print(f"precfuzz run: warning: --max-tests {cfg.max_tests} is fewer than one case's tests (each executor x "
              "input set is a test): nothing ran", file=sys.stderr)
    return EXIT_OK
