"""Activation shapes: sequence and image layouts, sized so the fp64 reference stays fast."""

from __future__ import annotations

import math

from .draw import DrawSource

SizeTable = list[tuple[tuple[int, int], int]]  # ((lo, hi), weight) rows
MAX_ELEMENTS = 48_000  # per tensor, outside the long-reduction corners
LONG_LENGTHS = (4096, 8192, 6144, 5000, 16384)  # normalized / reduced lengths of the long corners

# dim size classes: (lo, hi, weight); the first is the plainest
BATCH = [((1, 1), 5), ((2, 4), 4), ((5, 8), 1)]
FEATURES = [((1, 16), 4), ((17, 128), 5), ((129, 1024), 2), ((1, 3), 1)]
CHANNELS = [((1, 8), 5), ((9, 64), 4), ((128, 1024), 1)]
SPATIAL = {1: [((4, 64), 4), ((65, 512), 1)], 2: [((4, 16), 4), ((17, 48), 1)], 3: [((2, 8), 1)]}
DEPTH = [((1, 4), 3), ((5, 8), 1)]
LAYOUTS = [("seq2", 3), ("seq3", 3), ("img2", 4), ("img1", 2), ("img3", 2)]
IMAGE_RANK = {"img1": 3, "img2": 4, "img3": 5}


def dim(draw: DrawSource, classes: SizeTable, cap: int | None = None) -> int:
    """A size from a weighted table of ranges, at most cap."""
    lo, hi = draw.weighted(classes)
    if cap is not None:
        hi = max(1, min(hi, cap))
        lo = min(lo, hi)
    return draw.integer(lo, hi)


def fit(shape: list[int], budget: int = MAX_ELEMENTS, keep: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Halve the largest dims (except those in keep) until the shape holds at most budget elements."""
    shape = list(shape)
    while math.prod(shape) > budget:
        free = [i for i in range(len(shape)) if i not in keep and shape[i] > 1]
        if not free:
            break
        i = max(free, key=lambda j: (shape[j], -j))
        shape[i] = (shape[i] + 1) // 2
    return tuple(shape)


def seq_shape(draw: DrawSource, rank: int, features: int | None = None) -> tuple[int, ...]:
    """[B, D] or [B, T, D]."""
    d = features or dim(draw, FEATURES)
    shape = [dim(draw, BATCH)] + ([dim(draw, FEATURES[:2])] if rank == 3 else []) + [d]
    return fit(shape, keep=(len(shape) - 1,) if features else ())


def image_shape(draw: DrawSource, rank: int, channels: SizeTable | None = None) -> tuple[int, ...]:
    """[N, C, L], [N, C, H, W] or [N, C, D, H, W]."""
    nd = rank - 2
    n, c = dim(draw, BATCH[:2]), dim(draw, channels or CHANNELS)
    if nd == 3:
        sp = [dim(draw, DEPTH)] + [dim(draw, SPATIAL[3]) for _ in range(2)]
    else:
        sp = [dim(draw, SPATIAL[nd]) for _ in range(nd)]
    return fit([n, c, *sp], keep=(1,))


def layout_shape(draw: DrawSource, layout: str | None = None) -> tuple[int, ...]:
    """An activation shape of a drawn (or given) layout."""
    layout = layout or draw.weighted(LAYOUTS)
    if layout in IMAGE_RANK:
        return image_shape(draw, IMAGE_RANK[layout])
    return seq_shape(draw, 2 if layout == "seq2" else 3)


def divisors(n: int) -> list[int]:
    """Divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]
