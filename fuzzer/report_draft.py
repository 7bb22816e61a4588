"""Markdown bug-report drafts: title, expected, actual with numbers, environment, the short repro script inlined."""

from __future__ import annotations

import platform
from typing import Any, Iterable

from oracles.bugs import title as bug_title
from oracles.findings import Finding
from oracles.vocabulary import Kind, Oracle

from . import markdown as md
from .ir import Case
from .values import has_inline

EXPECTED = {
    Oracle.ERROR_BOUND: "each output within the error that an implementation computing with float32 accumulation (each op "
                   "rounded once to its dtype) loses against the float64 answer on the same rounded inputs: at most 3x "
                   "that error plus 2 ULP of the output dtype",
    Oracle.EFFECTIVE_PRECISION: "each output computed in the dtype it reports, within the error an implementation with float32 "
                           "accumulation loses (3x plus 2 ULP)",
    Oracle.STATUS_DIVERGENCE: "it runs, as PyTorch eager on the CPU runs the same program with the same dtypes",
    Oracle.DTYPE_DIVERGENCE: "it returns the dtypes PyTorch eager returns for the same program",
    Oracle.SILENT_DOWNCAST: "it refuses the mixed dtypes as PyTorch does, or computes and returns the promoted dtype",
    Kind.MODEL_HAZARD: "(not a backend bug) the model keeps its activations in the dtype of the parameters they meet",
    Oracle.COVERAGE: "the op is supported in this dtype",
    Oracle.CRASH: "it does not crash",
    Oracle.TIMEOUT: "it returns in reasonable time",
}


def title(finding: Finding, executors: Iterable[str] = (), describe: dict[str, Any] | None = None,
          variant: str = "*") -> str:
    """A one-line issue title (oracles.bugs.title)."""
    return bug_title(finding, executors, describe, variant)


ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16", "asimd", "sve", "bf16")  # what oneDNN/XLA pick kernels by


def cpu_isa() -> str:
    """The CPU's model and the vector ISA extensions kernels are chosen by (from /proc/cpuinfo where there is one)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "CPU part") and not model:
                    model = value.strip()
                elif key.strip() in ("flags", "Features"):
                    flags |= set(value.split())
    except OSError:
        pass
    isa = " ".join(f for f in ISA_FLAGS if f in flags)
    return f"{platform.machine()}{f', {model}' if model else ''}{f'; ISA: {isa}' if isa else ''}"


def cause_hint(case: Case, finding: Finding) -> str:
    """One line on what triggers it in the (minimized) case: the op at fault, its attributes, its operands' shapes,
    dtypes and values ("layer_norm over normalized_shape [4096] of x: float16 [1, 4096], alternating ±0.25")."""
    node = next((n for n in case.graph.nodes if n.id == finding.node), None)
    if node is None and len(case.graph.nodes) == 1:
        node = case.graph.nodes[0]
    if node is None:
        return ""
    inputs = {i.name: i for i in case.graph.inputs}
    parts = []
    for operand in node.inputs:
        inp = inputs.get(operand) if isinstance(operand, str) else None
        if inp is None:
            continue
        spec = case.input_sets[finding.input_set].get(inp.name, inp.init) if finding.input_set < len(case.input_sets) \
            else inp.init
        parts.append(f"{inp.name}: {inp.dtype} {list(inp.shape)}, {describe_values(spec)}")
    attrs = ", ".join(f"{k} {v}" for k, v in node.attrs.items())
    return f"{node.op}{f' ({attrs})' if attrs else ''} of " + "; ".join(parts) if parts else f"{node.op} ({attrs})"


def describe_values(spec: dict[str, Any]) -> str:
    """A value spec in words."""
    if has_inline(spec):
        return "the values given"
    dist, args = spec.get("dist", "?"), {k: v for k, v in spec.items() if k not in ("dist", "seed")}
    if dist == "alternating":
        return f"alternating ±{args.get('value', 0.25)}"
    if dist == "constant":
        return f"all {args.get('value', 1.0)}"
    return f"{dist} " + ", ".join(f"{k}={v}" for k, v in args.items()) if args else dist


def render(case: Case, finding: Finding, describe: dict[str, Any], script: str, command: str, head: str,
           script_name: str = "repro.py", executors: Iterable[str] = (), siblings: Iterable[str] = (),
           output: str | None = None, arrays_file: str | None = None) -> str:
    """The whole draft: expected, actual (with the script's own output where it ran), the trigger, other
    manifestations of the same cause, environment (versions, CPU and its ISA), the script."""
    ops = ", ".join(sorted({n.op for n in case.graph.nodes}))
    actual = md.text(finding.message)
    if finding.ratio is not None and finding.max_ulp is not None:
        actual += f"\n\n{finding.max_ulp:.1f} ULP of the output dtype at worst; error / allowed error = {finding.ratio:.3g}."
    if output:
        actual += f"\n\nThe script prints:\n\n{md.fence(output)}"
    hint = md.text(cause_hint(case, finding))
    also = [md.text(e) for e in sorted(set(executors) - {finding.executor})]
    others = [md.code(s) for s in sorted(set(siblings) - {finding.signature})]
    versions = "\n".join(f"- {md.text(k)}: {md.text(v)}" for k, v in sorted(describe.get("versions", {}).items()))
    settings = "\n".join(f"- {md.text(k)}: {md.text(v)}" for k, v in sorted(describe.get("settings", {}).items()))
    attached = f" beside its arrays, {md.code(arrays_file)} (attached)" if arrays_file else ""
    return f"""# {md.text(head)}

## Expected behavior

For this graph ({ops}; {len(case.graph.nodes)} node(s)): {EXPECTED.get(finding.oracle, "no divergence from PyTorch")}.

## Actual behavior

{actual}
{f"{chr(10)}Trigger: {hint}.{chr(10)}" if hint else ""}{f"{chr(10)}Also seen with: {', '.join(also)}.{chr(10)}" if also else ""}{f"{chr(10)}Other manifestations of this cause (precfuzz signatures): {'; '.join(others)}.{chr(10)}" if others else ""}
## Environment

{versions or '- (versions unknown)'}
- Python: {platform.python_version()}; OS: {platform.platform()}
- CPU: {cpu_isa()}

Settings:
{settings or '- none'}

## Steps to reproduce

Save the script below as {md.code(script_name)}{attached} and run {md.code("python " + script_name)}. It prints what it measures and exits 1
while the bug is there, 0 once fixed. It needs only numpy and the backend's own packages.

Found by precfuzz: {md.code(command)}

{md.fence(script, "python")}
"""
