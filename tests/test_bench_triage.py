"""bench.triage: the table a triager fills in shows each sampled finding's own claim and repro."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.triage import main

CAMPAIGN = Path(__file__).parent / "fixtures" / "triage17-one-finding"  # one finding and its bug, as written


def test_regression_a_sampled_finding_shows_its_own_message_and_repro_not_its_bugs(capsys: pytest.CaptureFixture) -> None:
    """triage17: the table showed the bug's title and ran the bug's minimized repro for a sampled finding; the bug's
    representative is another case (here a 0.086 loss where the finding claims 0.834), so five rows described
    something else than the finding being judged."""
    assert main([str(CAMPAIGN), "--sample", "1", "--no-run"]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert "findings/a964cfb769/repro_full.py" in row and "bugs/b3dad78eab/repro.py" not in row
    assert "loses 0.834 of its value" in row and "0.086" not in row
