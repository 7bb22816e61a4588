"""Terminating signals (SIGTERM, SIGHUP) raised as an exception, so the way out (finally, with) ends what was started."""

from __future__ import annotations

import os
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


INTERRUPT_GRACE_S = 5.0  # after Ctrl-C, how long the way out (finally, with: workers stopped, files closed) may take


@contextmanager
def ended_soon_after_interrupt(grace_s: float = INTERRUPT_GRACE_S,
                               signals: tuple[int, ...] = (signal.SIGINT, *SIGNALS)) -> Iterator[None]:
    """Within the block, a Ctrl-C (or SIGTERM, SIGHUP) ends the process within `grace_s` seconds even when the main
    thread cannot act on it: Python runs a signal's handler only between bytecodes, so KeyboardInterrupt waits for a
    long numpy call (the float64 reference of a case at the cost cap) to return. The handlers stay as they are; the
    signal's number also reaches a pipe (signal.set_wakeup_fd) that a watcher thread reads at once. Should the
    block still be running `grace_s` after the signal, the watcher kills the workers' process groups, prints the one
    line, and ends the process with 128 + the signal's number (130 for Ctrl-C). Leaving the block disarms it.
    Only a block run by the main thread is watched (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from .isolation import kill_every_worker  # here, not at the top: `precfuzz --help` needs no numpy

    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(r)
        os.close(w)
        yield
        return
    left = threading.Event()

    def watch() -> None:
        while True:
            try:
                got = os.read(r, 64)
            except OSError:
                return
            hit = [b for b in got if b in signals]
            if not got or left.is_set():
                return
            if hit:
                break
        if left.wait(grace_s):  # the way out finished in time
            return
        kill_every_worker()
        name = "interrupted" if hit[0] == signal.SIGINT else f"stopped by {signal.Signals(hit[0]).name}"
        try:  # the one line (the way out, which would print it, is stuck)
            os.write(2, f"{name} (ended {grace_s:.0f} s after the signal: the way out was inside a long computation)\n"
                     .encode())
        except OSError:
            pass
        os._exit(128 + hit[0])

    watcher = threading.Thread(target=watch, name="precfuzz-interrupt-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        left.set()
        signal.set_wakeup_fd(previous)
        try:
            os.write(w, b"\0")  # wakes the watcher, which sees `left` and returns
        except OSError:
            pass
        watcher.join(timeout=1.0)
        os.close(w)
        if not watcher.is_alive():
            os.close(r)
