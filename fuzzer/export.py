"""Standalone repro scripts: inputs regenerated deterministically, the fp64 reference pasted, the backend's own code.

A script imports numpy and the backend's packages only (never precfuzz), prints expected vs actual, and
exits 1 while the bug is there, 0 once fixed. The backend part comes from the executor (`repro_parts`),
the rest is shared here.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np

from oracles import bounds
from oracles.error_bounds import rounding_chain

from . import __version__
from .dtypes import FLOAT_FORMATS, is_float
from .interpret import (
    ONE_PASS_MAX_RELATIVE,
    PRELUDE,
    backward_perturbation,
    meaningful,
    reference_functions,
    render_reference,
)
from .ir import Case, Graph
from .ops.sources import function_source, snapshot_loaded
from .values import expression, has_inline, inline_expr, make_values


@dataclass(frozen=True)
class ReproParts:
    """The backend-specific pieces of a repro script."""

    imports: str  # import lines of the backend
    round_to: str  # source of `def round_to(values, dtype)` returning float64 values rounded as the backend rounds
    body: str  # source defining `def run_backend(inputs) -> (list of float64 arrays, list of dtype names)`
    graph: Graph  # the graph whose declared dtypes the backend promises (the policy graph)
    describe: dict[str, Any]  # executor name, settings, versions
    env: dict[str, str] | None = None  # environment the script must set before importing the backend
    numeric: Graph | None = None  # the graph whose dtypes the backend computes in (the exact answer and the ideals
    # are computed on it, its inputs rounded as it declares them); None: `graph`
    judge_numbers: bool = True  # False: the numbers are shown, not judged (a documented mode's own arithmetic)
    judge_dtypes: bool = True  # False: the reported dtypes are shown, not judged (a documented mode relabels them)
    not_judged: str = ""  # why (printed by the script where it does not judge)


def _exceeds(spec: dict[str, Any], shape: tuple[int, ...], top: float) -> bool:
    """True when the raw values of a spec reach beyond +-top (so the script must clip as precfuzz did)."""
    return bool(np.any(np.abs(make_values(spec, shape, "float64")) > top))


def inputs_code(case: Case, set_index: int) -> str:
    """`def make_inputs()`: each input's raw float64 values, from the same numpy expression precfuzz used."""
    overrides = case.input_sets[set_index] if case.input_sets else {}
    lines = ["def make_inputs():", '    """Raw float64 input values; round_to() turns them into the declared dtypes."""',
             "    inputs = {}"]
    for inp in case.graph.inputs:
        spec = overrides.get(inp.name, inp.init)
        shape = tuple(inp.shape)
        if has_inline(spec):
            expr = inline_expr(spec, shape)
        else:
            expr = expression(spec)
            if "rng" in expr:
                lines.append(f"    rng = np.random.default_rng({int(spec.get('seed', 0))})")
        if inp.kind == "tensor" and is_float(inp.dtype) and _exceeds(spec, shape, FLOAT_FORMATS[inp.dtype].max_value):
            top = FLOAT_FORMATS[inp.dtype].max_value
            expr = f"np.clip({expr}, {-top!r}, {top!r})"  # precfuzz keeps inputs inside the dtype's range
        lines.append(f"    shape = {shape!r}")
        lines.append(f"    inputs[{inp.name!r}] = np.asarray({expr}, dtype=np.float64).reshape(shape)")
    lines.append("    return inputs")
    return "\n".join(lines) + "\n"


CHECK = '''
def round_to_float32(values, dtype):
    """Round to dtype, then carry the value in float32 so the next op computes in float32 arithmetic."""
    out = round_to(values, dtype)
    return out if dtype in ("float64", "int32", "int64", "bool") else np.asarray(out).astype(np.float32)


def to_float32_arithmetic(value, name):
    """An input as the float32-arithmetic ideal sees it (Python scalars stay Python floats)."""
    if INPUT_KINDS[name] == "scalar":
        return float(value)
    return value if INPUT_DTYPES[name] in ("float64", "int32", "int64", "bool") else value.astype(np.float32)


def main():
    raw = make_inputs()
    inputs = {{name: round_to(value, INPUT_DTYPES[name]) for name, value in raw.items()}}
    expected = reference(inputs, False, round_to)
    # four ideal implementations of the declared dtypes: exact math rounded per op, float32 arithmetic (variances
    # in two passes, and in one pass), and exact math on backward-stably perturbed operands
    ideal = reference(inputs, True, round_to)
    ideal32 = reference({{name: to_float32_arithmetic(value, name) for name, value in inputs.items()}}, True, round_to_float32)
    token = VARIANCE_FORM.set("one-pass")
    ideal32_one_pass = reference({{name: to_float32_arithmetic(value, name) for name, value in inputs.items()}}, True,
                                 round_to_float32)
    VARIANCE_FORM.reset(token)
    ideal32_one_pass = {{k: (v if meaningful(v, ideal[k]) else ideal32[k]) for k, v in ideal32_one_pass.items()}}
    perturb = backward_perturbation(round_to)
    perturbed = reference({{name: perturb(value, "float64")
                           if INPUT_KINDS[name] == "tensor" and INPUT_DTYPES[name] not in ("int32", "int64", "bool") else value
                           for name, value in inputs.items()}}, True, perturb)
    try:
        actual, dtypes = run_backend(inputs)
    except Exception as exc:  # the bug may be that the backend raises
        print(f"{{BACKEND}} raised {{type(exc).__name__}}: {{exc}}", flush=True)
        print("expected: it runs and returns", ", ".join(f"{{k}}: {{v}}" for k, v in OUTPUT_DTYPES.items()), flush=True)
        return 1
    failed = False
    for name, out, dtype in zip(OUTPUTS, actual, dtypes):
        want = np.asarray(expected[name], dtype=np.float64)
        out = np.asarray(out, dtype=np.float64)
        declared, computed = OUTPUT_DTYPES[name], COMPUTED_DTYPES[name]
        ideals = [ideal[name], ideal32[name], perturbed[name], ideal32_one_pass[name]]
        unit = computed if computed.startswith("float") else "float32"  # int and bool outputs: in float32 ULPs, as the oracle judges them
        if name in SINGLE_ROUNDING:  # casts of an input alone: correctly rounded, half an ULP (ideal: that rounding)
            want = np.asarray(ideal[name], dtype=np.float64)
            ratio, max_ulp, worst, mismatch = rounding_ratio(out, want, unit)
        else:
            ratio, max_ulp, worst, mismatch = bound_ratio(out, want, ideals, unit, {multiplier!r}, {slack!r})
        print(f"{{name}}: dtype {{dtype}} (declared {{declared}}), shape {{list(out.shape)}}", flush=True)
        print("  expected (fp64 reference):", want.ravel()[:4], flush=True)
        print("  actual:                   ", out.ravel()[:4], flush=True)
        if worst >= 0 and out.shape == want.shape:
            print(f"  worst element {{worst}}: expected {{float(want.ravel()[worst]):.8g}}, got {{float(out.ravel()[worst]):.8g}}; "
                  f"max error {{max_ulp:.1f}} ULP of {{computed}}, {{ratio:.3g}}x the allowed error", flush=True)
        if dtype != declared and JUDGE_DTYPES:
            print(f"  FAIL: output dtype {{dtype}}, declared {{declared}}", flush=True)
            failed = True
        if not JUDGE_NUMBERS:
            print(f"  (numbers not judged: {{NOT_JUDGED}})", flush=True)
        elif mismatch:
            print(f"  FAIL: {{mismatch}} non-finite value(s) where the reference is finite (or the reverse)", flush=True)
            failed = True
        elif ratio > 1.0 and name in SINGLE_ROUNDING:
            print("  FAIL: a cast off by more than half an ULP of its format", flush=True)
            failed = True
        elif ratio > 1.0:
            print("  FAIL: error exceeds {multiplier:g} x the ideal implementation's error + {slack:g} ULP", flush=True)
            failed = True
    ok = "OK: matches the fp64 reference within the bound" if JUDGE_NUMBERS else "OK: it runs (all that is judged)"
    print("BUG REPRODUCED" if failed else ok, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def comment(text: str) -> str:
    """Text for a `# ` comment: every character that could end the line or hide code is escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def render_script(case: Case, parts: ReproParts, command: str, set_index: int = 0, title: str = "") -> str:
    """The whole standalone script.

    Text from outside (the title holds node ids, the command holds paths) only appears in `# ` comments with
    every non-printable character escaped, from the third line on: it can neither end its line nor declare a
    source encoding (Python reads that only on the first two lines).
    """
    graph = parts.graph
    numeric = parts.numeric or graph
    desc = parts.describe
    versions = ", ".join(f"{k}=={v}" for k, v in sorted(desc.get("versions", {}).items())) or "unknown"
    settings = ", ".join(f"{k}={v}" for k, v in sorted(desc.get("settings", {}).items())) or "none"
    from .ir import infer

    typed, computed = infer(graph), infer(numeric)
    out_dtypes = {o: typed.values[o].dtype for o in graph.outputs}
    computed_dtypes = {o: computed.values[o].dtype for o in numeric.outputs}
    rounded = [o for o in numeric.outputs if rounding_chain(numeric, o) is not None
               and computed_dtypes[o] in bounds.FLOAT_NAMES]
    in_dtypes = {i.name: (i.dtype if i.kind == "tensor" else "float64") for i in numeric.inputs}
    in_kinds = {i.name: i.kind for i in numeric.inputs}
    env_lines = "".join(f"os.environ.setdefault({k!r}, {v!r})\n" for k, v in (parts.env or {}).items())
    about = [title or f"precfuzz repro: {desc.get('name')}", "",
             f"Executor: {desc.get('name')} ({settings})",
             f"Versions: {versions}",
             f"Generated by precfuzz {__version__}: {command}",
             f"Case: {case.id} (input set {set_index})"]
    head = ("#!/usr/bin/env python3\n# precfuzz repro script (text from the finding is escaped and kept in comments)\n"
            + "".join(f"# {comment(line)}".rstrip() + "\n" for line in about)
            + '"""Prints expected (fp64 reference) vs actual values for the finding described above.\n\n'
            'Exits 1 while the bug is there, 0 once fixed. Needs only numpy and the backend\'s packages.\n'
            f'"""\nfrom __future__ import annotations\n\nimport os\nimport sys\n{env_lines}')
    parts_src = [
        head,
        PRELUDE,
        parts.imports.strip() + "\n",
        f"\nBACKEND = {desc.get('name')!r}\nOUTPUTS = {list(graph.outputs)!r}\n"
        f"INPUT_DTYPES = {in_dtypes!r}\nINPUT_KINDS = {in_kinds!r}\nOUTPUT_DTYPES = {out_dtypes!r}\n"
        f"COMPUTED_DTYPES = {computed_dtypes!r}  # the dtypes it computes in: the exact answer and the bound's\n"
        f"SINGLE_ROUNDING = {rounded!r}  # outputs made by casts of an input alone: held to correct rounding\n"
        f"JUDGE_NUMBERS, JUDGE_DTYPES = {parts.judge_numbers!r}, {parts.judge_dtypes!r}  # False: shown, not judged\n"
        f"NOT_JUDGED = {parts.not_judged!r}\n",
        "\n# ---- inputs, regenerated deterministically\n\n" + inputs_code(case, set_index),
        "\n\n" + textwrap.dedent(parts.round_to).strip() + "\n",
        "\n\n# ---- the exact answer: float64 numpy on the rounded inputs\n\n"
        + reference_functions(numeric).replace("\n\ndef ", "\n\n\ndef "),
        "\n\n" + render_reference(numeric),
        "\n\n# ---- the error bound (precfuzz oracles/bounds.py, fuzzer/interpret.py)\n\n" + function_source(bounds.ulp)
        + "\n\n" + function_source(bounds.bound_ratio) + "\n\n" + function_source(bounds.rounding_ratio)
        + "\n\n" + function_source(backward_perturbation)
        + f"\n\nONE_PASS_MAX_RELATIVE = {ONE_PASS_MAX_RELATIVE!r}\n\n\n" + function_source(meaningful),
        "\n\n# ---- the backend under test\n\n" + textwrap.dedent(parts.body).strip() + "\n",
        "\n" + CHECK.format(multiplier=bounds.MULTIPLIER, slack=bounds.SLACK_ULPS),
    ]
    return "".join(parts_src)


snapshot_loaded()  # the text of precfuzz's modules as this process loaded them (see snapshot_loaded)
