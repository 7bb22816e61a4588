"""tvm/passes: the graph through the case's own Relax pass sequence (fuzzer.tvm_passes), then tvm.compile.

The sequence is part of the case (`tvm_passes`, bound per case through Executor.bind); a graph run without
one gets a sequence derived from its content. The promises of the passes in the sequence set the semantics
the numbers are judged by: batch_norm mode after a decomposition, FastMathTransform's error budget.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..ir import Graph
from ..tvm_passes import (
    FAST_MATH_BUDGET,
    FAST_MATH_OPS,
    batch_norm_mode,
    check_sequence,
    derive_sequence,
    entries,
    promise_of,
)
from .tvm_exec import TVMExecutor


class TVMPassSequenceExecutor(TVMExecutor):
    """The case's own Relax pass sequence (drawn from a declared table) before tvm.compile for llvm."""

    description = ("the case's Relax pass sequence (tvm_passes: ExpandMatmulOfSum, CombineParallelMatmul, "
                   "FastMathTransform, ...) before tvm.compile; findings name the culprit pass")
    case_options = ("tvm_passes",)

    def __init__(self, cache_size: int = 32) -> None:
        super().__init__("default", cache_size)
        self.pipeline = "passes"
        self.name = "tvm/passes"
        self.description = type(self).description  # not the default pipeline's line TVMExecutor set
        self.sequence: tuple[str, ...] | None = None
        self.passes = ()

    def bind(self, options: dict[str, Any]) -> "TVMPassSequenceExecutor":
        seq = options.get("tvm_passes")
        self.sequence = None if seq is None else check_sequence(seq)
        self.passes = tuple(entries(self.sequence or ()))
        return self

    def _ensure(self, graph: Graph) -> None:
        """Without a bound sequence, the one derived from the graph's content."""
        if self.sequence is None:
            text = hashlib.sha256(graph.text.encode()).hexdigest()
            self.bind({"tvm_passes": list(derive_sequence(text, (n.op for n in graph.nodes)))})

    def settings(self) -> dict[str, Any]:
        out = {**super().settings(), "sequence": "per case (tvm_passes)"}
        mode = batch_norm_mode(self.sequence or ())
        if mode is not None:
            out["batch_norm"] = "training (batch statistics)" if mode else "inference"
        if promise_of(self.sequence or (), "approximate"):
            out["approximate"] = f"{'/'.join(FAST_MATH_OPS)} within {FAST_MATH_BUDGET:g} relative error"
        return out

    def policy_graph(self, graph: Graph) -> Graph:
        self._ensure(graph)
        return self.with_batch_norm_mode(graph, batch_norm_mode(self.sequence or ()))

    def approximations(self) -> dict[str, float]:
        if not promise_of(self.sequence or (), "approximate"):
            return {}
        return {op: FAST_MATH_BUDGET for op in FAST_MATH_OPS}

    def prepare(self, graph: Graph) -> Any:
        self._ensure(graph)
        return super().prepare(graph)

    def repro_parts(self, graph: Graph) -> Any:
        self._ensure(graph)
        return super().repro_parts(graph)
