"""Run an audited model's case on every executor: the captured graph, the pre-migration graph for XLA_USE_BF16,
and the inputs cast where the caller owes a cast; then minimize backend bugs and explore input values."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable
from oracles.vocabulary import ErrorClass, Kind, Reaction

from ..artifacts import write_finding
from ..check import Checker, CheckResult
from ..dtypes import LOW_PRECISION, is_float
from ..executors.xla_exec import LEGACY_XLA_USE_BF16
from ..ir import Case, Graph, infer, redeclare
from ..minimize.engine import MinimizeError, minimize
from ..policy import DECLARED
from .translate import Translation
from .verdict import (
    Bug,
    Scenario,
    Verdict,
    hazard_of,
    input_culprits,
    module_is_bf16,
)



def premigration(graph: Graph) -> Graph:
    """The model before the XLA_USE_BF16 -> model.to(bfloat16) migration: low-precision inputs and casts in float32.

    torch.export bakes `.to(latents.dtype)` in as the dtype the example had; the fp32 model that XLA_USE_BF16
    ran would have cast to float32 there.
    """
    return redeclare(graph, LOW_PRECISION, "float32")


def scenario(label: str, result: CheckResult, checker: Checker) -> Scenario:
    """A check result with the policies and policy graphs of its executors."""
    exs = checker.pool.executors
    names = list(result.outcomes)
    return Scenario(label, result, {n: exs[n].precision for n in names},
                    {n: exs[n].policy_graph(result.case.graph) for n in names},
                    not_judged={n: exs[n].not_judged for n in names if exs[n].not_judged})


MOVED = "model.to(bfloat16), exported after the move"  # the module exported after model.to(bfloat16)


def run_checks(case: Case, checker: Checker, names: list[str], log: Callable[[str], None],
               moved: Translation | None = None) -> list[Scenario]:
    """The audit's checks: the captured graph, the pre-migration graph (legacy), and caller casts applied.

    `moved`: the module exported after model.to(bfloat16) (translate.as_bfloat16). Where there is one, it is what
    the model.to(bfloat16) policy runs: its graph is checked on the declared-dtype executors, and the hazards the
    float32 capture showed under that policy (its runtime dtypes written as float32) are left out.
    """
    exs = checker.pool.executors
    pre = premigration(case.graph)
    legacy = [n for n in names if exs[n].precision == LEGACY_XLA_USE_BF16 and pre != case.graph]
    floats_in = any(i.role == "input" and is_float(i.dtype) for i in case.graph.inputs)
    if moved is not None and not floats_in:  # nothing for a caller to cast: the moved module is the whole answer
        names = [n for n in names if exs[n].precision.moves_module_to != "bfloat16"]
    log(f"checking {len(case.graph.nodes)} nodes on {', '.join(names)}")
    main = scenario("", checker.check(case, [n for n in names if n not in legacy]), checker)
    if moved is not None:
        baked = [f for f in main.result.findings if f.kind == Kind.MODEL_HAZARD and f.error_class == ErrorClass.RAISED
                 and main.policies.get(f.executor, DECLARED).moves_module_to == "bfloat16" and not hazard_of(f, main, {}, False).caller_cast]
        if baked:
            main.result.findings = [f for f in main.result.findings if f not in baked]
            main.result.notes.append(f"{len(baked)} hazard(s) of the float32 capture under model.to(bfloat16) left out: "
                                     "the module exported after the move runs (see its row)")
    out = [main]
    if legacy:
        log("checking the pre-migration graph (float32 inputs and casts) under XLA_USE_BF16=1")
        out.append(scenario("fp32 model before the migration", checker.check(case.with_graph(pre), legacy), checker))
    bf16 = module_is_bf16(case.graph)
    todo: dict[tuple[tuple[str, ...], tuple[str, ...], str], None] = {}
    for f in main.result.findings:
        if f.kind != Kind.MODEL_HAZARD:
            continue
        h = hazard_of(f, main, {}, bf16)
        if not h.caller_cast:
            continue
        raised = set(f.details.get("reactions", {}).get(Reaction.RAISED, [])) | {f.executor}
        raised_names = tuple(n for n in names if n in raised and exs[n].precision != DECLARED)
        graph = main.policy_graphs[f.executor]
        culprits = tuple(input_culprits(graph, infer(graph), f.node))
        if raised_names and culprits:
            todo[(culprits, raised_names, h.param_dtype)] = None
    for culprits, raised_names, dtype in todo:
        if moved is not None and all(exs[n].precision.moves_module_to == "bfloat16" for n in raised_names):
            continue  # the moved module's own capture answers it
        graph = Graph(tuple(replace(i, dtype=dtype) if i.name in culprits and is_float(i.dtype) else i
                            for i in case.graph.inputs), case.graph.nodes, case.graph.outputs)
        label = f"{', '.join(culprits)} as {dtype}"
        log(f"checking {', '.join(raised_names)} with {label} (the cast the caller owes)")
        out.append(scenario(label, checker.check(case.with_graph(graph), list(raised_names)), checker))
    if moved is not None:
        declared = [n for n in names if exs[n].precision == DECLARED]
        log(f"checking the module exported after model.to(bfloat16) ({len(moved.case.graph.nodes)} nodes) on "
            f"{', '.join(declared)}")
        out.append(replace(scenario(MOVED, checker.check(moved.case, declared), checker), sources=moved.sources))
    return out


def minimize_bugs(verdict: Verdict, scenarios: list[Scenario], checker: Checker, out_dir: Path, command: str,
                  budget_s: float, limit: int, log: Callable[[str], None], force: bool = False) -> None:
    """Minimize each backend bug (up to `limit`) and write its case and repro under out_dir/bugs/<id>/ (replacing
    only files precfuzz wrote there, unless `force`)."""
    done = 0
    for bug in verdict.bugs:
        if done >= limit:
            break
        sc = next((s for s in scenarios if any(f.signature == bug.signature for f in s.result.findings)), None)
        if sc is None:
            continue
        finding = next(f for f in sc.result.findings if f.signature == bug.signature)
        log(f"minimizing {bug.signature} (at most {budget_s:.0f} s)")
        try:
            result = minimize(sc.result.case, finding, checker, budget_s=budget_s, fresh_recheck=False)
        except MinimizeError as exc:
            log(f"  not minimized: {exc}")
            continue
        final = result.finding or finding
        case = result.case if result.finding else sc.result.case
        art = write_finding(out_dir / "bugs" / final.short_id, case, final,
                            checker.pool.describe(final.executor), command, force=force)
        for error in art.errors:
            log(f"  not written: {error}")
        bug.repro = str(art.repro or art.repro_full) if (art.repro or art.repro_full) else None
        bug.case = str(art.case) if art.case else None
        done += 1


# ---------------------------------------------------------------- explore


SCHEDULE_VALUES = (1, 2, 10, 500, 990, 999)  # integer timesteps: sigma near 0 and near 1 (t / 1000)


def variant_spec(inp: Any, rng: random.Random) -> dict[str, Any]:
    """One value spec for an input: large offsets, near-constant rows, wide magnitudes, extreme schedule values."""
    if not is_float(inp.dtype):
        return {"values": [rng.choice(SCHEDULE_VALUES)] * max(1, _size(inp.shape))} if len(inp.shape) <= 1 \
            else {"dist": "randint", "low": 0, "high": 1000, "seed": rng.randrange(2**31)}
    kind = rng.choice(("offset", "near-constant", "wide", "scaled", "sigma-extreme"))
    seed = rng.randrange(2**31)
    if kind == "offset":
        return {"dist": "offset", "mean": rng.choice((100.0, 1000.0, -3000.0)), "std": 1.0, "seed": seed}
    if kind == "near-constant":
        return {"dist": "offset", "mean": rng.choice((0.5, 1.0, 10.0)), "std": 1e-3, "seed": seed}
    if kind == "wide":
        return {"dist": "wide", "lo": -4.0, "hi": 3.0, "seed": seed}
    if kind == "sigma-extreme":
        return {"dist": "constant", "value": rng.choice((1e-4, 0.001, 0.999, 0.9999))}
    return {"dist": "normal", "mean": 0.0, "std": rng.choice((1e-3, 10.0, 100.0)), "seed": seed}


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def explore_case(case: Case, rng: random.Random, sets: int = 3) -> Case:
    """The model's graph with new input sets (only `input`s vary; parameters keep their trained values), and
    sometimes its float inputs in another dtype."""
    graph = case.graph
    if rng.random() < 0.3:
        dtype = rng.choice(("float32", "bfloat16", "float16"))
        graph = Graph(tuple(replace(i, dtype=dtype) if i.role == "input" and is_float(i.dtype) else i
                            for i in graph.inputs), graph.nodes, graph.outputs)
    varied = [i for i in graph.inputs if i.role == "input"]
    input_sets = tuple({i.name: variant_spec(i, rng) for i in varied} for _ in range(sets))
    return Case(graph, input_sets, {**case.meta, "explore": True})


@dataclass
class Explored:
    """What --explore found beyond the audit's own check: new findings (signature -> message) and their cases."""

    rounds: int
    new: dict[str, str]
    cases: dict[str, Case]
    seconds: float


def explore(case: Case, checker: Checker, names: list[str], rounds: int, seed: int, known: set[str],
            log: Callable[[str], None]) -> Explored:
    """Check `rounds` variants of the case's input values, scales and dtypes; report signatures not seen before."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    new: dict[str, str] = {}
    cases: dict[str, Case] = {}
    seen = set(known)
    for k in range(rounds):
        variant = explore_case(case, rng)
        result = checker.check(variant, names)
        fresh = [f for f in result.findings if f.signature not in seen]
        for f in fresh:
            seen.add(f.signature)
            new[f.signature] = f"[{f.kind}] {f.executor}: {f.message}"
            cases[f.signature] = variant
        log(f"explore {k + 1}/{rounds}: {len(result.findings)} finding(s), {len(fresh)} new")
    return Explored(rounds, new, cases, time.monotonic() - t0)


def explored_bugs(ex: Explored, sources: dict[str, Any]) -> list[Bug]:
    """The explore round's new backend findings as verdict bugs (hazards of other dtypes are noted, not counted)."""
    return [Bug(sig.split("|")[1], sig.split("|")[0], Kind.BACKEND_BUG, msg, None, "", "", "", sig)
            for sig, msg in ex.new.items() if msg.startswith("[backend-bug]")]


def step_scenario(case: Case, spec: dict[str, Any], checker: Checker, names: list[str],
                  log: Callable[[str], None], steps: int = 1) -> Scenario:
    """--train: optimizer step number `steps` of every trained parameter with its float64 gradient (after steps - 1
    exact float64 steps of training, each at its own gradient), on every executor that runs a forward program
    (tvm/train takes gradients; the step is TVM's optimizer on the other pipelines)."""
    from oracles.nodes import rounded_inputs

    from ..gradients import reference
    from ..ir import input_values
    from .training import advance, describe, step_case

    values = rounded_inputs(case.graph, input_values(case, 0))

    def gradients(params: dict[str, Any]) -> dict[str, Any]:
        return dict(zip(case.graph.wrt, reference(case.graph, {**values, **params})[0]))

    if steps > 1:
        log(f"training {steps - 1} exact float64 step(s) of {describe(spec)} first")
    params, grads, state = advance(case, spec, steps, gradients, values)
    step = (step_case(case, grads, spec) if steps == 1 else step_case(case, grads, spec, steps, params, state))
    exs = checker.pool.executors
    tvm = [n for n in names if n.startswith("tvm/") and n != "tvm/train"]
    chosen = [n for n in names if not n.startswith("tvm/") and exs[n].policy not in STEP_SKIPS] + tvm[:1]
    log(f"checking one {describe(spec)} step of {len(step.graph.nodes)} parameter tensor(s) on {', '.join(chosen)}")
    label = f"optimizer step {describe(spec)}" + (f", step {steps}" if steps > 1 else "")
    return scenario(label, checker.check(step, chosen), checker)


# The step is elementwise: TVM's pipelines differ only in passes that decompose norms and attention (one of them runs
# it), and a trainer steps outside the autocast context (its rows would be the declared ones again).
STEP_SKIPS = ("autocast-bf16", "autocast-fp16", "autocast")
