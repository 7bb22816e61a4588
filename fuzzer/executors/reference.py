"""The two numpy executors: `reference` (exact fp64) and `emulated` (ideal rounding per op)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..interpret import evaluate, outputs
from ..ir import Graph, infer
from .base import Executor, Inputs


class ReferenceExecutor(Executor):
    """fp64 on the dtype-rounded inputs: the exact answer."""

    name = "reference"
    group = "numpy"
    isolated = False
    rounded = False

    def packages(self) -> tuple[str, ...]:
        return ("numpy",)

    def settings(self) -> dict[str, Any]:
        return {"math": "float64", "rounding": "per-op" if self.rounded else "inputs only"}

    def prepare(self, graph: Graph) -> Any:
        return infer(graph)

    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        env = evaluate(graph, inputs, rounded=self.rounded)
        return outputs(graph, env), [prepared.values[o].dtype for o in graph.outputs], {}


class EmulatedExecutor(ReferenceExecutor):
    """fp64 math rounded to each op's declared dtype: what an ideal mixed-precision implementation returns."""

    name = "emulated"
    rounded = True
