"""Markdown bug-report drafts: title, expected, actual with numbers, environment, the short repro script inlined."""

from __future__ import annotations

import platform
from typing import Any, Iterable

from oracles.bugs import title as bug_title
from oracles.findings import Finding

from .ir import Case

EXPECTED = {
    "error-bound": "each output within the error that an implementation computing with float32 accumulation (each op "
                   "rounded once to its dtype) loses against the float64 answer on the same rounded inputs: at most 3x "
                   "that error plus 2 ULP of the output dtype",
    "effective-precision": "each output computed in the dtype it reports, within the error an implementation with float32 "
                           "accumulation loses (3x plus 2 ULP)",
    "status-divergence": "it runs, as PyTorch eager on the CPU runs the same program with the same dtypes",
    "dtype-divergence": "it returns the dtypes PyTorch eager returns for the same program",
    "silent-downcast": "it refuses the mixed dtypes as PyTorch does, or computes and returns the promoted dtype",
    "model-hazard": "(not a backend bug) the model keeps its activations in the dtype of the parameters they meet",
    "coverage": "the op is supported in this dtype",
    "crash": "it does not crash",
    "timeout": "it returns in reasonable time",
}


def title(finding: Finding, executors: Iterable[str] = (), describe: dict[str, Any] | None = None,
          variant: str = "*") -> str:
    """A one-line issue title (oracles.bugs.title)."""
    return bug_title(finding, executors, describe, variant)


def render(case: Case, finding: Finding, describe: dict[str, Any], script: str, command: str, head: str,
           script_name: str = "repro.py", executors: Iterable[str] = ()) -> str:
    """The whole draft."""
    versions = "\n".join(f"- {k}: {v}" for k, v in sorted(describe.get("versions", {}).items()))
    settings = "\n".join(f"- {k}: {v}" for k, v in sorted(describe.get("settings", {}).items()))
    ops = ", ".join(sorted({n.op for n in case.graph.nodes}))
    actual = finding.message
    if finding.ratio is not None and finding.max_ulp is not None:
        actual += f"\n\n{finding.max_ulp:.1f} ULP of the output dtype at worst; error / allowed error = {finding.ratio:.3g}."
    also = sorted(set(executors) - {finding.executor})
    return f"""# {head}

## Expected behavior

For this graph ({ops}; {len(case.graph.nodes)} node(s)): {EXPECTED.get(finding.oracle, "no divergence from PyTorch")}.

## Actual behavior

{actual}
{f"{chr(10)}Also seen with: {', '.join(also)}.{chr(10)}" if also else ""}
## Environment

{versions or '- (versions unknown)'}
- Python: {platform.python_version()}; OS: {platform.platform()}; CPU: {platform.machine()}

Settings:
{settings or '- none'}

## Steps to reproduce

Save the script below as `{script_name}` and run `python {script_name}`. It prints what it measures and exits 1
while the bug is there, 0 once fixed. It needs only numpy and the backend's own packages.

Found by precfuzz: `{command}`

```python
{script.rstrip()}
```
"""
