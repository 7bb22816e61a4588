"""Campaign storage: atomic state and findings files, and per-test records in parquet chunks.

Everything is written with write-to-temp + fsync + rename, so `kill -9` at any moment leaves every file
readable (the previous or the new version, never half of one).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pandas as pd

STATE = "state.json"
FINDINGS = "findings.jsonl"
BUGS = "bugs.jsonl"  # one record per root cause (fuzzer.bug_book), rewritten atomically like findings.jsonl
RUNS = "runs.parquet"  # a directory of part-NNNNN.parquet files, read with pandas.read_parquet(DIR/runs.parquet)


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


def dumps(obj: Any) -> str:
    """JSON with inf/nan as strings-free numbers where possible (non-finite floats become null)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
            return None if x != x else ("inf" if x > 0 else "-inf")
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x
    return json.dumps(clean(obj), default=_json_default, sort_keys=True)


class CampaignStore:
    """The files of one campaign directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.runs_dir = self.root / RUNS
        self._lock = threading.Lock()

    # ---- state
    def load_state(self) -> dict[str, Any] | None:
        """The saved campaign state, or None for a fresh directory."""
        path = self.root / STATE
        if not path.exists():
            return None
        return json.loads(path.read_text())

    def save_state(self, state: dict[str, Any]) -> None:
        """Atomically replace the state file."""
        atomic_write(self.root / STATE, dumps(state) + "\n")

    # ---- findings
    def load_findings(self) -> list[dict[str, Any]]:
        """Finding records (one JSON object per line); a torn last line cannot happen, but is skipped if present."""
        path = self.root / FINDINGS
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def save_findings(self, records: list[dict[str, Any]]) -> None:
        """Atomically rewrite findings.jsonl (records in order of first discovery)."""
        atomic_write(self.root / FINDINGS, "".join(dumps(r) + "\n" for r in records))

    # ---- bugs
    def load_bugs(self) -> list[dict[str, Any]]:
        """Bug records (one JSON object per line)."""
        path = self.root / BUGS
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def save_bugs(self, records: list[dict[str, Any]]) -> None:
        """Atomically rewrite bugs.jsonl (records in order of discovery)."""
        atomic_write(self.root / BUGS, "".join(dumps(r) + "\n" for r in records))

    # ---- per-test records
    def append_runs(self, rows: list[dict[str, Any]]) -> None:
        """Write one parquet chunk of per-test rows."""
        if not rows:
            return
        with self._lock:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            n = len(list(self.runs_dir.glob("part-*.parquet")))
            path = self.runs_dir / f"part-{n:05d}.parquet"
            tmp = self.runs_dir / f".part-{n:05d}.tmp"
            pd.DataFrame(rows).to_parquet(tmp, index=False)
            os.replace(tmp, path)

    def load_runs(self) -> pd.DataFrame:
        """All per-test rows (empty frame if none)."""
        parts = sorted(self.runs_dir.glob("part-*.parquet")) if self.runs_dir.exists() else []
        if not parts:
            return pd.DataFrame()
        return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
