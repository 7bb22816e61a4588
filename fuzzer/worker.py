"""Worker process main: reads run requests as frames on stdin, answers Outcome lists on the real stdout."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

from . import outcome as oc
from .executors import create
from .ir import graph_from_json
from .isolation import ANSWERED, PARENT_ENV, read_frame, write_frame

PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_S = 0.5
# 0: every input set of a case is prepared (compiled) on its own instead of all of them through one program:
# `make bench`'s off mode, with PRECFUZZ_PROGRAM_CACHE=0 and XLA_COMPILATION_CACHE_SIZE=0 (issue 13).
BATCH_VARIANTS = os.environ.get("PRECFUZZ_BATCH_VARIANTS", "1") != "0"


def run_request(ex: Any, graph: Any, input_sets: list[Any]) -> list[oc.Outcome]:
    """The executor's outcomes on every input set: one prepare for all, or (batching off) one each, marked alone."""
    if BATCH_VARIANTS or len(input_sets) < 2:
        return ex.run_case(graph, input_sets)
    outcomes = []
    for inputs in input_sets:
        (o,) = ex.run_case(graph, [inputs])
        o.info["alone"] = True  # its compile_s and compile are its own (fuzzer.campaign.runner.compiles)
        outcomes.append(o)
    return outcomes


def die_with_parent(parent: int) -> None:
    """Exit when process `parent` dies, even while a backend call hangs: SIGKILL from the kernel, and a watchdog."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before we asked
        os._exit(1)

    def watch() -> None:  # where prctl is missing, or the signal was lost: the parent pid changes on reparenting
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main() -> None:
    """Serve requests until EOF or an exit request; backends' own prints go to stderr, not the channel."""
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a backend prints to stdout lands in the log, not in our frames
    channel_in = os.fdopen(os.dup(0), "rb")
    executors: dict[str, Any] = {}
    while True:
        try:
            request = read_frame(channel_in)
        except EOFError:
            return
        if request.get("op") == "exit":  # skip the interpreter's teardown of torch/XLA/TVM (seconds each)
            for stream in (channel_out, sys.stdout, sys.stderr):
                stream.flush()
            os._exit(0)
        name = request["executor"]
        if name not in executors:
            executors[name] = create(name)
        ex = executors[name]
        if request["op"] == "describe":
            write_frame(channel_out, ex.describe())
            continue
        try:
            graph = graph_from_json(request["graph"], trusted=True)
            if "options" in request:
                ex.bind(request["options"])
        except ValueError as exc:  # IRError, PassSequenceError: a value, like every other failure; the worker stays up
            write_frame(channel_out, [oc.error("compile", type(exc).__name__, str(exc))] * len(request["inputs"]))
            continue
        outs = run_request(ex, graph, request["inputs"])
        if request.get("warm_up"):  # ExecutorPool.load_seconds: when this worker had loaded its backend
            for o in outs:
                o.info[ANSWERED] = time.monotonic()
        write_frame(channel_out, outs)


if __name__ == "__main__":
    sys.exit(main())
