"""Pieces every repro script is made of: the head (shebang, crash exit, title), the inputs as precfuzz makes them, and
a function whose casts can be redirected to float64 for the exact answer. Shared by fuzzer.repro and
fuzzer.grad_repro, so neither imports the other's internals."""

from __future__ import annotations

import math
import re
from typing import Any

from . import __version__
from .dtypes import FLOAT_FORMATS, is_float
from .executors.base import Executor
from .executors.torch_render import TORCH_DTYPE, node_expr, render_function
from .export import _exceeds, comment
from .identifiers import value_identifiers
from .ir import Case, Graph, infer
from .ops import is_cast
from .values import expression, has_inline, inline_expr


def values_expr(spec: dict[str, Any], shape: tuple[int, ...], dtype: str, kind: str) -> tuple[str, int | None]:
    """(numpy expression of an input's raw values, the rng seed it needs or None)."""
    if has_inline(spec):
        return inline_expr(spec, shape), None
    expr = re.sub(r"\bshape\b", repr(tuple(shape)), expression(spec))
    expr = re.sub(r"math\.prod\(\(([0-9, ]*)\)\)",  # the element count as a number: no `import math` for it
                  lambda m: str(math.prod(int(d) for d in m.group(1).split(",") if d.strip())), expr)
    if kind == "tensor" and is_float(dtype) and _exceeds(spec, shape, FLOAT_FORMATS[dtype].max_value):
        top = FLOAT_FORMATS[dtype].max_value
        expr = f"np.clip({expr}, {-top!r}, {top!r})"
    return expr, (int(spec.get("seed", 0)) if "rng" in expr else None)


def input_lines(case: Case, set_index: int, make: Any, listed: bool = False) -> tuple[list[str], list[str]]:
    """(module-level lines making `inputs`, the inputs' names); `make(inp, expr)` renders one input's value. With
    `listed`, `inputs` is one list literal where no generator is shared.

    Each input draws from a fresh generator of its own seed, as precfuzz makes its values (values.make_values):
    written inline where the expression draws once, else as `rng = ...` just before it. Two inputs of one seed
    must not share a generator: the second would get other values than the ones precfuzz ran.
    """
    overrides = case.input_sets[set_index] if case.input_sets else {}
    ident = value_identifiers(case.graph)
    exprs = [values_expr(overrides.get(i.name, i.init), i.shape, i.dtype, i.kind) for i in case.graph.inputs]
    lines, names = [], []
    for inp, (expr, need) in zip(case.graph.inputs, exprs):
        if need is not None:
            if len(re.findall(r"\brng\b", expr)) == 1:
                expr = re.sub(r"\brng\b", f"np.random.default_rng({need})", expr)
            else:
                lines.append(f"rng = np.random.default_rng({need})")
        lines.append(f"{ident[inp.name]} = {make(inp, expr)}")
        names.append(ident[inp.name])
    if listed and names and len(lines) == len(names):  # no shared generator: one list, the names in comments
        values = [line.split(" = ", 1)[1] for line in lines]
        return [f"{'inputs = [' if k == 0 else '          '}{v}{']' if k == len(values) - 1 else ','}  # {comment(n)}"
                for k, (v, n) in enumerate(zip(values, names))], names
    return lines + [f"inputs = [{', '.join(names)}]"], names


def script_head(title: str, executor: Executor, case: Case, set_index: int, body: list[str]) -> list[str]:
    """Shebang, a fixed second line (Python reads a source encoding from the first two lines only: no text from
    outside there) importing os and sys (and math where `body` uses it) and making a crash exit 2, then the
    escaped title and versions as comments."""
    desc = executor.describe()
    versions = ", ".join(f"{k} {v}" for k, v in sorted(desc.get("versions", {}).items()))
    about = [title, f"{executor.name} ({versions or 'versions unknown'}); precfuzz {__version__}, case {case.id} "
                    f"input set {set_index}. Exits 1 while the bug is there, 0 once fixed."]
    math_ = any(re.search(r"\bmath\.", line) for line in body)
    return ["#!/usr/bin/env python3",
            f"import {'math, ' if math_ else ''}os, sys; sys.excepthook = lambda *e: (sys.__excepthook__(*e), "
            "os._exit(2))  # a crash exits 2, not 1", *[f"# {comment(line)}" for line in about]]


def castable_function(graph: Graph, name: str) -> str | None:
    """`def <name>(..., cast=lambda d: d):` with every float cast written `.to(cast(torch.<dtype>))`, so that
    `cast=lambda d: torch.float64` runs the exact answer's program with the same text (None if a cast renders
    otherwise)."""
    typed = infer(graph)
    names = value_identifiers(graph)
    scalars = {k for k, v in typed.values.items() if v.kind == "scalar"}
    lines = render_function(graph, name).splitlines()
    for i, node in enumerate(graph.nodes, start=1):
        if is_cast(node.op) and is_float(str(node.attrs.get("dtype"))):
            dtype = TORCH_DTYPE[str(node.attrs["dtype"])]
            expr = node_expr(node, scalars, names)
            if not expr.endswith(f".to({dtype})") or lines[i] != f"    {names[node.id]} = {expr}":
                return None
            lines[i] = f"    {names[node.id]} = {expr[:-len(dtype) - 1]}cast({dtype}))"
    lines[0] = lines[0][:-2] + ("" if lines[0].endswith("():") else ", ") + \
        "cast=lambda dtype: dtype):  # the exact answer: cast=lambda dtype: torch.float64"
    return "\n".join(lines) + "\n"
