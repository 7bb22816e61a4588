"""fp8 graphs (issue 25): quantize-dequantize chains, fp8 scaled matmuls and linear layers, fp8 KV caches feeding
attention, and values at the formats' edges.

fp8 lives in storage, casts and the scaled matmul (PyTorch's CPU kernels for fp8 arithmetic are few): the graphs
compute in float32 / bfloat16 / float16 and go through fp8 the way fp8 recipes do (Transformer Engine, torchao,
vLLM's KV cache): amax of |x| -> scale = fp8_max / amax -> x * scale -> clamp to the range -> cast -> scaled
matmul with the inverse scales, or cast back and unscale. fp8 tensors are inputs or made in the graph, never
parameters (`model.to(torch.bfloat16)` turns an fp8 parameter into bfloat16, which _scaled_mm refuses).
"""

from __future__ import annotations

from fuzzer.dtypes import FLOAT_FORMATS

from . import distributions as dist
from .attention import causal_keep
from .builder import GraphBuilder, Val
from .elementwise import activation_stage
from .shapes import MAX_ELEMENTS, dim, layout_shape
from .sources import activation_input, param_input

FORMATS = [("float8_e4m3fn", 3), ("float8_e5m2", 1)]  # e4m3fn for weights and activations, e5m2 for gradients
COMPUTE = [("bfloat16", 4), ("float32", 3), ("float16", 2)]  # what the fp8 values come from and go back to
OUT_DTYPES = [("bfloat16", 5), ("float32", 4), ("float16", 1)]  # scaled_mm out_dtype
KINDS = [("qdq", 4), ("scaled_mm", 4), ("linear", 3), ("kv_cache", 3), ("edges", 4)]
MARGINS = [(1.0, 8), (0.5, 2), (1.125, 1)]  # scale = margin * fp8_max / amax; past 1 the clamp saturates
AMAX_EPS = (1e-12, 1e-6)  # amax is clamped from below before the division (an all-zero tensor)
INNER = [((8, 64), 4), ((65, 512), 2), ((513, 2048), 1)]  # K of a scaled matmul: the float32 accumulation length


def fp8_format(b: GraphBuilder) -> str:
    """float8_e4m3fn (mostly) or float8_e5m2."""
    return b.draw.weighted(FORMATS)


def top(fmt: str) -> float:
    """The largest finite value of an fp8 format (448 or 57344)."""
    return FLOAT_FORMATS[fmt].max_value


def quantize(b: GraphBuilder, x: Val, fmt: str, clamp: bool = True) -> tuple[Val, Val]:
    """x in fp8 with a per-tensor dynamic scale: (the fp8 tensor, the float32 inverse scale that dequantizes it)."""
    amax = b.op("amax", [b.op("abs", [x], stem=f"{x.name}_abs")], dims=None, stem=f"{x.name}_amax")
    if amax.dtype != "float32":
        amax = b.op("astype", [amax], dtype="float32", stem=f"{x.name}_amax32")
    amax = b.op("clamp", [amax], min=b.draw.choice(AMAX_EPS), stem=f"{x.name}_amax_eps")
    margin = b.draw.weighted(MARGINS) if clamp else 1.0
    scale = b.op("div", [margin * top(fmt), amax], stem=f"{x.name}_scale")
    wide = x
    if x.dtype != "float32" and b.draw.chance(0.7):  # x.float() * scale; else the scale multiplies in x's dtype
        wide = b.op("astype", [x], dtype="float32", stem=f"{x.name}_f32")
    scaled = b.op("mul", [wide, scale], stem=f"{x.name}_scaled")
    if clamp:
        scaled = b.op("clamp", [scaled], min=-top(fmt), max=top(fmt), stem=f"{x.name}_sat")
    q = b.op("astype", [scaled], dtype=fmt, stem=f"{x.name}_fp8")
    if not clamp:
        b.masked(q)  # in range by construction (scale * amax = fp8_max), which the intervals cannot show
    inverse = b.op("div", [1.0, scale], stem=f"{x.name}_scale_inv")
    return q, inverse


def static_quantize(b: GraphBuilder, x: Val, fmt: str, scale: Val) -> Val:
    """x in fp8 with a given scale (delayed scaling, a KV-cache scale): x / scale, clamped to the range, cast."""
    scaled = b.op("div", [x, scale], stem=f"{x.name}_scaled")
    return b.op("astype", [b.op("clamp", [scaled], min=-top(fmt), max=top(fmt), stem=f"{x.name}_sat")], dtype=fmt,
                stem=f"{x.name}_fp8")


def dequantize(b: GraphBuilder, q: Val, inverse: Val, dtype: str) -> Val:
    """An fp8 tensor back in `dtype`, times its inverse scale (the result keeps `dtype`: a 0-dim scale)."""
    back = b.op("astype", [q], dtype=dtype, stem=f"{q.name}_{dtype}")
    out = b.op("mul", [back, inverse], stem=f"{q.name}_dq")
    return b.masked(out) if q.name in b.infinite_ok else out


def scale_input(b: GraphBuilder, stem: str, fmt: str, bound: float) -> Val:
    """A positive float32 0-dim scale (amax history / fp8_max), sometimes too small, so that the clamp saturates."""
    def make() -> dist.Spec:
        return {"dist": "constant", "value": bound / top(fmt) * b.draw.choice([1.0, 1.0, 2.0, 0.25, 0.01])}
    specs = dist.spec_sets(b.draw, b.n_sets, make(), make, p_vary=0.5)
    return b.input(stem, (), "float32", specs)


def fp8_input(b: GraphBuilder, stem: str, shape: tuple[int, ...], fmt: str) -> Val:
    """A tensor stored in fp8 (pre-quantized weights, a cache): stress values of the format, its edges included."""
    first = dist.activation_spec(b.draw, fmt)
    return b.input(stem, shape, fmt, dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.activation_spec(b.draw, fmt)))


def qdq_family(b: GraphBuilder) -> list[Val]:
    """amax -> scale -> clamp -> cast -> cast back -> unscale over an activation, then maybe an op on it."""
    dtype = b.draw.weighted(COMPUTE)
    x = activation_input(b, layout_shape(b.draw), dtype)
    fmt = fp8_format(b)
    q, inverse = quantize(b, x, fmt, clamp=b.draw.chance(0.8))
    y = dequantize(b, q, inverse, b.draw.choice([dtype, "float32"]))
    outputs = [y]
    if b.draw.chance(0.25):
        outputs.append(q)  # the fp8 tensor itself (materialized, not fused away)
    if b.draw.chance(0.3):
        y = b.op("sub", [y, x], stem="quant_error")
        outputs[0] = y
    elif b.draw.chance(0.3):
        outputs[0] = activation_stage(b, y)
    return outputs


def _mm_sizes(b: GraphBuilder) -> tuple[int, int, int]:
    """(M, K, N) with both operands within the tensor budget."""
    m = dim(b.draw, [((1, 16), 3), ((17, 64), 1)])
    n = dim(b.draw, [((1, 16), 3), ((17, 128), 2)])
    k = dim(b.draw, INNER, cap=MAX_ELEMENTS // max(m, n))
    return m, k, n


def fp8_operand(b: GraphBuilder, stem: str, shape: tuple[int, int], fmt: str, weight: bool) -> tuple[Val, Val]:
    """(fp8 tensor, float32 inverse scale): quantized in the graph from a bfloat16/float32 tensor (dynamic
    scaling), quantized with a given scale (delayed scaling), or stored in fp8 with its scale (pre-quantized)."""
    how = b.draw.weighted([("dynamic", 5), ("delayed", 2), ("stored", 2)])
    if how == "stored":
        q = fp8_input(b, f"{stem}8", shape, fmt)
        return q, scale_input(b, f"{stem}_scale", fmt, top(fmt) * b.draw.choice([1.0, 0.01, 4.0]))
    dtype = b.draw.weighted(COMPUTE[:2])
    if weight:
        x = param_input(b, stem, shape, dtype, lambda: dist.weight_spec(b.draw, shape[-1]))
    else:
        x = activation_input(b, shape, dtype, stem=stem)
    if how == "dynamic":
        return quantize(b, x, fmt)
    scale = scale_input(b, f"{stem}_scale", fmt, max(x.bound, 1e-6))
    return static_quantize(b, x, fmt, scale), scale


def scaled_mm_stage(b: GraphBuilder, m: int, k: int, n: int, out_dtype: str) -> Val:
    """scaled_mm(x8 [M, K], w8ᵀ [K, N]) with per-tensor inverse scales: a fp8 linear layer's product."""
    x_fmt = fp8_format(b)
    w_fmt = "float8_e4m3fn" if x_fmt == "float8_e5m2" or b.draw.chance(0.8) else "float8_e5m2"
    xq, x_inv = fp8_operand(b, "x", (m, k), x_fmt, weight=False)
    wq, w_inv = fp8_operand(b, "w", (n, k), w_fmt, weight=True)
    wt = b.op("transpose", [wq], dim0=0, dim1=1, stem="w_t")  # column-major, as cuBLASLt wants it
    out = b.op("scaled_mm", [xq, wt, x_inv, w_inv], out_dtype=out_dtype, stem="mm")
    return b.masked(out) if {xq.name, wq.name} & b.infinite_ok else out


def scaled_mm_family(b: GraphBuilder) -> list[Val]:
    """One fp8 GEMM with per-tensor scales."""
    m, k, n = _mm_sizes(b)
    return [scaled_mm_stage(b, m, k, n, b.draw.weighted(OUT_DTYPES))]


def linear_family(b: GraphBuilder) -> list[Val]:
    """An fp8 linear layer (scaled_mm + bias, then an activation), sometimes a second one on its output (an MLP)."""
    m, k, n = _mm_sizes(b)
    out_dtype = b.draw.weighted(OUT_DTYPES[:2])
    h = scaled_mm_stage(b, m, k, n, out_dtype)
    if b.draw.chance(0.7):
        bias = param_input(b, "bias", (n,), out_dtype, lambda: dist.bias_spec(b.draw, k))
        h = b.op("add", [h, bias], stem="biased")
    h = activation_stage(b, h)
    if b.draw.chance(0.4) and n >= 1:
        hq, h_inv = quantize(b, h, "float8_e4m3fn")
        n2 = dim(b.draw, [((1, 16), 3), ((17, 64), 1)])
        w2 = param_input(b, "w2", (n2, n), out_dtype, lambda: dist.weight_spec(b.draw, n))
        w2q, w2_inv = quantize(b, w2, "float8_e4m3fn")
        w2t = b.op("transpose", [w2q], dim0=0, dim1=1, stem="w2_t")
        h = b.op("scaled_mm", [hq, w2t, h_inv, w2_inv], out_dtype=out_dtype, stem="mm2")
    return [h]


def kv_cache_family(b: GraphBuilder) -> list[Val]:
    """A decode step over an fp8 KV cache: new keys/values quantized with the cache's scales and appended,
    the cache dequantized, then scaled_dot_product_attention."""
    dtype = b.draw.weighted(COMPUTE)
    fmt = b.draw.weighted([("float8_e4m3fn", 4), ("float8_e5m2", 1)])
    batch, heads = b.draw.choice([1, 2]), b.draw.choice([1, 2, 4])
    head_dim = b.draw.choice([8, 16, 32, 64])
    past = dim(b.draw, [((4, 64), 3), ((65, 512), 1)], cap=max(4, MAX_ELEMENTS // (batch * heads * head_dim)))
    new = b.draw.integer(1, 4)
    shape = (batch, heads, new, head_dim)
    q = activation_input(b, shape, dtype, stem="q", kind="normal")
    k_scale = scale_input(b, "k_scale", fmt, b.draw.choice([4.0, 16.0, 1.0]))
    v_scale = scale_input(b, "v_scale", fmt, b.draw.choice([4.0, 1.0]))
    cached = []
    for stem, scale in (("k", k_scale), ("v", v_scale)):
        cache = fp8_input(b, f"{stem}_cache", (batch, heads, past, head_dim), fmt)
        fresh = static_quantize(b, activation_input(b, shape, dtype, stem=f"{stem}_new", kind="normal"), fmt, scale)
        full = b.op("cat", [cache, fresh], dim=2, stem=f"{stem}_all")
        cached.append(dequantize(b, full, scale, dtype))
    keys = past + new
    mask = causal_keep(b, new, keys) if b.draw.chance(0.4) else None
    out = b.op("scaled_dot_product_attention", [q, cached[0], cached[1], mask], stem="attn")
    return [out]


def edge_values(b: GraphBuilder, fmt: str, n: int) -> list[float]:
    """n values at the edges of `fmt` (zero, subnormals and their ties, the largest finite value, the rounding
    boundary past it and beyond), signed, with a few ordinary ones."""
    mant, emin, big = FLOAT_FORMATS[fmt].mantissa_bits, FLOAT_FORMATS[fmt].min_exponent, top(fmt)
    sub = 2.0 ** (emin - mant)
    half_ulp_top = 2.0 ** (len(bin(int(big))) - 3 - mant - 1)  # half the spacing at the largest value
    catalogue = [0.0, sub, sub / 2, 1.5 * sub, 2.5 * sub, (2**mant - 1) * sub, 2.0**emin, 2.0**emin - sub / 2,
                 1.0, 1.0 + 2.0 ** -(mant + 1), 1.0 + 2.0 ** -(mant + 1) + 2.0**-12, big, big + half_ulp_top / 2,
                 big + half_ulp_top, big + half_ulp_top * 1.0625, 2.0 * big, 448.0, 57344.0, 61440.0, 65504.0, 1e5]
    out = []
    for _ in range(n):
        if b.draw.chance(0.25):
            v = float(b.draw.integer(-4000, 4000)) / 1000.0
        else:
            v = b.draw.choice(catalogue)
        out.append(-v if b.draw.chance(0.4) else v)
    return out


def edges_family(b: GraphBuilder) -> list[Val]:
    """A cast to fp8 over values at the format's edges (past the range: NaN or inf, PyTorch's cast), then back, to
    the other fp8 format, through amax (NaN wins) or out as fp8; sometimes an inf made by `full` goes in too."""
    fmt = fp8_format(b)
    src = b.draw.weighted([("float32", 5), ("bfloat16", 3), ("float16", 2)])
    n = b.draw.integer(4, 24)
    specs = [{"values": edge_values(b, fmt, n)} for _ in range(b.n_sets)]
    x = b.input("x", (n,), src, specs)
    if b.draw.chance(0.2):
        inf = b.op("full", [], shape=[1], value=b.draw.choice(["inf", "-inf"]), dtype=src, stem="inf")
        x = b.masked(b.op("cat", [x, b.masked(inf)], dim=0, stem="x_inf"))
    if b.draw.chance(0.25):
        x = b.op("mul", [x, b.draw.choice([2.0, 0.5, 1.0625, 1024.0])], stem="x_scaled")
    q = b.masked(b.op("astype", [x], dtype=fmt, stem="q"))
    how = b.draw.weighted([("back", 4), ("out", 2), ("other", 1), ("amax", 2)])
    if how == "out":
        return [q]
    if how == "other":
        other = "float8_e5m2" if fmt == "float8_e4m3fn" else "float8_e4m3fn"
        r = b.masked(b.op("astype", [q], dtype=other, stem="r"))
        return [b.masked(b.op("astype", [r], dtype="float32", stem="y"))]
    y = b.masked(b.op("astype", [q], dtype=b.draw.choice([src, "float32"]), stem="y"))
    if how == "amax":
        return [b.masked(b.op("amax", [b.masked(b.op("abs", [y], stem="y_abs"))], dims=None, stem="y_amax")), y]
    return [y]


FAMILY_KINDS = {"qdq": qdq_family, "scaled_mm": scaled_mm_family, "linear": linear_family,
                "kv_cache": kv_cache_family, "edges": edges_family}


def fp8_family(b: GraphBuilder) -> list[Val]:
    """One fp8 graph (see the module docstring)."""
    kind = b.draw.weighted(KINDS)
    b.notes["fp8"] = kind
    return FAMILY_KINDS[kind](b)
