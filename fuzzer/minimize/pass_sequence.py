"""The shrink pass over a case's Relax pass sequence (tvm_passes): drop one pass at a time, keeping the order valid."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ..ir import Case
from ..tvm_passes import PassSequenceError, check_sequence
from .candidates import Candidate, offer


def fewer_tvm_passes(case: Case) -> Iterator[Candidate]:
    """The sequence without one of its passes (first to last), where what remains is still a valid order."""
    passes = case.tvm_passes or ()
    cands = []
    for k, name in enumerate(passes):
        try:
            rest = check_sequence(passes[:k] + passes[k + 1:])
        except PassSequenceError:
            continue
        cands.append(Candidate(f"drop Relax pass {name}", replace(case, tvm_passes=rest)))
    yield from offer(case, cands)
