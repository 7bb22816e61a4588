"""Shared fixtures: small example cases, one per op."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "corpus" / "seeds"


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    """corpus/seeds."""
    return SEEDS
