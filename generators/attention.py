"""Attention blocks as transformer libraries write them: q/k/v projections, heads split and transposed, masks built
from arange and comparisons (bool, or additive with finfo.min or -inf), grouped-query heads, SDPA or the explicit
matmul-softmax-matmul form; long key sequences (a decode step over a KV cache), large-magnitude scores, fully
masked rows.
"""

from __future__ import annotations

import math

from . import distributions as dist
from .builder import GraphBuilder, Val
from .linalg import linear_stage
from .shapes import MAX_ELEMENTS
from .sources import activation_dtype, activation_input

HEAD_DIMS = [(8, 4), (16, 4), (32, 2), (64, 2), (4, 1)]
KEY_LENGTHS = [((2, 16), 6), ((17, 128), 3), ((129, 1024), 1), ((1025, 4096), 1)]
MASKS = [("none", 3), ("causal_flag", 3), ("causal_bool", 3), ("causal_additive", 3), ("padding", 3)]
SCORE_SCALES = [(1.0, 6), (0.1, 1), (8.0, 2), (30.0, 1)]  # std of q and k: large-magnitude scores at 8-30


def _heads(b: GraphBuilder, x: Val, heads: int, head_dim: int, stem: str) -> Val:
    """[B, S, heads * head_dim] -> [B, heads, S, head_dim] (view, then transpose(1, 2))."""
    n, s = x.shape[0], x.shape[1]
    split = b.op("reshape", [x], shape=[n, s, heads, head_dim], stem=f"{stem}_split")
    return b.op("transpose", [split], dim0=1, dim1=2, stem=stem)


def _projected(b: GraphBuilder, hidden: Val, heads: int, head_dim: int, stem: str, dtype: str | None) -> Val:
    """A linear projection of the hidden states to heads (a model's q_proj/k_proj/v_proj)."""
    out = linear_stage(b, hidden, param_dtype=dtype, bias=b.draw.chance(0.5), out_features=heads * head_dim)
    return _heads(b, out, heads, head_dim, stem)


def _direct(b: GraphBuilder, shape: tuple[int, ...], dtype: str, stem: str, scale: float) -> Val:
    """q, k or v made directly (a cached key/value, or scores of a chosen magnitude)."""
    first = {"dist": "normal", "mean": 0.0, "std": scale, "seed": b.draw.seed()}
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: {**first, "seed": b.draw.seed()}, p_vary=0.6)
    return b.input(stem, shape, dtype, specs)


def causal_keep(b: GraphBuilder, queries: int, keys: int) -> Val:
    """The bool [L, S] mask of a causal model: key position <= query position (queries at the sequence's end)."""
    q_pos = b.op("arange", [], start=keys - queries, end=keys, step=1, dtype="int64", stem="q_pos")
    k_pos = b.op("arange", [], start=0, end=keys, step=1, dtype="int64", stem="k_pos")
    rows = b.op("reshape", [q_pos], shape=[queries, 1], stem="q_rows")
    return b.op("le", [k_pos, rows], stem="causal")


def padding_keep(b: GraphBuilder, batch: int, keys: int) -> Val:
    """A [B, 1, 1, S] bool mask from a 0/1 attention_mask input (some rows may be all padding)."""
    first = {"dist": "randint", "low": 0, "high": 2, "seed": b.draw.seed()}
    everything = {"dist": "constant", "value": 1.0}
    nothing = {"dist": "constant", "value": 0.0}
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: b.draw.choice([everything, nothing, first]), p_vary=0.5)
    mask = b.input("attention_mask", (batch, keys), "int64", specs)
    keep = b.op("ne", [mask, 0], stem="keep")
    return b.op("reshape", [keep], shape=[batch, 1, 1, keys], stem="keep4")


def additive(b: GraphBuilder, keep: Val, dtype: str) -> Val:
    """0 where kept, finfo(dtype).min or -inf elsewhere (as HF's masking utilities and older models build it)."""
    fill = b.draw.choice(["min", "min", "-inf"])
    zero = b.op("full", [], shape=[], value=0.0, dtype=dtype, stem="zero")
    low = b.op("full", [], shape=[], value=fill, dtype=dtype, stem="mask_fill")
    if fill == "-inf":
        b.masked(low)
    out = b.op("where", [keep, zero, low], stem="mask")
    return b.masked(out) if fill == "-inf" else out


def attention_family(b: GraphBuilder) -> list[Val]:
    """One attention block (see the module docstring)."""
    dtype = activation_dtype(b)
    head_dim = b.draw.weighted(HEAD_DIMS)
    kv_heads = b.draw.choice([1, 2, 4])
    group = b.draw.weighted([(1, 4), (2, 2), (4, 1)])
    heads = kv_heads * group
    keys = b.draw.integer(*b.draw.weighted(KEY_LENGTHS))
    batch = 1 if keys > 256 else b.draw.choice([1, 2])
    decode = keys > 256 or b.draw.chance(0.25)  # a few new queries over a long cache
    queries = b.draw.integer(1, 4) if decode else keys
    while batch * heads * queries * keys > 4 * MAX_ELEMENTS and keys > 2:
        keys //= 2
        queries = min(queries, keys)
    scale_std = b.draw.weighted(SCORE_SCALES)
    if not decode and b.draw.chance(0.6):  # projections from hidden states
        hidden = activation_input(b, (batch, keys, heads * head_dim), dtype, stem="hidden", kind="normal")
        param = dtype if b.draw.chance(0.85) else None
        q = _projected(b, hidden, heads, head_dim, "q", param)
        k = _projected(b, hidden, kv_heads, head_dim, "k", param)
        v = _projected(b, hidden, kv_heads, head_dim, "v", param)
    else:
        q = _direct(b, (batch, heads, queries, head_dim), dtype, "q", scale_std)
        k = _direct(b, (batch, kv_heads, keys, head_dim), dtype, "k", scale_std)
        v = _direct(b, (batch, kv_heads, keys, head_dim), dtype, "v", 1.0)
    mask_kind = b.draw.weighted(MASKS)
    b.notes["attention"] = {"mask": mask_kind, "keys": keys, "queries": q.shape[2], "gqa": group}
    keep = None
    if mask_kind in ("causal_bool", "causal_additive"):
        keep = causal_keep(b, q.shape[2], keys)
    elif mask_kind == "padding":
        keep = padding_keep(b, batch, keys)
    mask = additive(b, keep, dtype) if keep is not None and (mask_kind == "causal_additive" or b.draw.chance(0.5)) \
        else keep
    scale = None if b.draw.chance(0.7) else b.draw.choice([1.0, 0.125, 1.0 / head_dim])
    if b.draw.chance(0.6):  # scaled_dot_product_attention
        attrs = {"is_causal": mask_kind == "causal_flag" and q.shape[2] == keys, "enable_gqa": group > 1}
        if scale is not None:
            attrs["scale"] = scale
        out = b.op("scaled_dot_product_attention", [q, k, v, mask], stem="attn", **attrs)
    else:
        out = explicit(b, q, k, v, mask, group, scale if scale is not None else 1.0 / math.sqrt(head_dim),
                       mask_kind == "causal_flag")
    if b.draw.chance(0.4):  # merge heads (transpose back, reshape) and project out
        merged = b.op("transpose", [out], dim0=1, dim1=2, stem="merge")
        flat = b.op("reshape", [merged], shape=[batch, q.shape[2], heads * head_dim], stem="flat")
        out = linear_stage(b, flat, param_dtype=dtype if b.draw.chance(0.85) else None)
    return [out]


def explicit(b: GraphBuilder, q: Val, k: Val, v: Val, mask: Val | None, group: int, scale: float,
             causal: bool) -> Val:
    """softmax(q @ kᵀ * scale + mask) @ v written out (GPT-2 and older models), GQA heads repeated with expand."""
    if group > 1:  # repeat_kv: [B, Hkv, S, D] -> [B, Hkv, g, S, D] -> [B, H, S, D]
        n, hkv, s, d = k.shape
        k = b.op("reshape", [b.op("expand", [b.op("reshape", [k], shape=[n, hkv, 1, s, d])],
                                  shape=[n, hkv, group, s, d])], shape=[n, hkv * group, s, d], stem="k_rep")
        v = b.op("reshape", [b.op("expand", [b.op("reshape", [v], shape=[n, hkv, 1, s, v.shape[-1]])],
                                  shape=[n, hkv, group, s, v.shape[-1]])], shape=[n, hkv * group, s, v.shape[-1]],
                 stem="v_rep")
    kt = b.op("transpose", [k], dim0=-2, dim1=-1, stem="kt")
    qk = b.op("matmul", [q, kt], stem="qk")
    scores = b.op("mul", [qk, scale], stem="scores")
    if causal and q.shape[2] == k.shape[2]:
        mask = causal_keep(b, q.shape[2], k.shape[2])
    if mask is not None:
        if mask.dtype == "bool":
            low = b.masked(b.op("full", [], shape=[], value="-inf", dtype=scores.dtype, stem="neg_inf"))
            scores = b.masked(b.op("where", [mask, scores, low], stem="masked"))
        else:
            scores = b.op("add", [scores, mask], stem="masked")
            if mask.name in b.infinite_ok:
                b.masked(scores)
    if scores.dtype != "float32" and b.draw.chance(0.5):  # softmax(..., dtype=torch.float32) as HF's eager path
        upcast = b.op("astype", [scores], dtype="float32", stem="scores_f32")
        scores = b.masked(upcast) if scores.name in b.infinite_ok else upcast
    probs = b.op("softmax", [scores], dim=-1, stem="probs")
    if probs.dtype != v.dtype:
        probs = b.op("astype", [probs], dtype=v.dtype, stem="probs_v")
    return b.op("matmul", [probs, v], stem="attn")
