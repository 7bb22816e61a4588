"""`make bench`: a fixed-seed campaign slice on the local executors; writes bench/results.json.

Measures throughput (cases/s, tests/s per executor), where wall time goes (backend compile and run vs
everything else: generation, reference, oracles, IPC), and how long a fresh campaign takes to find each
seed bug class. One lane, so the fractions are not blurred by parallelism.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from fuzzer.campaign import Campaign, CampaignConfig
from fuzzer.campaign.progress import Progress
from fuzzer.campaign.store import CampaignStore
from fuzzer.commands.common import select_executors


# seed bug classes: (name, predicate over a finding record)
def _out_dtype(rec: dict) -> str:
    return rec["dtypes"][-1].split("->")[-1] if rec.get("dtypes") else ""


CLASSES = {
    # TVM DecomposeOpsForTraining: an fp16 layer_norm out of bound (wrong values or overflow)
    "tvm-decompose-fp16-layer_norm": lambda r: r["executor"] == "tvm/decompose" and r["oracle"] == "error-bound"
    and r["ops"][:1] == ["layer_norm"] and _out_dtype(r) == "float16",
    # fp32 schedule arithmetic upcasts a bf16 model's activation: the bf16 conv raises under one policy, not another
    "bf16-conv-schedule-upcast": lambda r: r["oracle"] == "status-divergence" and r["error_class"] == "dtype-mismatch"
    and r["executor"].startswith(("torch/", "xla/")) and r["ops"][:1] in (["conv1d"], ["conv2d"], ["conv3d"])
    and any(d in ("float32->bfloat16", "float64->bfloat16") for d in r["dtypes"]),
}


def run_slice(out: Path, executors: list[str], seed: int, time_s: float, max_tests: int | None) -> dict:
    """One fresh campaign; returns its measurements."""
    cfg = CampaignConfig(out=out, executors=executors, seed=seed, time_s=time_s, max_tests=max_tests, workers=1,
                         minimize=False, seeds_dir=None, command="make bench")
    t0 = time.perf_counter()
    summary = Campaign(cfg, Progress(stream=sys.stderr, interval_s=30.0, live=False)).run()
    wall = time.perf_counter() - t0
    store = CampaignStore(out)
    runs = store.load_runs()
    findings = store.load_findings()
    per_exec = {}
    for name in executors:
        rows = runs[runs["executor"] == name]
        compile_s, run_s = float(rows["compile_s"].sum()), float(rows["run_s"].sum())
        per_exec[name] = {
            "tests": int(len(rows)), "compile_s": round(compile_s, 2), "run_s": round(run_s, 2),
            "tests_per_backend_s": round(len(rows) / max(compile_s + run_s, 1e-9), 2),
            "statuses": {k: int(v) for k, v in rows["status"].value_counts().items()},
        }
    backend = sum(v["compile_s"] + v["run_s"] for v in per_exec.values())
    first_found = {}
    for cls, pred in CLASSES.items():
        hits = [r["first_seen_s"] for r in findings if pred(r)]
        first_found[cls] = round(min(hits), 1) if hits else None
    return {
        "wall_s": round(wall, 1), "cases": summary.cases, "tests": summary.tests,
        "cases_per_s": round(summary.cases / wall, 3), "tests_per_s": round(summary.tests / wall, 2),
        "backend_s": round(backend, 1), "overhead_fraction": round(1.0 - backend / wall, 3),
        "per_executor": per_exec, "findings": len(findings), "first_found_s": first_found,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time", type=float, default=float(os.environ.get("BENCH_TIME", 300)))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--executors", default=None)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results.json"))
    args = parser.parse_args(argv)
    executors = select_executors(args.executors)
    with tempfile.TemporaryDirectory(prefix="precfuzz-bench-") as tmp:
        result = run_slice(Path(tmp) / "campaign", executors, args.seed, args.time, None)
    result.update(seed=args.seed, time_budget_s=args.time, executors=executors, machine={
        "cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()})
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
