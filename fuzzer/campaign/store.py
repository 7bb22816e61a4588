"""Campaign storage: a lock per directory, atomic state and findings files, per-test records in parquet chunks.

Everything is written with write-to-temp + fsync + rename (temp names unique per process and thread), so
`kill -9` at any moment leaves every file readable (the previous or the new version, never half of one).
One campaign at a time owns a directory: `lock()` takes DIR/.lock (an flock, which the kernel drops when its
holder dies, so a stale lock from a dead process is simply taken over). What cannot be read is reported and
kept aside (findings.jsonl.damaged), never silently dropped.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from oracles import evidence

from ..executors import REGISTRY
from ..outfiles import replace_file
from ..terminal import one_line

if TYPE_CHECKING:
    import pandas as pd

STATE = "state.json"
FINDINGS = "findings.jsonl"
BUGS = "bugs.jsonl"  # one record per root cause (fuzzer.campaign.bug_book), rewritten atomically like findings.jsonl
DAMAGED = "findings.jsonl.damaged"  # lines of findings.jsonl that could not be read, kept for a person to look at
RUNS = "runs.parquet"  # a directory of part-NNNNN*.parquet files, read with pandas.read_parquet(DIR/runs.parquet)
DAMAGED_PREFIX = ".damaged-"  # RUNS/.damaged-part-*.parquet: a chunk that could not be read, set aside
JOURNAL_PREFIX = ".journal-"  # RUNS/.journal-<token>.jsonl: a lane's rows, written before they are counted
LOCK = ".lock"
LANE_EVENTS = "lane-events.jsonl"  # Ray lanes lost and replaced, one record each
ARM_RESULTS = "arm-results.jsonl"  # per finished case index: family, executors run, (signature, bug key) found
SCHEDULE = "schedule.json"  # the schedule, and per (family, executor) arm: tests, rewards, run probability
RECORD = "finding.json"  # findings/<id>/finding.json: the finding's record as first saved (findings.jsonl rebuilds from it)
DAMAGED_FILES = "damaged-files.jsonl"  # campaign files found damaged or missing, and what was done (re-derived, set aside)
FOLDERS = {"findings": "findings' cases and scripts", "bugs": "bugs' minimized cases and scripts",
           "logs": "backend workers' logs"}  # (runs.parquet: the store checks it)


class StoreError(Exception):
    """A campaign directory that cannot be used (held by another run, not a directory, damaged state)."""


def warn(message: str) -> None:
    """Default warning sink: one line on stderr."""
    print(f"precfuzz: warning: {one_line(message)}", file=sys.stderr, flush=True)


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (temp file, fsync, rename)."""
    replace_file(path, text)  # the temp file is removed on failure; a non-regular file in the way is refused


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


# Fields of a finding record (ARCHITECTURE.md) the campaign and the report rely on, with the types they need.
RECORD_FIELDS: dict[str, tuple[type, ...]] = {"signature": (str,), "oracle": (str,), "executor": (str,),
                                              "ops": (list,), "dtypes": (list,), "count": (int,)}
# Fields a finding record may lack, with the types they must have where present (None: may be null).
RECORD_OPTIONAL: dict[str, tuple[type, ...]] = {
    "kind": (str,), "bug": (str,), "bug_key": (str,), "title": (str,), "message": (str,), "error_class": (str,),
    "original": (str, type(None)), "case": (str, type(None)), "repro": (str, type(None)),
    "report": (str, type(None)), "first_seen_s": (int, float), "input_set": (int,), "details": (dict,),
    "against": (str,), "ratio": (int, float, str, type(None)), "max_ulp": (int, float, str, type(None)), "grad": (str,)}
# Fields of state.json, when present, with their types.
STATE_FIELDS: dict[str, tuple[type, ...]] = {
    "version": (int,), "seed": (int,), "next_index": (int,), "pending": (list,), "seeds_done": (list,),
    "cases": (int,), "tests": (int,), "elapsed_s": (int, float), "counts": (dict,), "invocations": (int,),
    "executors": (list,), "schedule": (str,), "schedule_block": (int,), "families": (str,)}
MAX_LINE_CHARS = 16 * 2**20  # a JSON-lines record longer than this is damaged (records are a few KB)
MAX_COUNT = 2**40  # cases, tests, case indices: a trillion is centuries of fuzzing
MAX_BLOCK = 1 << 16  # case indices per planning block (a campaign picks max(8, 2 per lane))
_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def _typed(rec: dict[str, Any], fields: dict[str, tuple[type, ...]], required: bool) -> bool:
    """True when every field of `fields` in `rec` (all of them if `required`) has one of its types (no bools for
    numbers, strings in the lists)."""
    for key, kinds in fields.items():
        if key not in rec:
            if required:
                return False
            continue
        value = rec[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return False
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            return False
    return True


def valid_record(rec: Any) -> bool:
    """True for a finding record with the fields and types the campaign and report use (safe `id` and `bug` ids)."""
    if not isinstance(rec, dict):
        return False
    if not _typed({"count": 1, **rec}, RECORD_FIELDS, True) or not _typed(rec, RECORD_OPTIONAL, False):
        return False
    try:
        evidence.read(rec.get("details") or {})  # the evidence fits its schema, or the record is damaged
    except evidence.EvidenceError:
        return False
    return all(k not in rec or (isinstance(rec[k], str) and _ID.fullmatch(rec[k]) is not None) for k in ("id", "bug"))


BUG_FIELDS: dict[str, tuple[type, ...]] = {  # every field bug_book.Bug has no default for, and those the report reads
    "bug": (str,), "key": (str,), "title": (str,), "kind": (str,), "backend": (str,), "ops": (list,),
    "error_class": (str,), "representative": (str,), "signatures": (list,), "executors": (list,), "count": (int,)}
# Fields a bug record may lack (bug_book.Bug has defaults), with the types they must have where present.
BUG_OPTIONAL: dict[str, tuple[type, ...]] = {
    "first_seen_s": (int, float), "minimized": (bool,), "confirmed": (bool,), "note": (str,),
    "repro": (str, type(None)), "repro_full": (str, type(None)), "report": (str, type(None)),
    "case": (str, type(None)), "nodes": (int, type(None)), "repro_lines": (int, type(None)), "aliases": (list,),
    "merged": (list,), "merged_into": (str, type(None))}


def valid_bug(rec: Any) -> bool:
    """True for a bug record with the fields and types the campaign and report use (a safe `bug` id included)."""
    return (isinstance(rec, dict) and _typed(rec, BUG_FIELDS, True) and _typed(rec, BUG_OPTIONAL, False)
            and _ID.fullmatch(rec["bug"]) is not None)


def _state_problem(state: Any, known_executors: bool = True) -> str | None:
    if not isinstance(state, dict):
        return "it does not hold a JSON object"
    for key, kinds in STATE_FIELDS.items():
        if key in state and (not isinstance(state[key], kinds) or isinstance(state[key], bool)):
            return f"field {key!r} has the wrong type"
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in state.get("pending", [])):
        return "field 'pending' must list case indices"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in state.get("counts", {}).values()):
        return "field 'counts' must map signatures to counts"
    if not all(isinstance(v, str) for v in state.get("seeds_done", [])):
        return "field 'seeds_done' must list file names"
    unknown = [v for v in state.get("executors", []) if not isinstance(v, str) or (known_executors and v not in REGISTRY)]
    if unknown:
        return f"field 'executors' names no known executor: {unknown[:3]!r}"[:160]
    for key in ("next_index", "cases", "tests", "invocations"):
        if not 0 <= state.get(key, 0) <= MAX_COUNT:
            return f"field {key!r} must be an integer in 0..{MAX_COUNT}, got {state[key]!r}"[:160]
    if not 1 <= state.get("schedule_block", 1) <= MAX_BLOCK:
        return f"field 'schedule_block' must be an integer in 1..{MAX_BLOCK}"
    if not all(0 <= v <= MAX_COUNT for v in state.get("counts", {}).values()):
        return f"field 'counts' must map signatures to counts in 0..{MAX_COUNT}"
    next_index, pending = state.get("next_index", 0), state.get("pending", [])
    if any(i >= next_index for i in pending):
        return "field 'pending' lists a case index at or past 'next_index'"
    if next_index > state.get("cases", 0) + len(pending):  # every index handed out finished (a case) or is pending
        return (f"field 'next_index' ({next_index}) is more than the cases run ({state.get('cases', 0)}) plus the "
                f"pending ones ({len(pending)})")
    if not math.isfinite(state.get("elapsed_s", 0.0)) or state.get("elapsed_s", 0.0) < 0:
        return "field 'elapsed_s' must be a finite number of seconds >= 0"
    return None


def read_state(path: Path) -> Any:
    """The JSON in a campaign's state.json (None where there is none); StoreError where it cannot be read."""
    if not path.exists() and not path.is_symlink():
        return None
    _refuse_link(path)
    if not path.is_file():  # a directory, FIFO, device or dangling link: reading would fail, block or never end
        raise StoreError(f"{path} is not a regular file; move it away to start the campaign over "
                         "(findings.jsonl is kept)")
    try:
        return json.loads(path.read_text())
    except RecursionError:
        raise StoreError(f"{path} is damaged (JSON nested too deeply); move it away to start the campaign over "
                         "(findings.jsonl is kept)") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path} cannot be read ({type(exc).__name__}: {str(exc)[:80]}); move it away to "
                         "start the campaign over (findings.jsonl is kept)") from None


def gone_executors(state: dict[str, Any]) -> list[str]:
    """The executors a (checked) state names that this precfuzz no longer has (renamed or removed since)."""
    return [e for e in state.get("executors", []) if e not in REGISTRY]


class DirLock:
    """DIR/.lock held with flock for as long as a campaign runs; its text names the holder (pid, host, start)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise StoreError naming the process that holds it."""
        if self._fd is not None:
            return
        for _ in range(20):  # the holder may unlink the file between our open and flock: then try again
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise StoreError(f"cannot create {self.path}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise StoreError(f"{self.path.parent} is in use by another precfuzz run ({holder}); wait for it to "
                                 "finish or give another directory") from None
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    os.close(fd)
                    raise StoreError(f"cannot lock {self.path}: {exc.strerror}") from None
                self._check_pid(fd)  # no flock on this file system: fall back to a liveness check of the pid
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            self._fd = fd
            text = f"pid {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
            os.fsync(fd)
            return
        raise StoreError(f"cannot lock {self.path}: it keeps changing")

    def _check_pid(self, fd: int) -> None:
        holder = _read_holder(fd)
        parts = holder.split()
        if len(parts) >= 5 and parts[0] == "pid" and parts[3] == socket.gethostname() and parts[1].isdigit():
            pid = int(parts[1])
            if pid != os.getpid() and _alive(pid):
                os.close(fd)
                raise StoreError(f"{self.path.parent} is in use by another precfuzz run ({holder}); wait for it to "
                                 "finish or give another directory")

    def release(self) -> None:
        """Drop the lock (removing the file first, while still holding it)."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def __enter__(self) -> "DirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "holder unknown"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _refuse_link(path: Path) -> None:
    """StoreError for a campaign file that is a symbolic link: precfuzz rewrites these files, and writing through
    a link would replace whatever file it points at (a user's bugs.jsonl link was overwritten: hostile pass #241)."""
    if path.is_symlink() and path.exists() and path.is_file():
        raise StoreError(f"{path} is a symbolic link to {os.path.realpath(path)}; precfuzz rewrites its campaign "
                         "files and would replace that file: put the file itself there (or move the link away) "
                         "to go on")


class CampaignStore:
    """The files of one campaign directory."""

    def __init__(self, root: Path, warn: Callable[[str], None] = warn, read_only: bool = False) -> None:
        self.root = Path(root)
        self.read_only = read_only  # a reader (the report): unreadable lines are reported, not moved aside
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root} exists and is not a directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.root}: {exc.strerror}") from None
        self.runs_dir = self.root / RUNS
        if self.runs_dir.exists() and not self.runs_dir.is_dir():  # before any case runs: no test row lost
            raise StoreError(f"{self.runs_dir} is not a directory (it holds the per-test parquet chunks); move it "
                             "away to go on")
        self.warn = warn
        self._lock = threading.Lock()
        self._dir_lock = DirLock(self.root)

    # ---- the directory lock
    def lock(self) -> None:
        """Own the directory (StoreError naming the holder if another run does); release with unlock()."""
        self._dir_lock.acquire()

    def unlock(self) -> None:
        """Let other runs use the directory."""
        self._dir_lock.release()

    # ---- state
    def load_state(self, known_executors: bool = True) -> dict[str, Any] | None:
        """The saved campaign state, or None for a fresh directory; StoreError if it cannot be read (or, with
        `known_executors`, if it names an executor this precfuzz does not have: gone_executors() lists them)."""
        path = self.root / STATE
        state = read_state(path)
        if state is None:
            return None
        problem = _state_problem(state, known_executors)
        if problem:
            raise StoreError(f"{path} is damaged ({problem}); move it away to start the campaign over "
                             "(findings.jsonl is kept)")
        return state

    def save_state(self, state: dict[str, Any]) -> None:
        """Atomically replace the state file."""
        atomic_write(self.root / STATE, dumps(state) + "\n")

    # ---- findings
    def load_findings(self) -> list[dict[str, Any]]:
        """Finding records (one JSON object per line); lines that cannot be read are kept in findings.jsonl.damaged."""
        return self._load_jsonl(FINDINGS, valid_record)

    def _load_jsonl(self, name: str, valid: Callable[[Any], bool]) -> list[dict[str, Any]]:
        """The valid records of one JSON-lines file; the others are quarantined to NAME.damaged."""
        path = self.root / name
        _refuse_link(path)
        if not path.exists():
            return []
        if not path.is_file():  # a directory, FIFO or device in its place: reading would fail or block
            raise StoreError(f"{path} is not a regular file; move it away to go on")
        out, damaged = [], []
        for line in path.read_bytes().decode("utf-8", errors="surrogateescape").splitlines():
            if not line.strip():
                continue
            try:  # a line too long or nested too deep is damaged like any other unreadable line
                rec = json.loads(line) if len(line) <= MAX_LINE_CHARS else None
            except (ValueError, RecursionError):
                rec = None
            if valid(rec):
                out.append(rec)
            else:
                damaged.append(line)
        if damaged and self.read_only:
            self.warn(f"{path}: {len(damaged)} line(s) could not be read and are left out (the next `precfuzz run` "
                      f"on this directory keeps them in {path}.damaged)")
        elif damaged:
            self._quarantine(name, damaged)
        return out

    def _quarantine(self, name: str, lines: list[str]) -> None:
        """Append unreadable lines of NAME to NAME.damaged (once each) and say so."""
        path = self.root / f"{name}.damaged"
        try:
            kept = set(path.read_bytes().decode("utf-8", errors="surrogateescape").splitlines()) if path.exists() else set()
            new = [line for line in lines if line not in kept]
            if new:
                with open(path, "ab") as fh:
                    fh.write("".join(line + "\n" for line in new).encode("utf-8", errors="surrogateescape"))
                    fh.flush()
                    os.fsync(fh.fileno())
        except OSError as exc:
            raise StoreError(f"{self.root / name} has {len(lines)} unreadable line(s) and {path} cannot be "
                             f"written ({exc.strerror}); fix or move the file") from None
        self.warn(f"{self.root / name}: {len(lines)} line(s) could not be read; kept in {path}")

    def save_findings(self, records: list[dict[str, Any]]) -> None:
        """Atomically rewrite findings.jsonl (records in order of first discovery)."""
        atomic_write(self.root / FINDINGS, "".join(dumps(r) + "\n" for r in records))

    # ---- bugs
    def load_bugs(self) -> list[dict[str, Any]]:
        """Bug records (one JSON object per line); unreadable lines are kept in bugs.jsonl.damaged."""
        return self._load_jsonl(BUGS, valid_bug)

    def save_bugs(self, records: list[dict[str, Any]]) -> None:
        """Atomically rewrite bugs.jsonl (records in order of discovery)."""
        atomic_write(self.root / BUGS, "".join(dumps(r) + "\n" for r in records))

    def load_records(self, name: str, valid: Callable[[Any], bool]) -> list[dict[str, Any]]:
        """The valid records of an append-only JSON-lines log (unreadable lines are kept in NAME.damaged)."""
        return self._load_jsonl(name, valid)

    def append_record(self, name: str, record: dict[str, Any], sync: bool = True) -> None:
        """Append one JSON line to NAME (fsync'd unless `sync` is False: an append-only log such as
        internal-errors.jsonl)."""
        with self._lock, open(self.root / name, "ab") as fh:
            fh.write((dumps(record) + "\n").encode())
            fh.flush()
            if sync:
                os.fsync(fh.fileno())

    # ---- per-test records
    def append_runs(self, rows: list[dict[str, Any]], token: str = "") -> Path | None:
        """Write one parquet chunk of per-test rows under a name no other writer can take (holding `token`, the
        journal the rows come from); its path, or None for no rows."""
        if not rows:
            return None
        with self._lock:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.runs_dir / f".part.{os.getpid()}.{threading.get_ident()}.tmp"
            import pandas as pd  # imported on use: 0.7 s of every CLI start otherwise

            pd.DataFrame(rows).to_parquet(tmp, index=False)
            n = len(list(self.runs_dir.glob("part-*.parquet")))
            tail = f"-{token}" if token else ""
            while True:
                path = self.runs_dir / f"part-{n:05d}{tail}.parquet"
                try:
                    os.link(tmp, path)  # fails if the name is taken
                except FileExistsError:
                    n += 1
                    continue
                except OSError:  # no hard links on this file system
                    if path.exists():
                        n += 1
                        continue
                    os.replace(tmp, path)
                break
            if tmp.exists():
                os.unlink(tmp)
            return path

    def journal(self) -> "RunsJournal":
        """A new journal of per-test rows for one lane (runs.parquet/.journal-<token>.jsonl)."""
        return RunsJournal(self)

    def recover_runs(self, counted: Callable[[str], bool]) -> tuple[int, int]:
        """Turn the journals a killed run left into parquet chunks, keeping only the rows of items `counted` (a case
        the saved state counts: the others run again); (rows kept, rows dropped). A journal whose chunk was already
        written (killed between the two) is only removed."""
        kept = dropped = 0
        if not self.runs_dir.is_dir():
            return kept, dropped
        for path in sorted(self.runs_dir.glob(f"{JOURNAL_PREFIX}*.jsonl")):
            token = path.name[len(JOURNAL_PREFIX):-len(".jsonl")]
            if not path.is_file() or path.is_symlink():
                self.warn(f"{path} is not a regular file; left alone")
                continue
            if not list(self.runs_dir.glob(f"part-*-{token}.parquet")):
                rows, bad = read_journal(path)
                if bad:
                    self.warn(f"{path}: {bad} line(s) cut short by the kill are left out (their cases run again)")
                mine = [r for r in rows if counted(str(r.get("item", "")))]
                self.append_runs(mine, token)
                kept, dropped = kept + len(mine), dropped + len(rows) - len(mine)
            os.unlink(path)
        return kept, dropped

    def count_runs(self) -> tuple[int, list[tuple[Path, str]]]:
        """Rows in runs.parquet, from the chunks' metadata; a chunk that cannot be read is set aside as
        runs.parquet/.damaged-<name> (readers skip dot files, so pandas.read_parquet(DIR/runs.parquet) still
        works): (rows, [(where it went, why)])."""
        import pyarrow.parquet as pq

        total, aside = 0, []
        for p in sorted(self.runs_dir.glob("part-*.parquet")) if self.runs_dir.is_dir() else []:
            try:
                total += pq.read_metadata(p).num_rows
            except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
                kept = p.with_name(f"{DAMAGED_PREFIX}{p.name}")
                os.replace(p, kept)
                aside.append((kept, f"{type(exc).__name__}: {str(exc)[:120]}"))
        return total, aside

    def load_runs(self) -> pd.DataFrame:
        """All per-test rows (empty frame if none); a chunk that cannot be read is skipped with a warning."""
        import pandas as pd
        parts = sorted(self.runs_dir.glob("part-*.parquet")) if self.runs_dir.exists() else []
        frames = []
        for p in parts:
            try:
                frames.append(pd.read_parquet(p))
            except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
                self.warn(f"{p} cannot be read ({type(exc).__name__}); its rows are left out")
        if not frames:
            return pd.DataFrame()
        return pd.concat(frames, ignore_index=True)


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The rows of a journal, and how many lines could not be read (a line cut short by a kill)."""
    rows, bad = [], 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif line.strip():
            bad += 1
    return rows, bad


class RunsJournal:
    """One lane's per-test rows on their way into runs.parquet.

    A case's rows are appended (one write, before the campaign counts its tests) to a journal file the kernel
    keeps whatever happens to the process; `seal()` turns the journal into a parquet chunk named after it and
    removes it. A journal left by a `kill -9` is sealed on resume (CampaignStore.recover_runs), so every test
    state.json counts has its row in runs.parquet.
    """

    def __init__(self, store: CampaignStore) -> None:
        self.store = store
        self.rows: list[dict[str, Any]] = []
        self.since = time.monotonic()  # when the oldest row not sealed was written
        self._start()

    def _start(self) -> None:
        self.token = f"{os.getpid()}x{threading.get_ident()}x{os.urandom(4).hex()}"
        self.path = self.store.runs_dir / f"{JOURNAL_PREFIX}{self.token}.jsonl"

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Write rows to the journal (the kernel has them once this returns)."""
        if not rows:
            return
        self.store.runs_dir.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(r, default=_json_default) + "\n" for r in rows).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        if not self.rows:
            self.since = time.monotonic()
        self.rows += rows

    def seal(self) -> None:
        """Write the rows as one parquet chunk, then drop the journal and start a new one."""
        if not self.rows:
            return
        self.store.append_runs(self.rows, self.token)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.rows = []
        self._start()
