"""A fault-injection executor: crashes, hangs or raises on request, to exercise isolation and campaigns."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from ..interpret import evaluate, outputs
from ..ir import Graph, infer
from .base import Executor, Inputs

# The first input whose name is `fault` selects the fault by its (constant) value.
FAULTS = {1.0: "segfault", 2.0: "hang", 3.0: "raise", 4.0: "exit", 5.0: "wrong"}


class FaultExecutor(Executor):
    """Computes the emulated answer, unless the graph's `fault` input asks for a crash, hang, error or wrong result."""

    name = "debug/faults"
    group = "debug"

    def settings(self) -> dict[str, Any]:
        return {"faults": ", ".join(f"{int(k)}={v}" for k, v in FAULTS.items())}

    def prepare(self, graph: Graph) -> Any:
        return infer(graph)

    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        fault = FAULTS.get(float(np.ravel(inputs["fault"])[0])) if "fault" in inputs else None
        if fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif fault == "hang":
            time.sleep(3600)
        elif fault == "raise":
            raise RuntimeError("injected failure")
        elif fault == "exit":
            os._exit(3)
        outs = outputs(graph, evaluate(graph, inputs, rounded=True))
        if fault == "wrong":
            outs = [o * 1.5 + 1.0 for o in outs]
        return outs, [prepared.values[o].dtype for o in graph.outputs], {}
