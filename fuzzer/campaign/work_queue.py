"""The work a campaign still owes: seed files, case indices handed out but unfinished, the next new index, and the
tests reserved by cases claimed and not yet finished.

Not locked itself: the campaign's lock guards it (fuzzer.campaign.runner calls it under that lock, the only lock
it holds while doing so). Its resumable part lives in the campaign state (next_index, seeds_done; pending is written
from `unfinished()` at each flush), so a case interrupted by kill -9 is run again on resume.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any, Iterable

from .state import CampaignState


class WorkQueue:
    """Seeds first, then unfinished indices in order, then new ones; claims reserve their tests."""

    def __init__(self, state: CampaignState, seeds: Iterable[Path]) -> None:
        self.state = state
        self.pending: list[int] = sorted(int(i) for i in state.pending)
        self.in_flight: set[int] = set()
        done = set(state.seeds_done)
        self.seeds = [p for p in seeds if p.name not in done]
        self.reserved = 0  # tests of cases claimed but not finished

    def add_pending(self, indices: Iterable[int]) -> None:
        """Indices to run again (finished cases whose results were lost)."""
        self.pending = sorted(set(self.pending) | set(indices))

    def peek(self) -> tuple[str, Any]:
        """The next item without claiming it: ("seed", path) or ("index", i)."""
        if self.seeds:
            return "seed", self.seeds[0]
        return "index", self.pending[0] if self.pending else self.state.next_index

    def take(self, kind: str, item: Any, tests: int) -> None:
        """Claim the item `peek` gave and reserve its tests."""
        if kind == "seed":
            self.seeds.pop(0)
        else:
            if self.pending and self.pending[0] == item:
                self.pending.pop(0)
            else:
                self.state.next_index = item + 1
            self.in_flight.add(item)
        self.reserved += tests

    def put_back(self, kind: str, item: Any, tests: int) -> None:
        """A claimed item whose lane was lost before it finished: the next claim takes it again."""
        self.reserved -= tests
        if kind == "seed":
            self.seeds.insert(0, item)
        else:
            self.in_flight.discard(item)
            bisect.insort(self.pending, item)

    def finish(self, kind: str, item: Any, tests: int) -> None:
        """A claimed item is done: its reservation ends and it is counted done."""
        self.reserved -= tests
        if kind == "seed":
            self.state.seeds_done.append(item.name)
        else:
            self.in_flight.discard(item)

    def unfinished(self) -> list[int]:
        """Indices claimed or queued but not finished (state.json's `pending`)."""
        return sorted(self.in_flight | set(self.pending))
