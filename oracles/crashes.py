"""Crash and timeout outcomes: always findings, whatever the other executors did."""

from __future__ import annotations

from fuzzer.ir import Graph
from fuzzer.outcome import Outcome

from .findings import Finding


def judge(graph: Graph, outcomes: dict[str, list[Outcome]]) -> list[Finding]:
    """One finding per executor whose worker crashed or hung on this case."""
    found = []
    ops = sorted({n.op for n in graph.nodes})
    for name, outs in outcomes.items():
        bad = next((o for o in outs if o.status in ("crash", "timeout")), None)
        if bad is None:
            continue
        cls = f"signal-{bad.signal}" if bad.status == "crash" else "timeout"
        found.append(Finding(bad.status, name, ops, sorted({i.dtype for i in graph.inputs}), cls,
                             bad.summary() + (f": {bad.message[-300:]}" if bad.message else ""),
                             input_set=outs.index(bad), details={"whole_graph": True}))
    return found
