"""What a list of cases covers (ops, dtypes, distributions, families, corners) and how many run on the reference."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable

import numpy as np

from fuzzer.dtypes import FP8
from fuzzer.interpret import evaluate
from fuzzer.ir import Case, Graph, infer, input_values
from fuzzer.ops import is_cast

from .corners import long_fp16_norm, schedule_chain_break


def _sorted(counter: Counter) -> dict[str, int]:
    return dict(sorted(counter.items()))


def coverage(cases: Iterable[Case]) -> dict[str, Any]:
    """Counts per op, dtype (of every tensor value), op:dtype (output dtype), distribution, family; corner cases."""
    ops: Counter = Counter()
    dtypes: Counter = Counter()
    op_dtypes: Counter = Counter()
    dists: Counter = Counter()
    families: Counter = Counter()
    long_norms = chain_breaks = schedule_breaks = n = max_elements = 0
    for case in cases:
        n += 1
        typed = infer(case.graph)
        families[str(case.meta.get("family"))] += 1
        for inp in case.graph.inputs:
            if inp.kind == "tensor":
                dtypes[inp.dtype] += 1
                max_elements = max(max_elements, math.prod(inp.shape))
            specs = [inp.init] + [s[inp.name] for s in case.input_sets if inp.name in s]
            for spec in specs:
                dists[spec.get("dist", "values")] += 1
        for node in case.graph.nodes:
            info = typed.values[node.id]
            ops[node.op] += 1
            if info.kind != "scalar":
                dtypes[info.dtype] += 1
                op_dtypes[f"{node.op}:{info.dtype}"] += 1
                max_elements = max(max_elements, math.prod(info.shape))
        long_norms += long_fp16_norm(case, typed)
        schedule_breaks += schedule_chain_break(case, typed)
        chain_breaks += bool(typed.chain_breaks())
    return {
        "cases": n,
        "op_counts": _sorted(ops),
        "dtype_counts": _sorted(dtypes),
        "op_dtype_counts": _sorted(op_dtypes),
        "distribution_counts": _sorted(dists),
        "family_counts": _sorted(families),
        "long_fp16_norm_cases": long_norms,
        "schedule_chain_break_cases": schedule_breaks,
        "chain_break_cases": chain_breaks,
        "max_tensor_elements": max_elements,
    }


def fp8_nonfinite(graph: Graph, env: dict[str, np.ndarray]) -> bool:
    """True when a cast to fp8 made a NaN or inf (PyTorch's cast past the format's range): by design, an answer."""
    return any(is_cast(n.op) and n.attrs.get("dtype") in FP8 and not np.all(np.isfinite(env[n.id]))
               for n in graph.nodes)


def reference_problem(case: Case) -> str | None:
    """None when every input set runs on the fp64 reference with finite outputs (or non-finite ones an fp8 cast made
    by PyTorch's semantics), else what went wrong (one line)."""
    for k in range(len(case.input_sets)):
        try:
            env = evaluate(case.graph, input_values(case, k), rounded=False)
        except Exception as exc:  # noqa: BLE001 - any failure makes the case invalid; report it as a value
            return f"input set {k}: {type(exc).__name__}: {exc}"
        for out in case.graph.outputs:
            if not np.all(np.isfinite(env[out])) and not fp8_nonfinite(case.graph, env):
                return f"input set {k}: output {out!r} is not finite"
    return None


def valid_fraction(cases: list[Case]) -> float:
    """Fraction of cases with no reference problem."""
    return sum(reference_problem(c) is None for c in cases) / len(cases) if cases else 1.0
