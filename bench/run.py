"""`make bench`: the same fixed-seed case list with compile sharing off (every test compiles its own program)
and on, minimization of the seed classes, one model audit and, with --zoo (`make bench BENCH_ZOO=1`), the audit
of every corpus/zoo model; writes bench/results.json.

Modes run one after the other in this process, so their ratio is measured on one machine under one load
(absolute tests/s on these shared machines varies 2x between runs). Per mode: tests/s, backend compilations
per test (machine-independent: it is what carries over to a neuronx-cc compile of seconds on trn2), backend
seconds per test, the share of wall time outside the backends, and the set of finding signatures (the two
modes must find the same). One lane, so the fractions are not blurred by parallelism.

Backend time is the backends' compiles and runs, the tests' and the oracles' (probes, eager's policy runs). The
workers' loading of their backends (a fresh interpreter importing torch_xla or TVM, the device client, a first
compile: 2-5 s each, side by side at a lane's start and again at each recycling) is `backend_load_s`, wall
seconds measured by the workers themselves. `overhead_fraction` counts it as backend time (it is the backends'
start-up, which precfuzz's own code cannot shorten); `overhead_fraction_with_load` counts it as overhead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fuzzer.campaign import Campaign, CampaignConfig
from fuzzer.campaign.progress import Progress
from fuzzer.campaign.store import CampaignStore
from fuzzer.commands.common import select_executors

ROOT = Path(__file__).resolve().parent.parent
MODES = {  # mode -> environment of its backend workers
    # every test (executor x input set) compiles its own program: no sharing across executors, no reuse across
    # the input sets of a case, torch_xla's in-process graph cache off (size 0)
    "off": {"PRECFUZZ_PROGRAM_CACHE": "0", "PRECFUZZ_BATCH_VARIANTS": "0", "XLA_COMPILATION_CACHE_SIZE": "0"},
    "on": {},  # the defaults: programs shared by structural hash within a worker
}
SEEDS = ROOT / "corpus" / "seeds"
MODEL = ROOT / "corpus" / "models" / "transformer_block.py"
ZOO_LIBRARIES = ("torchvision", "timm", "transformers", "diffusers")  # the optional extra `zoo`


def run_slice(out: Path, executors: list[str], seed: int, max_tests: int, env: dict[str, str],
              input_sets: list[tuple[int, int]] | None = None) -> dict:
    """One fresh campaign over the first `max_tests` tests of `seed` with `env` set; its measurements.

    `input_sets` replaces the generator's (count, weight) table of value variants per graph (cases are made
    in this process, so the change reaches them): the one-variant mode shows what value variants per compile
    are worth.
    """
    import generators.graphs as gen

    saved = {k: os.environ.get(k) for k in env}
    saved_sets = gen.INPUT_SETS
    os.environ.update(env)
    gen.INPUT_SETS = input_sets or saved_sets
    try:
        cfg = CampaignConfig(out=out, executors=executors, seed=seed, time_s=None, max_tests=max_tests, workers=1,
                             minimize=False, seeds_dir=None, command="make bench")
        t0 = time.perf_counter()
        summary = Campaign(cfg, Progress(stream=sys.stderr, interval_s=30.0, live=False)).run()
        wall = time.perf_counter() - t0
    finally:
        gen.INPUT_SETS = saved_sets
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    store = CampaignStore(out)
    runs = store.load_runs()
    # backend work counts whoever asked for it: the tests, and the oracles' probes, eager runs of policy graphs and
    # culprit-pass checks (oracle_* columns); compiles per test is all compiles over the tests
    oracle_compiles = int(runs["oracle_compiles"].sum())
    backend = float(runs["compile_s"].sum() + runs["run_s"].sum() + runs["oracle_backend_s"].sum())
    compiles = int(runs["compiles"].sum()) + oracle_compiles
    per_exec = {}
    for name in executors:
        rows = runs[runs["executor"] == name]
        per_exec[name] = {"tests": int(len(rows)), "compiles": int(rows["compiles"].sum()),
                          "oracle_compiles": int(rows["oracle_compiles"].sum()),
                          "shared": int((rows["shared_with"] != "").sum()),
                          "compile_s": round(float(rows["compile_s"].sum()), 2), "run_s": round(float(rows["run_s"].sum()), 2),
                          "oracle_backend_s": round(float(rows["oracle_backend_s"].sum()), 2)}
    tests = int(len(runs))
    load = summary.load_s  # the workers' backend loads (imports, device client, first compile), once per worker start
    return {
        "wall_s": round(wall, 1), "cases": summary.cases, "tests": tests,
        "tests_per_s": round(tests / wall, 3), "compiles": compiles, "oracle_compiles": oracle_compiles, "compiles_per_test": round(compiles / max(tests, 1), 4),
        "backend_s": round(backend, 1), "backend_s_per_test": round(backend / max(tests, 1), 4),
        "backend_load_s": round(load, 1), "overhead_fraction": round(1.0 - (backend + load) / wall, 3),
        "overhead_fraction_with_load": round(1.0 - backend / wall, 3), "per_executor": per_exec,
        "signatures": sorted({f["signature"] for f in store.load_findings()}),
        "bugs": sorted({b["key"] for b in store.load_bugs() if not b.get("merged_into")}),
    }


def minimize_seconds(case: Path, budget_s: float) -> dict:
    """Wall seconds of `precfuzz minimize` on one seed case (a fresh process, as a user runs it)."""
    with tempfile.TemporaryDirectory(prefix="precfuzz-bench-min-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "minimize", str(case), "--out", str(Path(tmp) / "m.json"),
                               "--max-seconds", str(budget_s), "--json"], capture_output=True, text=True, cwd=ROOT,
                              timeout=budget_s * 3 + 300)
        seconds = time.perf_counter() - t0
    try:
        summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        summary = {"error": proc.stderr.strip().splitlines()[-1:] or ["no output"]}
    return {"case": case.name, "seconds": round(seconds, 1), "exit": proc.returncode,
            **{k: summary.get(k) for k in ("checks", "nodes_before", "nodes_after", "signature", "error") if k in summary}}


def audit_seconds() -> dict:
    """Wall seconds of `precfuzz audit` on the example transformer block (issue 15: the table in under 2 minutes)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", str(MODEL), "--no-minimize", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=1200)
    return {"model": MODEL.name, "seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode}


def audit_zoo(timeout_s: float) -> dict:
    """Wall seconds of `precfuzz audit` on each corpus/zoo model, each in its own process (issue 22: <= 2 min each).

    Needs the zoo extra (`make install-zoo`); without it, a note saying so.
    """
    from fuzzer.audit.zoo import BUDGET_S, DEFAULT_DIR, discover, run_zoo

    missing = [lib for lib in ZOO_LIBRARIES if importlib.util.find_spec(lib) is None]
    if missing:
        return {"skipped": f"the zoo extra is not installed ({', '.join(missing)} missing): make install-zoo"}
    with tempfile.TemporaryDirectory(prefix="precfuzz-bench-zoo-") as tmp:
        entries = run_zoo(discover(DEFAULT_DIR), Path(tmp), timeout_s, inventory=False,
                          log=lambda line: print(f"bench: zoo {line}", file=sys.stderr, flush=True))
    secs = [e.seconds for e in entries]
    return {"models": {e.model: {"seconds": e.seconds, "exit": e.exit, "outcome": e.outcome} for e in entries},
            "passed": sum(e.passed for e in entries), "total_s": round(sum(secs), 1), "max_s": max(secs),
            "budget_s": BUDGET_S, "over_budget": [e.model for e in entries if e.exit is None or e.seconds > BUDGET_S]}


SCALE = ROOT / "corpus" / "scale"  # real-size models, audited by blocks (issue 37)


def tree_memory_mb(pid: int) -> tuple[float, float]:
    """Memory of a process and all its descendants, MiB (Linux /proc; 0 where it is missing): resident (RSS summed:
    pages the processes share, a forked child's copy-on-write pages too, counted once per process) and proportional
    (PSS summed: each shared page divided among the processes sharing it, what the tree takes from the machine)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            parents[int(entry.name)] = int(fields[1])
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p in tree:
            continue
        tree.add(p)
        todo += [c for c, parent in parents.items() if parent == p]
    pss = 0
    for p in tree:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError, IndexError):
            continue
    return sum(rss.get(p, 0) for p in tree) / 2**20, pss / 2**20


def real_size_targets() -> list[tuple[str, str]]:
    """(name, audit target) of every real-size model: corpus/scale's files, and each corpus/zoo model's `make_real`
    (its library's default config; a zoo file too large for the limits says why in REAL_SIZE instead)."""
    out = [(p.stem, str(p)) for p in sorted(SCALE.glob("*.py"))]
    out += [(f"zoo/{p.stem}", f"{p}:make_real") for p in sorted((ROOT / "corpus" / "zoo").glob("*.py"))
            if "\ndef make_real(" in p.read_text()]
    return out


def audit_scale(timeout_s: float, only: set[str] | None = None) -> dict:
    """Wall seconds and peak memory (the audit's whole process tree, RSS and PSS summed, sampled every second) of
    `precfuzz audit` on each real-size model of corpus/scale (issue 37: <= 10 minutes and <= 16 GB each on 2 cores)."""
    out = {}
    for name, model in real_size_targets():
        if only and name not in only:
            continue
        print(f"bench: audit at real size {name}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        verdict_out = tempfile.TemporaryFile("w+")  # not a pipe: a verdict past the pipe's 64 KB (a 1B decoder's 430
        # blocks) would block the audit while this loop only samples memory
        proc = subprocess.Popen([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--no-minimize", "--json"],
                                stdout=verdict_out, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        peak, peak_pss = 0.0, 0.0
        while proc.poll() is None and time.perf_counter() - t0 < timeout_s:
            rss, pss = tree_memory_mb(proc.pid)
            peak, peak_pss = max(peak, rss), max(peak_pss, pss)
            time.sleep(1.0)  # PSS walks every page table: sampled each second, it takes a tenth of a core
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        verdict_out.seek(0)
        text = verdict_out.read()
        verdict_out.close()
        try:
            verdict = json.loads(text)
        except ValueError:
            verdict = {}
        out[name] = {"seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode,
                           "peak_rss_mb": round(peak), "peak_pss_mb": round(peak_pss), "blocks": len(verdict.get("blocks", [])),
                           "values": verdict.get("graph", {}).get("values")}
    return out


def training_cost(seed: int, count: int, executors: list[str]) -> dict:
    """Training cases against their own graphs run forward-only (the grad flags dropped), case by case in one pool
    (issue 35: a training case costs at most 3x a forward case of the same graph): wall seconds per check, tests/s."""
    from dataclasses import replace as dc_replace

    from fuzzer.check import Checker
    from fuzzer.isolation import ExecutorPool
    from generators.graphs import generate_case

    names = list(dict.fromkeys([*executors, "tvm/train"]))
    cases = [generate_case(seed, i, ["training"]) for i in range(count)]
    per_case, spent, tests = [], {"training": 0.0, "forward": 0.0}, {"training": 0, "forward": 0}
    with ExecutorPool(names, timeout=300.0) as pool:
        checker = Checker(pool)
        checker.check(dc_replace(cases[0], graph=_forward(cases[0].graph)))  # warm-up: loads and first compiles
        for case in cases:
            seconds = {}
            for kind, graph in (("forward", _forward(case.graph)), ("training", case.graph)):
                t0 = time.perf_counter()
                result = checker.check(dc_replace(case, graph=graph))
                seconds[kind] = time.perf_counter() - t0
                spent[kind] += seconds[kind]
                tests[kind] += sum(len(o) for o in result.outcomes.values())
            per_case.append(seconds["training"] / max(seconds["forward"], 1e-9))
    return {"cases": count, "executors": names,
            "training_tests_per_s": round(tests["training"] / max(spent["training"], 1e-9), 3),
            "forward_tests_per_s": round(tests["forward"] / max(spent["forward"], 1e-9), 3),
            "cost_ratio_total": round(spent["training"] / max(spent["forward"], 1e-9), 3),
            "cost_ratio_median": round(statistics.median(per_case), 3), "cost_ratio_max": round(max(per_case), 3)}


def _forward(graph: Any) -> Any:
    """The same graph (a fuzzer.ir.Graph) as a forward-only case: no input asks for a gradient."""
    from dataclasses import replace as dc_replace

    return dc_replace(graph, inputs=tuple(dc_replace(i, grad=False) for i in graph.inputs))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tests", type=int, default=int(os.environ.get("BENCH_TESTS", 600)))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--executors", default=None)
    parser.add_argument("--minimize-budget", type=float, default=120.0)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: modes, minimize, audit, training, zoo, scale")
    parser.add_argument("--training-cases", type=int, default=int(os.environ.get("BENCH_TRAINING_CASES", 24)),
                        help="training cases the training part checks, each also run forward-only")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results.json"))
    parser.add_argument("--zoo", action="store_true", default=bool(os.environ.get("BENCH_ZOO")),
                        help="also audit every corpus/zoo model (audit_zoo: seconds per model; ~12 audits, opt-in)")
    parser.add_argument("--zoo-timeout", type=float, default=600.0, help="seconds per zoo model's audit")
    parser.add_argument("--scale", action="store_true", default=bool(os.environ.get("BENCH_SCALE")),
                        help="also audit the real-size models of corpus/scale (by blocks): seconds and peak memory")
    parser.add_argument("--scale-models", default="",
                        help="comma-separated names of the real-size models to audit (default: all; e.g. zoo/bert)")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    executors = select_executors(args.executors)
    result: dict = {"seed": args.seed, "max_tests": args.max_tests, "executors": executors}
    if "modes" not in skip:
        modes = {}
        with tempfile.TemporaryDirectory(prefix="precfuzz-bench-") as tmp:
            for mode, env in MODES.items():
                print(f"bench: mode {mode}", file=sys.stderr)
                modes[mode] = run_slice(Path(tmp) / mode, executors, args.seed, args.max_tests, env)
            print("bench: mode one-variant (sharing on, one input set per graph: other cases)", file=sys.stderr)
            modes["one-variant"] = run_slice(Path(tmp) / "one-variant", executors, args.seed, args.max_tests, {},
                                             input_sets=[(1, 1)])
        on, off = modes["on"], modes["off"]
        result.update(tests_per_s=on["tests_per_s"], overhead_fraction=on["overhead_fraction"],
                      overhead_fraction_with_load=on["overhead_fraction_with_load"], backend_load_s=on["backend_load_s"],
                      compiles_per_test=on["compiles_per_test"],
                      speedup_vs_off=round(on["tests_per_s"] / max(off["tests_per_s"], 1e-9), 3),
                      compiles_saved=round(1.0 - on["compiles"] / max(off["compiles"], 1), 3),
                      identical_findings=on["signatures"] == off["signatures"] and on["bugs"] == off["bugs"],
                      speedup_vs_one_variant=round(on["tests_per_s"] / max(modes["one-variant"]["tests_per_s"], 1e-9), 3),
                      modes={m: {k: v for k, v in r.items() if k not in ("signatures", "bugs")} | {
                          "signatures": len(r["signatures"]), "bugs": len(r["bugs"])} for m, r in modes.items()})
    if "minimize" not in skip:
        mins = [minimize_seconds(case, args.minimize_budget) for case in sorted(SEEDS.glob("*.json"))]
        secs = [m["seconds"] for m in mins]
        result.update(minimize=mins, minimize_s_median=round(statistics.median(secs), 1) if secs else None,
                      minimize_s_max=max(secs) if secs else None)
    if "audit" not in skip:
        result["audit_transformer"] = audit_seconds()
    if "training" not in skip:
        print("bench: training cases against their own graphs forward-only", file=sys.stderr)
        result["training"] = training_cost(args.seed, args.training_cases, executors)
    if args.zoo and "zoo" not in skip:
        result["audit_zoo"] = audit_zoo(args.zoo_timeout)
    if args.scale and "scale" not in skip:
        result["audit_scale"] = audit_scale(args.zoo_timeout, set(filter(None, args.scale_models.split(","))))
    result["machine"] = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
                         "python": platform.python_version(), "platform": platform.platform()}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
