"""PyTorch type promotion (c10 ResultTypeState), for tensors, 0-dim tensors and Python scalars."""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import BOOL, FLOAT_FORMATS, FP8, is_float

DEFAULT_FLOAT = "float32"  # torch.get_default_dtype()


class PromotionError(ValueError):
    """A dtype pair PyTorch refuses to promote (fp8 with any other dtype)."""


@dataclass(frozen=True)
class Operand:
    """What promotion sees of an operand: its dtype and whether it is a dim tensor, 0-dim tensor or Python scalar."""

    dtype: str
    kind: str  # "tensor" (ndim >= 1), "zerodim" (0-dim tensor) or "scalar" (Python number)


def category(dtype: str) -> int:
    """c10's type categories: bool < integral < floating point."""
    return 2 if is_float(dtype) else 0 if dtype == BOOL else 1


def promote_types(a: str, b: str) -> str:
    """torch.promote_types for the dtypes we model; PromotionError where PyTorch raises (fp8, measured on 2.9.1)."""
    if a == b:
        return a
    if a in FP8 or b in FP8:
        raise PromotionError(f"PyTorch does not promote {a} with {b} (no promotion for float8 types)")
    if category(a) != category(b):
        return a if category(a) > category(b) else b
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if not fa:  # both ints
        return a if int(a[3:]) >= int(b[3:]) else b
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    return a if FLOAT_FORMATS[a].mantissa_bits >= FLOAT_FORMATS[b].mantissa_bits else b


def _combine_categories(higher: str | None, lower: str | None) -> str | None:
    """c10 combine_categories: a lower-priority class only matters if it is of a higher category."""
    if higher is None:
        return lower
    if lower is not None and category(lower) > category(higher):
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Operand) -> str:
    """torch.result_type over operands, honouring dim/0-dim/Python-scalar priority."""
    dim: str | None = None
    zero: str | None = None
    wrapped: str | None = None
    for op in operands:
        if op.kind == "tensor":
            dim = op.dtype if dim is None else promote_types(dim, op.dtype)
        elif op.kind == "zerodim":
            zero = op.dtype if zero is None else promote_types(zero, op.dtype)
        elif op.kind == "scalar":
            current = DEFAULT_FLOAT if is_float(op.dtype) else "int64"
            wrapped = current if wrapped is None else promote_types(wrapped, current)
        else:
            raise ValueError(f"unknown operand kind {op.kind!r}")
    out = _combine_categories(dim, _combine_categories(zero, wrapped))
    if out is None:
        raise ValueError("result_type needs at least one operand")
    return out


def float_result(dtype: str) -> str:
    """Dtype of a float-valued op (exp, true division) applied to `dtype`: ints give the default float."""
    return dtype if is_float(dtype) else DEFAULT_FLOAT
