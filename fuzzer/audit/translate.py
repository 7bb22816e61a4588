"""A user's nn.Module as a precfuzz case: torch.export, then one table from ATen ops to IR ops.

Parameters and buffers become `param` inputs and lifted constants `input`s, each holding its values inline
(the module's state, not a seed); the example args become `input`s with their values. Every node keeps the
source line it came from (the exported graph's stack traces), so a verdict can point at the user's code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..dtypes import DTYPES
from ..ir import Case, Graph, Input, IRError, Node, check_size, infer

MAX_AUDIT_ELEMENTS = 2**21  # values held inline over all parameters and inputs (a case file stays ~40 MiB at most)


class AuditInputError(ValueError):
    """A model the audit cannot take (one line; exit status 2)."""


@dataclass(frozen=True)
class Source:
    """Where a graph value came from in the user's code."""

    file: str
    line: int
    code: str
    module: str = ""  # the submodule that made it (`proj (Conv3d)`), where one did
    aten: str = ""  # the ATen op of the exported graph

    def where(self) -> str:
        """`denoiser.py:41`."""
        return f"{Path(self.file).name}:{self.line}" if self.file else "?"


@dataclass
class Translation:
    """The case, the source of each value, and how the graph was captured."""

    case: Case
    sources: dict[str, Source] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- capture


def _float_params(module: Any) -> set[str]:
    import torch

    return {str(t.dtype).replace("torch.", "") for t in list(module.parameters()) + list(module.buffers())
            if torch.is_floating_point(t)}


def capture(module: Any, args: tuple[Any, ...]) -> tuple[Any, list[str]]:
    """torch.export of the module on its example args; (exported program, notes).

    A module whose low-precision parameters make PyTorch raise on the example args (a model hazard itself)
    cannot be exported as it is; it is exported with float32 parameters instead and the graph declares the
    module's own dtypes again (the translation keeps the original values and dtypes).
    """
    import copy

    import torch

    module = module.eval()
    try:
        return torch.export.export(module, args), []
    except Exception as exc:  # noqa: BLE001 - the user's model raised: a value, retried once
        first = _last_line(exc)
        if _float_params(module) <= {"float32", "float64"}:
            raise AuditInputError(f"torch.export failed on the example args: {first}") from None
        try:
            ep = torch.export.export(copy.deepcopy(module).float(), args)
        except Exception as exc2:  # noqa: BLE001
            raise AuditInputError(f"torch.export failed on the example args: {first} "
                                  f"(and with float32 parameters: {_last_line(exc2)})") from None
        return ep, [f"PyTorch raises on the example args as given ({first}); the graph was captured with "
                    "float32 parameters and declares the module's own dtypes"]


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------- sources


def source_of(fx_node: Any, model_file: str | None) -> Source:
    """The user's line that made `fx_node`: the last frame in the model file, else the last frame outside torch."""
    trace = fx_node.meta.get("stack_trace") or ""
    lines = trace.splitlines()
    parsed: list[tuple[str, int, str]] = []
    for k, line in enumerate(lines):
        text = line.strip()
        if text.startswith('File "'):
            try:
                fname = text.split('"')[1]
                lineno = int(text.split(", line ")[1].split(",")[0])
            except (IndexError, ValueError):
                continue
            code = lines[k + 1].strip() if k + 1 < len(lines) else ""
            parsed.append((fname, lineno, code))
    mine = [p for p in parsed if model_file and Path(p[0]).resolve() == Path(model_file).resolve()]
    outside = [p for p in parsed if "/torch/" not in p[0] and "/site-packages/" not in p[0]]
    fname, lineno, code = (mine or outside or parsed or [("", 0, "")])[-1]
    stack = fx_node.meta.get("nn_module_stack") or {}
    module = ""
    if stack:
        path, kind = list(stack.values())[-1]
        if path:
            module = f"{path} ({str(kind).rsplit('.', 1)[-1]})"
    return Source(fname, lineno, code, module, str(getattr(fx_node, "target", "")))


# ---------------------------------------------------------------- the op table


class _Skip(Exception):
    """An op this table does not translate (collected, never raised to the caller)."""


Emit = Callable[..., str]  # emit(op, inputs, attrs) -> the IR value name of the new node


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise _Skip(f"dtype {name}")
    return name


def _meta_shape(node: Any) -> list[int]:
    val = node.meta.get("val")
    return [int(s) for s in val.shape]


def _ints(v: Any) -> list[int]:
    return [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]


def _conv_arg(v: Any, default: int) -> int | list[int]:
    """A conv attribute as the IR takes it: one int (PyTorch broadcasts a 1-list) or one per spatial dim."""
    vals = _ints(default if v is None else v)
    return vals[0] if len(vals) == 1 else vals


def _conv(nd: int) -> Callable:
    def tr(n: Any, a: list[Any], emit: Emit) -> str:
        x, w, b = (a + [None] * 3)[:3]
        stride, padding, dilation, groups = (a + [None] * 7)[3:7]
        if isinstance(padding, str):
            raise _Skip(f"padding={padding!r}")
        attrs = {"stride": _conv_arg(stride, 1), "padding": _conv_arg(padding, 0),
                 "dilation": _conv_arg(dilation, 1), "groups": int(groups or 1)}
        return emit(f"conv{nd}d", [x, w, b], attrs)
    return tr


def _convolution(n: Any, a: list[Any], emit: Emit) -> str:
    x, w, b, stride, padding, dilation, transposed, _out_pad, groups = a[:9]
    if transposed:
        raise _Skip("transposed convolution")
    nd = len(_meta_shape(n)) - 2
    return emit(f"conv{nd}d", [x, w, b], {"stride": _conv_arg(stride, 1), "padding": _conv_arg(padding, 0),
                                          "dilation": _conv_arg(dilation, 1), "groups": int(groups)})


def _binary(op: str, swap: bool = False) -> Callable:
    def tr(n: Any, a: list[Any], emit: Emit) -> str:
        if n.kwargs.get("alpha", 1) != 1 or (len(a) > 2 and a[2] != 1) or n.kwargs.get("rounding_mode"):
            raise _Skip("alpha or rounding_mode")
        x, y = a[0], a[1]
        return emit(op, [y, x] if swap else [x, y], {})
    return tr


def _unary(op: str, **fixed: Any) -> Callable:
    return lambda n, a, emit: emit(op, [a[0]], dict(fixed))


def _identity(n: Any, a: list[Any], emit: Emit) -> str:
    return a[0]


def _to(n: Any, a: list[Any], emit: Emit) -> str:
    dtype = n.kwargs.get("dtype")
    if dtype is None:
        dtype = next((x for x in a[1:] if "dtype" in type(x).__name__ or str(x).startswith("torch.")), None)
    if dtype is None:
        return a[0]  # a device move
    return emit("astype", [a[0]], {"dtype": _dtype_name(dtype)})


def _reshape(n: Any, a: list[Any], emit: Emit) -> str:
    return emit("reshape", [a[0]], {"shape": _meta_shape(n)})


def _transpose(n: Any, a: list[Any], emit: Emit) -> str:
    return emit("transpose", [a[0]], {"dim0": int(a[1]), "dim1": int(a[2])})


def _t(n: Any, a: list[Any], emit: Emit) -> str:
    return emit("transpose", [a[0]], {"dim0": 0, "dim1": 1}) if len(_meta_shape(n)) == 2 else a[0]


def _linear(n: Any, a: list[Any], emit: Emit) -> str:
    return emit("linear", (a + [None])[:3], {})


def _matmul(op: str) -> Callable:
    return lambda n, a, emit: emit(op, [a[0], a[1]], {})


def _layer_norm(n: Any, a: list[Any], emit: Emit) -> str:
    x, shape, w, b, eps = (a + [None] * 5)[:5]
    eps = 1e-5 if eps is None else eps
    return emit("layer_norm", [x, w, b], {"normalized_shape": _ints(shape), "eps": float(eps)})


def _rms_norm(n: Any, a: list[Any], emit: Emit) -> str:
    x, shape, w, eps = (a + [None, None])[:4]
    attrs: dict[str, Any] = {"normalized_shape": _ints(shape)}
    if eps is not None:
        attrs["eps"] = float(eps)
    else:
        raise _Skip("rms_norm without eps (the default depends on the dtype)")
    return emit("rms_norm", [x, w], attrs)


def _group_norm(n: Any, a: list[Any], emit: Emit) -> str:
    x, groups, w, b, eps = (a + [None] * 5)[:5]
    eps = 1e-5 if eps is None else eps
    return emit("group_norm", [x, w, b], {"num_groups": int(groups), "eps": float(eps)})


def _softmax(op: str) -> Callable:
    def tr(n: Any, a: list[Any], emit: Emit) -> str:
        if (len(a) > 2 and a[2] not in (None, False)) or n.kwargs.get("dtype") is not None:
            raise _Skip("softmax with a dtype")
        return emit(op, [a[0]], {"dim": int(a[1])})
    return tr


def _gelu(n: Any, a: list[Any], emit: Emit) -> str:
    approximate = n.kwargs.get("approximate", a[1] if len(a) > 1 else "none")
    return emit("gelu", [a[0]], {"approximate": str(approximate)})


def _reduce(op: str, correction: bool = False) -> Callable:
    def tr(n: Any, a: list[Any], emit: Emit) -> str:
        if n.kwargs.get("dtype") is not None:
            raise _Skip("reduction with a dtype")
        dims = a[1] if len(a) > 1 else None
        keep = bool(a[2]) if len(a) > 2 else bool(n.kwargs.get("keepdim", False))
        attrs: dict[str, Any] = {"dims": None if dims is None else _ints(dims), "keepdim": keep}
        if correction:
            attrs["correction"] = int(n.kwargs.get("correction", 1) if n.kwargs.get("correction") is not None else 1)
        return emit(op, [a[0]], attrs)
    return tr


def _dropout(n: Any, a: list[Any], emit: Emit) -> str:
    if len(a) > 2 and a[2]:
        raise _Skip("dropout in training mode")
    return a[0]


def table() -> dict[Any, Callable]:
    """ATen overload -> translator (imports torch)."""
    import torch

    aten = torch.ops.aten
    return {
        aten.conv1d.default: _conv(1), aten.conv2d.default: _conv(2), aten.conv3d.default: _conv(3),
        aten.convolution.default: _convolution,
        aten.linear.default: _linear,
        aten.matmul.default: _matmul("matmul"), aten.mm.default: _matmul("matmul"), aten.bmm.default: _matmul("bmm"),
        aten.layer_norm.default: _layer_norm, aten.group_norm.default: _group_norm, aten.rms_norm.default: _rms_norm,
        aten.softmax.int: _softmax("softmax"), aten._softmax.default: _softmax("softmax"),
        aten.log_softmax.int: _softmax("log_softmax"), aten._log_softmax.default: _softmax("log_softmax"),
        aten.gelu.default: _gelu, aten.silu.default: _unary("silu"),
        aten.add.Tensor: _binary("add"), aten.add.Scalar: _binary("add"),
        aten.sub.Tensor: _binary("sub"), aten.sub.Scalar: _binary("sub"), aten.rsub.Scalar: _binary("sub", swap=True),
        aten.rsub.Tensor: _binary("sub", swap=True),
        aten.mul.Tensor: _binary("mul"), aten.mul.Scalar: _binary("mul"),
        aten.div.Tensor: _binary("div"), aten.div.Scalar: _binary("div"),
        aten.neg.default: _unary("neg"), aten.exp.default: _unary("exp"), aten.log.default: _unary("log"),
        aten.sqrt.default: _unary("sqrt"), aten.rsqrt.default: _unary("rsqrt"), aten.sin.default: _unary("sin"),
        aten.cos.default: _unary("cos"), aten.tanh.default: _unary("tanh"),
        aten.sum.dim_IntList: _reduce("sum"), aten.mean.dim: _reduce("mean"), aten.var.correction: _reduce("var", correction=True),
        aten.cumsum.default: lambda n, a, emit: emit("cumsum", [a[0]], {"dim": int(a[1])}),
        aten._to_copy.default: _to, aten.to.dtype: _to, aten.to.dtype_layout: _to, aten.to.device: _to,
        aten.view.default: _reshape, aten.reshape.default: _reshape, aten._unsafe_view.default: _reshape,
        aten.flatten.using_ints: _reshape, aten.unsqueeze.default: _reshape, aten.squeeze.dim: _reshape,
        aten.squeeze.dims: _reshape, aten.transpose.int: _transpose, aten.t.default: _t,
        aten.clone.default: _identity, aten.contiguous.default: _identity, aten.alias.default: _identity,
        aten.detach.default: _identity, aten.detach_.default: _identity, aten.lift_fresh_copy.default: _identity,
        aten.dropout.default: _dropout,
    }


# ops that only check metadata (no value): dropped
_ASSERTS = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range", "_assert_async")


# ---------------------------------------------------------------- translation


def _values(tensor: Any) -> Any:
    import torch

    return tensor.detach().to("cpu").to(torch.float64).numpy().tolist()


def _input(name: str, tensor: Any, role: str) -> Input:
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise AuditInputError(f"input {name!r} is a {type(tensor).__name__}, not a tensor (pass tensors in example_args)")
    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype not in DTYPES:
        raise AuditInputError(f"input {name!r} has dtype {dtype}; the IR takes {', '.join(DTYPES)}")
    if any(s == 0 for s in tensor.shape):
        raise AuditInputError(f"input {name!r} is empty (shape {list(tensor.shape)})")
    if torch.is_floating_point(tensor) and not bool(torch.isfinite(tensor).all()):
        raise AuditInputError(f"input {name!r} holds inf or nan")
    return Input(name, tuple(int(s) for s in tensor.shape), dtype, role, "tensor", {"values": _values(tensor)})


def _describe_outputs(ep: Any, out_node: Any, computed: set[str], env: dict[str, Any]) -> str:
    """What forward returned, in a few words: `an int (3)`, `a dict of 1 (input 'x' unchanged)`."""
    import torch

    def leaf(o: Any) -> str:
        if isinstance(o, torch.fx.Node):
            if o.op == "placeholder":
                return f"{o.name!r} unchanged (an input, parameter or buffer)"
            value = env.get(o.name)
            return "a computed tensor" if isinstance(value, str) and value in computed else f"{o.name!r}"
        return "None" if o is None else f"{type(o).__name__} {repr(o)[:40]}"

    leaves = list(out_node.args[0]) if out_node.args and isinstance(out_node.args[0], (tuple, list)) else []
    spec = getattr(getattr(ep, "call_spec", None), "out_spec", None)
    kind = getattr(spec, "type", None)
    if kind is None or len(leaves) == 1 and not isinstance(kind, type):
        return leaf(leaves[0]) if len(leaves) == 1 else "nothing"
    shown = ", ".join(leaf(o) for o in leaves[:4]) + (", ..." if len(leaves) > 4 else "")
    return f"a {kind.__name__} ({shown})"


def translate(module: Any, args: tuple[Any, ...], model_file: str | None = None, name: str = "model") -> Translation:
    """The module as a case: export, map every node, collect every untranslatable op with its line.

    AuditInputError when the module cannot be exported or holds ops the table lacks (all of them listed).
    """
    import torch
    from torch.export.graph_signature import InputKind

    ep, notes = capture(module, args)
    state = {**dict(module.state_dict(keep_vars=False)), **{k: v for k, v in ep.state_dict.items()
                                                            if k not in module.state_dict()}}
    ops = table()
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    user_args = iter(a for a in torch.utils._pytree.tree_leaves(args))
    inputs: list[Input] = []
    env: dict[str, Any] = {}
    nodes: list[Node] = []
    sources: dict[str, Source] = {}
    failures: list[str] = []
    taken: set[str] = set()
    graph = ep.graph_module.graph
    used = {n.name for n in graph.nodes if n.users}

    def fresh(base: str) -> str:
        base = base or "v"
        name_, k = base, 1
        while name_ in taken:
            k += 1
            name_ = f"{base}_{k}"
        taken.add(name_)
        return name_

    for n in graph.nodes:
        if n.op != "placeholder":
            continue
        spec = specs.get(n.name)
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind == InputKind.USER_INPUT:
            value = next(user_args, None)
            if n.name not in used:
                continue
            inp = _input(fresh(n.name), value, "input")
        elif kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            target = str(spec.target)
            if n.name not in used:
                continue
            tensor = state.get(target) if kind != InputKind.CONSTANT_TENSOR else ep.constants.get(target)
            if tensor is None:
                tensor = ep.constants.get(target)
            role = "param" if kind != InputKind.CONSTANT_TENSOR else "input"
            inp = _input(fresh(target), tensor, role)
        else:
            raise AuditInputError(f"placeholder {n.name!r} of kind {kind.name} is not supported")
        inputs.append(inp)
        env[n.name] = inp.name

    for n in graph.nodes:
        if n.op != "call_function":
            continue
        target_name = getattr(n.target, "__name__", str(n.target))
        if any(target_name.startswith(a) for a in _ASSERTS):
            continue
        fn = ops.get(n.target)
        src = source_of(n, model_file)
        args_ = [_operand(a, env) for a in n.args]
        missing = any(isinstance(a, _Missing) for a in args_)
        if missing and (fn is not None or target_name == "getitem"):
            env[n.name] = _Missing()  # a translatable user of an op already listed (sort's getitem): not listed again
            continue
        if fn is None:
            failures.append(f"{_op_name(n.target)} at {_where(src)}")
            env[n.name] = _Missing()
            continue

        def emit(op: str, operands: list[Any], attrs: dict[str, Any], _n: Any = n, _src: Source = src) -> str:
            vid = fresh(_n.name)
            while operands and operands[-1] is None:
                operands = operands[:-1]
            nodes.append(Node(vid, op, tuple(operands), attrs))
            sources[vid] = _src
            return vid

        try:
            if any(isinstance(a, _Missing) for a in args_):
                raise _Skip("an operand that was not translated")
            env[n.name] = fn(n, args_, emit)
        except _Skip as why:
            if "not translated" not in str(why):
                failures.append(f"{_op_name(n.target)} ({why}) at {_where(src)}")
            env[n.name] = _Missing()
    if failures:
        raise AuditInputError(f"{len(failures)} op(s) precfuzz cannot translate: " + "; ".join(failures))
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = [_operand(o, env) for o in torch.utils._pytree.tree_leaves(out_node.args)]
    if not outs or not all(isinstance(o, str) and o in {nd.id for nd in nodes} for o in outs):
        raise AuditInputError("forward must return tensors it computes (a tensor or a tuple of tensors), but it "
                              f"returned {_describe_outputs(ep, out_node, {nd.id for nd in nodes}, env)}")
    graph_ir = Graph(tuple(inputs), tuple(nodes), tuple(dict.fromkeys(outs)))
    total = sum(math.prod(i.shape) for i in inputs)
    if total > MAX_AUDIT_ELEMENTS:
        raise AuditInputError(f"the model holds {total} parameter and input values, more than the "
                              f"{MAX_AUDIT_ELEMENTS} an audit takes (use smaller example args or a smaller config)")
    try:
        check_size(graph_ir, infer(graph_ir))
    except IRError as exc:
        raise AuditInputError(f"the translated graph is invalid: {exc}") from None
    case = Case(graph_ir, ({},), {"source": f"audit:{Path(model_file).name if model_file else name}", "model": name})
    return Translation(case, sources, notes)


class _Missing:
    """The value of a node that was not translated (its users are skipped, not reported again)."""


def _operand(a: Any, env: dict[str, Any]) -> Any:
    import torch

    if isinstance(a, torch.fx.Node):
        return env.get(a.name, _Missing())
    if isinstance(a, bool):
        return int(a)
    if isinstance(a, (int, float)) or a is None:
        return a
    if isinstance(a, (list, tuple)):
        return [_operand(x, env) for x in a]
    return a


def _op_name(target: Any) -> str:
    name = str(target)
    return name if name.startswith("aten.") else getattr(target, "__name__", name)


def _where(src: Source) -> str:
    return f"{src.where()} `{src.code}`" if src.file else "(no source line)"
