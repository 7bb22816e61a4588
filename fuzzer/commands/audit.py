"""Audit your own PyTorch model under every precision policy and backend (exit 0 clean, 1 hazards or bugs, 2 bad input).

MODEL.py[:FUNC]: FUNC (default `make`) returns (module, example_args) on the CPU. This IMPORTS AND RUNS the
Python file you name (that is the point: it is your model); case JSON files, by contrast, are data and never
run code. The module is captured with torch.export, translated to precfuzz's IR (parameters keep their values),
and checked on every available executor and policy with the usual oracles.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..audit.blocks import BLOCK_VALUES
from ..check import Checker
from ..executors import create
from ..ir import save_case
from ..isolation import ExecutorPool
from ..terminal import safe
from ..terminating import raised_on_termination

if TYPE_CHECKING:
    from ..audit.translate import Translation
from .common import (
    EXIT_OK,
    UsageError,
    add_force,
    explore_int,
    fail,
    positive_seconds,
    seed_int,
    select_executors,
    timeout_seconds,
    writable_dir,
    writable_file,
)

# Each TVM pipeline compiles a big graph in a worker of its own: LLVM codegen is most of an audit's time, and
# in one worker the three pipelines ran one after the other while the other cores idled (mobilenet_v3_small:
# 74 s of TVM in a row in a 79 s check, on 2 cores).
AUDIT_OWN_WORKER = frozenset({"tvm"})


def steps_int(text: str) -> int:
    """--steps: an int in 1..1000."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..1000, got {text!r}")
    return value


def block_values_int(text: str) -> int:
    """--block-values: an int in 1..2**40."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**40:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..2**40, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz audit`."""
    parser.add_argument("model", help="MODEL.py[:FUNC] (FUNC defaults to make; the file is imported and run)")
    parser.add_argument("--executors", help="comma-separated executor names (default: all available)")
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    parser.add_argument("--out", help="directory for minimized bug repros (default results/audit/<model>)")
    parser.add_argument("--save-case", help="write the translated case JSON here (a seed for `precfuzz run --seeds-dir`); "
                        "by blocks, each distinct block's case beside it (<stem>.block<k>.json); arrays of more than "
                        "4096 values (real weights, recorded activations) go to a .npz beside each case")
    parser.add_argument("--explore", type=explore_int, default=0,
                        help="check N variants of the input values, scales and dtypes (the graph stays)")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of --explore")
    parser.add_argument("--minimize-budget", type=positive_seconds, default=60.0,
                        help="seconds to minimize each backend bug (at most 3 are minimized)")
    parser.add_argument("--no-minimize", action="store_true", help="report backend bugs without minimizing them")
    parser.add_argument("--train", action="store_true",
                        help="one training step too: the gradient of loss(output, *inputs) (defined in the file; "
                             "default: mean of the squared output) for every parameter, on every policy and backend "
                             "(TVM's training flow included), and the step of optimizer(params) (default: AdamW "
                             "lr 1e-4) judged per parameter tensor (updates lost below half an ULP, non-finite steps)")
    parser.add_argument("--steps", type=steps_int, default=1,
                        help="with --train: judge optimizer step N, after N - 1 exact (float64) training steps of the "
                             "model, each at its own gradient (default 1: the first step, zero optimizer state)")
    parser.add_argument("--blocks", action="store_true",
                        help="audit block by block (module paths), each with its real parameters and the activations "
                             "the whole model's eager run feeds it; automatic for a model holding more than "
                             "2097152 parameter and input values")
    parser.add_argument("--block-values", type=block_values_int, default=None,
                        help="by blocks: split a module until its blocks hold at most N parameter values (default "
                             "8388608; a module with no submodule is one block whatever its size); implies --blocks")
    add_force(parser, "an existing --save-case file or files under --out")
    parser.add_argument("--timeout", type=timeout_seconds, default=300.0,
                        help="seconds per executor call, and for importing, making and exporting the model "
                             "(in a child process: a model that hangs or ends its process is one error line)")


def run(args: argparse.Namespace) -> int:
    """Audit the model; exit 0 (clean), 1 (hazards or backend bugs) or 2 (bad input)."""
    from ..audit.load import capture_isolated, split_target
    from ..audit.translate import AuditInputError

    t0 = time.monotonic()
    log = (lambda line: print(safe(f"[audit] {line}"), file=sys.stderr, flush=True))
    try:
        for option, value in (("--out", args.out), ("--save-case", args.save_case)):
            if value is not None and not value.strip():  # empty is not "the default" (or "none")
                raise UsageError(f"{option} is empty")
        if args.steps != 1 and not args.train:
            raise UsageError("--steps needs --train (it counts optimizer steps)")
        path, func = split_target(args.model)
        names = select_executors(args.executors)
        if args.train and args.executors is None and "tvm/train" not in names \
                and create("tvm/train").availability() is None:
            names.append("tvm/train")  # TVM's training flow (opt-in elsewhere) is what --train asks of TVM
        model = f"{path.stem}" + (f"-{func}" if func != "make" else "")
        out_dir = writable_dir(args.out or str(Path("results") / "audit" / model), "--out")
        save = writable_file(args.save_case, "--save-case", keep=(str(path),), force=args.force) \
            if args.save_case else None
    except (UsageError, AuditInputError) as exc:
        return fail(str(exc))
    # SIGTERM and SIGHUP end the audit as Ctrl-C does: through the cleanup that ends the model's process tree
    # a real model's blocks wait on disk until audited (the temporary folder goes with the audit, however it ends)
    with raised_on_termination(), tempfile.TemporaryDirectory(prefix="precfuzz-blocks-") as store, \
            ExecutorPool(names, timeout=args.timeout, own_worker=AUDIT_OWN_WORKER) as pool:
        pool.prime()  # the backends load while the model is imported and exported
        try:
            limit = args.block_values if args.block_values is not None else (BLOCK_VALUES if args.blocks else None)
            tr = capture_isolated(path, func, model, args.timeout, log, train=args.train, blocks=limit,
                                  store=Path(store))
            if args.train:
                from ..audit.training import TrainingError, with_gradients

                try:
                    tr.case = with_gradients(tr.case, tr.trainable)
                    if tr.bf16 is not None:
                        tr.bf16.case = with_gradients(tr.bf16.case, tr.trainable)
                except TrainingError as exc:
                    raise AuditInputError(f"{path}:{func}: {exc}") from None
        except AuditInputError as exc:
            return fail(str(exc))
        broken = tr.unexplained_eager_error()  # by blocks too: the break is a raise hazard of the block holding it
        if broken:  # nothing to judge: every backend's failure on it would read as "clean"
            return fail(f"{path}:{func}: the model raises {broken} under eager PyTorch on its own example args, and "
                        "no dtype break explains it (fix the model or its example args)")
        if tr.blocks is not None:
            return _audit_blocks(args, pool, tr, path, func, out_dir, save, log, t0)
        return _audit(args, pool, tr, path, func, out_dir, save, log, t0)


def moved_block(tr: Translation, name: str) -> Translation | None:
    """The block `name` of the module exported after model.to(bfloat16) (its blocks fed the bfloat16 model's own
    activations), as the moved translation run_checks takes; None where there is none."""
    from ..audit.translate import Translation

    for bc in (tr.bf16.blocks or []) if tr.bf16 is not None else []:
        if name in bc.block.members:
            return Translation(bc.loaded(), bc.sources)
    return None


def _audit_blocks(args: argparse.Namespace, pool: ExecutorPool, tr: Translation, path: Path, func: str, out_dir: Path,
                  save: Path | None, log: Callable[[str], None], t0: float) -> int:
    """The audit at real size: each distinct block checked alone (fed its recorded activations), a progress line per
    block, at most 3 backend bugs minimized over the model, one table of blocks. With `save`, each distinct block's
    case is written beside it (`<stem>.block<k>.json`, its real weights and recorded activations in `.npz`)."""
    from ..audit.session import minimize_bugs, run_checks
    from ..audit.verdict import BlockVerdict, blocks_exit_status, blocks_json, build, graph_size, render_blocks

    command = "precfuzz audit " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "precfuzz audit"
    checker = Checker(pool, side_by_side=True)
    blocks = tr.blocks or []
    done: list[BlockVerdict] = []
    minimized, seen = 0, set()
    for k, bc in enumerate(blocks, 1):
        t1 = time.monotonic()
        case = bc.loaded()  # one block's weights in memory at a time
        size = graph_size(case.graph)
        also = f", standing for {len(bc.block.members)} blocks of its structure" if len(bc.block.members) > 1 else ""
        log(f"block {k}/{len(blocks)} {bc.block.name}: {size['nodes']} nodes, {size['values']} values{also}")
        if save is not None:
            target = save.with_name(f"{save.stem}.block{k:0{len(str(len(blocks)))}d}.json")
            try:
                save_case(case, target, force=args.force)
            except OSError as exc:
                return fail(f"--save-case: cannot write {exc.filename or target}: {exc.strerror or exc}")
            log(f"wrote block {k}'s case to {target}")
        moved = moved_block(tr, bc.block.name)
        scenarios = run_checks(case, checker, pool.names, log, moved)
        verdict = build(f"{path}:{func} [{bc.block.name}]", scenarios, bc.sources, [])
        verdict.graph = size
        fresh = [b for b in verdict.bugs if b.signature not in seen]
        seen.update(b.signature for b in verdict.bugs)
        if fresh and not args.no_minimize and minimized < 3:
            before = sum(1 for b in verdict.bugs if b.repro)
            minimize_bugs(verdict, scenarios, checker, out_dir, command, args.minimize_budget, 3 - minimized, log,
                          args.force)
            minimized += sum(1 for b in verdict.bugs if b.repro) - before
        verdict.seconds = time.monotonic() - t1
        done.append(BlockVerdict(bc.block.name, list(bc.block.members), verdict))
        log(f"block {k}/{len(blocks)} {bc.block.name}: {'hazards or bugs' if verdict.exit_status else 'clean'} "
            f"({verdict.seconds:.0f} s)")
    seconds = time.monotonic() - t0
    whole = graph_size(tr.case.graph)
    if args.json:
        print(json.dumps(blocks_json(f"{path}:{func}", done, whole, tr.notes, seconds), indent=1, default=str))
    else:
        print(safe(render_blocks(f"{path}:{func}", done, whole, tr.notes, seconds)))
    return blocks_exit_status(done) or EXIT_OK


def _audit(args: argparse.Namespace, pool: ExecutorPool, tr: Translation, path: Path, func: str, out_dir: Path,
           save: Path | None, log: Callable[[str], None], t0: float) -> int:
    """The audit of a captured model on `pool`: checks, minimization, exploration, the verdict printed."""
    from ..audit.session import explore, explored_bugs, minimize_bugs, run_checks, step_scenario
    from ..audit.verdict import build, graph_size, render

    names = pool.names
    if save is not None:
        try:
            save_case(tr.case, save, force=args.force)
        except OSError as exc:  # something took the name while the model was captured
            return fail(f"--save-case: cannot write {exc.filename or save}: {exc.strerror or exc}")
        log(f"wrote the case to {save}")
    command = "precfuzz audit " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "precfuzz audit"
    checker = Checker(pool, side_by_side=True)
    scenarios = run_checks(tr.case, checker, names, log, tr.bf16)
    if tr.optimizer is not None:
        scenarios.append(step_scenario(tr.case, tr.optimizer, checker, names, log, args.steps))
    verdict = build(f"{path}:{func}", scenarios, tr.sources, tr.notes)
    verdict.graph = graph_size(tr.case.graph)
    if verdict.bugs and not args.no_minimize:
        minimize_bugs(verdict, scenarios, checker, out_dir, command, args.minimize_budget, 3, log, args.force)
    if args.explore:
        known = {f.signature for s in scenarios for f in s.result.findings}
        ex = explore(tr.case, checker, names, args.explore, args.seed, known, log)
        verdict.bugs += explored_bugs(ex, tr.sources)
        for sig, case in ex.cases.items():
            try:
                saved = save_case(case, out_dir / "explore" / f"{abs(hash(sig)) % 10**10:010d}.json",
                                  force=args.force)
            except OSError as exc:
                verdict.notes.append(f"explore: {ex.new[sig]} (case not saved: {exc.filename}: {exc.strerror})")
                continue
            verdict.notes.append(f"explore: {ex.new[sig]} (case {saved})")
        verdict.notes.append(f"explore: {ex.rounds} variant(s) in {ex.seconds:.0f} s, {len(ex.new)} new finding(s)")
    verdict.seconds = time.monotonic() - t0
    if args.json:
        print(json.dumps(verdict.to_json(), indent=1, default=str))
    else:
        print(safe(render(verdict)))
    return verdict.exit_status or EXIT_OK
