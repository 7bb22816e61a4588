"""Helpers shared by subcommands: option types with range checks, executor selection, paths, one-line errors."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Callable

from ..executors import HIDDEN, ORACLE_EXECUTORS, REGISTRY, availability
from ..ir import Case, IRError, load_case
from ..outfiles import FORCE_HINT, not_regular, owned
from ..terminal import one_line, safe  # noqa: F401 - re-exported: every command prints case text through these

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
MAX_SEED = 2**63 - 1
MIN_TIMEOUT_S = 1.0  # shorter executor timeouts turn every backend start into a false "timeout" finding
MAX_TIMEOUT_S = 7 * 86400.0  # a week per executor call; larger values overflow the OS's wait primitives
MAX_WORKERS = 256
MAX_GENERATE = 1_000_000  # cases per `generate` call (each held in memory and written; use --start for more)


class UsageError(Exception):
    """Bad command-line input (exit status 2)."""


def fail(message: str) -> int:
    """Print a one-line error and return the bad-input status."""
    print(f"precfuzz: error: {one_line(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


# ---- option types: argparse calls them on the text and reports ArgumentTypeError as the option's error


def _number(kind: Callable[[str], float | int], what: str, ok: Callable[[float | int], bool]) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"must be {what}, got {one_line(text)[:40]!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {one_line(text)[:40]!r}")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse


def _finite(v: float) -> bool:
    return math.isfinite(v)


positive_seconds = _number(float, "a finite number of seconds > 0", lambda v: _finite(v) and v > 0)
nonnegative_seconds = _number(float, "a finite number of seconds >= 0", lambda v: _finite(v) and v >= 0)
timeout_seconds = _number(float, f"a number of seconds in {MIN_TIMEOUT_S:g}..{MAX_TIMEOUT_S:g}",
                          lambda v: _finite(v) and MIN_TIMEOUT_S <= v <= MAX_TIMEOUT_S)
positive_number = _number(float, "a finite number > 0", lambda v: _finite(v) and v > 0)
positive_int = _number(int, "an integer >= 1", lambda v: v >= 1)
nonnegative_int = _number(int, "an integer >= 0", lambda v: v >= 0)
seed_int = _number(int, f"an integer in 0..{MAX_SEED}", lambda v: 0 <= v <= MAX_SEED)
count_int = _number(int, f"an integer in 0..{MAX_GENERATE} (use --start for more)", lambda v: 0 <= v <= MAX_GENERATE)
workers_int = _number(int, f"an integer in 1..{MAX_WORKERS}", lambda v: 1 <= v <= MAX_WORKERS)
MAX_EXPLORE = 10_000  # audit --explore variants: each is a check of seconds, so 10k is hours (a campaign is `run`)
explore_int = _number(int, f"an integer in 0..{MAX_EXPLORE} (a longer search is `precfuzz run --seeds-dir` on "
                      "the --save-case)", lambda v: 0 <= v <= MAX_EXPLORE)


def writable_file(path: str, option: str, keep: tuple[str, ...] = (), force: bool | None = False) -> Path:
    """A path a file can be written to (checked before any work starts); UsageError saying why not. An existing
    file precfuzz cannot prove it wrote (outfiles.owned) is refused unless `force` (None: not asked, the caller
    decides)."""
    out = Path(path)
    if not path:
        raise UsageError(f"{option} needs a file name")
    if out.is_dir():
        raise UsageError(f"{option} {path} is a directory")
    what = not_regular(out)
    if what is not None:  # a rename over it would replace the device, FIFO or socket itself
        raise UsageError(f"{option} {path} exists and is {what}; give a regular file name")
    for other in keep:
        if same_file(out, other):
            raise UsageError(f"{option} {path} would overwrite {other}")
    if force is False and not owned(out):
        raise UsageError(f"{option} {path} exists and was not written by precfuzz; {FORCE_HINT}")
    parent = next((p for p in [out.parent, *out.parent.parents] if p.exists()), Path("."))
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a directory")
    if not os.access(out if out.exists() else parent, os.W_OK):
        raise UsageError(f"{option} {path} is not writable")
    return out


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when two paths name one file (through symlinks and hard links)."""
    try:
        if Path(a).resolve() == Path(b).resolve():
            return True
        return os.path.samefile(a, b)
    except (OSError, ValueError, RuntimeError):
        return False


def distinct_outputs(*pairs: tuple[str, str | None]) -> None:
    """UsageError when two (option, path) outputs of one command name the same file (one would overwrite the
    other)."""
    seen: list[tuple[str, str]] = []
    for option, path in pairs:
        if not path:
            continue
        for other_option, other in seen:
            if same_file(path, other):
                raise UsageError(f"{option} {path} and {other_option} {other} are the same file; one would "
                                 "overwrite the other")
        seen.append((option, path))


def add_force(parser: argparse.ArgumentParser, what: str) -> None:
    """The --force option: replace an existing output precfuzz cannot prove it wrote."""
    parser.add_argument("--force", action="store_true",
                        help=f"replace {what} even where precfuzz cannot prove it wrote the file there (no generated "
                             "header with the file's own hash): by default such a file is kept and the command refused")


def writable_dir(path: str, option: str) -> Path:
    """A directory that exists or can be created, and can be written to; UsageError saying why not."""
    out = Path(path)
    if not path:
        raise UsageError(f"{option} needs a directory name")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {path} exists and is not a directory")
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("."))
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path} is not writable")
    return out


def select_executors(spec: str | None) -> list[str]:
    """Executors under test from a comma list (default: every available one, oracles excluded)."""
    status = availability()
    if spec is not None and not spec.strip():
        raise UsageError("no executor named: the executor option is empty")
    if not spec:
        return [n for n, why in status.items() if why is None and n not in ORACLE_EXECUTORS and n not in HIDDEN]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UsageError(f"no executor named in {one_line(spec)!r}")
    chosen = []
    for n in names:
        matches = [k for k in REGISTRY if k == n or (n.endswith("/*") and k.startswith(n[:-1]))]
        if not matches:
            raise UsageError(f"unknown executor {one_line(n)[:60]!r} (known: {', '.join(REGISTRY)})")
        for m in matches:
            if status[m] is not None and not n.endswith("/*"):
                raise UsageError(f"executor {m!r} is not available here: {status[m]}")
            if status[m] is None and m not in ORACLE_EXECUTORS and m not in chosen:
                chosen.append(m)
    if not chosen:
        valid = ", ".join(n for n, why in status.items() if why is None and n not in ORACLE_EXECUTORS)
        oracles = [n for n in names if n in ORACLE_EXECUTORS]
        if oracles:
            raise UsageError(f"{', '.join(map(repr, oracles))} {'is an oracle' if len(oracles) == 1 else 'are oracles'}"
                             f" precfuzz judges backends against, not a backend executor; name one of: {valid}")
        raise UsageError(f"{one_line(spec)[:60]!r} selects no available executor; available: {valid}")
    return chosen


def read_case(path: str) -> Case:
    """Load a case, turning IR errors into UsageError (one line)."""
    try:
        return load_case(path)
    except IRError as exc:
        raise UsageError(str(exc)) from None
