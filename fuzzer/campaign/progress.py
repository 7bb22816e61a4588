"""Campaign progress: a live status line on a terminal, a plain line per interval otherwise."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

from ..terminal import one_line


@dataclass
class Snapshot:
    """Counters shown in a progress line."""

    elapsed_s: float
    cases: int
    tests: int
    new_findings: int
    total_findings: int
    alive: int
    workers: int
    restarts: int
    new_bugs: int = 0
    bugs: int = 0
    backend_bugs: int = 0
    minimized: int = 0


def format_line(s: Snapshot, window_cases: float, window_tests: float) -> str:
    """One progress line (rates over the recent window)."""
    m, sec = divmod(int(s.elapsed_s), 60)
    h, m = divmod(m, 60)
    return (f"[{h:d}:{m:02d}:{sec:02d}] cases {s.cases} ({window_cases:.2f}/s)  tests {s.tests} ({window_tests:.1f}/s)  "
            f"bugs {s.new_bugs} new / {s.bugs} total ({s.backend_bugs} backend, {s.minimized} minimized)  "
            f"findings {s.total_findings}  workers {s.alive}/{s.workers}"
            + (f"  restarts {s.restarts}" if s.restarts else ""))


class Progress:
    """Prints snapshots: rewritten in place on a TTY, else one line per `interval_s`."""

    def __init__(self, stream: TextIO | None = None, interval_s: float = 60.0, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.interval_s = 1.0 if self.live else interval_s
        self._last_print = 0.0
        self._last: tuple[float, int, int] | None = None

    def update(self, snap: Snapshot, force: bool = False) -> None:
        """Show a snapshot if the interval has passed (or force)."""
        now = time.monotonic()
        if not force and now - self._last_print < self.interval_s:
            return
        if force or self._last is None or now <= self._last[0]:  # the last line: averages over the whole run
            rate_c = snap.cases / max(snap.elapsed_s, 1e-9)
            rate_t = snap.tests / max(snap.elapsed_s, 1e-9)
        else:
            dt = now - self._last[0]
            rate_c, rate_t = (snap.cases - self._last[1]) / dt, (snap.tests - self._last[2]) / dt
        self._last = (now, snap.cases, snap.tests)
        self._last_print = now
        line = one_line(format_line(snap, rate_c, rate_t))
        if self.live:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def warn(self, message: str) -> None:
        """One warning line (ends a live status line first)."""
        self.stream.write(("\n" if self.live else "") + f"precfuzz: warning: {one_line(message)}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the live line."""
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
