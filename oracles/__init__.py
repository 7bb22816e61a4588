"""Oracles: error bounds, status and dtype outcomes, and the finding records they produce."""
