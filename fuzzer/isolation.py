"""Process isolation in one place: long-lived worker subprocesses, timeouts, crash mapping, restarts.

Workers die with their parent: each one asks Linux for SIGKILL when its parent dies (prctl
PR_SET_PDEATHSIG) and also watches its parent pid from a thread. Linux sends that signal when the *thread*
that forked the worker exits, so every worker is forked by one long-lived spawner thread, never by the
lane thread that asked for it (lanes end while the process lives on).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import outcome as oc
from .executors import Executor, create
from .ir import Graph, Input, Node, graph_to_json

_HEADER = struct.Struct("<Q")
PARENT_ENV = "PRECFUZZ_PARENT_PID"  # tells a worker which process to die with
ANSWERED = "answered_at"  # a warm-up outcome's info: time.monotonic() in the worker when it answered (one clock per host)
STARTUP_S = 300.0  # the least a fresh worker gets to load its backend (imports, device client, first compile)


class _Spawner:
    """Forks worker processes from one daemon thread that lives as long as this process (see the module doc)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any], threading.Event]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """subprocess.Popen(*args, **kwargs), run on the spawner thread."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="precfuzz-spawner", daemon=True)
                self._thread.start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((args, kwargs, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["proc"]

    def _serve(self) -> None:
        while True:
            args, kwargs, box, done = self._jobs.get()
            try:
                box["proc"] = subprocess.Popen(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            finally:
                done.set()


SPAWNER = _Spawner()

# pids (= process groups: each starts a session) of the workers this process started and has not reaped: what an
# interrupt that cannot wait for the way out (terminating.ended_soon_after_interrupt) kills
_LIVE: set[int] = set()


def kill_every_worker() -> None:
    """SIGKILL the process group of every worker this process started (their children too); no reaping, no
    bookkeeping: safe from any thread, for a process about to end (or about to read its workers' EOF)."""
    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _new_log(log_dir: Path, stem: str) -> Path:
    """A log file of its own: stem-N.log with the first N no other worker has taken."""
    n = 1
    while True:
        path = log_dir / f"{stem}-{n}.log"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


def write_frame(stream: Any, obj: Any) -> None:
    """Write one length-prefixed pickle frame."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: Any) -> Any:
    """Read one frame; EOFError when the other side is gone."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class _Deadline(Exception):
    pass


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Deadline
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise _Deadline
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


@dataclass
class WorkerProcess:
    """One worker subprocess hosting the executors of one group; restarted after a crash, hang or N calls."""

    group: str
    env: dict[str, str]
    max_calls: int = 400
    log_dir: Path | None = None
    label: str = ""  # names the log file (default: the group and a hash of env)
    proc: subprocess.Popen | None = field(default=None, init=False)
    calls: int = field(default=0, init=False)
    restarts: int = field(default=0, init=False)
    pending: int = field(default=0, init=False)  # replies to `prime` requests not read yet
    spawned: float = field(default=0.0, init=False)  # time.monotonic() of the last start
    loads: list[tuple[float, float]] = field(default_factory=list, init=False)  # (spawned, warm-up answered), monotonic
    _log: Any = field(default=None, init=False)
    _log_path: Path | None = field(default=None, init=False)

    def start(self) -> None:
        """Spawn the worker (a fresh interpreter, never a fork); its stderr goes to a log file of its own."""
        if self._log_path is None:
            log_dir = self.log_dir or Path(tempfile.gettempdir())
            log_dir.mkdir(parents=True, exist_ok=True)
            label = self.label or f"{self.group}-{env_key(self.env)}"
            self._log_path = _new_log(log_dir, f"worker-{label.replace('/', '_')}-{os.getpid()}")
        if self._log is not None:
            self._log.close()
        self._log = open(self._log_path, "ab")  # noqa: SIM115 - lives as long as the process
        env = {**os.environ, **self.env, PARENT_ENV: str(os.getpid())}
        self.proc = SPAWNER.popen(
            [sys.executable, "-m", "fuzzer.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, env=env, start_new_session=True,
        )
        _LIVE.add(self.proc.pid)
        self.spawned = time.monotonic()
        self.calls = 0
        self.pending = 0

    def prime(self, request: dict[str, Any]) -> None:
        """Start the worker if needed and send it `request` (a warm-up) without waiting for the answer.

        Workers of a pool primed one after the other load their backends side by side; the first `call`
        reads the pending answer first. A primed worker has run no case: it is as fresh as a new one.
        """
        if not self.alive:
            self.stop()
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            write_frame(self.proc.stdin, request)
            self.pending += 1
        except (BrokenPipeError, OSError):
            self.kill()

    def _drain(self, deadline: float) -> None:
        """Read (and drop) the answers to `prime` requests."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while self.pending:
            (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
            reply = pickle.loads(_read_exact(fd, size, deadline))
            self.pending -= 1
            done = reply[0].info.get(ANSWERED) if isinstance(reply, list) and reply else None
            if isinstance(done, float) and done >= self.spawned:
                self.loads.append((self.spawned, done))

    @property
    def alive(self) -> bool:
        """True while the subprocess runs."""
        return self.proc is not None and self.proc.poll() is None

    def call(self, request: dict[str, Any], timeout: float, warm_up: dict[str, Any] | None = None) -> Any:
        """Send one request; returns the reply, or a crash/timeout Outcome if the worker died or hung.

        `timeout` bounds the request alone: a worker (re)started for it first runs `warm_up` (imports, device client,
        first compile), under a start-up clock of its own (at least STARTUP_S), so a slow import on a loaded machine
        is not a timeout of the case.
        """
        if not self.alive or self.calls >= self.max_calls:
            self.stop()
            self.start()
            if warm_up is not None:
                self.prime(warm_up)
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.calls += 1
        started = time.monotonic()
        try:
            if self.pending:  # a primed worker loading its backends: start-up has its own clock
                self._drain(started + max(timeout, STARTUP_S))
            t0 = time.monotonic()
            write_frame(self.proc.stdin, request)
            deadline = t0 + timeout
            fd = self.proc.stdout.fileno()
            (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
            return pickle.loads(_read_exact(fd, size, deadline))
        except _Deadline:
            loading = self.pending > 0
            self.kill()
            if loading:
                return oc.timeout(time.monotonic() - started, message=f"the worker did not start (load its backend) "
                                  f"in {max(timeout, STARTUP_S):.0f} s")
            return oc.timeout(timeout)
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait(timeout=10)
            _LIVE.discard(self.proc.pid)
            self.restarts += 1
            self.proc = None
            sig = -code if code < 0 else None
            return oc.crash(sig, f"worker exited with status {code}: {self.stderr_tail()}")

    def stderr_tail(self, size: int = 1500) -> str:
        """The end of the worker's stderr log."""
        try:
            data = Path(self._log_path).read_bytes()[-size:]
            return data.decode(errors="replace").strip()
        except (OSError, AttributeError, TypeError):
            return ""

    def kill(self) -> None:
        """Kill the worker and its children (a restart: counted)."""
        self._kill_group()
        self.restarts += 1

    def _kill_group(self) -> None:
        """SIGKILL the worker's process group and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            _LIVE.discard(self.proc.pid)
        self.proc = None

    def ask_exit(self) -> None:
        """Ask the worker to exit without waiting (`stop` then waits); stopping many workers overlaps their exits.
        A worker still loading its backend for a warm-up nobody read has run no case: it is killed, not waited for
        (an audit whose model fails to export closes a pool primed a moment before)."""
        if self.pending and self.proc is not None and self.proc.poll() is None:
            self._kill_group()
            self.pending = 0
            return
        if self.proc is not None and self.proc.poll() is None:
            try:
                write_frame(self.proc.stdin, {"op": "exit"})
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def abort(self) -> None:
        """SIGKILL the worker's process group now, from any thread, without waiting: a call waiting on it (in another
        thread) reads EOF at once and returns a crash outcome; `stop` reaps it. For an interrupted command."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                if not self.proc.stdin.closed:
                    write_frame(self.proc.stdin, {"op": "exit"})
                self.proc.wait(timeout=5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.kill()
        if self.proc is not None:
            _LIVE.discard(self.proc.pid)
        self.proc = None
        self.pending = 0
        if self._log is not None:
            self._log.close()
            self._log = None


def covered_seconds(spans: list[tuple[float, float]]) -> float:
    """Length of the union of the (start, end) spans: wall time in which at least one of them ran."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def env_key(env: dict[str, str]) -> str:
    """A short stable hash of a worker's environment (workers of one group differ by it)."""
    text = ",".join(f"{k}={v}" for k, v in sorted(env.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:6]


WARM_UP = Graph((Input("x", (2,), "float32"),), (Node("y", "add", ("x", "x")),), ("y",))  # ExecutorPool.prime


class ExecutorPool:
    """Runs executors by name: isolated ones in their group's worker, the numpy oracles in-process."""

    def __init__(self, names: list[str], timeout: float = 120.0, max_calls: int = 400,
                 log_dir: Path | None = None, extra_env: dict[str, str] | None = None,
                 own_worker: frozenset[str] = frozenset()) -> None:
        """`own_worker`: groups whose executors get a worker process each (side-by-side checks of a big graph
        compile them in parallel; a group's executors otherwise share one worker and its program cache)."""
        self.names = list(names)
        self.own_worker = own_worker
        self.timeout = timeout
        self.max_calls = max_calls
        self.log_dir = log_dir
        self.extra_env = dict(extra_env or {})
        self.executors: dict[str, Executor] = {}
        self.workers: dict[str, WorkerProcess] = {}
        self._key: dict[str, str] = {}
        for name in names:
            self.ensure(name)

    def ensure(self, name: str) -> Executor:
        """The executor called `name`, added to the pool (with its worker entry) if it is not there yet.

        Executors added this way run on demand (the checker's semantic oracle) but are not in `names`.
        """
        if name in self.executors:
            return self.executors[name]
        ex = self.executors[name] = create(name)
        if ex.isolated:
            key = ex.group + "|" + ",".join(f"{k}={v}" for k, v in sorted(ex.env().items()))
            label = ""
            if ex.group in self.own_worker:
                key, label = f"{key}|{name}", f"{ex.group}-{env_key(ex.env())}-{name.split('/')[-1]}"
            if key not in self.workers:
                self.workers[key] = WorkerProcess(ex.group, {**ex.env(), **self.extra_env}, self.max_calls, self.log_dir,
                                                  label)
            self._key[name] = key
        return ex

    def run(self, name: str, graph: Graph, input_sets: list[dict[str, Any]],
            options: dict[str, Any] | None = None) -> list[oc.Outcome]:
        """Outcomes of executor `name` on every input set (never raises for backend failures).

        `options`: the case's per-case settings (fuzzer.ir.case_options); only those the executor reads are sent.
        """
        ex = self.executors[name]
        mine = {k: v for k, v in (options or {}).items() if k in ex.case_options}
        if not ex.isolated:
            return ex.bind(mine).run_case(graph, input_sets)
        t0 = time.monotonic()
        request = {"op": "run", "executor": name, "graph": graph_to_json(graph), "inputs": input_sets}
        if ex.case_options:
            request["options"] = mine
        reply = self.workers[self._key[name]].call(request, self.timeout, self._warm_up(name))
        if isinstance(reply, oc.Outcome):
            reply.seconds = reply.seconds if reply.seconds is not None else time.monotonic() - t0
            reply.info.setdefault("executor", name)
            return [reply] * len(input_sets)
        return reply

    def groups(self, names: list[str]) -> list[list[str]]:
        """`names` split by the worker process that runs them (in-process executors one group each), in order."""
        out: dict[str, list[str]] = {}
        for name in names:
            self.ensure(name)
            out.setdefault(self._key.get(name, f"in-process:{name}"), []).append(name)
        return list(out.values())

    def describe(self, name: str) -> dict[str, Any]:
        """The executor's description (versions read in its own worker)."""
        ex = self.executors[name]
        if not ex.isolated:
            return ex.describe()
        reply = self.workers[self._key[name]].call({"op": "describe", "executor": name}, self.timeout,
                                                   self._warm_up(name))
        return reply if isinstance(reply, dict) else {"name": name, "error": reply.summary()}

    def alive(self) -> int:
        """Number of worker processes currently running."""
        return sum(1 for w in self.workers.values() if w.alive)

    def restarts(self) -> int:
        """Worker restarts so far (crashes, hangs, recycling)."""
        return sum(w.restarts for w in self.workers.values())

    def prime(self, names: list[str] | None = None) -> None:
        """Have the workers of `names` (default: the pool's) load their backends now, side by side.

        Each worker gets one run of a two-element add (imports, device client, first compile) that nobody
        waits for; the worker's next call reads its answer first (WorkerProcess.prime).
        """
        primed: set[str] = set()
        for name in names if names is not None else self.names:
            ex = self.ensure(name)
            key = self._key.get(name)
            if ex.isolated and key is not None and key not in primed:
                primed.add(key)
                self.workers[key].prime(self._warm_up(name))

    @staticmethod
    def _warm_up(name: str) -> dict[str, Any]:
        """The request that loads executor `name`'s backend in a fresh worker: a two-element add."""
        return {"op": "run", "executor": name, "graph": graph_to_json(WARM_UP), "inputs": [{"x": np.ones(2)}],
                "warm_up": True}

    def load_seconds(self) -> float:
        """Wall seconds in which at least one of the pool's workers was loading its backend (spawn to its warm-up's
        answer: interpreter, imports, device client, first compile), restarts included; a load still under way,
        or one whose answer was never read, is not counted."""
        return covered_seconds([span for w in self.workers.values() for span in w.loads])

    def close(self) -> None:
        """Stop every worker (all are asked first, so their exits overlap)."""
        for w in self.workers.values():
            w.ask_exit()
        for w in self.workers.values():
            w.stop()

    def __enter__(self) -> "ExecutorPool":
        return self

    def abort(self) -> None:
        """Kill every worker now, waiting for none (Ctrl-C, SIGTERM: calls in flight are not worth finishing)."""
        for w in self.workers.values():
            w.abort()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):  # KeyboardInterrupt, SystemExit: at once
            self.abort()
        self.close()


