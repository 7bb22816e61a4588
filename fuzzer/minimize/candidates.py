"""Candidates offered by the shrink passes, and the filter that keeps only valid, strictly smaller ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ..ir import Case
from .edit import valid
from .size import size


@dataclass(frozen=True)
class Candidate:
    """A smaller case and a short label of the edit that made it."""

    label: str
    case: Case


Pass = Callable[[Case], Iterator[Candidate]]


def offer(current: Case, candidates: Iterable[Candidate]) -> Iterator[Candidate]:
    """The candidates that type-check, keep at least one node and are strictly smaller than `current` (each case once)."""
    limit = size(current)
    seen = {current.id}
    for cand in candidates:
        key = cand.case.id
        if key in seen:
            continue
        seen.add(key)
        if cand.case.graph.nodes and valid(cand.case) and size(cand.case) < limit:
            yield cand
