"""Terminating signals (SIGTERM, SIGHUP) raised as an exception, so the way out (finally, with) ends what was started."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """A SIGTERM or SIGHUP arrived: the command ends with 128 + its number, after its cleanup ran."""


@contextmanager
def raised_on_termination(signals: tuple[int, ...] = SIGNALS) -> Iterator[None]:
    """Within the block, the first SIGTERM or SIGHUP raises Terminated in the main thread (later ones are ignored
    so the cleanup it starts is not cut short); the previous handlers come back after. Elsewhere: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise Terminated(128 + signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def default_in_child(signals: tuple[int, ...] = SIGNALS) -> None:
    """In a forked child: the default action for the terminating signals (not the parent's Python handler)."""
    for s in signals:
        signal.signal(s, signal.SIG_DFL)
