"""Case generators: Hypothesis-drivable strategies for mixed-precision op graphs aimed at numerically hard corners.

Campaigns call `generate_case(seed, index)`; tests use the Hypothesis strategy `cases()`.
Both run the same generator code (see generators.draw).
"""

from .corners import long_fp16_norm, schedule_chain_break
from .coverage import coverage, reference_problem, valid_fraction
from .graphs import (
    FAMILIES,
    GENERATOR,
    build_case,
    cases,
    generate_case,
    generate_cases,
)

__all__ = [
    "FAMILIES", "GENERATOR", "build_case", "cases", "coverage", "generate_case", "generate_cases",
    "long_fp16_norm", "reference_problem", "schedule_chain_break", "valid_fraction",
]
