"""Write DIR/report.md with plots and the findings table for a campaign directory."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..campaign.store import StoreError
from ..outfiles import kind_of
from .common import EXIT_OK, add_force, fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `precfuzz report`."""
    parser.add_argument("dir", help="campaign directory (from precfuzz run --out)")
    add_force(parser, "an existing report.md or plot")


def run(args: argparse.Namespace) -> int:
    """Render the report."""
    if not args.dir.strip():
        return fail("the campaign directory is empty")  # Path("") is the working directory
    root = Path(args.dir)
    state = root / "state.json"
    if not root.is_dir():
        return fail(f"{root} is not a campaign directory ({'no such directory' if not root.exists() else 'not a directory'})")
    if not state.exists() and not state.is_symlink():
        return fail(f"{root} is not a campaign directory (no state.json)")
    if not state.is_file():
        what = "a link to nothing" if not state.exists() else kind_of(state.stat().st_mode)
        return fail(f"{state} is not a regular file ({what}); the report reads the campaign's state from it")
    if not os.access(state, os.R_OK):
        return fail(f"{state} is not readable (permission denied)")
    # pandas and matplotlib: imported when a report is written
    from ..campaign.report import write_report

    try:
        print(f"wrote {write_report(root, args.force)}")
    except StoreError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write {exc.filename or root}: {exc.strerror or exc}")
    return EXIT_OK
