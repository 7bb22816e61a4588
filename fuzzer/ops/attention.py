"""scaled_dot_product_attention: softmax(q kᵀ · scale + mask) v, with causal, boolean and additive masks, GQA.

PyTorch semantics: q [..., Hq, L, E], k [..., Hk, S, E], v [..., Hk, S, Ev]; scale defaults to 1/sqrt(E);
a bool mask keeps where True, a float mask (float32 or q's dtype) is added; is_causal keeps the lower
triangle aligned top-left; enable_gqa repeats each k/v head Hq/Hk times; a row with nothing kept is 0
(PyTorch's _safe_softmax), not nan. The ideal accumulates scores and the weighted sum in float32 or better.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..promotion import promote_types
from . import aten as A
from .base import (
    BOOL,
    AtenCall,
    AtenSkip,
    AttrType,
    ChainBreak,
    Example,
    IRError,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    acc_sum,
    broadcast_shapes,
    example_input,
    require_float,
    tensor,
)
from .linalg import matmul


def _infer(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    q, k, v, mask = ops
    assert q is not None and k is not None and v is not None
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.is_scalar or len(t.shape) < 3:
            raise IRError(f"{name} must have rank >= 3 ([..., heads, seq, dim]), got {list(t.shape)}")
        require_float(t, name)
    if not (len(q.shape) == len(k.shape) == len(v.shape)) or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise IRError(f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)} do not fit ([..., L, E], [..., S, E], "
                      "[..., S, Ev])")
    hq, hk = q.shape[-3], k.shape[-3]
    if k.shape[-3] != v.shape[-3] or (hq != hk and not (attrs.get("enable_gqa") and hq % hk == 0)):
        raise IRError(f"{hq} query heads and {hk} key/value heads need enable_gqa with {hq} a multiple of {hk}")
    batch = broadcast_shapes([q.shape[:-3], k.shape[:-3], v.shape[:-3]])
    out = tensor((*batch, hq, q.shape[-2], v.shape[-1]), q.dtype)
    if mask is not None:
        if mask.is_scalar or len(mask.shape) < 2:  # triage32 b288655e41: a 1-D mask minimized into a case eager cannot run
            raise IRError(f"attn_mask must have rank >= 2 (PyTorch's SDPA on the CPU reads its last two dims), got "
                          f"{list(mask.shape)}")
        if attrs.get("is_causal"):
            raise IRError("attn_mask and is_causal together (PyTorch raises)")
        broadcast_shapes([mask.shape, out.shape[:-1] + (k.shape[-2],)])
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) > 1:  # PyTorch raises: query, key and value must share a dtype
        wide = promote_types(promote_types(q.dtype, k.dtype), v.dtype)
        index, odd = next((i, t.dtype) for i, t in enumerate((q, k, v)) if t.dtype != wide)
        return Typed(tensor(out.shape, wide), ChainBreak(index, odd, wide), wide)
    if mask is not None and mask.dtype not in ("bool", "float32", q.dtype):
        wide = promote_types(q.dtype, mask.dtype)
        return Typed(tensor(out.shape, wide), ChainBreak(0, q.dtype, mask.dtype), wide)
    return Typed(out)


def sdpa(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False, **_: Any) -> np.ndarray:
    """The attention of each query row over the kept key positions (a row keeping none is 0)."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    heads = q.shape[-3] // k.shape[-3]
    if heads > 1:
        k, v = np.repeat(k, heads, axis=-3), np.repeat(v, heads, axis=-3)
    kind = q.dtype.type
    factor = kind(1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    scores = matmul(q, np.swapaxes(k, -1, -2)) * factor
    length, span = scores.shape[-2:]
    keep = np.ones((length, span), dtype=bool)
    if is_causal:
        keep = np.tril(keep)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype == bool:
            keep = keep & mask
        else:
            scores = scores + mask.astype(scores.dtype)
    scores = np.where(keep, scores, kind(-np.inf))
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.max(scores, axis=-1, keepdims=True)
        e = np.where(np.isneginf(top), kind(0.0), np.exp(scores - np.where(np.isneginf(top), kind(0.0), top)))
        total = acc_sum(e, -1, keepdims=True)
        weights = np.where(total == 0, kind(0.0), e / np.where(total == 0, kind(1.0), total))
    return matmul(weights.astype(q.dtype), v)


# ---------------------------------------------------------------- lowerings


def _torch(c: TorchCall) -> str:
    kw = [f"attn_mask={c.args[3]}"] if c.args[3] != "None" else []
    if c.attrs.get("is_causal"):
        kw.append("is_causal=True")
    if c.attrs.get("scale") is not None:
        kw.append(f"scale={float(c.attrs['scale'])!r}")
    if c.attrs.get("enable_gqa"):
        kw.append("enable_gqa=True")
    return f"F.scaled_dot_product_attention({c.args[0]}, {c.args[1]}, {c.args[2]}{''.join(', ' + k for k in kw)})"


def _relax(c: RelaxCall) -> str:
    """R.nn.attention in its [B, S, H, E] layout; GQA heads repeated, a bool mask as a -inf bias, rank 3 as B=1."""
    typed = c.low.typed.values
    q_shape, k_shape = typed[c.slot(0)].shape, typed[c.slot(1)].shape
    if len(q_shape) != 4:
        raise NotImplementedError("R.nn.attention takes [B, S, H, E]: only 4-D query, key and value are lowered")
    hint = c.low.name_of(c.node.id)
    q, k, v = (c.arg(i) for i in range(3))
    heads = q_shape[1] // k_shape[1]
    if heads > 1:
        k = c.low.emit(f"R.op.repeat({k}, {heads}, axis=1)", f"{hint}_k")
        v = c.low.emit(f"R.op.repeat({v}, {heads}, axis=1)", f"{hint}_v")
    q, k, v = (c.low.emit(f"R.op.permute_dims({t}, axes=[0, 2, 1, 3])", f"{hint}_{n}") for t, n in
               ((q, "q_bshe"), (k, "k_bshe"), (v, "v_bshe")))
    bias, kept, dt = "None", None, c.low.dt(c.dtype)
    if c.slot(3) is not None:
        full = [q_shape[0], q_shape[1], q_shape[2], k_shape[2]]
        mask_dtype = typed[c.slot(3)].dtype
        if mask_dtype == "bool":
            mask = c.low.operand(c.slot(3), "bool")
            bias = c.low.emit(f"R.op.where({mask}, R.const(0.0, {dt}), R.const(float('-inf'), {dt}))", f"{hint}_bias")
            kept = _rows_kept(c, mask, full, dt, hint)
        else:
            bias = c.arg(3)
        bias = c.low.emit(f"R.op.broadcast_to({bias}, {full})", f"{hint}_bias_full")
    # scale=None lets TVM take 1/sqrt(E) in the operands' dtype, as the torch importer passes it; an explicit float
    # scale is a float32 FloatImm that widens 16-bit scores (its own record), hiding what 16-bit attention computes
    scale = "" if c.attrs.get("scale") is None else f", scale={float(c.attrs['scale'])!r}"
    causal = ", causal_mask='TopLeft'" if c.attrs.get("is_causal") else ""
    out = c.low.emit(f"R.op.nn.attention({q}, {k}, {v}, {bias}{scale}{causal})", f"{hint}_bshe")
    if kept is None:
        return f"R.op.permute_dims({out}, axes=[0, 2, 1, 3])"
    out = c.low.emit(f"R.op.permute_dims({out}, axes=[0, 2, 1, 3])", f"{hint}_bhse")
    return f"R.op.where({kept}, {out}, R.const(0.0, {dt}))"


def _rows_kept(c: RelaxCall, mask: str, full: list[int], dt: str, hint: str) -> str:
    """Whether each query row keeps a key ([B, H, S, 1] bool), causal mask included: a bool mask means "a row keeping
    none is 0" (PyTorch's SDPA), which R.nn.attention, taking only an additive bias, has no word for; TVM's importer
    refuses bool masks, so this lowering is precfuzz's own and must not make the -inf rows' 0/0 (triage31
    b19e97bca2, a false alarm of this lowering)."""
    flags = c.low.emit(f"R.op.broadcast_to(R.op.astype({mask}, {dt}), {full})", f"{hint}_keep")
    if c.attrs.get("is_causal"):
        flags = c.low.emit(f"R.op.tril({flags}, 0)", f"{hint}_keep_causal")
    rows = c.low.emit(f"R.op.max({flags}, axis=[3], keepdims=True)", f"{hint}_rows")
    return c.low.emit(f"R.op.greater({rows}, R.const(0.0, {dt}))", f"{hint}_rows_kept")


def _aten(c: AtenCall) -> str:
    """scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)."""
    if c.arg(4, "dropout_p", 0.0):
        raise AtenSkip("attention dropout")
    scale = c.arg(6, "scale")
    attrs = {"is_causal": bool(c.arg(5, "is_causal", False)), "scale": None if scale is None else float(scale),
             "enable_gqa": bool(c.arg(7, "enable_gqa", False))}
    return c.emit("scaled_dot_product_attention", [c.arg(0, "query"), c.arg(1, "key"), c.arg(2, "value"),
                                                   c.arg(3, "attn_mask")], attrs)


SCALE = AttrType("null or a finite number", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                  and math.isfinite(v)))

OPS: list[OpSpec] = [
    OpSpec("scaled_dot_product_attention", "attention", ("q", "k", "v", "mask?"),
           {"is_causal": False, "scale": None, "enable_gqa": False}, _infer, sdpa, _torch, _relax,
           lambda ivs, infos, attrs, out: (min(ivs[2][0], 0.0), max(ivs[2][1], 0.0)),
           Example((example_input("q", [1, 4, 6, 8]), example_input("k", [1, 2, 5, 8]), example_input("v", [1, 2, 5, 8]),
                    example_input("m", [6, 5], init={"dist": "randint", "low": 0, "high": 2, "seed": 7}, dtype="bool")),
                   ("q", "k", "v", "m"), {"enable_gqa": True}),
           attr_types={"is_causal": BOOL, "scale": SCALE, "enable_gqa": BOOL},
           # relax-one-formula: TVM's causal mask is trilu's 0, not -inf, in every dtype: a row whose kept scores are all
           # far below 0 is 0/0 (triage29 b2ec291c20 float16, b8948f55ce float32: one mechanism, two records by dtype)
           tags=frozenset({"autocast-lower-cpu", "autocast-inner-xla", "amp-always", "relax-one-formula"}),
           aten=A.overloads("scaled_dot_product_attention.default", _aten)),
]
