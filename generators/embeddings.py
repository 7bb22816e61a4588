"""Position and timestep embeddings as diffusion and transformer models compute them in the graph.

- RoPE: inv_freq = base^(-arange(0, d, 2) / d), angles = positions x inv_freq (positions up to 32k), the cos/sin
  tables in float32 or in 16 bits (the precision hazard), rotate-half by slice/neg/cat, q*cos + rot(q)*sin.
- Sinusoidal timestep embeddings (DDPM/UNet2DModel): freqs = exp(-log(max_period) * arange(half) / half),
  args = t[:, None] * freqs (timesteps up to 1000, in float32 or 16 bits), cat(sin, cos), then linear+silu+linear.
"""

from __future__ import annotations

import math

from . import distributions as dist
from .builder import GraphBuilder, Val
from .linalg import linear_stage
from .sources import activation_dtype, activation_input, param_input

TABLE_DTYPES = [("float32", 3), ("bfloat16", 2), ("float16", 1)]
POSITION_STARTS = [(0, 3), (1000, 2), (4000, 2), (16000, 1), (32000, 1)]


def _exp_freqs(b: GraphBuilder, count: int, step: float, scale: float, stem: str) -> Val:
    """exp(arange(0, count*step, step) * -scale): the inverse frequencies, in float32."""
    idx = b.op("arange", [], start=0.0, end=float(count * step), step=float(step), dtype="float32", stem=f"{stem}_idx")
    return b.op("exp", [b.op("mul", [idx, -scale], stem=f"{stem}_exponent")], stem=stem)


def positions(b: GraphBuilder, length: int) -> Val:
    """Token positions start..start+length-1 (start up to 32k): an int64 input, or an arange."""
    start = b.draw.weighted(POSITION_STARTS)
    start = max(0, min(start + b.draw.integer(0, 64), 32768 - length))
    if b.draw.chance(0.5):
        return b.op("arange", [], start=start, end=start + length, step=1, dtype="int64", stem="pos")
    first = {"values": list(range(start, start + length))}
    return b.input("position_ids", (length,), "int64", dist.spec_sets(b.draw, b.n_sets, first, None, p_vary=0.0))


def rope_family(b: GraphBuilder) -> list[Val]:
    """q (or k) [B, H, S, D] rotated by RoPE tables computed in the graph."""
    dtype = activation_dtype(b)
    head_dim = b.draw.choice([8, 16, 32, 64])
    seq = b.draw.choice([4, 8, 16, 32, 64])
    heads = b.draw.choice([1, 2, 4])
    base = b.draw.choice([10000.0, 500000.0, 10000.0])
    x = activation_input(b, (1, heads, seq, head_dim), dtype, stem="q", kind="normal")
    inv_freq = _exp_freqs(b, head_dim // 2, 2.0, math.log(base) / head_dim, "inv_freq")
    pos = positions(b, seq)
    table = b.draw.weighted(TABLE_DTYPES)
    pos_f = b.op("astype", [pos], dtype=table, stem="pos_f")
    freq_t = inv_freq if table == "float32" else b.op("astype", [inv_freq], dtype=table, stem="inv_freq_t")
    angles = b.op("mul", [b.op("reshape", [pos_f], shape=[seq, 1], stem="pos_col"), freq_t], stem="angles")
    both = b.op("cat", [angles, angles], dim=-1, stem="emb")
    cos, sin = b.op("cos", [both], stem="cos"), b.op("sin", [both], stem="sin")
    if cos.dtype != dtype:
        cos, sin = (b.op("astype", [t], dtype=dtype, stem=f"{t.name}_x") for t in (cos, sin))
    b.notes["rope"] = {"table": table, "start": pos.lo}
    half = head_dim // 2
    x1 = b.op("slice", [x], dim=-1, start=0, end=half, step=1, stem="x1")
    x2 = b.op("slice", [x], dim=-1, start=half, end=head_dim, step=1, stem="x2")
    rotated = b.op("cat", [b.op("neg", [x2], stem="neg_x2"), x1], dim=-1, stem="rotated")
    return [b.op("add", [b.op("mul", [x, cos], stem="x_cos"), b.op("mul", [rotated, sin], stem="rot_sin")], stem="q_rot")]


def timestep_family(b: GraphBuilder) -> list[Val]:
    """The sinusoidal embedding of integer timesteps up to 1000, then the model's time MLP."""
    batch = b.draw.choice([1, 2, 4])
    dim = b.draw.choice([16, 32, 64, 128])
    half = dim // 2
    steps = b.draw.choice([1000, 1000, 50])
    first = dist.timestep_spec(b.draw, steps, edges=False, last=steps - 1)
    specs = dist.spec_sets(b.draw, b.n_sets, first,
                           lambda: dist.timestep_spec(b.draw, steps, edges=True, last=steps - 1), p_vary=0.8)
    t = b.input("timesteps", (batch,), "int64", specs)
    freqs = _exp_freqs(b, half, 1.0, math.log(10000.0) / (half - b.draw.choice([0, 1])), "freqs")
    work = b.draw.weighted(TABLE_DTYPES)  # the dtype the arguments are computed in
    tf = b.op("astype", [t], dtype=work, stem="t_f")
    f = freqs if work == "float32" else b.op("astype", [freqs], dtype=work, stem="freqs_w")
    args = b.op("mul", [b.op("reshape", [tf], shape=[batch, 1], stem="t_col"), f], stem="args")
    parts = [b.op("sin", [args], stem="sin"), b.op("cos", [args], stem="cos")]
    emb = b.op("cat", parts[::-1] if b.draw.chance(0.3) else parts, dim=-1, stem="emb")
    b.notes["timestep"] = {"work_dtype": work, "steps": steps}
    if b.draw.chance(0.3):
        return [emb]
    model = activation_dtype(b)
    if emb.dtype != model:
        emb = b.op("astype", [emb], dtype=model, stem="emb_m")
    h = b.op("silu", [linear_stage(b, emb, param_dtype=model, out_features=dim * 2)], stem="time_act")
    return [linear_stage(b, h, param_dtype=model, out_features=dim * 2)]


def lookup_family(b: GraphBuilder) -> list[Val]:
    """Token ids through an embedding table (vocab up to 32k rows), position embeddings added, a layer norm."""
    dtype = activation_dtype(b)
    dim = b.draw.choice([16, 32, 64])
    vocab = min(b.draw.choice([50, 1000, 32000]), 48_000 // dim)
    seq = b.draw.choice([4, 8, 16])
    batch = b.draw.choice([1, 2])
    first = {"dist": "randint", "low": 0, "high": vocab, "seed": b.draw.seed()}
    ids = b.input("input_ids", (batch, seq), "int64", dist.spec_sets(b.draw, b.n_sets, first, None, p_vary=0.7))
    table = param_input(b, "wte", (vocab, dim), dtype, lambda: dist.weight_spec(b.draw, 1))
    h = b.op("embedding", [table, ids], stem="tok")
    if b.draw.chance(0.5):
        pos_table = param_input(b, "wpe", (seq, dim), dtype, lambda: dist.weight_spec(b.draw, 1))
        pos = b.op("arange", [], start=0, end=seq, step=1, dtype="int64", stem="pos")
        h = b.op("add", [h, b.op("embedding", [pos_table, pos], stem="pos_emb")], stem="h")
    weight = param_input(b, "ln_w", (dim,), dtype, lambda: dist.gamma_spec(b.draw))
    return [b.op("layer_norm", [h, weight], normalized_shape=[dim], eps=1e-5)]
