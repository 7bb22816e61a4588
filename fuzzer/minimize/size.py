"""The well-founded size of a case: the minimizer accepts a step only when this strictly decreases."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Case, infer
from ..ops import is_cast
from ..values import has_inline, inline
from .edit import elements

# Cost of a dtype: wider (float32) is simpler to reason about than the narrow formats; ints are left alone.
DTYPE_COST = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 3, "float8_e5m2": 3, "int32": 0,
              "int64": 0}

# Base cost of a value spec by kind: a constant reads best, inline lists worst (each a bound above the one before).
SPEC_BASE = {"constant": 0, "alternating": 20, "linspace": 40, "normal": 60, "uniform": 60, "randint": 64,
             "loguniform": 66, "offset": 68, "wide": 70}
INLINE_BASE = 100


@dataclass(frozen=True, order=True)
class Size:
    """Lexicographic size: structure first, then shapes, dtypes, input sets, value complexity and explicit attributes."""

    nodes: int
    outputs: int
    inputs: int
    operands: int
    elements: int
    dims: int
    dtypes: int
    narrow: int
    input_sets: int
    overrides: int
    values: int
    attrs: int
    tvm_passes: int  # length of the case's Relax pass sequence (fuzzer.minimize.pass_sequence)

    def describe(self) -> str:
        """One line naming every component."""
        return ", ".join(f"{k}={v}" for k, v in self.__dict__.items())


def digits(value: float) -> int:
    """Significant decimal digits of a number's shortest repr; 0 and +-1 cost nothing (0.5 -> 1, 0.25 -> 2, 0.999 -> 3)."""
    if not math.isfinite(value):
        return 20
    if value in (0.0, 1.0, -1.0):
        return 0
    if value == int(value) and abs(value) < 1e16:
        text = str(abs(int(value))).rstrip("0")
        return len(text)
    mantissa = repr(abs(float(value))).split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return len(mantissa)


def spec_cost(spec: dict[str, Any]) -> int:
    """Complexity of one value spec (kind, then the digits of its parameters, then a non-zero seed)."""
    if has_inline(spec):
        distinct = np.unique(inline(spec))
        return INLINE_BASE + 4 * len(distinct) + sum(digits(float(v)) for v in distinct)
    params = sum(digits(float(v)) for k, v in spec.items() if k not in ("dist", "seed"))
    return SPEC_BASE.get(spec.get("dist", ""), 80) + params + (1 if spec.get("seed", 0) else 0)


def size(case: Case) -> Size:
    """The size of a case (the case must type-check)."""
    graph = case.graph
    typed = infer(graph)
    dtypes = {i.dtype for i in graph.inputs if i.kind == "tensor"}
    narrow = sum(DTYPE_COST.get(i.dtype, 0) for i in graph.inputs if i.kind == "tensor")
    for node in graph.nodes:
        if is_cast(node.op) and node.attrs.get("dtype"):
            dtypes.add(node.attrs["dtype"])
            narrow += DTYPE_COST.get(node.attrs["dtype"], 0)
    values = sum(spec_cost(i.init) for i in graph.inputs) + sum(spec_cost(v) for s in case.input_sets for v in s.values())
    return Size(
        nodes=len(graph.nodes),
        outputs=len(graph.outputs),
        inputs=len(graph.inputs),
        operands=sum(1 for n in graph.nodes for o in n.inputs if o is not None),
        elements=sum(elements(v.shape) for v in typed.values.values()),
        dims=sum(len(i.shape) for i in graph.inputs),
        dtypes=len(dtypes),
        narrow=narrow,
        input_sets=len(case.input_sets),
        overrides=sum(len(s) for s in case.input_sets),
        values=values,
        attrs=sum(len(n.attrs) for n in graph.nodes),
        tvm_passes=len(case.tvm_passes or ()),
    )
