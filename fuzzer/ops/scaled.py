"""fp8 scaled products: torch._scaled_mm with per-tensor scales (the fp8 GEMM of fp8 training and inference recipes).

Measured on torch 2.9.1's CPU kernel: both operands 2-d float8 (e4m3fn or e5m2, mixed too, any layout), scales with
one element each (0-dim or [1]; the CPU takes any dtype, the IR float32 as CUDA requires), out_dtype float32,
bfloat16 or float16 (fp8 out needs scale_result, not modelled); row-wise scales are refused. The ideal accumulates the fp8 products (exact in
float32) in float32 and scales the sum once: (a @ b) * (scale_a * scale_b), rounded to out_dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import FP8
from . import intervals as iv
from .base import (
    AtenCall,
    AtenSkip,
    Example,
    IRError,
    NumpyCall,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    example_input,
    one_of,
    tensor,
)
from .linalg import matmul

OUT_DTYPES = ("float32", "bfloat16", "float16")


def _infer_scaled_mm(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    a, b, sa, sb = ops
    assert a is not None and b is not None and sa is not None and sb is not None
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise IRError(f"scaled_mm needs [M, K] @ [K, N], got {list(a.shape)} and {list(b.shape)}")
    for what, info in (("a", a), ("b", b)):
        if info.dtype not in FP8:
            raise IRError(f"{what} must be float8_e4m3fn or float8_e5m2, got {info.dtype} (PyTorch raises)")
    for what, info in (("scale_a", sa), ("scale_b", sb)):
        if info.is_scalar or math.prod(info.shape) != 1 or len(info.shape) > 1 or info.dtype != "float32":
            raise IRError(f"{what} must be a float32 tensor of shape [] or [1] (per-tensor), got "
                          f"{info.dtype} {list(info.shape)}")
    return Typed(tensor((a.shape[0], b.shape[1]), str(attrs["out_dtype"])))


def scaled_mm(a, b, scale_a, scale_b, **_: Any) -> np.ndarray:
    """(a @ b) * (scale_a * scale_b); float32 values (the ideal) accumulate the products in float32 one by one."""
    scale = np.reshape(scale_a, ()) * np.reshape(scale_b, ())
    return matmul(np.asarray(a), np.asarray(b)) * scale


def _torch_scaled_mm(c: TorchCall) -> str:
    a, b, sa, sb = c.args[:4]
    return f"torch._scaled_mm({a}, {b}, scale_a={sa}, scale_b={sb}, out_dtype=torch.{c.attrs['out_dtype']})"


def _relax_scaled_mm(c: RelaxCall) -> str:
    """The composite: both fp8 operands cast to float32, one float32 matmul, times the product of the scales."""
    hint = c.low.name_of(c.node.id)
    acc = c.low.emit(f"R.op.matmul({c.arg(0, 'float32')}, {c.arg(1, 'float32')})", f"{hint}_acc")
    scale = c.low.emit(f"R.op.multiply({c.arg(2, 'float32')}, {c.arg(3, 'float32')})", f"{hint}_scale")
    return f"R.op.multiply({acc}, {scale})"


def _interval(ivs: list[Any], infos: list[Any], attrs: dict[str, Any], out: ValueInfo) -> iv.Interval:
    a, b, sa, sb = ivs
    k = infos[0].shape[1]
    return iv.mul(iv.symmetric(k * iv.magnitude(a) * iv.magnitude(b)), iv.mul(sa, sb))


def _np_scaled_mm(c: NumpyCall) -> str:
    a, b, sa, sb = c.args[:4]
    return f"(({a} @ {b}) * (np.reshape({sa}, ()) * np.reshape({sb}, ())))"


def _aten_scaled_mm(c: AtenCall) -> str:
    """_scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False)."""
    if c.arg(4, "bias") is not None or c.arg(5, "scale_result") is not None:
        raise AtenSkip("_scaled_mm with a bias or scale_result")
    out = c.arg(6, "out_dtype")
    name = None if out is None else getattr(out, "name", str(out).replace("torch.", ""))
    if name not in OUT_DTYPES:
        raise AtenSkip(f"_scaled_mm to {name or 'its input dtype'}")
    return c.emit("scaled_mm", [c.arg(0, "self"), c.arg(1, "mat2"), c.arg(2, "scale_a"), c.arg(3, "scale_b")],
                  {"out_dtype": name})


# small integers are exact in both formats and their products' sums exact in float32: the example's answer is exact
_SMALL = {"dist": "randint", "low": 1, "high": 9, "seed": 7}
OPS: list[OpSpec] = [
    OpSpec("scaled_mm", "scaled_mm", ("a", "b", "scale_a", "scale_b"), {"out_dtype": "float32"}, _infer_scaled_mm,
           scaled_mm, _torch_scaled_mm, _relax_scaled_mm, _interval,
           Example((example_input("a", [4, 16], init=_SMALL, dtype="float8_e4m3fn"),
                    example_input("b", [16, 8], init={**_SMALL, "seed": 8}, dtype="float8_e5m2"),
                    example_input("sa", [], init={"dist": "constant", "value": 0.5}, dtype="float32"),
                    example_input("sb", [1], init={"dist": "constant", "value": 4.0}, dtype="float32")),
                   ("a", "b", "sa", "sb"), {"out_dtype": "float32"}),
           attr_types={"out_dtype": one_of(*OUT_DTYPES)}, relax_dtype=lambda c: "float32", numpy=_np_scaled_mm,
           tags=frozenset({"amp-unmodelled", "float32-scales", "relax-fp8-astype"}),
           aten={"_scaled_mm.default": _aten_scaled_mm}),
]
