"""Triage helper: sample random findings (or bugs) of a campaign, run their repro scripts, write a table to fill in.

    python -m bench.triage results/fuzz --sample 25 --seed 0 [--unit bugs] > sample.md

Each row: the finding's signature, its bug, the finding's own kind and message and its own repro script (a bug's
title and minimized repro describe the bug's representative, which can be another case: triage17), that script's
exit status and last lines when run as a user would (`python -I`); for --unit bugs, the bug's title and repro. The verdict column is for a person (or a
reviewer session) who checks the claim against PyTorch on the CPU; bench/TRIAGE.md keeps the filled table.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from fuzzer.artifacts import run_script
from fuzzer.campaign.store import CampaignStore


def sample(root: Path, n: int, seed: int, unit: str) -> list[dict]:
    """n random findings (each with its bug) or bugs, in a fixed order for a seed."""
    store = CampaignStore(root)
    bugs = {b["bug"]: b for b in store.load_bugs()}
    bugs.update({m: b for b in list(bugs.values()) for m in b.get("merged", []) if m not in bugs})  # merged ids
    if unit == "bugs":
        pool = [b for b in bugs.values() if not b.get("merged_into")]
        return [{"bug": b} for b in random.Random(seed).sample(pool, min(n, len(pool)))]
    findings = store.load_findings()
    picked = random.Random(seed).sample(findings, min(n, len(findings)))
    out = []
    for f in picked:
        b = bugs.get(f.get("bug", ""))
        while b is not None and b.get("merged_into"):
            b = bugs.get(b["merged_into"])
        out.append({"finding": f, "bug": b})
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--sample", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--unit", choices=("findings", "bugs"), default="findings")
    p.add_argument("--no-run", action="store_true", help="do not run the scripts")
    args = p.parse_args(argv)
    root = Path(args.dir)
    rows = sample(root, args.sample, args.seed, args.unit)
    what = "message" if args.unit == "findings" else "title"
    print(f"| # | {'finding | ' if args.unit == 'findings' else ''}bug | kind | {what} | repro | exit | output | verdict |")
    print(f"|---|{'---|' if args.unit == 'findings' else ''}---|---|---|---|---|---|---|")
    for k, row in enumerate(rows, 1):
        b, f = row["bug"] or {}, row.get("finding")
        repro = (f.get("repro") or b.get("repro")) if f else b.get("repro")
        kind, text = (f.get("kind", "-"), f.get("message", "")) if f else (b.get("kind", "-"), b.get("title", ""))
        status, tail = (None, "not run")
        if repro and not args.no_run:
            status, tail = run_script(root / repro)
        cells = [str(k)]
        if args.unit == "findings":
            cells.append(f"`{row['finding']['signature']}`")
        cells += [b.get("bug", "-"), kind, str(text).replace("|", "/")[:400], repro or "-",
                  str(status), tail.replace("|", "/")[:300], ""]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
