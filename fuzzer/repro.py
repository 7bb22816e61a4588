"""Short repro scripts: the minimized graph as plain backend code, inputs made in the script, the numbers printed.

What an upstream report carries (the seeds in shared/seeds are examples): 10-40 lines of backend code, a
comparison with the exact float64 answer (the same PyTorch program in float64 on the CPU; for TVM the same
Relax module built in float64) next to a control, and exit status 1 while the bug is there, 0 once fixed.
The script imports numpy and the backend only. Every uncontrolled text (names, messages, paths) enters it
through repr(), value_identifiers(), or as a comment line (from the third line on) with its special
characters escaped. The full-oracle script
(fuzzer.export: pasted reference, four ideal implementations and the bound) stays beside it as repro_full.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from oracles.bounds import allowed_abs
from oracles.findings import Finding

from . import __version__
from .dtypes import FLOAT_FORMATS, is_float
from .executors.base import Executor
from .executors.torch_render import TORCH_DTYPE, render_function
from .executors.tvm_exec import TVMExecutor, render_passes
from .executors.tvm_render import render_module
from .export import _exceeds, comment
from .identifiers import literal, value_identifiers
from .interpret import evaluate, ideal_values
from .ir import Case, Graph, infer, input_values, op_attrs
from .ops import OPS, has_training_mode, is_cast
from .ops.base import NumpyCall
from .values import expression

ACCURACY = ("error-bound", "effective-precision")
RAISES = ("status-divergence", "coverage", "crash", "timeout")


@dataclass(frozen=True)
class Evidence:
    """What precfuzz measured on the minimized case that the script restates."""

    allowed: dict[str, float] = field(default_factory=dict)  # output -> max abs error the bound allows
    eager_dtypes: list[str] | None = None  # what PyTorch eager returns (dtype findings); None where it raises
    promoted: list[str] | None = None  # the promoted dtypes a correct promotion returns (downcast findings)


def evidence(case: Case, finding: Finding, executor: Executor, set_index: int) -> Evidence:
    """The numbers the script needs: the bound on these inputs for accuracy findings, dtypes for dtype findings."""
    graph = case.graph
    if finding.oracle in ACCURACY:
        numeric = executor.numeric_graph(graph)
        values = input_values(case, set_index)
        from .check import rounded_inputs

        inputs = rounded_inputs(numeric, values)
        exact, ideal = evaluate(numeric, inputs, rounded=False), ideal_values(numeric, inputs)
        typed = infer(numeric)
        return Evidence({o: allowed_abs(exact[o], ideal[o], typed.values[o].dtype) for o in graph.outputs})
    if finding.oracle == "dtype-divergence":
        want = finding.details.get("mismatches")
        typed = infer(executor.policy_graph(graph))
        dtypes = [executor.reported_dtypes().get(typed.values[o].dtype, typed.values[o].dtype) for o in graph.outputs]
        if want:
            table = {m[0]: m[1] for m in want}
            dtypes = [table.get(o, d) for o, d in zip(graph.outputs, dtypes)]
        return Evidence(eager_dtypes=dtypes)
    if finding.oracle == "silent-downcast":
        typed = infer(executor.numeric_graph(graph))
        return Evidence(promoted=[typed.values[o].dtype for o in graph.outputs])
    return Evidence()


def exact_graph(graph: Graph) -> Graph:
    """The graph whose float casts do not round: every cast to a float dtype becomes one to float64."""
    nodes = tuple(replace(n, attrs={**n.attrs, "dtype": "float64"}) if is_cast(n.op) and is_float(str(n.attrs.get("dtype")))
                  else n for n in graph.nodes)
    return Graph(graph.inputs, nodes, graph.outputs)


def render_numpy(graph: Graph, name: str = "exact") -> str | None:
    """`def exact(<inputs>):` the graph in float64 numpy, one line per node (None if an op has no numpy form)."""
    if any(OPS[n.op].numpy is None for n in graph.nodes):
        return None
    typed = infer(graph)
    names = value_identifiers(graph)
    lines = [f"def {name}({', '.join(names[i.name] for i in graph.inputs)}):"]
    for node in graph.nodes:
        spec = OPS[node.op]
        slots = list(node.inputs) + [None] * (len(spec.operands) - len(node.inputs))
        args = ["None" if o is None else (names[o] if isinstance(o, str) else literal(o)) for o in slots]
        shapes = [typed.values[o].shape if isinstance(o, str) and typed.values[o].kind != "scalar" else None for o in slots]
        call = NumpyCall(args, op_attrs(node), shapes, typed.values[node.id].dtype)
        lines.append(f"    {names[node.id]} = {spec.numpy(call)}")
    lines.append(f"    return [{', '.join(names[o] for o in graph.outputs)}]")
    return "\n".join(lines) + "\n"


def _values_expr(spec: dict[str, Any], shape: tuple[int, ...], dtype: str, kind: str) -> tuple[str, int | None]:
    """(numpy expression of an input's raw values, the rng seed it needs or None)."""
    if "values" in spec:
        return f"np.broadcast_to(np.array({np.asarray(spec['values'], dtype=np.float64).tolist()!r}), {shape!r})", None
    expr = re.sub(r"\bshape\b", repr(tuple(shape)), expression(spec))
    if kind == "tensor" and is_float(dtype) and _exceeds(spec, shape, FLOAT_FORMATS[dtype].max_value):
        top = FLOAT_FORMATS[dtype].max_value
        expr = f"np.clip({expr}, {-top!r}, {top!r})"
    return expr, (int(spec.get("seed", 0)) if "rng" in expr else None)


def _input_lines(case: Case, set_index: int, make: Any) -> tuple[list[str], list[str]]:
    """(lines of make_inputs' body, the names it returns); `make(inp, expr)` renders one input's value."""
    overrides = case.input_sets[set_index] if case.input_sets else {}
    ident = value_identifiers(case.graph)
    lines, names, seed = [], [], None
    for inp in case.graph.inputs:
        expr, need = _values_expr(overrides.get(inp.name, inp.init), inp.shape, inp.dtype, inp.kind)
        if need is not None and need != seed:
            lines.append(f"    rng = np.random.default_rng({need})")
            seed = need
        lines.append(f"    {ident[inp.name]} = {make(inp, expr)}")
        names.append(ident[inp.name])
    return lines, names


def _head(title: str, finding: Finding, executor: Executor, case: Case, set_index: int) -> list[str]:
    desc = executor.describe()
    versions = ", ".join(f"{k} {v}" for k, v in sorted(desc.get("versions", {}).items()))
    about = [title, finding.message, f"{executor.name} ({versions or 'versions unknown'}); precfuzz {__version__}, "
             f"case {case.id} input set {set_index}. Exits 1 while the bug is there, 0 once fixed."]
    # line 2 is fixed text: Python reads a source encoding from the first two lines only
    overrides = case.input_sets[set_index] if case.input_sets else {}
    uses_math = any("math." in _values_expr(overrides.get(i.name, i.init), i.shape, i.dtype, i.kind)[0]
                    for i in case.graph.inputs)
    return ["#!/usr/bin/env python3", "# precfuzz repro (text from the finding below is escaped)",
            *[f"# {comment(line)}" for line in about], *(["import math"] if uses_math else []), "import os",
            "import sys", "",
            "sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a failing script exits 2, not 1"]


def render(case: Case, finding: Finding, executor: Executor, title: str, set_index: int = 0,
           ev: Evidence | None = None) -> str:
    """The short script for a finding on its (minimized) case."""
    if executor.name == "tvm/frontend":
        raise NotImplementedError("tvm/frontend has no short script yet (its repro_full.py runs the export path)")
    if not isinstance(executor, TVMExecutor) and not hasattr(executor, "repro_env"):  # debug/faults: full only
        raise NotImplementedError(f"{executor.name} has no short script")
    ev = ev if ev is not None else evidence(case, finding, executor, set_index)
    if isinstance(executor, TVMExecutor):
        return _tvm_script(case, finding, executor, title, set_index, ev)
    return _torch_script(case, finding, executor, title, set_index, ev)


# ---------------------------------------------------------------- PyTorch, PyTorch/XLA, Neuron


def _torch_script(case: Case, finding: Finding, ex: Any, title: str, set_index: int, ev: Evidence) -> str:
    graph = case.graph
    policy = ex.policy_graph(graph)
    oracle = finding.oracle
    lines = _head(title, finding, ex, case, set_index)
    if oracle != "model-hazard" and ex.repro_env():
        lines += [f"os.environ.setdefault({k!r}, {v!r})" for k, v in ex.repro_env().items()]
    lines += ["import numpy as np", "import torch", "import torch.nn.functional as F"]
    on_device = oracle != "model-hazard" and bool(ex.repro_sync())
    if on_device:
        lines.append(ex.repro_imports().strip().splitlines()[-1])  # import torch_xla
    lines += [""]
    if oracle in ACCURACY:
        lines += ["# allowed max abs error: 3x an ideal implementation's (fp32 accumulation) on these inputs + 2 ULP",
                  f"ALLOWED = {{{', '.join(f'{o!r}: {v:.6g}' for o, v in ev.allowed.items())}}}", ""]
    fn = render_function(graph)
    lines += fn.rstrip().splitlines() + [""]
    program = render_function(policy, "program")
    distinct = program.replace("def program(", "def graph(", 1) != fn
    if distinct:
        lines += ["# the same program with the casts its precision policy makes written out (what eager runs)"]
        lines += program.rstrip().splitlines() + [""]
    prog = "program" if distinct else "graph"
    exact = prog
    if oracle in ACCURACY:
        text = render_function(exact_graph(ex.numeric_graph(graph)), "exact")
        if text.replace("def exact(", f"def {prog}(", 1) != (program if distinct else fn):
            lines += ["# the exact answer's program: its float casts do not round (float64 throughout)"]
            lines += text.rstrip().splitlines() + [""]
            exact = "exact"
    hazard = oracle == "model-hazard"
    dtype_of = (lambda inp: policy.input(inp.name).dtype) if hazard else ex.input_dtype

    def make(inp: Any, expr: str) -> str:
        if inp.kind == "scalar":
            return f"{'float' if is_float(inp.dtype) else 'int'}(np.asarray({expr}).reshape(()))"
        return f"torch.tensor({expr}).to({TORCH_DTYPE[dtype_of(inp)]})"

    body, names = _input_lines(case, set_index, make)
    lines += ["def make_inputs():", *body, f"    return [{', '.join(names)}]", ""]
    lines.append("inputs = make_inputs()")
    if hazard:
        lines += _hazard_tail(finding, prog)
    else:
        if on_device:
            lines.append(ex.repro_setup().strip())
        lines += _torch_tail(finding, ex, prog, exact, on_device, ev, bool(infer(policy).chain_breaks()))
    return "\n".join(lines) + "\n"


def _torch_tail(finding: Finding, ex: Any, prog: str, exact: str, on_device: bool, ev: Evidence,
                eager_raises: bool) -> list[str]:
    ctx = ", ".join(["torch.no_grad()"] + ([ex.repro_context()] if ex.repro_context() else []))
    args = "[t.to(device) if torch.is_tensor(t) else t for t in inputs]" if on_device else "inputs"
    sync = [f"    {ex.repro_sync()}"] if ex.repro_sync() else []
    name = ex.name
    oracle = finding.oracle
    if oracle in ACCURACY:
        lines = ["with torch.no_grad():",
                 f"    expected = {exact}(*[t.double() if torch.is_tensor(t) and t.is_floating_point() else t "
                 f"for t in inputs])  # exact: float64 on the CPU"]
        cpu = ex.group != "torch" and not eager_raises  # else the CPU is what is judged, or it refuses the program
        control = "PyTorch eager on the CPU" if cpu else "float32 on the CPU"
        if cpu:
            lines.append(f"    control = {prog}(*inputs)  # {control}, same program and dtypes")
        else:
            lines.append(f"    control = {prog}(*[t.float() if torch.is_tensor(t) and t.is_floating_point() else t "
                         f"for t in inputs])  # {control}")
        lines += [f"with {ctx}:", f"    actual = graph(*{args})", *sync,
                  "failed = False",
                  "for name, e, c, a in zip(ALLOWED, expected, control, actual):",
                  "    err = (a.cpu().double() - e).abs().max().item()",
                  "    ref = (c.to(a.dtype).double() - e).abs().max().item()",
                  f"    print(f\"{{name}}: {name} {{a.dtype}} max error {{err:.4g}}; {control} {{ref:.4g}}; "
                  f"allowed {{ALLOWED[name]:.4g}}\")",
                  "    failed |= not err <= ALLOWED[name]  # nan fails too",
                  'print("BUG REPRODUCED" if failed else "OK")', "sys.exit(1 if failed else 0)"]
        return lines
    if oracle in ("dtype-divergence", "silent-downcast"):
        want = ev.eager_dtypes if oracle == "dtype-divergence" else ev.promoted
        first = (["with torch.no_grad():", f"    print('PyTorch eager on the CPU:', [str(o.dtype) for o in {prog}(*inputs)])"]
                 if oracle == "dtype-divergence" else
                 ["try:", "    with torch.no_grad():", f"        {prog}(*inputs)",
                  "except RuntimeError as exc:",
                  "    print('PyTorch eager on the CPU raises:', str(exc).splitlines()[0])"])
        return first + [f"with {ctx}:", f"    actual = graph(*{args})", *sync,
                        "got = [str(o.dtype).replace('torch.', '') for o in actual]",
                        f"want = {want!r}  # " + ("what PyTorch returns" if oracle == "dtype-divergence"
                                                  else "a correct promotion"),
                        f"print('{name} returns', got, 'expected', want)",
                        "sys.exit(1 if got != want else 0)"]
    # the backend raises (or crashes) where PyTorch eager runs
    check = [] if oracle == "coverage" else [
        "with torch.no_grad():",
        f"    print('PyTorch eager on the CPU runs it:', [str(o.dtype) for o in {prog}(*inputs)])"]
    return check + ["try:", f"    with {ctx}:", f"        actual = graph(*{args})", *[f"    {s}" for s in sync],
                    "except Exception as exc:",
                    f"    print('{name} raises', type(exc).__name__, str(exc).splitlines()[0] if str(exc) else '')",
                    "    sys.exit(1)",
                    f"print('{name} runs it:', [str(o.dtype) for o in actual])", "sys.exit(0)"]


def _hazard_tail(finding: Finding, prog: str) -> list[str]:
    fix = finding.details.get("fix") or "cast the activation to the parameters' dtype"
    return ["try:", "    with torch.no_grad():", f"        outs = {prog}(*inputs)",
            "except RuntimeError as exc:",
            "    print('PyTorch raises:', str(exc).splitlines()[0])",
            f"    print('fix:', {fix!r})",
            "    sys.exit(1)",
            "print('runs:', [str(o.dtype) for o in outs])", "sys.exit(0)"]


# ---------------------------------------------------------------- TVM Relax


def _tvm_script(case: Case, finding: Finding, ex: TVMExecutor, title: str, set_index: int, ev: Evidence) -> str:
    graph = ex.policy_graph(case.graph)  # the semantics the pipeline's passes promise (training batch_norm, ...)
    program = ex.program_graph(case.graph)  # what is lowered to Relax (the float32 version for ToMixedPrecision)
    case = case.with_graph(graph)
    typed = infer(graph)
    lines = _head(title, finding, ex, case, set_index)
    bf16 = any(v.dtype == "bfloat16" for v in typed.values.values())
    lines += (["import ml_dtypes"] if bf16 else []) + ["import numpy as np", "import tvm", "from tvm import relax as R",
                                                        "", f"PASSES = {render_passes(ex.passes)}  # [] is TVM's default pipeline"]
    oracle = finding.oracle
    training = any(has_training_mode(n.op) and n.attrs.get("training") for n in graph.nodes)
    exact = render_numpy(graph) if oracle in ACCURACY else None
    if oracle in ACCURACY:
        lines += ["# allowed max abs error: 3x an ideal implementation's (fp32 accumulation) on these inputs + 2 ULP",
                  f"ALLOWED = {{{', '.join(f'{o!r}: {v:.6g}' for o, v in ev.allowed.items())}}}"]
        if exact is None:
            lines.append(f"EXACT_PASSES = {['DecomposeOpsForTraining' if training else 'DecomposeOpsForInference']!r}"
                         "  # norms as elementary ops, which exist in float64")
    lines.append('AS_DECLARED = {d: d for d in ["float16", "bfloat16", "float32", "float64", "int32", "int64"]}')
    if oracle in ACCURACY:
        lines += ([] if exact else ['AS_FLOAT64 = {**AS_DECLARED, "float16": "float64", "bfloat16": "float64", '
                                    '"float32": "float64"}'])
        lines.append('AS_FLOAT32 = {**AS_DECLARED, "float16": "float32", "bfloat16": "float32"}')
    lines += [""] + render_module(program, "T").rstrip().splitlines() + [""]
    if exact:
        lines += ["# the exact answer: the same graph in float64 numpy (casts do not round)"]
        lines += exact.rstrip().splitlines() + [""]

    def make(inp: Any, expr: str) -> str:
        return f"(np.asarray({expr}, dtype=np.float64), {typed.values[inp.name].dtype!r})"

    body, names = _input_lines(case, set_index, make)
    kwargs = any(not isinstance(p, str) for p in ex.passes)
    apply = (["    for name, kw in [(p, {}) if isinstance(p, str) else p for p in passes]:",
              "        mod = getattr(R.transform, name)(**kw)(mod)"] if kwargs else
             ["    for name in passes:", "        mod = getattr(R.transform, name)()(mod)"])
    if bf16:
        lines += ["nd = lambda d: ml_dtypes.bfloat16 if d == 'bfloat16' else d  # noqa: E731 - numpy dtype of a name", ""]
    cast = "v.astype(nd(d)).astype(nd(T[d]))" if bf16 else "v.astype(d).astype(T[d])"
    lines += ["def make_inputs():  # (values, declared dtype) of each input", *body,
              f"    return [{', '.join(names)}]", "",
              "def run(T, passes):  # build with dtypes T, apply the passes, compile for the CPU, run",
              "    mod = build_module(T)", *apply,
              "    with tvm.transform.PassContext(opt_level=3):",
              '        vm = R.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())',
              f"    args = [tvm.runtime.tensor(np.array({cast}, order='C')) for v, d in make_inputs()]",
              "    return [o.numpy() for o in vm['main'](*args)]", ""]
    if oracle in ACCURACY:
        if exact:
            rounded = "v.astype(nd(d)).astype(np.float64)" if bf16 else "v.astype(d).astype(np.float64)"
            lines.append(f"expected = exact(*[{rounded} for v, d in make_inputs()])")
        else:
            lines += ["try:",
                      "    expected = run(AS_FLOAT64, EXACT_PASSES)  # the exact answer: the same module in float64",
                      "except Exception:  # an op without a float64 kernel: float32 then",
                      "    expected = run(AS_FLOAT32, EXACT_PASSES)"]
        lines.append("actual, control = run(AS_DECLARED, PASSES), run(AS_FLOAT32, PASSES)  # control: float32 internals")
        if ex.passes:
            lines.append("off = run(AS_DECLARED, [])  # without PASSES")
        lines += ["failed = False", "for i, name in enumerate(ALLOWED):",
                  "    e = expected[i].astype(np.float64)",
                  "    diff = np.abs(actual[i].astype(np.float64) - e)",
                  "    err, ref, k = diff.max(), np.abs(control[i].astype(np.float64) - e).max(), int(np.nanargmax(diff))",
                  "    print(f\"{name}[{k}]: expected {e.ravel()[k]:.6g}, got {actual[i].ravel()[k]:.6g}\")"]
        if ex.passes:
            lines += ["    print(f\"{name}: max error {err:.4g} with PASSES, {np.abs(off[i].astype(np.float64) - e).max():.4g} \"",
                      "          f\"without; {ref:.4g} with float32 internals; allowed {ALLOWED[name]:.4g}\")"]
        else:
            lines += ["    print(f\"{name}: max error {err:.4g}; {ref:.4g} with float32 internals; allowed {ALLOWED[name]:.4g}\")"]
        lines += ["    failed |= not err <= ALLOWED[name]  # nan fails too",
                  'print("BUG REPRODUCED" if failed else "OK")', "sys.exit(1 if failed else 0)"]
    elif oracle == "dtype-divergence":
        lines += ["got = [str(a.dtype) for a in run(AS_DECLARED, PASSES)]",
                  f"want = {ev.eager_dtypes!r}  # what PyTorch returns for this program",
                  "print('TVM returns', got, 'expected', want)", "sys.exit(1 if got != want else 0)"]
    else:
        lines += ["try:", "    actual = run(AS_DECLARED, PASSES)", "except Exception as exc:",
                  "    print('TVM raises', type(exc).__name__, (str(exc).strip().splitlines() or [''])[-1])",
                  "    sys.exit(1)", "print('TVM runs it')", "sys.exit(0)"]
    return "\n".join(lines) + "\n"
