"""Pure float64 interpretation of a graph: the exact reference and the ideal rounded ("emulated") execution.

The interpreter is rendered as Python source and executed, so the reference that a repro script pastes
is byte for byte the one precfuzz judged with.
"""

from __future__ import annotations

import math
from functools import lru_cache
from types import FunctionType
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .dtypes import FP8, LOW_PRECISION, cast_undefined, is_exact, is_float, round_to
from .identifiers import literal, value_identifiers
from .ir import Graph, infer, op_attrs
from .ops import OPS, is_cast
from .ops.base import VARIANCE_FORM
from .ops.ints import INT_BITS, wrap_int
from .ops.sources import helpers, source

Values = dict[str, np.ndarray]
PRELUDE = ("import math\nfrom contextvars import ContextVar\nfrom typing import Any\n\nimport numpy as np\n"
           "from numpy.lib.stride_tricks import sliding_window_view\n\n"
           "VARIANCE_FORM = ContextVar('variance_form', default='two-pass')  # see acc_moments\n")


def reference_functions(graph: Graph) -> str:
    """Source of the numpy reference functions the graph's ops need (pasted into repro scripts)."""
    seen: dict[str, Any] = {}
    for node in graph.nodes:
        helpers(OPS[node.op].reference, seen)  # type: ignore[arg-type]
    if any(v.dtype in INT_BITS for v in infer(graph).values.values()):
        helpers(wrap_int, seen)  # type: ignore[arg-type]
    constants = [source(k, v) for k, v in seen.items() if not isinstance(v, FunctionType)]
    functions = [source(k, v) for k, v in seen.items() if isinstance(v, FunctionType)]
    return "\n".join(constants) + ("\n\n" if constants else "") + "\n\n".join(functions) + "\n"


def inner_name(node_id: str) -> str:
    """The `widen` entry keeping only the inside of a stepwise op in float32 (its result still rounds to its dtype)."""
    return f"{node_id}#inside"


def render_reference(graph: Graph, name: str = "reference", widen: frozenset[str] = frozenset()) -> str:
    """`def reference(inputs, rounded, round_to)` returning every value of the graph in float64.

    rounded=False is the reference: exact math on the (already dtype-rounded) inputs, no rounding
    anywhere else (only casts to integer truncate). rounded=True is the ideal mixed-precision
    implementation: each op computes exactly (fp32-or-better accumulation) from its operands cast to
    its compute dtype, and its result is rounded once to the op's declared output dtype. Nodes in `widen` round
    a float16/bfloat16 result to float32 instead (precision hazards: that node alone kept in float32); an
    inner_name(node) entry keeps only a stepwise op's inside in float32 (training hazards: float32 optimizer state).
    """
    typed = infer(graph)
    ident = value_identifiers(graph)
    lines = [f"def {name}(inputs, rounded, round_to):",
             "    rnd = round_to if rounded else (lambda v, dtype: v)"]
    for inp in graph.inputs:
        lines.append(f"    {ident[inp.name]} = inputs[{inp.name!r}]")
    for node in graph.nodes:
        t = typed.nodes[node.id]
        args = []
        convert = OPS[node.op].round_scalars and t.compute_dtype  # PyTorch converts Python numbers first
        for operand in node.inputs:
            if isinstance(operand, str):
                arg = ident[operand]
                if t.compute_dtype and typed.values[operand].kind != "scalar":
                    arg = f"rnd({arg}, {t.compute_dtype!r})"
                elif convert:
                    arg = f"round_to({arg}, {t.compute_dtype!r})"
                args.append(arg)
            elif operand is None:
                args.append("None")
            else:
                args.append(f"round_to({literal(operand)}, {t.compute_dtype!r})" if convert else literal(operand))
        attrs = op_attrs(node)
        info = t.value
        kwargs = [f"{k}={v!r}" for k, v in attrs.items()]
        if "stepwise" in OPS[node.op].tags:  # rounds inside: to the node's dtype (float32 where widened)
            wide = node.id in widen or inner_name(node.id) in widen
            inner = "float32" if wide and info.dtype in LOW_PRECISION else info.dtype
            kwargs.append(f"stepwise=lambda v: rnd(v, {inner!r})")
        call = f"{OPS[node.op].reference.__name__}({', '.join(args + kwargs)})"
        if is_cast(node.op) and info.dtype == "bool":
            call = f"np.not_equal({call}, 0)"
        elif is_cast(node.op) and not is_float(info.dtype):
            call = f"wrap_int(np.trunc({call}), {info.dtype!r})"
        elif info.kind != "scalar" and info.dtype in INT_BITS:  # PyTorch's int arithmetic wraps: so does the reference
            call = f"rnd(wrap_int({call}, {info.dtype!r}), {info.dtype!r})"  # (rnd: undefined_cast_reach's hook)
        elif info.kind != "scalar":
            call = f"rnd({call}, {'float32' if node.id in widen and info.dtype in LOW_PRECISION else info.dtype!r})"
        lines.append(f"    {ident[node.id]} = {call}")
    names = [i.name for i in graph.inputs] + [n.id for n in graph.nodes]
    lines.append("    return {" + ", ".join(f"{n!r}: {ident[n]}" for n in names) + "}")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=256)
def _compiled(key: str, widen: frozenset[str] = frozenset()) -> Callable[..., Values]:
    """The reference function of the graph whose Graph.form is `key` (its values left out: 256 keys of a real model's
    blocks held their weights' text, and the audit of a UNet grew by gigabytes)."""
    from .ir import graph_from_json

    graph = graph_from_json(__import__("json").loads(key), trusted=True)
    namespace: dict[str, Any] = {"np": np, "math": math, "sliding_window_view": sliding_window_view,
                                 "wrap_int": wrap_int, "INT_BITS": INT_BITS}
    for node in graph.nodes:
        fn = OPS[node.op].reference
        seen: dict[str, FunctionType] = {}
        helpers(fn, seen)  # type: ignore[arg-type]
        namespace.update(seen)
    exec(compile(render_reference(graph, widen=widen), "<precfuzz reference>", "exec"), namespace)  # noqa: S102 - our own render
    return namespace["reference"]


def round_to_float32_arithmetic(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round to `dtype`, then carry the value as float32 so the next op computes in float32 arithmetic."""
    out = round_to(values, dtype)
    return out if dtype == "float64" or is_exact(dtype) else out.astype(np.float32)


def backward_perturbation(round_to, seed=0, relative=4 * 2.0**-24, absolute=2.0**-149):
    """A rounding hook that also perturbs each value by a random relative `relative` (4 units of float32), and each
    non-zero value by `absolute` (a unit of float32's subnormal spacing, the standard model's underflow term; at most
    half the value, so no sign flips).

    A backward-stable float32 algorithm returns the exact result of inputs perturbed this much, so
    evaluating exactly on perturbed operands gives an ideal implementation that feels the problem's
    conditioning (a constant row under layer_norm, cancellation) the way real fp32 kernels do. Among subnormal
    values the spacing is absolute: a mean of 1e-40s is off by up to a unit of 2**-149, which layer_norm's
    rstd of 1/sqrt(eps) multiplies (triage14 b62fbe4b9c: 0.87 units of the mean, 276 ULP of the output).
    """
    rng = np.random.default_rng(seed)

    def rnd(values, dtype):
        out = round_to(values, dtype)
        if dtype in ("int32", "int64", "bool"):  # pasted into repro scripts: no helper imported here
            return out
        shape = np.shape(out)
        tiny = np.minimum(absolute, 0.5 * np.abs(out))  # zero stays zero
        return out * (1.0 + relative * rng.uniform(-1.0, 1.0, size=shape)) + tiny * rng.uniform(-1.0, 1.0, size=shape)

    return rnd


ARITHMETICS = ("float64", "float32", "perturbed", "float32-one-pass")
# ops whose float32 kernels commonly form a variance in one pass (see fuzzer.ops.base.VARIANCE_FORM)
VARIANCE_OPS = frozenset({"layer_norm", "group_norm", "batch_norm", "instance_norm", "var"})


def evaluate(graph: Graph, inputs: Values, rounded: bool, arithmetic: str = "float64",
             overflow: list[str] | None = None, widen: frozenset[str] = frozenset()) -> Values:
    """Every value of the graph in float64 (see render_reference for the two modes).

    With rounded=True, `arithmetic` picks one of three ideal implementations of the declared dtypes:
    "float64" computes each op exactly; "float32" computes in float32 arithmetic (fp32 accumulation);
    "perturbed" computes exactly on operands perturbed backward-stably at float32 level; "float32-one-pass" is
    "float32" with variances formed as E[x^2] - E[x]^2 (XLA's and TVM's norm kernels). A backend may lose what
    the worst of them loses (see oracles.bounds).
    """
    if arithmetic == "float32-one-pass":
        token = VARIANCE_FORM.set("one-pass")
        try:
            return evaluate(graph, inputs, rounded, "float32", overflow, widen)
        finally:
            VARIANCE_FORM.reset(token)
    fn = _compiled(graph.form, frozenset(widen))
    typed = infer(graph)
    rnd = round_to
    kinds = {i.name: (bool if i.dtype == "bool" else np.float64) for i in graph.inputs}  # masks stay bool
    env: dict[str, Any] = {k: np.asarray(v, dtype=kinds.get(k, np.float64)) for k, v in inputs.items()}
    if arithmetic == "float32":
        rnd = round_to_float32_arithmetic
        for inp in graph.inputs:
            if inp.kind == "scalar":
                env[inp.name] = float(env[inp.name])  # a Python float does not upcast float32 arrays (NEP 50)
            elif inp.dtype != "float64" and not is_exact(inp.dtype):
                env[inp.name] = env[inp.name].astype(np.float32)
    elif arithmetic == "perturbed":
        rnd = backward_perturbation(round_to)
        for inp in graph.inputs:
            if inp.kind == "tensor" and not is_exact(inp.dtype):
                env[inp.name] = rnd(env[inp.name], "float64")
    elif arithmetic != "float64":
        raise ValueError(f"arithmetic must be one of {', '.join(ARITHMETICS)}, not {arithmetic!r}")
    if overflow is None:
        with np.errstate(all="ignore"):
            values = fn(env, rounded, rnd)
    else:  # record overflow, invalid operations and underflow anywhere, inside ops included
        with np.errstate(all="ignore", over="call", invalid="call", under="call",
                         call=lambda kind, flag: overflow.append(kind)):
            values = fn(env, rounded, rnd)
    return {k: (np.broadcast_to(np.asarray(v, dtype=np.float64), typed.values[k].shape)
                if typed.values[k].kind != "scalar" else np.asarray(v, dtype=np.float64))
            for k, v in values.items()}


def undefined_cast_reach(graph: Graph, inputs: Values) -> set[str]:
    """Values that change when every float->int cast gives another int where the conversion is undefined (NaN, inf,
    out of range): the reference run twice, such elements set to 0 and then to 1. A value computed from such a cast
    whose elements are then discarded (torch.where picking the other branch, T5's relative-position buckets) does
    not change, and stays judged."""
    fn = _compiled(graph.form, frozenset())
    kinds = {i.name: (bool if i.dtype == "bool" else np.float64) for i in graph.inputs}

    def run(fill: int) -> dict[str, np.ndarray]:
        def rnd(values: Any, dtype: str) -> np.ndarray:
            out = round_to(values, dtype)
            if is_float(dtype) or dtype == "bool":
                return out
            return np.where(cast_undefined(values, dtype), fill, out)

        env = {k: np.asarray(v, dtype=kinds.get(k, np.float64)) for k, v in inputs.items()}
        with np.errstate(all="ignore"):
            return {k: np.asarray(v, dtype=np.float64) for k, v in fn(env, True, rnd).items()}

    a, b = run(0), run(1)
    return {k for k in a if k in b and (np.shape(a[k]) != np.shape(b[k]) or not np.array_equal(a[k], b[k], equal_nan=True))}


def outputs(graph: Graph, env: Values) -> list[np.ndarray]:
    """The graph's outputs from an environment of values."""
    return [env[name] for name in graph.outputs]


FLOAT32_MAX = float(np.finfo(np.float32).max)


def order_overflows(graph: Graph, values: Values) -> set[str]:
    """Contractions (conv, linear, matmul) whose terms summed in absolute value pass float32's range: some order of
    an fp32 sum overflows there, so no fp32 kernel owes a finite answer (triage14 b7246b2b36: oneDNN's bf16 conv1d
    adds kernel positions first, 5 x -7.5e37 on 3e38 data is -inf, where channel order stays finite)."""
    out: set[str] = set()
    for node in graph.nodes:
        spec = OPS[node.op]
        if "contraction" not in spec.tags and "float32-scales" not in spec.tags:
            continue
        args = [None if o is None else np.abs(np.asarray(values[o] if isinstance(o, str) else o, dtype=np.float64))
                for o in node.inputs]
        tries = [args]
        if "float32-scales" in spec.tags:  # scaled_mm: a kernel may apply one scale after the other (oneDNN's
            # (acc * scale_a) * scale_b), so each scale alone on the accumulated sum must stay in range too
            # (triage16 b150d2acc4: scale_a 2e36 times a sum of 400s is inf, then times scale_b 0 is NaN)
            tries = [[*args[:2], args[2], np.ones_like(args[3])], [*args[:2], np.ones_like(args[2]), args[3]]]
        with np.errstate(all="ignore"):
            totals = [np.asarray(spec.reference(*a, **op_attrs(node)), dtype=np.float64) for a in tries]
        if any(np.any(~(t <= FLOAT32_MAX)) for t in totals):
            out.add(node.id)
    return out


def overflowed(graph: Graph, values: Values, exact: Values | None = None, also: set[str] = frozenset()) -> set[str]:
    """Values that are non-finite (or in `also`), or computed from such a value anywhere upstream.

    With `exact` (the exact answer), only values non-finite where the exact answer is finite count: an fp8 cast's
    NaN / inf is PyTorch's cast semantics, part of the exact answer, compared element by element.
    """
    bad = set(also) | {k for k, v in values.items()
                       if not np.all(np.isfinite(v) if exact is None else np.isfinite(v) | ~np.isfinite(exact[k]))}
    for node in graph.nodes:
        if any(isinstance(o, str) and o in bad for o in node.inputs):
            bad.add(node.id)
    return bad


def ideal_values(graph: Graph, inputs: Values, notes: set[str] | None = None) -> dict[str, list[np.ndarray]]:
    """Per value, the three ideal implementations of the declared dtypes (see evaluate), rounded per op.

    Where the float32-arithmetic ideal overflows (or meets inf - inf) anywhere, even inside an op (data near
    float32's range), or some summation order of a contraction would (order_overflows), or a norm's one-pass variance
    does (E[x^2] past float32's range: PyTorch's CPU and torch_xla's kernels give NaN for a bfloat16 layer_norm of a
    constant row near 2e37), fp32 kernels are outside their range too: the ideals become NaN, so the bound does not
    judge those values (their non-finite results included). In a graph with casts to fp8, a NaN or inf the exact
    answer has too (PyTorch's fp8 cast past the range, and what it flows into) is not such a value. `notes`
    collects "underflow" when the float32 run went subnormal somewhere.
    """
    events: list[str] = []
    with_variance = any(n.op in VARIANCE_OPS for n in graph.nodes)
    runs = [evaluate(graph, inputs, rounded=True, arithmetic=a, overflow=events if a == "float32" else None)
            for a in ARITHMETICS if with_variance or a != "float32-one-pass"]
    if notes is not None and "underflow" in events:
        notes.add("underflow")  # fp32 arithmetic went subnormal: flush-to-zero backends may differ there
    trouble = {"overflow", "invalid"} & set(events)
    fp8_casts = any(is_cast(n.op) and n.attrs.get("dtype") in FP8 for n in graph.nodes)
    exact = evaluate(graph, inputs, rounded=False) if fp8_casts and not trouble else None
    if not trouble:
        wide = order_overflows(graph, runs[0])
        out_of_range = overflowed(graph, runs[ARITHMETICS.index("float32")], exact, wide)
        if len(runs) == len(ARITHMETICS):  # E[x^2] past float32's range: that common float32 form overflows there
            out_of_range |= overflowed(graph, runs[ARITHMETICS.index("float32-one-pass")], exact)
    else:
        out_of_range = set(runs[0])
    if len(runs) == len(ARITHMETICS):
        one_pass = ARITHMETICS.index("float32-one-pass")
        for k in runs[0]:  # a one-pass variance that destroys the value is no ideal: PyTorch's two passes stand
            if not meaningful(runs[one_pass][k], runs[0][k]):
                runs[one_pass][k] = runs[ARITHMETICS.index("float32")][k]
    return {k: ([np.full(np.shape(runs[0][k]), np.nan)] * len(runs) if k in out_of_range else [r[k] for r in runs])
            for k in runs[0]}


ONE_PASS_MAX_RELATIVE = 2.0**-7  # bfloat16's unit roundoff: past it a one-pass variance has cancelled the value away


def meaningful(value: np.ndarray, ideal: np.ndarray) -> bool:
    """True when `value` keeps the information of `ideal`: relative RMS error at most ONE_PASS_MAX_RELATIVE.

    A float32 kernel forming the variance in one pass loses about eps * (mean/std)^2 of it: a few hundred ULPs
    are a common implementation's price (allowed), an output that no longer carries the normalized values is
    a bug PyTorch's maintainers fixed in their own kernels (Welford), and stays one here.
    """
    v, i = np.asarray(value, dtype=np.float64), np.asarray(ideal, dtype=np.float64)
    fin = np.isfinite(v) & np.isfinite(i)
    if not fin.all():
        return bool(np.array_equal(np.isfinite(v), np.isfinite(i))) and (not fin.any() or meaningful(v[fin], i[fin]))
    scale = float(np.sqrt(np.mean(i**2))) if i.size else 0.0
    return scale == 0.0 or float(np.sqrt(np.mean((v - i) ** 2))) <= ONE_PASS_MAX_RELATIVE * scale
