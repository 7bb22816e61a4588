"""Fuzz campaigns: the runner (lanes, minimizer lane), its store and state, bugs, progress, smoke verdicts, report."""

from .runner import (
    Campaign,
    CampaignConfig,
    CampaignError,
    CampaignSummary,
    command_line,
    lane_env,
)

__all__ = ["Campaign", "CampaignConfig", "CampaignError", "CampaignSummary", "command_line", "lane_env"]
