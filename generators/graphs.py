"""Whole cases: the family table, chained graphs, and the entry points (seeded `generate_case`, Hypothesis `cases`)."""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

from fuzzer.ir import Case, IRError

from .attention import attention_family
from .blocks import head_family, unet_family
from .builder import GraphBuilder, Val
from .conv import conv_family, conv_input, conv_stage
from .draw import DrawSource, HypothesisDraw, RandomDraw
from .elementwise import (
    activation_stage,
    binary_stage,
    cast_family,
    cast_stage,
    elementwise_family,
    unary_stage,
)
from .embeddings import lookup_family, rope_family, timestep_family
from .fp8 import fp8_family
from .linalg import linalg_family, linear_stage
from .norms import norm_family, norm_stage
from .passes import tvm_pass_family
from .reductions import reduce_stage, reduction_family, softmax_family, softmax_stage
from .schedule import schedule_family, schedule_source
from .shapes import seq_shape
from .sources import activation_dtype, activation_input
from .optimizer import optimizer_family
from .training import training_family

GENERATOR = "precfuzz-gen/7"  # bump when the same (seed, index) starts giving other cases
INPUT_SETS = [(3, 3), (4, 4), (5, 3)]  # value variants per graph: one compile serves them all (issue 13; 4.0 on average)
MAX_NODES = 12
ATTEMPTS = 4  # redraws (from the same source) when a graph's intervals are not finite
REDRAWS = 8  # redraws from derived seeds should a generator raise (see generate_case)

# chained graphs: stage sequences as models write them ("random" draws one stage at a time)
TEMPLATES: list[tuple[tuple[str, ...], int]] = [
    (("conv", "norm", "act"), 3),
    (("conv", "norm", "linear"), 3),
    (("norm", "linear", "act", "linear"), 2),
    (("conv", "act", "conv"), 1),
    (("norm", "linear", "softmax"), 1),
    (("linear", "act", "norm"), 1),
    (("random",), 3),
]
RANDOM_STAGES = [("conv", 3), ("norm", 3), ("linear", 3), ("act", 2), ("softmax", 1), ("reduce", 1),
                 ("cast", 1), ("unary", 1), ("binary", 1)]
PARAMETRIZED = ("conv", "norm", "linear")
SIMPLE_STAGES: dict[str, Callable[[GraphBuilder, Val], Val]] = {
    "act": activation_stage, "softmax": softmax_stage, "cast": cast_stage, "unary": unary_stage, "binary": binary_stage}


def _stage(b: GraphBuilder, name: str, h: Val, param_dtype: str | None) -> Val:
    if name == "conv":
        return conv_stage(b, h, param_dtype=param_dtype)
    if name == "norm":
        return norm_stage(b, h, param_dtype=param_dtype)
    if name == "linear":
        return linear_stage(b, h, param_dtype=param_dtype)
    if name == "reduce":
        return reduce_stage(b, h, keepdim=True)
    return SIMPLE_STAGES[name](b, h)


def chain_family(b: GraphBuilder) -> list[Val]:
    """Families chained as models chain them: schedule -> conv -> norm -> linear and the like."""
    start = b.draw.weighted([("schedule", 5), ("image", 3), ("seq", 3)])
    model_dtype: str | None = None
    if start == "schedule":
        h, notes = schedule_source(b)
        model_dtype = notes["latent_dtype"]
        if h.dtype != model_dtype and b.draw.chance(0.3):
            h = b.op("astype", [h], dtype=model_dtype, stem="model_in")
    elif start == "image":
        h = conv_input(b)
    else:
        h = activation_input(b, seq_shape(b.draw, b.draw.choice([2, 3])), activation_dtype(b))
    template = b.draw.weighted(TEMPLATES)
    if template == ("random",):
        template = tuple(b.draw.weighted(RANDOM_STAGES) for _ in range(b.draw.integer(2, 4)))
    outputs: list[Val] = []
    for name in template:
        if len(b.nodes) >= MAX_NODES - 2:
            break
        if name == "conv" and h.rank not in (3, 4, 5):
            name = "norm"
        param_dtype = None
        if name in PARAMETRIZED:
            param_dtype = model_dtype if model_dtype and b.draw.chance(0.85) else None
        h = _stage(b, name, h, param_dtype)
        if len(b.nodes) < MAX_NODES - 3 and b.draw.chance(0.12):
            h = _stage(b, b.draw.choice(["cast", "unary", "binary"]), h, None)
        if b.draw.chance(0.1):
            outputs.append(h)
    if h.rank >= 1 and len(b.nodes) < MAX_NODES and b.draw.chance(0.15):
        h = reduce_stage(b, h)
    return [h, *outputs]


# family -> (weight, generator); Hypothesis shrinks towards the first
FAMILIES: dict[str, tuple[int, Callable[[GraphBuilder], list[Val]]]] = {
    "elementwise": (8, elementwise_family),
    "cast": (4, cast_family),
    "reduction": (6, reduction_family),
    "softmax": (5, softmax_family),
    "norm": (14, norm_family),
    "conv": (12, conv_family),
    "linalg": (10, linalg_family),
    "schedule": (20, schedule_family),
    "chain": (23, chain_family),
    "tvm-passes": (6, tvm_pass_family),  # shapes TVM's rewrite passes target (generators/passes.py)
    # the blocks real models are made of (issue 23): a third of the cases by default
    "attention": (16, attention_family),
    "rope": (8, rope_family),
    "timestep": (9, timestep_family),
    "lookup": (5, lookup_family),
    "unet": (11, unet_family),
    "head": (6, head_family),
    "fp8": (12, fp8_family),  # fp8 storage, casts and scaled matmuls (issue 25): 7% of the cases
}
REAL_MODEL_FAMILIES = ("attention", "rope", "timestep", "lookup", "unet", "head")
# families drawn only when named (`--families`, `--train`): a default draw keeps the forward-only table above, so a
# fixed seed gives the cases it gave before training cases existed
NAMED_ONLY: dict[str, tuple[int, Callable[[GraphBuilder], list[Val]]]] = {
    "training": (58, training_family),  # a block + a loss head + gradients (generators/training.py, issue 35): with
    # every forward family (weights 175 in all) a quarter of the draws, as `precfuzz run --train` asks
    "optimizer": (25, optimizer_family),  # one optimizer step of a parameter tensor (generators/optimizer.py, issue 36)
}
ALL_FAMILIES = {**FAMILIES, **NAMED_ONLY}


def build(draw: DrawSource, families: Sequence[str] | None = None) -> tuple[GraphBuilder, list[Val], str]:
    """(builder, outputs, family) of one graph; the builder keeps every value's interval."""
    unknown = [f for f in families or () if f not in ALL_FAMILIES]
    if unknown:
        raise ValueError(f"unknown generator famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} "
                         f"(known: {', '.join(ALL_FAMILIES)})")
    table = [(name, ALL_FAMILIES[name][0]) for name in (families or FAMILIES)]
    for _ in range(ATTEMPTS):
        family = draw.weighted(table)
        b = GraphBuilder(draw, draw.weighted(INPUT_SETS))
        outputs = ALL_FAMILIES[family][1](b)
        if b.finite():
            break
    return b, outputs, family


def build_case(draw: DrawSource, families: Sequence[str] | None = None, meta: dict[str, Any] | None = None) -> Case:
    """One case from a draw source (see generators.draw for the two sources)."""
    b, outputs, family = build(draw, families)
    detail = {"detail": dict(sorted(b.notes.items()))} if b.notes else {}
    return b.case(outputs, {"generator": GENERATOR, "family": family, **(meta or {}), **detail})


def generate_case(seed: int, index: int, families: Sequence[str] | None = None) -> Case:
    """The index-th case of a campaign seeded with seed: a pure function of (seed, index, families).

    Never raises for known families: should a generator break its own constraints (a bug, which the
    property test in tests/test_generators.py looks for), the case is redrawn from a derived seed and its
    meta says so, so a campaign that reaches this index does not stop on every rerun.
    """
    meta: dict[str, Any] = {"seed": seed, "index": index}
    try:
        return build_case(RandomDraw(random.Random(f"{GENERATOR}:{seed}:{index}")), families, meta)
    except (IRError, ValueError, IndexError, KeyError, ZeroDivisionError) as exc:
        if any(f not in ALL_FAMILIES for f in families or ()):
            raise
        failure = f"{type(exc).__name__}: {exc}"
    for attempt in range(1, REDRAWS + 1):
        try:
            return build_case(RandomDraw(random.Random(f"{GENERATOR}:{seed}:{index}:redraw{attempt}")), families,
                              {**meta, "redrawn": attempt, "generator_error": failure})
        except (IRError, ValueError, IndexError, KeyError, ZeroDivisionError):
            continue
    return build_case(RandomDraw(random.Random(f"{GENERATOR}:{seed}:{index}:plain")), ["elementwise"],
                      {**meta, "redrawn": REDRAWS + 1, "generator_error": failure})


def generate_cases(seed: int, count: int, start: int = 0, families: Sequence[str] | None = None) -> list[Case]:
    """Cases start .. start+count-1 of a campaign."""
    return [generate_case(seed, i, families) for i in range(start, start + count)]


def cases(families: Sequence[str] | None = None) -> Any:
    """A Hypothesis SearchStrategy of Case, shrinking towards the simplest family, shapes and values."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw: Callable[[Any], Any]) -> Case:
        return build_case(HypothesisDraw(draw), families, {"seed": None, "index": None})

    return strategy()
