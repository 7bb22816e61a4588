"""Conservative value intervals per op, read off the op records (fuzzer.ops: each OpSpec's `interval`).

The interval arithmetic lives in fuzzer.ops.intervals beside the records that use it; this module keeps the
names the generators import.
"""

from __future__ import annotations

from fuzzer.ops import OPS
from fuzzer.ops.intervals import (
                                  HUGE,
                                  UNBOUNDED,
                                  Interval,
                                  Rule,
                                  add,
                                  clamp,
                                  div,
                                  is_finite,
                                  magnitude,
                                  mul,
                                  rounded,
                                  square,
                                  sub,
                                  symmetric,
                                  union,
)

RULES: dict[str, Rule] = {name: spec.interval for name, spec in OPS.items()}

__all__ = ["HUGE", "RULES", "UNBOUNDED", "Interval", "Rule", "add", "clamp", "div", "is_finite", "magnitude", "mul",
           "rounded", "square", "sub", "symmetric", "union"]
