"""The campaign state a rerun resumes from (state.json): generator position, unfinished cases, counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

STATE_VERSION = 1


@dataclass
class CampaignState:
    """What state.json holds; the store checks its types when reading it."""

    seed: int
    executors: list[str]
    version: int = STATE_VERSION
    next_index: int = 0  # the next generator index never handed out
    pending: list[int] = field(default_factory=list)  # indices handed out but not finished (run again on resume)
    seeds_done: list[str] = field(default_factory=list)  # seed-corpus files already run
    cases: int = 0
    tests: int = 0
    elapsed_s: float = 0.0  # campaign seconds over all invocations
    counts: dict[str, int] = field(default_factory=dict)  # signature -> hits
    invocations: int = 0
    schedule: str = "uniform"  # 'adaptive' or 'uniform' (fuzzer.campaign.schedule); a resume keeps it
    schedule_block: int = 8  # case indices per planning block (0 until a new campaign has chosen it)
    families: str = ""  # run --families as given, sorted ("" for every family); a resume keeps it

    def to_json(self) -> dict[str, Any]:
        """The JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "CampaignState":
        """The state of a checked JSON object (fields it does not know are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in known})
