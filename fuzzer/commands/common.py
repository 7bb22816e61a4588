"""Helpers shared by subcommands: executor selection, case loading with one-line errors."""

from __future__ import annotations

import sys

from ..executors import HIDDEN, ORACLE_EXECUTORS, REGISTRY, availability
from ..ir import Case, IRError, load_case

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input (exit status 2)."""


def fail(message: str) -> int:
    """Print a one-line error and return the bad-input status."""
    print(f"precfuzz: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def select_executors(spec: str | None) -> list[str]:
    """Executors under test from a comma list (default: every available one, oracles excluded)."""
    status = availability()
    if not spec:
        return [n for n, why in status.items() if why is None and n not in ORACLE_EXECUTORS and n not in HIDDEN]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    chosen = []
    for n in names:
        matches = [k for k in REGISTRY if k == n or (n.endswith("/*") and k.startswith(n[:-1]))]
        if not matches:
            raise UsageError(f"unknown executor {n!r} (known: {', '.join(REGISTRY)})")
        for m in matches:
            if status[m] is not None and not n.endswith("/*"):
                raise UsageError(f"executor {m!r} is not available here: {status[m]}")
            if status[m] is None and m not in ORACLE_EXECUTORS and m not in chosen:
                chosen.append(m)
    if not chosen:
        raise UsageError("no available executor selected")
    return chosen


def read_case(path: str) -> Case:
    """Load a case, turning IR errors into UsageError (one line)."""
    try:
        return load_case(path)
    except IRError as exc:
        raise UsageError(str(exc)) from None
