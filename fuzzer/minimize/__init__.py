"""Minimizer: shrink a finding's case to the smallest graph, shapes, dtypes and values that still show it.

Library API (the campaign calls this on every new finding):

    result = minimize(case, finding.signature, checker, budget_s=90)
    result.case, result.finding, result.confirmed, result.summary(), result.lines()

`Search(case, interesting).run()` is the same search under any predicate (Case -> bool).
"""

from .engine import MinimizeError, MinimizeResult, Search, Step, minimize, recheck
from .passes import PASSES
from .size import Size, size
from .target import Predicate, Target

__all__ = ["MinimizeError", "MinimizeResult", "PASSES", "Predicate", "Search", "Size", "Step", "Target", "minimize", "recheck", "size"]
