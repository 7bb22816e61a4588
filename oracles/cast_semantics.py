"""fp8 cast semantics: past an fp8 format's range PyTorch's cast gives NaN (float8_e4m3fn) or inf (float8_e5m2).

The exact answer carries that (fuzzer.ops.elementwise.astype), so a backend returning finite values there is an
error-bound violation with non-finite mismatches, pinned on the cast. This rule names it for what it is: a
dtype-semantics finding, the backend saturating (to the format's largest finite value) or wrapping (any other
finite value) where PyTorch does not. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, FP8, past_fp8_range
from fuzzer.ir import Graph
from fuzzer.ops import is_cast

from .nodes import rounded_inputs
from .vocabulary import ErrorClass

CLASS = ErrorClass.DTYPE_SEMANTICS.value  # the error class (and bug-key family) of such a finding


@dataclass(frozen=True)
class RangeViolation:
    """Where a backend's cast to fp8 is finite past the range."""

    count: int  # elements past the range that came back finite
    how: str  # "saturates" (every such element is +-max) or "wraps" (some other finite value)
    pytorch: str  # what PyTorch's cast gives there: "NaN" or "inf"
    example: tuple[float, float]  # one (operand, backend value) pair


def range_violation(operand: np.ndarray, actual: np.ndarray, dtype: str) -> RangeViolation | None:
    """The violation of a cast of `operand` to `dtype` whose backend result is `actual` (None: none, or not fp8)."""
    if dtype not in FP8:
        return None
    x = np.broadcast_to(np.asarray(operand, dtype=np.float64), np.shape(actual)).ravel()
    a = np.asarray(actual, dtype=np.float64).ravel()
    hits = past_fp8_range(x, dtype) & np.isfinite(a)
    if not hits.any():
        return None
    top = FLOAT_FORMATS[dtype].max_value
    how = "saturates" if np.all(np.abs(a[hits]) == top) else "wraps"
    k = int(np.flatnonzero(hits)[0])
    gives = "NaN" if dtype == "float8_e4m3fn" else "inf"
    return RangeViolation(int(hits.sum()), how, gives, (float(x[k]), float(a[k])))


def cast_range(numeric: Graph, node_id: str, inputs: dict[str, np.ndarray],
               observed: dict[str, np.ndarray]) -> RangeViolation | None:
    """The violation of a node of a probe run, if it is a cast to fp8 finite past the range on its own operand."""
    node = numeric.node(node_id)
    if not is_cast(node.op) or not isinstance(node.inputs[0], str) or node_id not in observed:
        return None
    operand = node.inputs[0]
    x = observed[operand] if operand in observed else rounded_inputs(numeric, inputs).get(operand)
    return None if x is None else range_violation(x, observed[node_id], str(node.attrs.get("dtype")))
