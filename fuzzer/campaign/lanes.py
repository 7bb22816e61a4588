"""Where a lane checks its cases: a pool of warm local worker processes (the default) or a remote Ray actor.

A lane takes one case at a time and returns the checker's result (outcomes, judgements, findings); the
campaign driver does everything else (case order, dedup, store, state, minimizing). `LaneLost` says that the
process holding a lane's workers is gone (a Ray actor died, or its node left): the case goes back to the queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from ..check import Checker, CheckResult
from ..ir import Case
from ..isolation import ExecutorPool


class LaneLost(Exception):
    """The lane's process is gone; the case it held was not checked."""


class RemoteCheckError(Exception):
    """precfuzz itself failed on a case in a remote lane: the remote error line and traceback, as text."""

    def __init__(self, error: str, traceback: str) -> None:
        super().__init__(error)
        self.error = error
        self.traceback = traceback


class Lane(Protocol):
    """One lane's executors: check cases, describe executors, count worker processes."""

    def check(self, case: Case, executors: list[str] | None = None) -> CheckResult:
        """Run `case` on the lane's executors (or those of them named) and judge it (LaneLost if the lane's process
        is gone)."""

    def describe(self, name: str) -> dict[str, Any]:
        """The executor's description, read where it runs."""

    def alive(self) -> int:
        """Backend worker processes running."""

    def restarts(self) -> int:
        """Backend worker restarts so far."""

    def load_s(self) -> float:
        """Wall seconds the lane's workers spent loading their backends so far (ExecutorPool.load_seconds)."""

    def replace(self) -> str | None:
        """Start a fresh process for a lost lane: None when it is ready, else why not (the lane ends)."""

    def close(self) -> None:
        """Stop the lane's workers."""


class Lanes(Protocol):
    """A source of lanes: how many, and each one by number."""

    count: int

    def open(self, lane: int) -> Lane:
        """Lane number `lane` (its workers start on first use)."""

    def describe(self) -> str:
        """Where the lanes run, for the campaign's first line."""

    def minimizer_env(self) -> dict[str, str]:
        """Extra environment of the driver-side minimizer's workers (a NeuronCore no lane uses)."""

    def close(self) -> None:
        """Release what the lanes hold (a Ray connection)."""


class LocalLane:
    """A lane of warm worker processes on this machine (fuzzer.isolation)."""

    def __init__(self, pool: ExecutorPool) -> None:
        self.pool = pool
        self.checker = Checker(pool)

    def check(self, case: Case, executors: list[str] | None = None) -> CheckResult:
        """The checker's result on this machine."""
        return self.checker.check(case, executors)

    def describe(self, name: str) -> dict[str, Any]:
        """The executor's description from its worker."""
        return self.pool.describe(name)

    def alive(self) -> int:
        """Worker processes running."""
        return self.pool.alive()

    def restarts(self) -> int:
        """Worker restarts so far."""
        return self.pool.restarts()

    def load_s(self) -> float:
        """Seconds the workers spent loading their backends."""
        return self.pool.load_seconds()

    def replace(self) -> str | None:
        """A local lane is never lost (its workers restart on their own)."""
        return "a local lane cannot be replaced"

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()


class LocalLanes:
    """`count` lanes of local worker processes, each with its environment (its own NeuronCore on trn2)."""

    def __init__(self, count: int, executors: list[str], timeout_s: float, max_calls: int, log_dir: Path,
                 env_of: Callable[[int], dict[str, str]]) -> None:
        self.count = count
        self.executors = executors
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.log_dir = log_dir
        self.env_of = env_of  # lane number -> extra environment

    def open(self, lane: int) -> LocalLane:
        """A fresh pool for lane `lane`, its workers loading their backends side by side (the first case's
        executors then wait for the slowest load, not for the sum of them)."""
        pool = ExecutorPool(self.executors, timeout=self.timeout_s, max_calls=self.max_calls, log_dir=self.log_dir,
                            extra_env=self.env_of(lane))
        pool.prime()
        return LocalLane(pool)

    def describe(self) -> str:
        """The lanes' line."""
        return f"{self.count} lane(s)"

    def minimizer_env(self) -> dict[str, str]:
        """The environment of the lane after the last one."""
        return self.env_of(self.count)

    def close(self) -> None:
        """Nothing to release."""
