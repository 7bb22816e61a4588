"""Random kill -9 of `precfuzz run`, then a resume that runs nothing (--max-tests = the tests state.json counts):
runs.parquet must hold exactly the counted rows, with no recount warning (issue 24).

    python bench/kill_resume.py OUT_DIR ROUNDS SEED [EXECUTORS]   # SRC=checkout to test (default: this one)

Measured 2026-12-01 (torch/eager, seed 5): before the runs journal 5 of 5 rounds miscounted (state.json 320..1368
tests, runs.parquet 0 rows: rows were written every 500 rows or 30 s, counted at once); after, 8 of 8 exact.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1])
rounds = int(sys.argv[2])
seed = int(sys.argv[3])
execs = sys.argv[4] if len(sys.argv) > 4 else "torch/eager"
rng = random.Random(seed)
env = {**os.environ, "PYTHONPATH": os.environ.get("SRC", str(Path(__file__).resolve().parent.parent))}
base = [sys.executable, "-m", "fuzzer.cli", "run", "--out", str(out), "--executors", execs, "--no-seeds",
        "--workers", "1", "--no-minimize", "--seed", "3"]
bad = 0
for r in range(rounds):
    p = subprocess.Popen(base + ["--time", "600"], env=env, cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(rng.uniform(6, 20))
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    st = json.loads((out / "state.json").read_text()) if (out / "state.json").exists() else {"tests": 0}
    t = st.get("tests", 0)
    if t == 0:
        print(f"round {r}: nothing counted yet")
        continue
    done = subprocess.run(base + ["--max-tests", str(t)], env=env, cwd=env["PYTHONPATH"], capture_output=True, text=True)
    rows = len(pd.read_parquet(out / "runs.parquet")) if (out / "runs.parquet").exists() else 0
    warn = [line for line in done.stderr.splitlines() if "runs.parquet holds" in line]
    ok = rows == t and not warn
    bad += not ok
    print(f"round {r}: killed with state.json tests {t}; after resume runs.parquet rows {rows} "
          f"{'OK' if ok else 'MISCOUNT ' + ' '.join(warn)}", flush=True)
print("miscounts:", bad)
