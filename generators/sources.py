"""Graph sources shared by the family generators: activation dtypes, activation and parameter inputs."""

from __future__ import annotations

from typing import Callable

from . import distributions as dist
from .builder import GraphBuilder, Val
from .distributions import Spec

ACTIVATION_DTYPES = [("float32", 3), ("float16", 4), ("bfloat16", 4)]


def activation_dtype(b: GraphBuilder) -> str:
    """fp32, fp16 or bf16 for an activation."""
    return b.draw.weighted(ACTIVATION_DTYPES)


def activation_input(b: GraphBuilder, shape: tuple[int, ...], dtype: str, stem: str = "x",
                     kind: str | None = None) -> Val:
    """An activation input with stress values; later input sets reseed it or switch distribution."""
    first = dist.activation_spec(b.draw, dtype, kind)
    specs = dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.activation_spec(b.draw, dtype), p_vary=0.4)
    return b.input(stem, shape, dtype, specs)


def param_input(b: GraphBuilder, stem: str, shape: tuple[int, ...], dtype: str, make: Callable[[], Spec]) -> Val:
    """A parameter; input sets mostly keep it (a compiled model reused with new inputs), sometimes reseed it."""
    first = make()
    return b.input(stem, shape, dtype, dist.spec_sets(b.draw, b.n_sets, first, None, p_vary=0.15), role="param")


def positive_input(b: GraphBuilder, stem: str, shape: tuple[int, ...], dtype: str) -> Val:
    """An input whose values are strictly positive (sqrt, log, rsqrt operands)."""
    first = dist.positive_spec(b.draw)
    return b.input(stem, shape, dtype, dist.spec_sets(b.draw, b.n_sets, first, lambda: dist.positive_spec(b.draw)))
