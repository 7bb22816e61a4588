"""List the executors: which are available here, and for the others why not."""

from __future__ import annotations

import argparse
import json

from ..executors import OPT_IN, REGISTRY, availability, create


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz executors`."""
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print one line per executor."""
    status = availability()
    rows = []
    for name in REGISTRY:
        ex = create(name)
        rows.append({"name": name, "available": status[name] is None, "why_not": status[name],
                     "group": ex.group, "description": ex.summary(), "settings": ex.settings()})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['why_not']}"
        state += " (opt-in)" if r["name"] in OPT_IN and r["available"] else ""
        settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        print(f"{r['name']:<{width}}  {state}  {r['description']}  [{settings}]")
    return 0
