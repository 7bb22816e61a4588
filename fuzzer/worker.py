"""Worker process main: reads run requests as frames on stdin, answers Outcome lists on the real stdout."""

from __future__ import annotations

import os
import sys
from typing import Any

from .executors import create
from .ir import graph_from_json
from .isolation import read_frame, write_frame


def main() -> None:
    """Serve requests until EOF or an exit request; backends' own prints go to stderr, not the channel."""
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a backend prints to stdout lands in the log, not in our frames
    channel_in = os.fdopen(os.dup(0), "rb")
    executors: dict[str, Any] = {}
    while True:
        try:
            request = read_frame(channel_in)
        except EOFError:
            return
        if request.get("op") == "exit":
            return
        name = request["executor"]
        if name not in executors:
            executors[name] = create(name)
        ex = executors[name]
        if request["op"] == "describe":
            write_frame(channel_out, ex.describe())
            continue
        graph = graph_from_json(request["graph"])
        write_frame(channel_out, ex.run_case(graph, request["inputs"]))


if __name__ == "__main__":
    sys.exit(main())
