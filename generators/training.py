"""Training cases (issue 35): a forward block of a real model, a scalar loss head, gradients of its inputs and params.

The block is drawn from the forward families (norm + linear, attention, conv / UNet blocks, embedding + layer norm,
the diffusion noise schedule around a 16-bit model, chains); the loss head is a sum against an upstream gradient
that spans magnitudes, MSE or L1 against a target (the diffusion / flow-matching loss when the block is the schedule),
or cross-entropy over the last dim. Every floating-point input the loss depends on gets its gradient checked, except
the loss's own targets; the hard corners of backward come from the blocks' own stress values (offset activations,
large logits, long reductions).
"""

from __future__ import annotations

import math
from typing import Callable

from fuzzer.dtypes import LOW_PRECISION

from . import distributions as dist
from .attention import attention_family
from .blocks import unet_family
from .builder import GraphBuilder, Val
from .embeddings import lookup_family
from .linalg import linear_stage
from .norms import norm_family, norm_stage
from .schedule import schedule_family
from .sources import activation_dtype, activation_input
from .shapes import seq_shape

TRAINABLE = ("float16", "bfloat16", "float32")  # dtypes PyTorch, torch_xla and TVM take gradients of
LOSSES = [("upstream", 4), ("mse", 3), ("l1", 1), ("cross-entropy", 2)]
MAX_LOGITS = 4096  # elements a cross-entropy head's logits may have (a class per element of the last dim)


def norm_linear_block(b: GraphBuilder) -> Val:
    """norm -> linear (the transformer MLP's entry), on stress activations."""
    dtype = activation_dtype(b)
    x = activation_input(b, seq_shape(b.draw, b.draw.choice([2, 3])), dtype)
    h = norm_stage(b, x, op=b.draw.choice(["layer_norm", "rms_norm"]), param_dtype=dtype)
    return linear_stage(b, h, param_dtype=dtype)


def first(family: Callable[[GraphBuilder], list[Val]]) -> Callable[[GraphBuilder], Val]:
    """A forward family's first output as a block."""
    return lambda b: family(b)[0]


BLOCKS: dict[str, tuple[int, Callable[[GraphBuilder], Val]]] = {
    "norm-linear": (4, norm_linear_block),
    "norm": (3, first(norm_family)),
    "attention": (3, first(attention_family)),
    "lookup": (2, first(lookup_family)),
    "unet": (2, first(unet_family)),
    "schedule": (3, first(schedule_family)),
}


def target_like(b: GraphBuilder, h: Val, stem: str, spread: bool) -> Val:
    """An input of h's shape and dtype: an upstream gradient spanning magnitudes (`spread`), or a regression target."""
    def make() -> dict:
        std = b.draw.choice([1.0, 1e-3, 30.0]) if spread else 1.0
        return {"dist": "normal", "mean": 0.0, "std": std, "seed": b.draw.seed()}
    return b.input(stem, h.shape, h.dtype, dist.spec_sets(b.draw, b.n_sets, make(), make, p_vary=0.5))


def loss_head(b: GraphBuilder, h: Val, kind: str) -> Val:
    """The scalar loss of `kind` over h (0-dim, h's dtype)."""
    if kind == "upstream":
        return b.op("sum", [b.op("mul", [h, target_like(b, h, "upstream", spread=True)], stem="weighted")], stem="loss")
    if kind in ("mse", "l1"):
        d = b.op("sub", [h, target_like(b, h, "target", spread=False)], stem="residual")
        e = b.op("mul", [d, d], stem="squared") if kind == "mse" else b.op("abs", [d], stem="absolute")
        return b.op("mean", [e], stem="loss")
    classes = h.shape[-1]
    rows = math.prod(h.shape[:-1])
    logits = h if h.rank == 2 else b.op("reshape", [h], shape=[rows, classes], stem="logits")
    logp = b.op("log_softmax", [logits], dim=-1, stem="logp")
    ids = b.input("labels", (rows, 1), "int64",
                  dist.spec_sets(b.draw, b.n_sets, {"dist": "randint", "low": 0, "high": classes, "seed": b.draw.seed()},
                                 None, p_vary=0.5))
    picked = b.op("gather", [logp, ids], dim=1, stem="picked")
    return b.op("neg", [b.op("mean", [picked], stem="mean_logp")], stem="loss")


def depends_on(b: GraphBuilder, value: str) -> set[str]:
    """Every value `value` is computed from (itself included)."""
    producers = {n.id: n for n in b.nodes}
    seen, todo = set(), [value]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in producers:
            todo += [o for o in producers[name].inputs if isinstance(o, str)]
    return seen


def training_family(b: GraphBuilder) -> list[Val]:
    """A block, a loss head, gradients of every trainable input the loss depends on (not the loss's targets)."""
    block = b.draw.weighted([(name, weight) for name, (weight, _) in BLOCKS.items()])
    h = BLOCKS[block][1](b)
    if h.info.is_scalar or h.dtype not in TRAINABLE:  # an integer or fp8 block output: train its float32 view
        h = b.op("astype", [h], dtype="float32", stem="h32")
    kinds = [(k, w) for k, w in LOSSES if k != "cross-entropy" or (h.rank >= 2 and h.numel <= MAX_LOGITS)]
    kind = b.draw.weighted(kinds)
    if block == "schedule" and kind == "upstream":
        kind = "mse"  # the diffusion / flow-matching loss: the model's output against a target
    targets = {i.name for i in b.inputs}
    loss = loss_head(b, h, kind)
    targets = {i.name for i in b.inputs} - targets  # the loss's own inputs: no gradient
    used = depends_on(b, loss.name)
    b.grads = {i.name for i in b.inputs if i.kind == "tensor" and i.dtype in TRAINABLE and i.name in used
               and i.name not in targets}
    b.notes["training"] = {"block": block, "loss": kind, "low_precision": h.dtype in LOW_PRECISION}
    return [loss]
