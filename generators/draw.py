"""Draw sources: the one generator code path, fed by a seeded random.Random or by Hypothesis.

Every generator in this package is a plain function of a `DrawSource`, and every random decision
goes through its one primitive, `integer(lo, hi)`; `choice`, `weighted`, `chance` and `seed` are
built on it. Two sources implement the primitive:

- `RandomDraw` wraps a `random.Random`. `generate_case(seed, index)` seeds one from the text
  "precfuzz-gen/<version>:<seed>:<index>" (string seeds hash through SHA-512, so they are the same
  in every process and on every machine), which makes a campaign's i-th case a pure function of
  (seed, i): resuming at i gives the same case without replaying 0..i-1.
- `HypothesisDraw` wraps the `draw` function of a `st.composite` strategy and turns every
  `integer(lo, hi)` into `draw(st.integers(lo, hi))`. Hypothesis then owns the choice sequence, so
  it can replay and shrink generated graphs: every decision shrinks towards `lo`, the tables in the
  generators put the plainest option first, and `chance` shrinks towards its likelier outcome.

Why not `.example()` or driving the strategy with Hypothesis' ConjectureData over a seeded buffer:
`.example()` is documented as unfit for this (not reproducible, warns outside interactive use),
and ConjectureData is internal API that changes between Hypothesis releases, so a campaign's cases
would change with a dependency upgrade. The price of two sources is that they give different
distributions from the same tables (Hypothesis biases integers towards boundaries); validity does
not depend on that, because every generator keeps its constraints by construction (budgets are
computed, never hoped for).
"""

from __future__ import annotations

import bisect
import random
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
_CHANCE_STEPS = 10_000


class DrawSource:
    """Random decisions built on one primitive, `integer(lo, hi)` (inclusive; shrinks towards lo)."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi]."""
        raise NotImplementedError

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`, uniformly (shrinks towards the first)."""
        return options[self.integer(0, len(options) - 1)]

    def weighted(self, table: Sequence[tuple[T, int]]) -> T:
        """One option of a table of (option, integer weight) pairs (shrinks towards the first)."""
        cumulative: list[int] = []
        total = 0
        for _, weight in table:
            total += weight
            cumulative.append(total)
        pick = self.integer(0, total - 1)
        return table[bisect.bisect_right(cumulative, pick)][0]

    def chance(self, p: float) -> bool:
        """True with probability p (shrinks towards the likelier outcome)."""
        hits = round(p * _CHANCE_STEPS)
        pick = self.integer(0, _CHANCE_STEPS - 1)
        return pick < hits if hits * 2 >= _CHANCE_STEPS else pick >= _CHANCE_STEPS - hits

    def seed(self) -> int:
        """A seed for a numpy value distribution."""
        return self.integer(0, 2**31 - 1)


class RandomDraw(DrawSource):
    """Decisions from an explicit random.Random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi], uniformly."""
        return self.rng.randint(lo, hi)


class HypothesisDraw(DrawSource):
    """Decisions drawn from Hypothesis (inside a st.composite), so it can shrink them."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        from hypothesis import strategies as st

        self._draw = draw
        self._integers = st.integers

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi] chosen by Hypothesis."""
        return self._draw(self._integers(lo, hi)) if hi > lo else lo
