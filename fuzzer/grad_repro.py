"""Short repro scripts of gradient findings: the backend's own autodiff against float64 autograd on the CPU.

The script makes the case's inputs, runs the program on the backend (PyTorch / torch_xla autograd under the
executor's policy, or TVM's DecomposeOpsForTraining + relax.transform.Gradient), takes the loss's gradient with
respect to the tensor the finding names, and compares it with the same program's gradient in float64 on the CPU
(PyTorch autograd: the stated independent reference, never the backend under test). PyTorch eager on the CPU runs
the same program as the control where the backend is not PyTorch itself. It exits 1 while the gradient has
non-finite values where the exact one is finite, or is off by more than ALLOWED (the oracle's bound restated as
one absolute number: what an ideal 16-bit backward loses, times the multiplier, plus the slack), 0 once fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oracles.bounds import allowed_ulps
from oracles.error_bounds import MARGIN
from oracles.localize import EAGER_PAR
from oracles.findings import Finding
from oracles.nodes import rounded_inputs
from oracles.vocabulary import ErrorClass

from .dtypes import FLOAT_FORMATS, is_float
from .executors.torch_render import TORCH_DTYPE, render_function
from .executors.tvm_exec import TVMExecutor
from .executors.tvm_render import render_module
from .gradients import program, reference
from .identifiers import value_identifiers
from .ir import Case, infer, input_values
from .script_parts import castable_function, input_lines, script_head


def render(case: Case, finding: Finding, ex: Any, title: str, set_index: int = 0) -> str:
    """The short script of a gradient finding (finding.details["grad"] names the tensor) on its minimized case."""
    graph = case.graph
    policy = ex.policy_graph(graph)
    numeric = ex.numeric_graph(graph)
    name = finding.details["grad"]
    k = list(graph.wrt).index(name)
    exacts, ideals, floors = reference(numeric, rounded_inputs(numeric, input_values(case, set_index)))
    dtype = numeric.input(name).dtype
    fmt = FLOAT_FORMATS[dtype]
    bound = (*allowed_ulps(exacts[k], [ideal[k] for ideal in ideals], dtype, floor=floors[k]), fmt.mantissa_bits,
             fmt.min_exponent, floors[k])
    tvm = isinstance(ex, TVMExecutor)
    ident = value_identifiers(graph)
    fn = render_function(graph)  # what the backend runs, under the executor's context
    control = render_function(policy, "program")  # what eager runs: the policy's casts written out
    want = render_function(program(policy, "float64", rounded=False), "exact")
    made, names = input_lines(case, set_index, lambda inp, expr: _make(inp, expr, policy))
    wrt = [names[j] for j, i in enumerate(graph.inputs) if i.grad]
    lines = ["import numpy as np", "import torch", "import torch.nn.functional as F"]
    if tvm:  # torch here is the float64 reference only
        lines += ["import ml_dtypes", "import tvm", "from tvm import relax as R"]
    elif ex.repro_sync():
        lines = _env_lines(ex.repro_env()) + lines + [
            "import torch_xla"]
    margin = MARGIN if finding.ratio is None or finding.ratio >= MARGIN else 1.0  # 1: it stood on two input sets
    lines += [f"ALLOWED = ({float(bound[0])!r}, {float(bound[1])!r}, {bound[2]}, {bound[3]}, {float(bound[4])!r})  # max "
              f"and RMS error in ULPs (at each value's magnitude, floored at the RMS and at the magnitude of the terms "
              f"the backward sums): 3x an ideal 16-bit backward's + 2; a bug at {margin:g}x",
              f"WRT = {wrt!r}  # the inputs whose gradients the loss (the first output) is taken with respect to"]
    same = control.replace("def program(", "def graph(", 1) == fn
    prog = "graph" if same else "program"  # what eager runs as the control
    base = fn if same else control
    castable = None if tvm else castable_function(policy, prog)
    if not tvm and want.replace("def exact(", f"def {prog}(", 1) == base:  # no casts: the program's text serves
        wanted = f"{prog}(*doubles)"
    elif castable is not None:  # one text for the program and the exact answer (its casts keep float64 there)
        base, wanted = castable, f"{prog}(*doubles, cast=lambda dtype: torch.float64)"
    else:
        lines += want.splitlines()
        wanted = "exact(*doubles)"
    if tvm:
        lines += render_module(policy, separate_outputs=True).splitlines()
    else:
        lines += base.splitlines() if same else fn.splitlines() + base.splitlines()
    lines += made
    lines += _tvm_run(policy, names, k) if tvm else _torch_run(ex, names, k, prog)
    lines += _exact_lines(names, k, wanted)  # after the backend's: a CPU backward first breaks torch_xla's autograd engine
    if not tvm:
        lines.append(f"control, _ = backward({prog}, 'cpu', contextlib.nullcontext())")
    lines += _verdict(ex.name, name, not tvm and ex.name != "torch/eager", ident, margin,
                      finding.details.get("expected_dtype") if finding.error_class == ErrorClass.GRAD_DTYPE else None)
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"


def _env_lines(env: dict[str, str]) -> list[str]:
    """The backend's environment defaults, on one line (a gradient script stays within 60 lines: triage26 bd86210ab6
    was 61 with one line per variable)."""
    if len(env) <= 1:
        return [f"os.environ.setdefault({k!r}, {v!r})" for k, v in env.items()]
    return [f"for _k, _v in {dict(env)!r}.items(): os.environ.setdefault(_k, _v)"]


def _make(inp: Any, expr: str, policy: Any) -> str:
    """One input as a CPU tensor in the policy's dtype (a Python number for a scalar)."""
    if inp.kind == "scalar":
        return f"{'float' if is_float(inp.dtype) else 'int'}(np.asarray({expr}).reshape(()))"
    dtype = policy.input(inp.name).dtype
    if dtype == "float16":  # numpy rounds float64 to float16 once; torch goes through float32 (twice)
        return f"torch.tensor(np.asarray({expr}, dtype=np.float16))"
    return f"torch.tensor({expr}).to({TORCH_DTYPE[dtype]})"


def _exact_lines(names: list[str], k: int, call: str) -> list[str]:
    """The exact gradient: the program in float64 on the CPU (`call`, on `doubles`), PyTorch autograd."""
    return ["doubles = [t.double().requires_grad_(n in WRT) if torch.is_tensor(t) and t.is_floating_point() else t "
            f"for t, n in zip(inputs, {names!r})]  # exact: float64 on the CPU",
            f"want = torch.autograd.grad({call}[0], [d for d, n in zip(doubles, "
            f"{names!r}) if n in WRT])[{k}].numpy()"]


def _where(ex: Any) -> tuple[str, str]:
    """(device, context) expressions of a PyTorch executor's script: torch_xla's device or the CPU, its autocast."""
    return ("torch_xla.device()" if ex.repro_sync() else repr("cpu")), (ex.repro_context() or "contextlib.nullcontext()")


def _torch_run(ex: Any, names: list[str], k: int, control: str) -> list[str]:
    """The backend's gradient under the executor's context (`backward`, which the control calls again on the CPU
    with `control`, the program with the policy's casts written out): PyTorch autograd on both."""
    device, ctx = _where(ex)
    out = ["import contextlib", "", "", "def backward(fn, device, context):",
           f"    args = [t.to(device).detach().requires_grad_(n in WRT) if torch.is_tensor(t) else t for t, n in "
           f"zip(inputs, {names!r})]",
           "    with context:",
           "        loss = fn(*args)[0]",
           f"    got = torch.autograd.grad(loss, [a for a, n in zip(args, {names!r}) if n in WRT])[{k}]"]
    if ex.repro_sync():
        out.append(f"    {ex.repro_sync()}")
    return out + ["    return got.detach().to('cpu').double().numpy(), str(got.dtype).replace('torch.', '')", "", "",
                  f"got, dtype = backward(graph, {device}, {ctx})"]


def _tvm_run(policy: Any, names: list[str], k: int) -> list[str]:
    """TVM's training flow: DecomposeOpsForTraining, Gradient of main's loss, build, run main_adjoint."""
    typed = infer(policy)
    dtypes = [typed.values[i.name].dtype for i in policy.inputs]
    return ["mod = R.transform.DecomposeOpsForTraining()(build_module())",
            "params = [p for p in mod['main'].params if p.name in WRT]",
            "mod = R.transform.Gradient('main', require_grads=params, target_index=0)(mod)",
            "with tvm.transform.PassContext(opt_level=3):",
            "    vm = R.VirtualMachine(tvm.compile(mod, target='llvm'), tvm.cpu())",
            f"DTYPES = {dtypes!r}",
            "args = [tvm.runtime.tensor(np.array(np.asarray(t.double()).astype(getattr(ml_dtypes, d, d)), order='C'), "
            "tvm.cpu()) for t, d in zip(inputs, DTYPES)]",
            "_, grads = vm['main_adjoint'](*args)",
            f"got, dtype = grads[{k}].numpy().astype(np.float64), str(grads[{k}].dtype)"]


def _verdict(executor: str, name: str, control: bool, ident: dict[str, str], margin: float,
             expected_dtype: str | None = None) -> list[str]:
    """Print the errors; exit 1 while the gradient is non-finite where the exact one is not, or its error in ULPs is
    `margin` times the bound (the oracle's ratio restated: worst with worst, RMS with RMS); for a dtype finding,
    while the gradient's dtype is not `expected_dtype`, PyTorch's (triage22 b94a8c15e3: its script judged only the
    error and exited 0)."""
    out = ["finite = np.isfinite(want)",
           "scale = np.maximum(np.maximum(np.abs(want), np.sqrt(np.mean(want[finite] ** 2)) if finite.any() else 0.0), "
           "ALLOWED[4])",
           "def judged(g):  # (ratio to the allowed error, non-finite where exact is finite)",
           "    ok = finite & np.isfinite(g)",
           "    ulps = (np.abs(g - want) / np.exp2(np.maximum(np.floor(np.log2(np.where(scale > 0, scale, 1e-300))), "
           "ALLOWED[3]) - ALLOWED[2]))[ok]",
           "    return (max(ulps.max() / ALLOWED[0], np.sqrt(np.mean(ulps ** 2)) / ALLOWED[1]) if ulps.size else 0.0,",
           "            int(np.count_nonzero(finite & ~np.isfinite(g))))",
           "ratio, bad_nonfinite = judged(got)",
           f"print(f'gradient of {ident.get(name, name)} ({{dtype}}) on {executor}: max error "
           "{np.max(np.abs(got - want)[finite & np.isfinite(got)], initial=0.0):.4g} ({ratio:.3g}x the allowed error), "
           "non-finite where exact is finite: {bad_nonfinite}')"]
    if control:  # a backend as far off as PyTorch eager on the same program is not at fault (triage25 bd18a077ac)
        out += ["eager_ratio, eager_nonfinite = judged(control)",
                "print(f'PyTorch eager on the CPU, same program: max error "
                "{float(np.max(np.abs(control - want)[finite & np.isfinite(control)], initial=0.0)):.4g} "
                "({eager_ratio:.3g}x), non-finite: {eager_nonfinite}')"]
    if expected_dtype is not None:
        out += [f"print(f'gradient of {ident.get(name, name)} has dtype {{dtype}} on {executor}; PyTorch eager gives "
                f"{expected_dtype}')", f"bug = dtype != {expected_dtype!r}"]
    elif control:
        out.append(f"bug = (bad_nonfinite > 0 and not eager_nonfinite) or (ratio >= {margin!r} and ratio > "
                   f"{EAGER_PAR!r} * eager_ratio)")
    else:
        out.append(f"bug = bad_nonfinite > 0 or ratio >= {margin!r}")
    out += ["print('BUG REPRODUCED' if bug else 'not reproduced (fixed?)')",
            "sys.exit(1 if bug else 0)"]
    return out


def render_status(case: Case, finding: Finding, ex: Any, title: str, set_index: int = 0) -> str:
    """The short script of TVM's training flow raising (or refusing) on a training case where PyTorch autograd
    computes the gradients: the case's module, DecomposeOpsForTraining, Gradient, build and run; exit 1 while
    it raises (triage19: the forward script written for these never ran Gradient and exited 0)."""
    graph = case.graph
    policy = ex.policy_graph(graph)
    made, names = input_lines(case, set_index, lambda inp, expr: _make(inp, expr, policy))
    wrt = [names[j] for j, i in enumerate(graph.inputs) if i.grad]
    lines = ["import numpy as np", "import torch", "import torch.nn.functional as F", "import ml_dtypes", "import tvm",
             "from tvm import relax as R",
             f"WRT = {wrt!r}  # the inputs whose gradients the loss (the first output) is taken with respect to"]
    lines += render_function(policy).splitlines() + render_module(policy, separate_outputs=True).splitlines() + made
    lines += ["args = [t.detach().requires_grad_(n in WRT) if torch.is_tensor(t) else t for t, n in "
              f"zip(inputs, {names!r})]",
              "grads = torch.autograd.grad(graph(*args)[0], [a for a, n in zip(args, "
              f"{names!r}) if n in WRT])",
              "print('PyTorch autograd on the CPU:', [str(g.dtype).replace('torch.', '') for g in grads])",
              "try:"]
    lines += ["    " + line for line in _tvm_run(policy, names, 0)]
    lines += ["except Exception as exc:  # noqa: BLE001 - the raise is the finding",
              "    print(f'TVM training flow raises {type(exc).__name__}: {(str(exc).strip().splitlines() or [repr(exc)])[-1][:300]}')",
              "    print('BUG REPRODUCED')",
              "    sys.exit(1)",
              "print('TVM computes the gradients too: not reproduced (fixed?)')",
              "sys.exit(0)"]
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"


def render_underflow(case: Case, finding: Finding, ex: Any, title: str, set_index: int = 0) -> str:
    """The script of a gradient training hazard on a PyTorch executor (oracles.training_hazards): the backend's
    gradient of the tensor against float64's, without and with the loss scale the finding names (GradScaler's
    scale-then-unscale, on the backend itself); exit 1 while the gradient loses at least GRAD_LOSS of its RMS (hz24:
    the forward-only script these findings had printed the outputs' dtypes and exited 0)."""
    from oracles.training_hazards import GRAD_LOSS, scaled_loss

    graph = case.graph
    policy = ex.policy_graph(graph)
    numeric = ex.numeric_graph(graph)
    name = str(finding.details["gradient"])
    k = list(graph.wrt).index(name)
    _, _, floors = reference(numeric, rounded_inputs(numeric, input_values(case, set_index)))
    scale = float(finding.details.get("scale") or 0.0)
    ident = value_identifiers(graph)
    made, names = input_lines(case, set_index, lambda inp, expr: _make(inp, expr, policy))
    wrt = [names[j] for j, i in enumerate(graph.inputs) if i.grad]
    lines = ["import numpy as np", "import torch", "import torch.nn.functional as F"]
    if ex.repro_sync():
        lines = _env_lines(ex.repro_env()) + lines + [
            "import torch_xla"]
    lines += [f"WRT = {wrt!r}  # the inputs whose gradients the loss (the first output) is taken with respect to",
              f"FLOOR = {float(floors[k]) * 2.0**-24!r}  # below this the exact gradient is zero by cancellation "
              "(an ULP of float32 at the magnitude of the terms it sums)"]
    fn = render_function(graph)
    want = render_function(program(policy, "float64", rounded=False), "exact")
    same = want.replace("def exact(", "def graph(", 1) == fn  # no dtype written in the program: it serves as exact
    lines += fn.splitlines() + ([] if same else want.splitlines())
    if scale:
        lines += render_function(scaled_loss(graph, scale), "scaled").splitlines()
    lines += made
    lines += _torch_run(ex, names, k, "graph")
    if scale:
        device, ctx = _where(ex)
        lines.append(f"with_scale = backward(scaled, {device}, {ctx})[0] / {scale!r}  # GradScaler: scale, backward, "
                     "unscale in float32")
    lines += _exact_lines(names, k, "graph(*doubles)" if same else "exact(*doubles)")
    lines += ["want = np.where(np.abs(want) <= FLOOR, 0.0, want)",
              "def lost(g):  # relative RMS of the exact gradient lost in g",
              "    keep = np.isfinite(want) & np.isfinite(g)",
              "    return float(np.sqrt(np.mean((np.where(want[keep] == 0, 0.0, g[keep]) - want[keep]) ** 2)) / "
              "max(np.sqrt(np.mean(want[keep] ** 2)), 1e-300))",
              f"print(f'gradient of {ident.get(name, name)} ({{dtype}}) on {ex.name}: {{lost(got):.0%}} of it lost, "
              f"{{np.mean(got[want != 0] == 0):.0%}} of its non-zero elements returned as 0')"]
    if scale:
        lines.append(f"print(f'with the loss scaled by {scale:g} and the gradient unscaled: {{lost(with_scale):.0%}} "
                     "lost')")
    lines += [f"print('fix:', {str(finding.details.get('fix', ''))!r})",
              f"bug = lost(got) >= {GRAD_LOSS!r}",
              "print('HAZARD REPRODUCED' if bug else 'not reproduced')",
              "sys.exit(1 if bug else 0)"]
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"
