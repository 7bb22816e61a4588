"""Noise-schedule generators: sigma / alpha-bar as diffusion and flow-matching code computes them; add_noise, targets.

The schedule value lives where real code keeps it, and each place promotes differently next to
bf16/fp16 latents (PyTorch semantics): a Python float (`scheduler.sigmas[i].item()`, or a literal)
and a 0-dim fp32 tensor leave the latents' dtype alone; a 1-dim fp32 tensor (shape [1], the
torch-xla seed) or a broadcastable [B, 1, ..., 1] one upcasts the whole expression to fp32, and the
bf16 conv/linear/norm that follows then meets an fp32 activation (a chain break; PyTorch raises).
Some variants cast back explicitly (`.to(latents.dtype)`), as careful code does.
"""

from __future__ import annotations

import math
from typing import Any

from . import distributions as dist
from .builder import GraphBuilder, Val
from .conv import conv_stage
from .linalg import linear_stage
from .norms import norm_stage
from .shapes import BATCH, dim, image_shape, seq_shape
from .sources import activation_input

Sched = Val | float  # a schedule value: a graph value or a Python-float literal

FORMS = [("one", 7), ("batch", 4), ("zerodim", 2), ("scalar", 2), ("literal", 1)]
SCHEDULE_DTYPES = [("float32", 6), ("float64", 1), ("latent", 1)]
LATENT_DTYPES = [("bfloat16", 6), ("float16", 2), ("float32", 1)]
SOURCES = [("direct", 4), ("timestep", 4), ("cosine", 2)]
RECIPES = [("flow", 5), ("ddpm", 4), ("velocity", 2), ("x0", 1), ("euler", 2), ("edm", 1)]
STEPS = [(1000, 6), (50, 1), (4, 1)]
LATENT_CHANNELS = [((4, 16), 4), ((1, 3), 1), ((17, 64), 1)]
MODELS = [("conv", 5), ("linear", 3), ("norm", 2)]
SIGMA_LITERALS = (0.5, 0.25, 0.999, 1e-3, dist.F32_BELOW_ONE, 0.0, 1.0)
EDM_SIGMAS = (0.002, 80.0, 1.0, 14.6, 0.5)


# ---- small helpers that work on graph values and literals alike

def one_minus(b: GraphBuilder, s: Sched) -> Sched:
    """1 - s, written as `1 - sigma` (an int literal) or `1.0 - sigma`."""
    if isinstance(s, float):
        return 1.0 - s
    return b.op("sub", [b.draw.choice([1, 1.0]), s], stem="one_minus")


def root(b: GraphBuilder, s: Sched) -> Sched:
    """sqrt(s)."""
    if isinstance(s, float):
        return math.sqrt(s)
    return b.op("sqrt", [s], stem="root")


def scale(b: GraphBuilder, s: Sched, x: Val) -> Val:
    """s * x or x * s."""
    return b.op("mul", [s, x] if b.draw.chance(0.7) else [x, s], stem="scaled")


# ---- where the schedule value comes from

def schedule_shape(form: str, latents: Val) -> tuple[int, ...]:
    """Shape of a tensor schedule value next to latents."""
    return {"one": (1,), "zerodim": (), "batch": (latents.shape[0],) + (1,) * (latents.rank - 1)}[form]


def schedule_dtype(b: GraphBuilder, latents: Val) -> str:
    """fp32 mostly, sometimes fp64 or the latents' own dtype."""
    dtype = b.draw.weighted(SCHEDULE_DTYPES)
    return latents.dtype if dtype == "latent" else dtype


def timestep(b: GraphBuilder, form: str, shape: tuple[int, ...], steps: int, last: int | None = None) -> Val:
    """An int64 timestep tensor (or Python int) with 0, 1, steps-1 and steps among its input sets."""
    first = dist.timestep_spec(b.draw, steps, edges=False, last=last)
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.timestep_spec(b.draw, steps, edges=True, last=last),
                           p_vary=0.8)
    kind = "scalar" if form == "scalar" else "tensor"
    return b.input("t", shape if kind == "tensor" else (), "int64", specs, kind=kind)


def unit_value(b: GraphBuilder, form: str, latents: Val, dtype: str, source: str, stem: str, low: float = 0.0) -> Sched:
    """A schedule value in [low, 1]: direct input, `t.float() / N`, or a literal."""
    if form == "literal":
        return max(low, b.draw.choice(SIGMA_LITERALS))
    shape = () if form == "scalar" else schedule_shape(form, latents)
    if source == "timestep" and low == 0.0:
        steps = b.draw.weighted(STEPS)
        t = timestep(b, form, shape, steps)
        if form == "scalar":
            return b.op("div", [t, steps], stem=stem)
        tf = b.op("astype", [t], dtype=dtype, stem="t_float")
        return b.op("div", [tf, b.draw.choice([steps, float(steps)])], stem=stem)
    first = dist.unit_spec(b.draw, edges=False, low=low)
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.unit_spec(b.draw, edges=True, low=low), p_vary=0.8)
    if form == "scalar":
        return b.input(stem, (), "float64", specs, kind="scalar")
    return b.input(stem, shape, dtype, specs)


def cosine_pair(b: GraphBuilder, form: str, latents: Val, dtype: str) -> tuple[Sched, Sched]:
    """(sqrt(alpha_bar), sqrt(1 - alpha_bar)) of the cosine schedule: cos and sin of (t/N + s)/(1 + s) * pi/2."""
    u = unit_value(b, form, latents, dtype, b.draw.choice(["timestep", "direct"]), "u")
    if isinstance(u, float):
        angle = (u + 0.008) / 1.008 * math.pi / 2
        return math.cos(angle), math.sin(angle)
    if b.draw.chance(0.5):  # improved-DDPM offset s = 0.008
        u = b.op("div", [b.op("add", [u, 0.008]), 1.008])
    angle = b.op("mul", [u, math.pi / 2], stem="angle")
    return b.op("cos", [angle], stem="alpha"), b.op("sin", [angle], stem="sigma")


def edm_sigma(b: GraphBuilder, form: str, latents: Val, dtype: str) -> Sched:
    """A Karras/EDM sigma in [0.002, 80]."""
    if form == "literal":
        return b.draw.choice(EDM_SIGMAS)
    specs = dist.spec_sets(b.draw, b.n_sets, {"dist": "constant", "value": b.draw.choice(EDM_SIGMAS)},
                           lambda: {"dist": "constant", "value": b.draw.choice(EDM_SIGMAS)}, p_vary=0.8)
    if form == "scalar":
        return b.input("sigma", (), "float64", specs, kind="scalar")
    return b.input("sigma", schedule_shape(form, latents), dtype, specs)


# ---- the recipes

def latents_input(b: GraphBuilder, shape: tuple[int, ...], dtype: str, stem: str) -> Val:
    """Latents-like activations: normal values, sometimes stress values."""
    kind = "normal" if b.draw.chance(0.6) else None
    return activation_input(b, shape, dtype, stem=stem, kind=kind)


def latent_shape(b: GraphBuilder, layout: str) -> tuple[int, ...]:
    """[B, C, H, W], [B, C, F, H, W] (video) or [B, T, D] (tokens)."""
    if layout == "tokens":
        return seq_shape(b.draw, 3)
    return image_shape(b.draw, 4 if layout == "image" else 5, LATENT_CHANNELS)


def add_noise(b: GraphBuilder, layout: str, latent_dtype: str) -> tuple[Val, list[Val], Val]:
    """(model input, extra outputs such as targets, the latents) of one drawn schedule recipe."""
    shape = latent_shape(b, layout)
    x = latents_input(b, shape, latent_dtype, "latents")
    noise_dtype = latent_dtype if b.draw.chance(0.85) else "float32"  # torch.randn defaults to fp32
    recipe = b.draw.weighted(RECIPES)
    form = b.draw.weighted(FORMS)
    dtype = schedule_dtype(b, x)
    source = b.draw.weighted(SOURCES)
    b.notes.update(recipe=recipe, form=form, schedule_dtype=dtype, source=source)
    if recipe in ("flow", "euler"):
        if recipe == "euler":  # x_next = x + (sigma_next - sigma) * v
            s = unit_value(b, form, x, dtype, source, "sigma")
            s_next = unit_value(b, form, x, dtype, source, "sigma_next")
            v = latents_input(b, shape, latent_dtype, "velocity")
            literals = isinstance(s, float) and isinstance(s_next, float)
            dt = s_next - s if literals else b.op("sub", [s_next, s], stem="dt")  # type: ignore[operator]
            return b.op("add", [x, scale(b, dt, v)], stem="x_next"), [], x
        s = unit_value(b, form, x, dtype, source, "sigma")
        n = latents_input(b, shape, noise_dtype, "noise")
        noisy = b.op("add", [scale(b, one_minus(b, s), x), scale(b, s, n)], stem="noisy")
        extra = [b.op("sub", [n, x], stem="target")] if b.draw.chance(0.3) else []
        return noisy, extra, x
    if recipe == "edm":  # c_in = 1 / sqrt(sigma^2 + sigma_data^2)
        s = edm_sigma(b, form, x, dtype)
        if isinstance(s, float):
            c_in: Sched = 1.0 / math.sqrt(s * s + 0.25)
        else:
            den = b.op("add", [b.op("mul", [s, s], stem="sigma_sq"), 0.25])
            if den.info.is_scalar:  # rsqrt takes tensors only
                c_in = b.op("div", [1.0, b.op("sqrt", [den])], stem="c_in")
            else:
                c_in = b.op("rsqrt", [den], stem="c_in")
        return scale(b, c_in, x), [], x
    if recipe == "x0":  # x0 = (x_t - sqrt(1 - a) * eps) / sqrt(a)
        a = unit_value(b, form, x, dtype, "direct", "alpha_bar", low=0.01)
        eps = latents_input(b, shape, noise_dtype, "eps")
        num = b.op("sub", [x, scale(b, root(b, one_minus(b, a)), eps)])
        sa = root(b, a)
        return b.op("div", [num, sa], stem="x0"), [], x
    if source == "cosine":
        sa, s1 = cosine_pair(b, form, x, dtype)
    else:
        a = unit_value(b, form, x, dtype, source, "alpha_bar")
        sa, s1 = root(b, a), root(b, one_minus(b, a))
    n = latents_input(b, shape, noise_dtype, "noise")
    noisy = b.op("add", [scale(b, sa, x), scale(b, s1, n)], stem="noisy")
    extra = []
    if recipe == "velocity":  # v = sqrt(a) * noise - sqrt(1 - a) * x
        extra.append(b.op("sub", [scale(b, sa, n), scale(b, s1, x)], stem="v_target"))
    return noisy, extra, x


def model_stage(b: GraphBuilder, h: Val, latent_dtype: str) -> Val:
    """The model's first parametrized op, with parameters in the latents' dtype (cast back first, sometimes)."""
    if h.dtype != latent_dtype and b.draw.chance(0.25):
        h = b.op("astype", [h], dtype=latent_dtype, stem="model_in")
        b.notes["cast_back"] = True
    dtype = latent_dtype if b.draw.chance(0.9) else "float32"
    model = b.draw.weighted([(m, w) for m, w in MODELS if m != "conv" or h.rank >= 3])
    if model == "conv":
        return conv_stage(b, h, param_dtype=dtype, bias=b.draw.chance(0.8))
    if model == "linear":
        return linear_stage(b, h, param_dtype=dtype)
    op = "group_norm" if h.rank >= 3 and b.draw.chance(0.5) else "layer_norm"
    return norm_stage(b, h, op=op, affine="both", param_dtype=dtype)


def timestep_embedding(b: GraphBuilder, latent_dtype: str) -> list[Val]:
    """sin/cos of t times exp(-log(10000) * i / half), maybe into the time-embedding MLP."""
    n, half = dim(b.draw, BATCH), b.draw.choice([4, 8, 16, 32, 64, 128])
    steps = b.draw.weighted(STEPS)
    t = timestep(b, "one", (n, 1), steps)
    tf = b.op("astype", [t], dtype=b.draw.choice(["float32", "float32", "float64"]), stem="t_float")
    arange = {"dist": "linspace", "start": 0.0, "stop": (half - 1) / half}  # arange(half) / half
    index = b.input("exponent", (half,), "float32", [arange] * b.n_sets)
    freqs = b.op("exp", [b.op("mul", [index, -math.log(10000.0)])], stem="freqs")
    args = b.op("mul", [tf, freqs], stem="args")
    emb = b.op("sin", [args], stem="emb_sin")
    outs = [emb, b.op("cos", [args], stem="emb_cos")]
    if b.draw.chance(0.6):
        h = b.op("astype", [emb], dtype=latent_dtype, stem="emb_cast") if b.draw.chance(0.4) else emb
        h = linear_stage(b, h, param_dtype=latent_dtype, bias=True)
        h = linear_stage(b, b.op("silu", [h]), param_dtype=latent_dtype, bias=True)
        outs = [h]
    return outs


def schedule_family(b: GraphBuilder) -> list[Val]:
    """add_noise / targets / preconditioning then (mostly) a bf16 model op; or a timestep embedding."""
    latent_dtype = b.draw.weighted(LATENT_DTYPES)
    if b.draw.chance(0.12):
        b.notes["recipe"] = "embedding"
        return timestep_embedding(b, latent_dtype)
    layout = b.draw.weighted([("image", 4), ("video", 3), ("tokens", 2)])
    h, extra, _ = add_noise(b, layout, latent_dtype)
    if b.draw.chance(0.8):
        h = model_stage(b, h, latent_dtype)
    return [h, *extra]


def schedule_source(b: GraphBuilder) -> tuple[Val, dict[str, Any]]:
    """add_noise as the first stage of a chained graph: (noisy latents, notes)."""
    latent_dtype = b.draw.weighted(LATENT_DTYPES)
    layout = b.draw.weighted([("image", 4), ("video", 3), ("tokens", 2)])
    h, _, _ = add_noise(b, layout, latent_dtype)
    return h, {"latent_dtype": latent_dtype}
