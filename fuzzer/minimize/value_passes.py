"""Value shrink passes: fewer and wider dtypes, fewer input sets and overrides, simpler value specs."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import numpy as np

from ..dtypes import is_float
from ..ir import Case, Input, input_values
from ..ops import is_cast
from ..values import DISTRIBUTIONS, ValueSpecError, has_inline, inline, make_values
from .candidates import Candidate, offer
from .edit import Spec, simplest_spec
from .size import DTYPE_COST

WIDEST_FIRST = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


def _float_dtypes(case: Case) -> list[str]:
    """Float dtypes of tensor inputs and astype targets, in WIDEST_FIRST order."""
    present = {i.dtype for i in case.graph.inputs if i.kind == "tensor"}
    present |= {n.attrs.get("dtype") for n in case.graph.nodes if is_cast(n.op)}
    return [d for d in WIDEST_FIRST if d in present]


def _retype(case: Case, old: str, new: str, only: str | None = None) -> Case:
    """Dtype `old` replaced by `new` on tensor inputs (just input `only` if given) and, globally, on astype targets."""
    g = case.graph
    inputs = tuple(replace(i, dtype=new) if i.kind == "tensor" and i.dtype == old and only in (None, i.name) else i
                   for i in g.inputs)
    nodes = g.nodes if only else tuple(
        replace(n, attrs={**n.attrs, "dtype": new}) if is_cast(n.op) and n.attrs.get("dtype") == old else n for n in g.nodes)
    return case.with_graph(replace(g, inputs=inputs, nodes=nodes))


def simpler_dtypes(case: Case) -> Iterator[Candidate]:
    """Merge one float dtype into another present one (wider first), widen a narrow dtype to float32, then per input."""
    present = _float_dtypes(case)
    cands = []
    for old in reversed(present):
        for new in present:
            if new != old:
                cands.append(Candidate(f"dtype {old} -> {new}", _retype(case, old, new)))
        if DTYPE_COST[old] > DTYPE_COST["float32"]:
            cands.append(Candidate(f"dtype {old} -> float32", _retype(case, old, "float32")))
    for inp in case.graph.inputs:
        if inp.kind == "tensor" and is_float(inp.dtype):
            for new in present:
                if DTYPE_COST[new] < DTYPE_COST[inp.dtype]:
                    cands.append(Candidate(f"{inp.name}: {inp.dtype} -> {new}", _retype(case, inp.dtype, new, only=inp.name)))
    yield from offer(case, cands)


def fewer_input_sets(case: Case) -> Iterator[Candidate]:
    """Keep one input set, drop one, fold a lone set's overrides into the inits, drop single overrides."""
    sets = case.input_sets
    cands = []
    if len(sets) > 1:
        cands += [Candidate(f"keep only input set {k}", replace(case, input_sets=(s,))) for k, s in enumerate(sets)]
        cands += [Candidate(f"drop input set {k}", replace(case, input_sets=sets[:k] + sets[k + 1:])) for k in range(len(sets))]
    if len(sets) == 1 and sets[0]:
        only = sets[0]
        folded = tuple(replace(i, init=only[i.name]) if i.name in only else i for i in case.graph.inputs)
        cands.append(Candidate("fold the overrides into the inputs",
                               replace(case, graph=replace(case.graph, inputs=folded), input_sets=({},))))
    for k, s in enumerate(sets):
        for name in s:
            rest = {n: v for n, v in s.items() if n != name}
            cands.append(Candidate(f"input set {k}: drop override of {name}", replace(case, input_sets=sets[:k] + (rest,) + sets[k + 1:])))
    yield from offer(case, cands)


def _round(value: float, sig: int) -> float:
    """`value` rounded to `sig` significant decimal digits."""
    return float(f"{value:.{sig}g}")


def spec_variants(spec: Spec, values: np.ndarray) -> list[Spec]:
    """Simpler specs to try in place of `spec` (whose values are `values`), simplest first."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    finite = flat[np.isfinite(flat)]
    big = _round(float(np.max(np.abs(finite))), 1) if finite.size else 1.0
    mean = _round(float(np.mean(finite)), 1) if finite.size else 0.0
    out: list[Spec] = [{"dist": "constant", "value": v} for v in dict.fromkeys((1.0, 0.0, mean, big))]
    out.append(simplest_spec(flat.reshape(np.shape(values))) if flat.size else {"dist": "constant", "value": 0.0})
    out += [{"dist": "alternating", "value": v} for v in dict.fromkeys((big, 1.0)) if v > 0]
    if has_inline(spec):
        for sig in (1, 2, 3):
            out.append(simplest_spec(np.vectorize(lambda v, s=sig: _round(v, s) if np.isfinite(v) else v)(np.asarray(values, dtype=np.float64))))
    elif spec.get("dist") in DISTRIBUTIONS:
        params = {k: v for k, v in spec.items() if k not in ("dist", "seed")}
        for sig in (1, 2):
            out.append({**spec, **{k: _round(float(v), sig) for k, v in params.items()}})
        if spec.get("seed", 0):
            out.append({k: v for k, v in spec.items() if k != "seed"})
        defaults = DISTRIBUTIONS[spec["dist"]][1]
        out += [{k: v for k, v in spec.items() if k != p} for p in params if p in defaults]
    return out


def _with_spec(case: Case, name: str, where: int | None, spec: Spec) -> Case:
    """Input `name` made by `spec`: its init (where=None) or its override in input set `where`."""
    if where is None:
        inputs = tuple(replace(i, init=spec) if i.name == name else i for i in case.graph.inputs)
        return replace(case, graph=replace(case.graph, inputs=inputs))
    sets = tuple({**s, name: spec} if k == where else s for k, s in enumerate(case.input_sets))
    return replace(case, input_sets=sets)


def simpler_values(case: Case) -> Iterator[Candidate]:
    """For each input's init, then each override: constants, alternating, rounded parameters, fewer distinct values."""
    slots: list[tuple[Input, int | None, Spec, int]] = []
    for inp in case.graph.inputs:
        plain = [k for k, s in enumerate(case.input_sets) if inp.name not in s]
        if plain:
            slots.append((inp, None, inp.init, plain[0]))
    for k, s in enumerate(case.input_sets):
        for inp in case.graph.inputs:
            if inp.name in s:
                slots.append((inp, k, s[inp.name], k))
    made = [input_values(case, k) for k in range(len(case.input_sets))]
    cands = []
    for inp, where, spec, k in slots:
        values = made[k][inp.name]
        seen: list[np.ndarray] = []
        for variant in spec_variants(spec, values):
            try:
                got = make_values(variant, inp.shape, inp.dtype if inp.kind == "tensor" else "float64")
            except (ValueSpecError, ValueError):
                continue
            if any(np.array_equal(got, old, equal_nan=True) for old in seen):
                continue  # the same values as a simpler variant offered before
            seen.append(got)
            label = f"{inp.name}{'' if where is None else f' (set {where})'}: {_show(variant)}"
            cands.append(Candidate(label, _with_spec(case, inp.name, where, variant)))
    yield from offer(case, cands)


def _show(spec: Spec) -> str:
    """A short text of a spec for logs."""
    if has_inline(spec):
        return f"{inline(spec).size} inline values"
    return ", ".join(f"{k}={v}" for k, v in spec.items())
