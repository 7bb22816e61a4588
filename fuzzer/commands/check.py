"""Run one case on every available executor and print the verdict table (exit 1 on a finding)."""

from __future__ import annotations

import argparse
import json
import math

from ..check import Checker, CheckResult
from ..isolation import ExecutorPool
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    fail,
    one_line,
    read_case,
    safe,
    select_executors,
    timeout_seconds,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz check`."""
    parser.add_argument("case", help="case JSON file")
    parser.add_argument("--executors", help="comma-separated executor names (default: all available)")
    parser.add_argument("--json", action="store_true", help="print outcomes and findings as JSON")
    parser.add_argument("--timeout", type=timeout_seconds, default=300.0, help="seconds per executor call (at least 1; a worker's start-up, importing its backend, "
                        "has a clock of its own)")


def _num(value: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return format(value, fmt)


def table(result: CheckResult) -> str:
    """The verdict table, one row per executor, then the findings."""
    backward = bool(result.backward)  # a training case: the gradients' worst ratio to their bound, apart
    head = ["executor", "status", "dtype", "max abs err", "max ULP", "ratio"] + ["backward"] * backward + ["verdict"]
    rows = []
    for name in result.outcomes:
        r = result.row(name)
        rows.append([one_line(x) for x in (name, r["status"], r["dtype"], _num(r["max_abs"], ".4g"),
                                           _num(r["max_ulp"], ".1f"), _num(r["ratio"], ".3g"))]
                    + [result.backward.get(name, "-")] * backward + [one_line(r["verdict"])])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in [head, *rows]]
    for name in result.outcomes:
        detail = result.row(name)["detail"]
        if detail:
            lines.append(f"  {name}: {detail}")
    if result.findings:
        lines.append("")
        lines.append(f"{len(result.findings)} finding(s):")
        for f in result.findings:
            lines.append(f"  [{f.oracle}] {f.executor}: {f.message}")
            lines.append(f"      signature {f.signature}")
    else:
        lines.append("")
        lines.append("no findings")
    lines += [f"note: {n}" for n in result.notes]
    return safe("\n".join(lines))  # value names and messages come from the case: nothing reaches the terminal raw


def to_json(result: CheckResult) -> dict:
    """The --json form."""
    outcomes = {}
    for name, outs in result.outcomes.items():
        r = result.row(name)
        outcomes[name] = {**{k: v for k, v in r.items() if k != "detail"},
                          "sets": [o.to_json() for o in outs]}
        outcomes[name]["sets"] = [{k: v for k, v in s.items() if k != "info" or "traceback" not in v} for s in outcomes[name]["sets"]]
        if result.backward:
            outcomes[name]["backward"] = result.backward.get(name, "-")
    return {"case": result.case.id, "outcomes": outcomes, "findings": [f.record() for f in result.findings],
            "notes": result.notes}


def run(args: argparse.Namespace) -> int:
    """Check the case; exit 0 (clean), 1 (finding) or 2 (bad input)."""
    try:
        case = read_case(args.case)
        names = select_executors(args.executors)
    except UsageError as exc:
        return fail(str(exc))
    with ExecutorPool(names, timeout=args.timeout) as pool:
        result = Checker(pool, side_by_side=True).check(case)
    if args.json:
        print(json.dumps(to_json(result), indent=1, default=_jsonable))
    else:
        print(table(result))
    return EXIT_FINDING if result.findings else EXIT_OK


def _jsonable(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return value.item()  # type: ignore[attr-defined]
    return str(value)
