"""Short repro scripts: the minimized graph as plain backend code, inputs made in the script, the numbers printed.

What an upstream report carries (the seeds in shared/seeds are examples): 10-40 lines of backend code, a
comparison with the exact float64 answer (the same PyTorch program in float64 on the CPU, its casts keeping
float64; for TVM the graph in float64 numpy, or precfuzz's reference interpreter pasted, never TVM's own run)
next to a control, and exit status 1 while the bug is there, 0 once fixed. The script imports numpy and the
backend only, holds one line per node of each program it runs, and no helper that is not called: a 1-node case
is about 25-40 lines, a 5-node one stays under 60. Every uncontrolled text (names, messages, paths) enters it
through repr(), value_identifiers(), or as a comment (from the third line on) with its special characters
escaped. The full-oracle script (fuzzer.export: pasted reference, four ideal implementations and the bound)
stays beside it as repro_full.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from oracles.bounds import allowed_ulps, slack_ulps
from oracles.bugs import GRADIENT_HAZARDS
from oracles.error_bounds import MARGIN, rounding_chain
from oracles.findings import Finding
from oracles.precision_hazards import PRECISION_LOSS
from oracles.training_hazards import UPDATE_LOSS
from oracles.vocabulary import ErrorClass, Oracle

from .dtypes import FLOAT_FORMATS, FP8, LOW_PRECISION, is_float
from .executors.base import Executor
from .executors.torch_render import TORCH_DTYPE, render_function
from .executors.tvm_exec import NO_TORCH, TVMExecutor, TVMTrainExecutor, render_passes
from .executors.tvm_render import render_module
from .export import comment
from .identifiers import literal, value_identifiers
from .interpret import evaluate, ideal_values, reference_functions, render_reference
from .ir import Case, Graph, infer, input_values, op_attrs, redeclare
from .ops import OPS, is_cast
from .ops.base import NumpyCall
from .script_parts import castable_function, input_lines, script_head

ACCURACY = (Oracle.ERROR_BOUND, Oracle.EFFECTIVE_PRECISION)
RAISES = (Oracle.STATUS_DIVERGENCE, Oracle.COVERAGE, Oracle.CRASH, Oracle.TIMEOUT)


@dataclass(frozen=True)
class Evidence:
    """What precfuzz measured on the minimized case that the script restates."""

    # output -> (allowed max error, allowed RMS error, both in ULPs at each element's magnitude floored at the RMS;
    # mantissa bits, min exponent of the output dtype): the oracle's bound_ratio denominators on these inputs
    allowed: dict[str, tuple[float, float, int, int]] = field(default_factory=dict)
    eager_dtypes: list[str] | None = None  # what PyTorch eager returns (dtype findings); None where it raises
    # output -> the float dtypes of the casts it is made by from an input alone (oracles.error_bounds.rounding_chain):
    # held to correct rounding, so a script that rounds its exact answer so may ask for that value itself
    rounded: dict[str, list[str]] = field(default_factory=dict)
    promoted: list[str] | None = None  # the promoted dtypes a correct promotion returns (downcast findings)


def evidence(case: Case, finding: Finding, executor: Executor, set_index: int) -> Evidence:
    """The numbers the script needs: the bound on these inputs for accuracy findings, dtypes for dtype findings."""
    graph = case.graph
    if finding.oracle in ACCURACY:
        numeric = executor.numeric_graph(graph)
        values = input_values(case, set_index)
        from oracles.nodes import rounded_inputs

        inputs = rounded_inputs(numeric, values)
        exact, ideal = evaluate(numeric, inputs, rounded=False), ideal_values(numeric, inputs)
        typed = infer(numeric)
        budget = max(executor.approximations().values(), default=0.0)  # as judge_outputs widens the slack
        allowed = {}
        fp8 = _has_fp8(numeric)
        for o in graph.outputs:
            if fp8:  # the script judges every finite answer: an ideal past an fp8 tie (NaN) counts as the exact one
                ideal[o] = [np.where(np.isfinite(i) | ~np.isfinite(ideal[o][0]), i, ideal[o][0]) for i in ideal[o]]
            dtype = typed.values[o].dtype
            fmt = FLOAT_FORMATS[dtype if dtype in FLOAT_FORMATS else "float32"]
            allowed[o] = (*allowed_ulps(exact[o], ideal[o], dtype, slack_ulps=slack_ulps(dtype, budget)),
                          fmt.mantissa_bits, fmt.min_exponent)
        return Evidence(allowed, rounded=cast_chains(numeric, graph.outputs))
    if finding.oracle == Oracle.DTYPE_DIVERGENCE:
        want = finding.details.get("mismatches")
        typed = infer(executor.policy_graph(graph))
        dtypes = [executor.reported_dtypes().get(typed.values[o].dtype, typed.values[o].dtype) for o in graph.outputs]
        if want:
            table = {m[0]: m[1] for m in want}
            dtypes = [table.get(o, d) for o, d in zip(graph.outputs, dtypes)]
        return Evidence(eager_dtypes=dtypes)
    if finding.oracle == Oracle.SILENT_DOWNCAST:
        typed = infer(executor.numeric_graph(graph))
        return Evidence(promoted=[typed.values[o].dtype for o in graph.outputs])
    return Evidence()


CAST_ALLOWED = 1e-300  # a cast's allowed error against its correctly rounded value: none (0 / this is 0, else huge)
# what the script prints as its verdict: the ratio to the bound, or for a cast, how many values are not correctly rounded
# (triage33 beacf72a2b printed "7.45e+291x the allowed error", a ratio to CAST_ALLOWED)
VERDICT = (f'verdict = f"{{ratio:.3g}}x the allowed error" if @bound[0] > {CAST_ALLOWED!r} else '
           'f"{int((diff > 0).sum())} of {len(diff)} value(s) not the correctly rounded cast"')
NUMPY_CAST = {"float16": "np.float16", "float32": "np.float32", "bfloat16": "ml_dtypes.bfloat16",
              "float8_e4m3fn": "np.float32).astype(ml_dtypes.float8_e4m3fn",  # through float32, as PyTorch casts
              "float8_e5m2": "np.float32).astype(ml_dtypes.float8_e5m2"}


def cast_chains(numeric: Graph, outputs: tuple[str, ...]) -> dict[str, list[str]]:
    """Output -> the dtypes of the float casts it is made by from an input alone (outputs the oracle holds to
    correct rounding, oracles.error_bounds.single_rounding; one with a cast to an int on the way is left out)."""
    typed, out = infer(numeric), {}
    for o in outputs:
        found = rounding_chain(numeric, o)
        dtypes = [typed.values[n.id].dtype for n in found[1]] if found else []
        if dtypes and all(d in NUMPY_CAST or d == "float64" for d in dtypes):
            out[o] = dtypes
    return out


def rounded_expr(value: str, dtypes: list[str], via32: bool = False) -> str:
    """`value` (float64 numpy) through each cast, one rounding each, back in float64; `via32`: a 16-bit cast rounds
    through float32 first, as PyTorch's does (fuzzer.dtypes.cast_results)."""
    casts = [("np.float32).astype(" if via32 and d in LOW_PRECISION else "") + NUMPY_CAST[d]
             for d in dtypes if d in NUMPY_CAST]
    return value + "".join(f".astype({c})" for c in casts) + ".astype(np.float64)"


def casts_exact(ev: Evidence) -> Evidence:
    """The evidence with outputs made by casts of an input alone allowed nothing but their correctly rounded value (the
    script rounds its exact answer through the casts: rounded_expr), as the oracle holds them."""
    return replace(ev, allowed={o: (CAST_ALLOWED, CAST_ALLOWED, *v[2:]) if o in ev.rounded else v
                                for o, v in ev.allowed.items()})


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


def render_interpreted(graph: Graph, name: str = "exact") -> str:
    """`def exact(<inputs>):` the graph in float64 by precfuzz's own reference interpreter (fuzzer.interpret), pasted,
    for a graph with an op that has no one-line numpy form (conv, pooling, attention): the expected value of a short
    script never comes from the backend under test (triage12 b8948f55ce: TVM's own float64 module gave the same NaN)."""
    ident = value_identifiers(graph)
    text = reference_functions(graph) + "\n" + render_reference(graph, "reference")
    head = (["from typing import Any"] * bool(re.search(r"\bAny\b", text))
            + ["from numpy.lib.stride_tricks import sliding_window_view"] * ("sliding_window_view" in text)
            + ["from contextvars import ContextVar",
               "VARIANCE_FORM = ContextVar('variance_form', default='two-pass')"] * ("VARIANCE_FORM" in text))
    body = text.replace("rnd = round_to if rounded else (lambda v, dtype: v)",
                        "rnd = lambda v, dtype: v  # exact: no rounding")
    rounds = "round_to(" in body  # Python numbers PyTorch converts to the compute dtype first (comparisons)
    head += ["def round_to(values, dtype):  # one rounding to `dtype`, as PyTorch converts a Python number",
             "    return np.asarray(values, dtype=np.float64).astype(getattr(ml_dtypes, dtype, dtype))"
             ".astype(np.float64)"
             ] * rounds
    call = ", ".join(f"{i.name!r}: {ident[i.name]}" for i in graph.inputs)
    wrapper = [f"def {name}({', '.join(ident[i.name] for i in graph.inputs)}):  # the graph in float64: precfuzz's "
               "reference interpreter",
               f"    values = reference({{{call}}}, False, {'round_to' if rounds else 'None'})",
               f"    return [{', '.join(f'values[{o!r}]' for o in graph.outputs)}]"]
    return "\n".join(head + [body.rstrip()] + wrapper) + "\n"


def training_only(case: Case, finding: Finding, executor: Executor) -> bool:
    """True where only the short script shows the finding: a gradient's (the full oracle judges outputs), and a
    training flow raising on a training case (the full oracle compiles the forward alone and exits 0: triage25
    sample #10, #18, #19, #24, tvm/train's Gradient raising)."""
    return finding.details.get("grad") is not None or (
        bool(case.graph.wrt) and isinstance(executor, TVMTrainExecutor)
        and finding.oracle in (Oracle.STATUS_DIVERGENCE, Oracle.COVERAGE))


def render(case: Case, finding: Finding, executor: Executor, title: str, set_index: int = 0,
           ev: Evidence | None = None) -> str:
    """The short script for a finding on its (minimized) case."""
    if executor.name == "tvm/frontend":
        executor = FrontendScript(executor)
    elif not isinstance(executor, TVMExecutor) and not hasattr(executor, "repro_env"):  # debug/faults: full only
        raise NotImplementedError(f"{executor.name} has no short script")
    if finding.details.get("grad") is not None:  # a gradient finding: the backend's autodiff against float64's
        from .grad_repro import render as render_gradient

        return render_gradient(case, finding, executor, title, set_index)
    if isinstance(executor, TVMTrainExecutor) and case.graph.wrt and finding.oracle in (Oracle.STATUS_DIVERGENCE, Oracle.COVERAGE):
        from .grad_repro import render_status  # TVM's training flow raising: the script runs Gradient too

        return render_status(case, finding, executor, title, set_index)
    if (finding.oracle == Oracle.MODEL_HAZARD and finding.error_class in GRADIENT_HAZARDS
            and not isinstance(executor, TVMExecutor)):
        from .grad_repro import render_underflow  # the gradient without and with the loss scale (hz24)

        return render_underflow(case, finding, executor, title, set_index)
    if finding.oracle == Oracle.MODEL_HAZARD and finding.error_class == ErrorClass.PRECISION:
        return _precision_script(case, finding, executor, title, set_index)
    if finding.oracle == Oracle.MODEL_HAZARD and finding.error_class in (ErrorClass.UPDATE_LOST, ErrorClass.UPDATE_NONFINITE):
        return _update_script(case, finding, executor, title, set_index)
    ev = ev if ev is not None else evidence(case, finding, executor, set_index)
    if isinstance(executor, TVMExecutor):
        return _tvm_script(case, finding, executor, title, set_index, ev)
    return _torch_script(case, finding, executor, title, set_index, ev)


class FrontendScript:
    """tvm/frontend as the torch script writer sees it: the graph as an nn.Module, torch.export, from_exported_program,
    tvm.compile, run; eager on the CPU is the control (the short repro of issue 26)."""

    group, policy = "tvm", "declared"

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.name = executor.name

    def __getattr__(self, name: str) -> Any:  # the rest is the executor's own (describe, reported_dtypes, ...)
        return getattr(self.executor, name)

    def policy_graph(self, graph: Graph) -> Graph:
        return graph

    numeric_graph = policy_graph

    def input_dtype(self, inp: Any) -> str:
        return inp.dtype

    def repro_env(self) -> dict[str, str]:
        return {}

    def repro_context(self) -> str:
        return ""

    def repro_sync(self) -> str:
        return ""

    def repro_setup(self) -> str:
        return ""

    def repro_extra(self) -> tuple[list[str], list[str]]:
        """(import lines, the module class) the script adds."""
        return (["import ml_dtypes", "import tvm", "from tvm import relax as R",
                 "from tvm.relax.frontend.torch import from_exported_program"],
                ["class Program(torch.nn.Module):", "    def forward(self, *args):", "        return graph(*args)"])

    def repro_run(self) -> list[str]:
        """torch.export, from_exported_program, tvm.compile and the run: `actual` as torch tensors."""
        return ["exported = torch.export.export(Program(), tuple(inputs))",
                "with tvm.transform.PassContext(opt_level=3):",
                "    vm = R.VirtualMachine(tvm.compile(from_exported_program(exported), target='llvm'), tvm.cpu())",
                "host = [t.float().numpy().astype(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else t.numpy() "
                "for t in inputs]",
                "outs = vm['main'](*[tvm.runtime.tensor(np.array(h, order='C')) for h in host])",
                "outs = [outs] if hasattr(outs, 'numpy') else list(outs)",
                "actual = [torch.from_numpy(o.numpy().astype(np.float64)).to(getattr(torch, str(o.dtype))) for o in outs]"]


def _allowed(ev: Evidence) -> str:
    """ALLOWED: the bound (one output) or output -> bound: (max, RMS) error in ULPs, the dtype's mantissa bits and
    min exponent. Values are written with repr() so the script's verdict is the oracle's to the last bit."""
    comment_ = (f"  # max and RMS error in ULPs (at each value's magnitude, floored at the RMS): 3x an fp32-accumulating "
                f"implementation's on these inputs + 2; a bug at {MARGIN:g}x"
                + (f"; {CAST_ALLOWED!r} for a cast: nothing but the correctly rounded value"
                   if any(v[0] == CAST_ALLOWED for v in ev.allowed.values()) else ""))
    text = lambda v: f"({float(v[0])!r}, {float(v[1])!r}, {int(v[2])}, {int(v[3])})"  # noqa: E731
    if len(ev.allowed) == 1:
        return f"ALLOWED = {text(next(iter(ev.allowed.values())))}" + comment_
    return f"ALLOWED = {{{', '.join(f'{o!r}: {text(v)}' for o, v in ev.allowed.items())}}}" + comment_


def _compare(single: bool, results: list[str], lines: list[str], ok: str) -> list[str]:
    """The verdict. `lines` judge one output and `ok` says it is within its bound: `@name` is a result in `results`
    (expected, actual, ...), `@bound` its ALLOWED, `@where` the prefix of the printed index. With one output they
    run once on the results; else in a loop over the outputs, with the results' initials."""
    def fill(line: str, names: dict[str, str], bound: str, where: str) -> str:
        for key, value in names.items():
            line = line.replace(f"@{key}", value)
        return line.replace("@bound", bound).replace("@where", where)

    if single:
        names = {r: r for r in results}
        check = fill(ok, names, "ALLOWED", "")
        return [fill(line, names, "ALLOWED", "") for line in lines] + [
            f'print("OK" if {check} else "BUG REPRODUCED")  # nan fails too',
            f"sys.exit(0 if {check} else 1)"]
    short = {r: r[0] for r in results}
    return (["failed = False", f"for name, {', '.join(short.values())} in zip(ALLOWED, {', '.join(results)}):"]
            + [f"    {fill(line, short, 'ALLOWED[name]', '{name}')}" for line in lines]
            + [f"    failed |= not {fill(ok, short, 'ALLOWED[name]', '')}  # nan fails too",
               'print("BUG REPRODUCED" if failed else "OK")', "sys.exit(1 if failed else 0)"])


# ---------------------------------------------------------------- PyTorch, PyTorch/XLA, Neuron


def _torch_script(case: Case, finding: Finding, ex: Any, title: str, set_index: int, ev: Evidence) -> str:
    graph = case.graph
    policy = ex.policy_graph(graph)
    oracle = finding.oracle
    hazard = oracle == Oracle.MODEL_HAZARD
    on_device = not hazard and bool(ex.repro_sync())
    fn = render_function(graph)
    program = render_function(policy, "program")
    distinct = program.replace("def program(", "def graph(", 1) != fn
    prog = "program" if distinct else "graph"
    defs = [fn] + ([program] if distinct else [])
    exact = f"{prog}(*doubles)"
    numeric = ex.numeric_graph(graph)
    fp8_numpy = render_numpy(numeric) if oracle in ACCURACY and _has_fp8(numeric) else None
    if fp8_numpy is not None:  # torch runs no fp8 program in float64 (_scaled_mm; a cast past the range is NaN)
        defs.append(fp8_numpy)
        exact = ("[torch.from_numpy(np.asarray(e, dtype=np.float64)) for e in exact(*[t.double().numpy() if "
                 "torch.is_tensor(t) else t for t in inputs])]")
    elif oracle in ACCURACY:
        want = render_function(exact_graph(numeric), "exact").replace("def exact(", f"def {prog}(", 1)
        if want != defs[-1]:
            base = policy if distinct else graph
            castable = castable_function(base, prog) if render_function(exact_graph(base), prog) == want else None
            if castable:  # one text for the program and the exact answer
                defs[-1] = castable
                exact = f"{prog}(*doubles, cast=lambda dtype: torch.float64)"
            else:
                defs.append(want.replace(f"def {prog}(", "def exact(", 1))
                exact = "exact(*doubles)"
    if distinct:  # the program eager runs: the graph with its policy's casts written out
        head, _, note = defs[1].partition("\n")[0].partition("  # ")
        defs[1] = f"{head}  # the casts {comment(ex.name)} makes, written out: what eager runs" + \
            (f"; {note}" if note else "") + defs[1][defs[1].index("\n"):]
    dtype_of = (lambda inp: policy.input(inp.name).dtype) if hazard else ex.input_dtype

    def make(inp: Any, expr: str) -> str:
        if inp.kind == "scalar":
            return f"{'float' if is_float(inp.dtype) else 'int'}(np.asarray({expr}).reshape(()))"
        if dtype_of(inp) == "float16":  # numpy rounds float64 to float16 once; torch goes through float32 (twice)
            return f"torch.tensor(np.asarray({expr}, dtype=np.float16))"
        return f"torch.tensor({expr}).to({TORCH_DTYPE[dtype_of(inp)]})"

    made, _ = input_lines(case, set_index, make)
    code = "".join(defs)
    if "device=device" in code and "    device = " not in code:  # constants alone: made on the CPU (or the device)
        made = ['device = "cpu"'] + made
    env = ex.repro_env() if not hazard else {}
    extra = getattr(ex, "repro_extra", None)  # tvm/frontend: its imports, and the module it exports
    lines = (([f"os.environ.setdefault({k!r}, {v!r})" for k, v in env.items()]) + ["import numpy as np", "import torch"]
             + ["import torch.nn.functional as F"] * ("F." in code) + ["import torch_xla"] * on_device
             + (extra()[0] if extra else [])
             + ["import ml_dtypes"] * any("ml_dtypes" in rounded_expr("", c) for c in ev.rounded.values())
             + ([_allowed(casts_exact(ev))] if oracle in ACCURACY else [])
             + code.splitlines() + (extra()[1] if extra else []) + made)
    if hazard:
        lines += _hazard_tail(finding, prog)
    else:
        lines += _torch_tail(finding, ex, prog, exact, on_device, ev, bool(infer(policy).chain_breaks()),
                             len(graph.outputs) == 1, fp8_numpy is not None)
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"


def _has_fp8(graph: Graph) -> bool:
    """True when a value of the graph is fp8."""
    return any(v.dtype in FP8 for v in infer(graph).values.values())


def _torch_tail(finding: Finding, ex: Any, prog: str, exact: str, on_device: bool, ev: Evidence,
                eager_raises: bool, single: bool, nonfinite_agree: bool = False) -> list[str]:
    """The run and the verdict; `nonfinite_agree`: NaN/inf are answers (fp8 casts), equal where both have them."""
    ctx = ", ".join(["torch.no_grad()"] + ([ex.repro_context()] if ex.repro_context() else []))
    run = [f"with {ctx}:",
           "    actual = graph(*[t.to(device) if torch.is_tensor(t) else t for t in inputs])" if on_device else
           "    actual = graph(*inputs)"] + ([f"    {ex.repro_sync()}"] if ex.repro_sync() else [])
    if hasattr(ex, "repro_run"):  # tvm/frontend: export, import, build and run in TVM
        run = ex.repro_run()
    device = [ex.repro_setup().strip()] if on_device else []
    name = ex.name
    oracle = finding.oracle
    if oracle in ACCURACY:
        cpu = ex.group != "torch" and not eager_raises  # else the CPU is what is judged, or it refuses the program
        control = "PyTorch eager on the CPU" if cpu else "float32 on the CPU"
        one = "[0]" if single else ""
        if hasattr(ex, "repro_run"):
            run = run + ([f"actual = actual{one}"] if one else [])
        else:
            run[1] = run[1] + one
        doubles = "[t.double() if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs]"
        if finding.error_class == "shape":  # the values may not even broadcast: the shapes are the verdict
            return ([f"expected = {prog}(*inputs){one}  # PyTorch eager on the CPU, same program and dtypes"] + device
                    + run + _compare(single, ["expected", "actual"], [
                        "shapes = tuple(@actual.shape), tuple(@expected.shape)",
                        f"print(f\"{'' if single else '@where: '}{name} returns shape {{shapes[0]}}, PyTorch eager on "
                        f"the CPU {{shapes[1]}}\")"],
                        "shapes[0] == shapes[1]"))
        wanted = (f"{exact.replace('doubles', doubles)}{one}.double()" if single else  # int and bool outputs too
                  f"[e.double() for e in {exact.replace('doubles', doubles)}]")
        rounding = [f"{e} = torch.from_numpy({rounded_expr(f'{e}.numpy()', ev.rounded[o], via32=True)})  # casts, "
                    "each rounded as PyTorch casts" for k, o in enumerate(ev.allowed) if o in ev.rounded
                    for e in ["expected" if single else f"expected[{k}]"]]
        return ([f"expected = {wanted}  # exact: float64 on the CPU (int arithmetic wraps as the backend's)", *rounding,
                 f"control = {prog}(*inputs){one}  # {control}, same program and dtypes" if cpu else
                 f"control = {prog}(*[t.float() if torch.is_tensor(t) and t.is_floating_point() "
                 + ("and t.element_size() > 1 " if nonfinite_agree else "")  # fp8 stays fp8 (scaled_mm takes no other)
                 + "else t for t in inputs]"
                 + (", cast=lambda dtype: torch.float32" if "cast=lambda" in exact and not nonfinite_agree else "")
                 + f"){one}  # {control}"]
                + device + run + _compare(single, ["expected", "control", "actual"], ([
                    "same = (@actual.cpu().double() == @expected) | (@actual.cpu().double().isnan() & @expected.isnan())"
                    "  # NaN and inf agree",
                    "diff = torch.where(same, 0.0, (@actual.cpu().double() - @expected).abs()).flatten()",
                    "scale = @expected.abs().flatten().nan_to_num(0.0, 0.0, 0.0).clamp(min=@expected[@expected.isfinite()]"
                    ".pow(2).mean().sqrt().nan_to_num(0.0).item())",
                    "ulps = torch.where(same.flatten(), 0.0, (diff / torch.exp2(scale.log2().floor().clamp(min=@bound[3]) "
                    "- @bound[2])).nan_to_num(float('inf')))  # in ULPs"] if nonfinite_agree else [
                    "diff = (@actual.cpu().double() - @expected).abs().flatten()",
                    "scale = @expected.abs().flatten().clamp(min=@expected.pow(2).mean().sqrt().item())",
                    "ulps = (diff / torch.exp2(scale.log2().floor().clamp(min=@bound[3]) - @bound[2]))"
                    ".nan_to_num(float('inf'))  # in ULPs"]) + [
                    "ratio = max(ulps.max().item() / @bound[0], ulps.pow(2).mean().sqrt().item() / @bound[1])",
                    "k, ref = int(ulps.argmax()), (@control.to(@actual.dtype).double() - @expected).abs()"
                    + (".nan_to_num(0.0, 0.0, 0.0)" if nonfinite_agree else "") + ".max().item()",
                    VERDICT,
                    f"print(f\"@where[{{k}}]: expected {{@expected.flatten()[k].item():.6g}}, got "
                    f"{{@actual.cpu().flatten()[k].item():.6g}}; max error {{diff.max().item():.4g}} "
                    f"({{ulps.max().item():.3g}} ULP, {name}, {{@actual.dtype}}), \"",
                    f"      f\"{{ref:.4g}} ({control}); {{verdict}}\")"], f"ratio < {MARGIN!r}"))
    if oracle in (Oracle.DTYPE_DIVERGENCE, Oracle.SILENT_DOWNCAST):
        want = ev.eager_dtypes if oracle == Oracle.DTYPE_DIVERGENCE else ev.promoted
        first = ([f"print('PyTorch eager on the CPU returns', [str(o.dtype) for o in {prog}(*inputs)])"]
                 if oracle == Oracle.DTYPE_DIVERGENCE else
                 ["try:", f"    {prog}(*inputs)", "except RuntimeError as exc:",
                  "    print('PyTorch eager on the CPU raises:', str(exc).splitlines()[0])"])
        return (device + first + run +
                ["got = [str(o.dtype).replace('torch.', '') for o in actual]",
                 f"want = {want!r}  # "
                 + ("what PyTorch returns" if oracle == Oracle.DTYPE_DIVERGENCE else "a correct promotion"),
                 f"print('{name} returns', got, 'expected', want)", "sys.exit(1 if got != want else 0)"])
    # the backend raises (or crashes) where PyTorch eager runs
    check = [] if oracle == Oracle.COVERAGE else [
        f"print('PyTorch eager on the CPU runs it:', [str(o.dtype) for o in {prog}(*inputs)])"]
    return (device + check + ["try:", *[f"    {line}" for line in run], "except Exception as exc:",
                              f"    print('{name} raises', type(exc).__name__, (str(exc).splitlines() or [''])[0])",
                              "    sys.exit(1)",
                              f"print('{name} runs it:', [str(o.dtype) for o in actual])"])


def _hazard_tail(finding: Finding, prog: str) -> list[str]:
    fix = finding.details.get("fix") or "cast the activation to the parameters' dtype"
    return ["try:", f"    outs = {prog}(*inputs)", "except RuntimeError as exc:",
            f"    print('PyTorch raises:', str(exc).splitlines()[0], '- fix:', {fix!r})", "    sys.exit(1)",
            "print('runs:', [str(o.dtype) for o in outs])"]


def _precision_script(case: Case, finding: Finding, ex: Any, title: str, set_index: int) -> str:
    """A precision hazard: the policy's program in PyTorch eager against the same model in float32, on the CPU."""
    policy = ex.numeric_graph(case.graph)
    model32 = redeclare(policy, LOW_PRECISION, "float32")
    defs = render_function(policy, "program") + render_function(model32, "model32")

    def make(inp: Any, expr: str) -> str:
        if inp.kind == "scalar":
            return f"{'float' if is_float(inp.dtype) else 'int'}(np.asarray({expr}).reshape(()))"
        return f"torch.tensor({expr})" + ("" if is_float(inp.dtype) else f".to({TORCH_DTYPE[inp.dtype]})")

    made, _ = input_lines(case, set_index, make)
    if "device=device" in defs and "    device = " not in defs:  # constants alone: made on the CPU
        made = ['device = "cpu"'] + made
    dtypes = [TORCH_DTYPE[i.dtype] if i.kind == "tensor" else "None" for i in policy.inputs]
    k = list(policy.outputs).index(finding.output) if finding.output in policy.outputs else 0
    fix = str(finding.details.get("fix", ""))
    lines = (["import numpy as np", "import torch"] + ["import torch.nn.functional as F"] * ("F." in defs)
             + defs.splitlines() + made
             + [f"dtypes = [{', '.join(dtypes)}]  # the inputs' dtypes under the {comment(ex.policy)} policy",
                "with torch.no_grad():",
                "    actual = program(*[t.to(d) if torch.is_tensor(t) else t for t, d in zip(inputs, dtypes)])"
                f"[{k}].double()",
                "    expected = model32(*[t.float() if torch.is_tensor(t) and t.is_floating_point() else t "
                f"for t in inputs])[{k}].double()  # the model in float32",
                "keep = torch.isfinite(expected)  # the elements the float32 model answers (NaN there is no loss)",
                "actual, expected = actual[keep], expected[keep]",
                "loss = ((actual - expected).pow(2).mean().sqrt() / expected.pow(2).mean().sqrt()).item()",
                f"print(f'{comment(finding.output)}: relative RMS error {{loss:.3g}} against the float32 model, in "
                f"PyTorch eager on the CPU; fix: ' + {fix!r})",
                f"sys.exit(1 if loss > {PRECISION_LOSS!r} else 0)"])
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"


def _update_script(case: Case, finding: Finding, ex: Any, title: str, set_index: int) -> str:
    """A training hazard of an optimizer step: torch.optim's step in the policy's dtype, in PyTorch eager on the CPU,
    against the same step in float64 (the exact update) and in float32 (master weights), from the same values."""
    policy = ex.numeric_graph(case.graph)
    node = policy.node(finding.node)
    step = Graph(policy.inputs, policy.nodes, (node.id, node.inputs[0]))  # the updated weight and the weight
    wide = redeclare(step, LOW_PRECISION, "float32")
    exact = redeclare(step, LOW_PRECISION + ("float32",), "float64")
    defs = (render_function(step, "program") + render_function(wide, "master_step")
            + render_function(exact, "exact_step"))

    def make(inp: Any, expr: str) -> str:
        return f"torch.tensor({expr})" + ("" if is_float(inp.dtype) else f".to({TORCH_DTYPE[inp.dtype]})")

    made, _ = input_lines(case, set_index, make)
    dtypes = [TORCH_DTYPE[i.dtype] if i.kind == "tensor" else "None" for i in policy.inputs]
    fix = str(finding.details.get("fix", ""))
    lines = (["import numpy as np", "import torch"] + defs.splitlines() + made
             + [f"dtypes = [{', '.join(dtypes)}]  # the inputs' dtypes under the {comment(ex.policy)} policy",
                "inputs = [t.to(d) if torch.is_tensor(t) else t for t, d in zip(inputs, dtypes)]  # rounded once",
                "def update(fn, dtype):  # (the step's update, in float64) computed in `dtype`",
                "    new, old = fn(*[t.to(dtype) if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs])",
                "    return new.double() - old.double()",
                "with torch.no_grad():",
                "    exact = update(exact_step, torch.float64)  # torch.optim's step in float64: the exact update",
                "    got = (lambda new, old: new.double() - old.double())(*program(*inputs))  # in the policy's dtypes",
                "    master = update(master_step, torch.float32)  # the fix: the step in float32 master weights",
                "keep = torch.isfinite(exact)",
                "def lost(u):  # relative RMS of the exact update that `u` loses",
                "    return ((u[keep] - exact[keep]).pow(2).mean().sqrt() / exact[keep].pow(2).mean().sqrt()).item()",
                "bad = int((keep & ~torch.isfinite(got)).sum())",
                "frozen = ((got == 0) & (exact != 0)).double().mean().item()",
                "print(f'{bad} non-finite update(s); {lost(got):.0%} of the update lost in the 16-bit step, {frozen:.0%} '",
                "      f'of the weights do not move; {lost(master):.0%} lost with float32 master weights. Fix: ' + "
                f"{fix!r})",
                f"sys.exit(1 if bad or lost(got) >= {UPDATE_LOSS!r} else 0)"])
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"


# ---------------------------------------------------------------- TVM Relax


def _tvm_script(case: Case, finding: Finding, ex: TVMExecutor, title: str, set_index: int, ev: Evidence) -> str:
    graph = ex.policy_graph(case.graph)  # the semantics the pipeline's passes promise (training batch_norm, ...)
    program = ex.program_graph(case.graph)  # what is lowered to Relax (the float32 version for ToMixedPrecision)
    case = case.with_graph(graph)
    typed = infer(graph)
    oracle = finding.oracle
    accuracy = oracle in ACCURACY
    numpy_form = render_numpy(graph) if accuracy else None
    exact = (numpy_form or render_interpreted(graph)) if accuracy else None
    module = render_module(program, "T" if accuracy else None)  # dtypes looked up in T where controls rebuild it
    module = "\n".join(line for line in module.splitlines() if not line.lstrip().startswith('"""'))
    params = {i.name: infer(program).values[i.name].dtype for i in program.inputs}  # main's parameters
    declared = sorted(set(re.findall(r"\bT\['(\w+)'\]", module)) | set(params.values()))
    bf16 = any(d in ("bfloat16", *FP8) for d in declared) or any(typed.values[i.name].dtype in ("bfloat16", *FP8)
                                                                for i in graph.inputs)  # ml_dtypes' formats
    bf16 = bf16 or "ml_dtypes" in (exact or "") or any(d in ("bfloat16", *FP8) for c in ev.rounded.values() for d in c)
    as_f32 = {d: "float32" if d in ("float16", "bfloat16") else d for d in declared}
    passes = render_passes(ex.passes)
    lines = [NO_TORCH] + (["import ml_dtypes"] if bf16 else []) + ["import numpy as np", "import tvm",
                                                                     "from tvm import relax as R"]
    if ex.passes:
        lines.append(f"PASSES = {passes}  # applied before tvm.compile; [] is TVM's default pipeline")
    if accuracy:
        ev = casts_exact(ev)
        lines.append(_allowed(ev))
        lines.append(f"DECLARED, FP32 = {dict(zip(declared, declared))!r}, {as_f32!r}  # dtypes to build in: as "
                     "declared; float32 internals (a control)")
    lines += module.splitlines()
    if exact:
        body = exact.splitlines()
        last = re.fullmatch(r"    (\w+) = (.*)", body[-2])
        if last and body[-1] == f"    return [{last.group(1)}]" and len(body) == 3:  # one node: one line
            body = [f"{body[0]} return [{last.group(2)}]"]
        lines += body

    def make(inp: Any, expr: str) -> str:  # rounded to the declared dtype, then as main takes it
        dtype = typed.values[inp.name].dtype
        return f"np.asarray({expr}, dtype={dtype!r})" + (f".astype({params[inp.name]!r})"
                                                          if params.get(inp.name, dtype) != dtype else "")

    lines += input_lines(case, set_index, make, listed=True)[0]
    kwargs = any(not isinstance(p, str) for p in ex.passes)
    takes = bool(ex.passes)
    params = ", ".join(["T"] * accuracy + ["passes=()"] * takes)
    lines += [f"def run({params}):  # build{' in dtypes T' if accuracy else ''}, "
              f"{'apply the passes, ' if takes else ''}compile for the CPU, run on the inputs",
              f"    mod = build_module({'T' if accuracy else ''})"]
    if takes:
        lines += (["    for name, kw in [(p, {}) if isinstance(p, str) else p for p in passes]:",
                   "        mod = getattr(R.transform, name)(**kw)(mod)"] if kwargs else
                  ["    for name in passes:", "        mod = getattr(R.transform, name)()(mod)"])
    lines += ["    with tvm.transform.PassContext(opt_level=3):",
              '        vm = R.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())',
              "    return [o.numpy() for o in vm['main'](*[tvm.runtime.tensor("
              + ("v.astype(T[str(v.dtype)])" if accuracy else "v") + ") for v in inputs])]"]
    mine = ["PASSES"] if ex.passes else []
    on = ", ".join(["DECLARED"] * accuracy + ["PASSES"] * bool(ex.passes))
    if accuracy:
        single = len(graph.outputs) == 1
        one = "[0]" if single else ""
        if numpy_form:
            lines.append("expected = [np.asarray(e, dtype=np.float64) for e in exact(*[v if v.dtype.kind in 'iub' else "
                         f"v.astype(np.float64) for v in inputs])]{one}  # the graph in float64 numpy (int arithmetic "
                         "wraps as TVM's)")
        else:  # masks stay bool, as the interpreter takes them
            lines.append(f"expected = exact(*[v if v.dtype == bool else v.astype(np.float64) for v in inputs]){one}"
                         "  # the graph in float64, never TVM's own run")
        for k, o in enumerate(graph.outputs):
            if o in ev.rounded:
                name = "expected" if single else f"expected[{k}]"
                lines.append(f"{name} = {rounded_expr(name, ev.rounded[o])}  # casts: each rounds once, correctly")
        runs = ["actual", "control"] + ["off"] * bool(mine)
        calls = ([f"got{one}", f"tried(got, FP32{', PASSES' if mine else ''}){one}"]
                 + [f"tried(got, DECLARED, []){one}"] * bool(mine))
        lines += ["def tried(like, *args):  # a control run; NaN where it does not build (say, an op without that dtype)",
                  "    try: return run(*args)",
                  "    except Exception: return [np.full(np.shape(a), np.nan) for a in like]",
                  f"got = run({on})",
                  f"{', '.join(runs)} = {', '.join(calls)}  # control: float32 internals"
                  + ("; off: without PASSES" if mine else "")]
        # NaN and inf are answers where the exact answer has them (PyTorch's fp8 casts, log of a negative): equal
        # where both have them. The exact answer is never TVM's own run, so a NaN it shares is no agreement by fiat.
        lines += _compare(single, ["expected"] + runs, [
            "diff = np.where((@actual.astype(np.float64) == @expected) | (np.isnan(@actual.astype(np.float64)) & "
            "np.isnan(@expected)), 0.0, np.abs(@actual.astype(np.float64) - @expected)).ravel()  # NaN and inf agree",
            "scale = np.maximum(np.nan_to_num(np.abs(@expected).ravel(), nan=0.0, posinf=0.0), "
            "np.sqrt(np.mean(np.square(@expected[np.isfinite(@expected)]))) if np.isfinite(@expected).any() else 0.0)",
            "ulps = np.nan_to_num(diff / 2.0 ** (np.floor(np.log2(scale.clip(1e-300))).clip(@bound[3]) - @bound[2]), "
            "nan=np.inf)  # in ULPs",
            "ratio = max(ulps.max() / @bound[0], np.sqrt(np.mean(ulps ** 2)) / @bound[1])",
            "k = int(ulps.argmax())", VERDICT,
            "print(f\"@where[{k}]: expected {float(@expected.ravel()[k]):.6g}, got {float(@actual.ravel()[k]):.6g}; max error "
            "{diff.max():.4g} ({ulps.max():.3g} ULP)" + (" with PASSES, {np.abs(@off.astype(np.float64) - @expected).max():.4g} without"
                                   if mine else "") + ", \"",
            "      f\"{np.abs(@control.astype(np.float64) - @expected).max():.4g} with float32 internals; {verdict}\")"],
            f"ratio < {MARGIN!r}")
    elif oracle == Oracle.DTYPE_DIVERGENCE:
        lines += [f"got = [str(a.dtype) for a in run({on})]",
                  f"want = {ev.eager_dtypes!r}  # what PyTorch returns for this program",
                  "print('TVM returns', got, 'expected', want)", "sys.exit(1 if got != want else 0)"]
    else:
        lines += ["try:", f"    run({on})", "except Exception as exc:",
                  "    print('TVM raises', type(exc).__name__, (str(exc).strip().splitlines() or [''])[-1])",
                  "    sys.exit(1)", "print('TVM runs it')"]
    return "\n".join(script_head(title, ex, case, set_index, lines) + lines) + "\n"
