"""Python identifiers for graph values: one injective, ASCII-only mapping per graph, used by every renderer.

Value names are arbitrary strings. Sanitizing them one at a time is not injective (`a.` and `a_` both give
`a_`; an input `list` becomes `v_list`, which may be another value's name), and Python NFKC-normalizes
non-ASCII identifiers (a bold-letter `torch` is `torch`). So each graph gets one mapping, built in value
order: the name is NFKC-normalized as Python would, then every character that is not an ASCII letter, digit or
`_` becomes `_`; names that are empty, start with a digit
or shadow something a rendered function or repro script uses get a `v_` prefix, and a name already taken
gets a numeric suffix.
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
import unicodedata
from functools import lru_cache
from typing import Any

from .ir import Graph

# module aliases and every name the rendered torch, reference and Relax code or a repro script defines or calls
FIXED = frozenset({
    "torch", "F", "math", "np", "tvm", "R", "relax", "bb", "ml_dtypes", "os", "sys", "graph", "inputs", "device",
    "args", "outs", "rnd", "round_to", "rounded", "reference", "sliding_window_view", "Any", "run_backend",
    "make_inputs", "main", "ulp", "bound_ratio", "torch_xla", "xm", "outputs", "build_module", "compile_module",
    "run_module", "apply_passes", "PASSES", "PARAM_DTYPES", "TVM_DTYPES", "BACKEND", "OUTPUTS", "INPUT_DTYPES",
    "INPUT_KINDS", "OUTPUT_DTYPES", "backward_perturbation", "round_to_float32", "to_float32_arithmetic",
    # the short repro scripts (fuzzer/repro.py)
    "T", "ALLOWED", "AS_DECLARED", "AS_FLOAT64", "AS_FLOAT32", "program", "run", "nd", "expected", "actual",
    "control", "off", "failed", "got", "want", "exc", "rng", "exact", "cast", "DECLARED", "FP32",
})
_NOT_WORD = re.compile(r"[^A-Za-z0-9_]")


@lru_cache(maxsize=1)
def reserved_names() -> frozenset[str]:
    """Keywords, builtins, module aliases and every function a rendered graph or repro script defines or calls."""
    from .ops.sources import reference_helper_names

    return frozenset(FIXED | set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
                     | reference_helper_names())


def sanitize(name: str) -> str:
    """An ASCII identifier close to `name` that shadows nothing (not injective: see value_identifiers)."""
    out = _NOT_WORD.sub("_", unicodedata.normalize("NFKC", name))
    return out if out and not out[0].isdigit() and out not in reserved_names() else f"v_{out}"


def value_identifiers(graph: Graph) -> dict[str, str]:
    """Value name -> Python identifier for every input and node of `graph`; distinct names get distinct identifiers."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name in [i.name for i in graph.inputs] + [n.id for n in graph.nodes]:
        if name in out:
            continue
        base = sanitize(name)
        ident, k = base, 1
        while ident in taken or ident in reserved_names():
            k += 1
            ident = f"{base}_{k}"
        taken.add(ident)
        out[name] = ident
    return out


def literal(value: Any) -> str:
    """Python source for a number: repr, or float('inf') / float('nan') where repr is not valid source."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`, ...: the first not in `taken` (which it joins)."""
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name
