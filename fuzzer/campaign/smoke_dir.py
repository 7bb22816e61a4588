"""Smoke's --out folder: its marker lists every file the run wrote (with its sha256); only those are ever deleted."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from ..outfiles import MAX_PROOF_BYTES, owned, proven, replace_file

MARKER = ".precfuzz-smoke"  # written into the directories smoke creates: only those are ever emptied again
LOCK_NAME = ".lock"
ABOUT = "made by precfuzz smoke; the next smoke run with this --out deletes the files listed here (path, sha256)"
MAX_LISTED = 200_000  # files a marker may list (a smoke run writes a few hundred)


def _sha256(path: Path) -> str | None:
    """The sha256 of a regular file (not followed through a link), or None when it cannot be read."""
    try:
        h = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def marked(out: Path) -> bool:
    """True when `out` holds a marker smoke wrote (a regular file, not a link, carrying its generated header)."""
    marker = out / MARKER
    try:
        return marker.is_file() and not marker.is_symlink() and 0 < marker.stat().st_size <= MAX_PROOF_BYTES \
            and proven(marker.read_bytes())
    except OSError:
        return False


def listed(out: Path) -> dict[str, str]:
    """relative path -> sha256 of the files the marker lists (empty when it is unproven or lists none)."""
    if not marked(out):
        return {}
    files: dict[str, str] = {}
    for line in (out / MARKER).read_text(errors="replace").splitlines()[:MAX_LISTED + 2]:
        sha, _, rel = line.partition(" ")
        if len(sha) == 64 and rel.startswith('"'):
            try:
                name = json.loads(rel)
            except ValueError:
                continue
            if isinstance(name, str):
                files[name] = sha
    return files


def walk(out: Path) -> tuple[list[str], list[str]]:
    """(every entry that is not a directory, every directory) under `out`, as relative paths; links not followed."""
    files, dirs = [], []
    for root, subdirs, names in os.walk(out, followlinks=False):
        rel = Path(root).relative_to(out)
        for d in subdirs:
            (files if (Path(root) / d).is_symlink() else dirs).append(str(rel / d))
        files += [str(rel / n) for n in names]
    return files, dirs


def strangers(out: Path) -> list[str]:
    """The entries under `out` smoke did not write: not listed with their current sha256 in its marker, and not a
    file precfuzz proves it wrote (a summary or --junit file with its generated header)."""
    mine = listed(out)
    files, _ = walk(out)
    found = []
    for rel in sorted(files):
        path = out / rel
        if rel in (MARKER, LOCK_NAME) and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file():
            found.append(rel)
        elif mine.get(rel) == _sha256(path):
            continue
        elif not (path.stat().st_size > 0 and owned(path, manifest=True)):
            found.append(rel)
    return found


def empty(out: Path) -> None:
    """Delete what strangers() found nothing against: every file under `out` but the marker and lock, then the
    folders left empty (deepest first)."""
    files, dirs = walk(out)
    for rel in files:
        if rel not in (MARKER, LOCK_NAME):
            (out / rel).unlink()
    for rel in sorted(dirs, key=lambda r: -len(Path(r).parts)):
        (out / rel).rmdir()


def record(out: Path) -> None:
    """Write the marker listing every file now under `out` with its sha256 (what the next run may delete)."""
    files, _ = walk(out)
    lines = [ABOUT]
    for rel in sorted(files):
        path = out / rel
        if rel in (MARKER, LOCK_NAME) or path.is_symlink():
            continue
        sha = _sha256(path)
        if sha is not None:
            lines.append(f"{sha} {json.dumps(rel)}")
    replace_file(out / MARKER, "\n".join(lines) + "\n", sync=False, style="python", force=True)
