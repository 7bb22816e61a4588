"""Write DIR/report.md with plots and the findings table for a campaign directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..campaign.report import write_report
from ..campaign.store import StoreError
from .common import EXIT_OK, fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz report`."""
    parser.add_argument("dir", help="campaign directory (from precfuzz run --out)")


def run(args: argparse.Namespace) -> int:
    """Render the report."""
    root = Path(args.dir)
    if not root.is_dir() or not (root / "state.json").is_file():
        return fail(f"{root} is not a campaign directory (no state.json)")
    try:
        print(f"wrote {write_report(root)}")
    except StoreError as exc:
        return fail(str(exc))
    return EXIT_OK
