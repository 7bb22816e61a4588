"""A user's nn.Module as a precfuzz case: torch.export, then one table from ATen ops to IR ops.

Parameters and buffers become `param` inputs and lifted constants `input`s, each holding its values inline
(the module's state, not a seed); the example args become `input`s with their values. Every node keeps the
source line it came from (the exported graph's stack traces), so a verdict can point at the user's code.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from ..dtypes import DTYPES
from ..ir import Case, Graph, Input, IRError, Node, check_size, infer, infer_node
from ..ops import OPS, ValueInfo
from ..ops.aten import AtenDtype
from ..ops.base import AtenCall, AtenFn, AtenSkip
from .source import Source

MAX_AUDIT_ELEMENTS = 2**21  # values held inline over all parameters and inputs (a case file stays ~40 MiB at most)


class AuditInputError(ValueError):
    """A model the audit cannot take (one line; exit status 2)."""


@dataclass
class Translation:
    """The case, the source of each value, and how the graph was captured."""

    case: Case
    sources: dict[str, Source] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    bf16: "Translation | None" = None  # the module after model.to(bfloat16), float inputs cast, exported as such
    eager_error: str = ""  # what the module raised under eager PyTorch on its own example args ("" if it ran)
    optimizer: dict[str, Any] | None = None  # --train: the optimizer step's hyperparameters (audit.training)
    trainable: frozenset[str] | None = None  # --train: the parameters that take a gradient (not buffers)
    blocks: "list[Any] | None" = None  # --blocks: the distinct blocks as cases (fuzzer.audit.blocks.BlockCase)

    def unexplained_eager_error(self) -> str:
        """The eager error when no dtype break of the captured graph explains it (a model hazard the audit reports
        does: a bf16 conv fed float32); "" when eager ran or a break explains it."""
        from ..ir import infer

        return self.eager_error if self.eager_error and not infer(self.case.graph).chain_breaks() else ""


# ---------------------------------------------------------------- capture


def _float_params(module: Any) -> set[str]:
    import torch

    return {str(t.dtype).replace("torch.", "") for t in list(module.parameters()) + list(module.buffers())
            if torch.is_floating_point(t)}


def capture(module: Any, args: tuple[Any, ...], retry_float32: bool = True) -> tuple[Any, list[str]]:
    """torch.export of the module on its example args; (exported program, notes).

    A module whose low-precision parameters make PyTorch raise on the example args (a model hazard itself)
    cannot be exported as it is; it is exported with float32 parameters instead and the graph declares the
    module's own dtypes again (the translation keeps the original values and dtypes). The notes say so, and are
    empty exactly when the module was exported as it is.
    """
    import copy

    import torch

    module = module.eval()
    captured = io.StringIO()  # what torch prints while it fails (a graph dump of up to 100 KB): a log file, not the terminal
    try:
        with quiet_torch_logs(captured):
            return torch.export.export(module, args), []
    except Exception as exc:  # noqa: BLE001 - the user's model raised: a value, retried once
        first = _last_line(exc) + _user_line(exc)
        if not retry_float32 or _float_params(module) <= {"float32", "float64"}:
            raise AuditInputError(f"torch.export failed on the example args: {first}{_log_note(exc, captured)}") from None
        try:
            with quiet_torch_logs(captured):
                ep = torch.export.export(copy.deepcopy(module).float(), args)
        except Exception as exc2:  # noqa: BLE001
            raise AuditInputError(f"torch.export failed on the example args: {first} (and with float32 parameters: "
                                  f"{_last_line(exc2)}{_user_line(exc2)}){_log_note(exc2, captured)}") from None
        return ep, [f"PyTorch raises on the example args as given ({first}); the graph was captured with "
                    "float32 parameters and declares the module's own dtypes"]


def _user_line(exc: BaseException) -> str:
    """' at FILE:LINE (`code`)': the last frame outside torch and precfuzz that torch's message names (its "The
    following call raised this error"), or '' (issue 37: the one line left torch's pointer to the user's code out)."""
    frames = [(f, int(n), code.strip()) for f, n, code in
              re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n[ \t]+([^\n]*)', str(exc))
              if "site-packages" not in f and not f.startswith(OWN_CODE)]
    if not frames:
        return ""
    name, line, code = frames[-1]
    return f" at {Path(name).name}:{line} (`{code[:120]}`)"


def _log_note(exc: BaseException, captured: io.StringIO) -> str:
    """'; torch's full message and output: PATH' (a file of its own), or '' where it cannot be written."""
    try:
        fd, path = tempfile.mkstemp(prefix="precfuzz-export-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(f"{type(exc).__name__}: {exc}\n\n--- printed by torch while exporting ---\n{captured.getvalue()}")
    except OSError:
        return ""
    return f"; torch's full message and output: {path}"


@contextlib.contextmanager
def quiet_torch_logs(captured: io.StringIO | None = None) -> Iterator[None]:
    """No log records while torch.export runs: on a model that raises, its fake-tensor dispatch logs the whole
    traceback at ERROR level to stderr before raising (round five: a Linear(4, 4) given a [2, 5] input printed 17
    lines of traceback above the audit's one error line); the exception itself is what the audit reports. With
    `captured`, what torch prints meanwhile goes there (a data-dependent guard prints the graph, twice)."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        if captured is None:
            yield
        else:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                yield
    finally:
        logging.disable(before)


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------- sources


OWN_CODE = str(Path(__file__).resolve().parents[1]) + "/"  # precfuzz's fuzzer/ package: no user line is in it


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
    outside = [p for p in parsed if "/torch/" not in p[0] and "/site-packages/" not in p[0]
               and not p[0].startswith(OWN_CODE)]  # never precfuzz's own wrapper (audit --train's loss module)
    fname, lineno, code = (mine or outside or parsed or [("", 0, "")])[-1]
    library = ""
    libs = [p for p in parsed if "/site-packages/" in p[0] and "/site-packages/torch/" not in p[0]]
    users = mine or outside
    if libs and not users:  # all of it inside libraries (a torchvision model): the library line is the place
        fname, lineno, code = libs[-1]
    elif libs and parsed.index(libs[-1]) > max(parsed.index(p) for p in users):
        lib_file, lib_line, lib_code = libs[-1]
        library = f"{lib_file.split('/site-packages/', 1)[1]}:{lib_line}"
        code = lib_code or code
    stack = fx_node.meta.get("nn_module_stack") or {}
    module = ""
    if stack:
        path, kind = list(stack.values())[-1]
        if path:
            module = f"{path} ({str(kind).rsplit('.', 1)[-1]})"
    return Source(fname, lineno, code, module, str(getattr(fx_node, "target", "")), library)


# ---------------------------------------------------------------- the op table


class _Skip(Exception):
    """An op this translation cannot take (collected, never raised to the caller)."""


# ATen overloads that keep their operand's value (copies, views of the whole, eval-mode dropout): no node
PASSTHROUGH = ("clone.default", "contiguous.default", "alias.default", "detach.default", "detach_.default",
               "lift_fresh_copy.default", "dropout.default", "dropout_.default", "_assert_tensor_metadata.default")
# calls that only check metadata: dropped
_ASSERTS = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range", "_assert_async")


def _resolve(name: str) -> Any:
    """The torch OpOverload an overload name ("add_.Tensor") names, or None where this torch lacks it."""
    import torch

    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet, None), overload, None)


def table() -> dict[Any, tuple[str, AtenFn]]:
    """ATen overload -> (its name, the translator of the op record that takes it), read off the op records."""
    out: dict[Any, tuple[str, AtenFn]] = {}
    for spec in OPS.values():
        for name, fn in spec.aten.items():
            target = _resolve(name)
            if target is not None:
                out[target] = (name, fn)
    return out


def passthrough() -> dict[Any, str]:
    """The value-keeping overloads, resolved."""
    return {t: n for n in PASSTHROUGH if (t := _resolve(n)) is not None}


# ---------------------------------------------------------------- translation


def _values(tensor: Any, arrays: bool = False) -> Any:
    import torch

    if arrays:  # a real-size model's parameters in their own width, no copy where numpy has the format (no float64
        # copy of a 1B model, no float32 copy of its bfloat16 move; blocks pack theirs as float64, one at a time)
        t = tensor.detach().to("cpu")
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if t.dtype in (torch.float16, torch.float32, torch.float64):
            return t.numpy()
        return t.to(torch.float32 if t.is_floating_point() else torch.float64).numpy()
    return tensor.detach().to("cpu").to(torch.float64).numpy().tolist()


@dataclass(frozen=True)
class _Empty:
    """A tensor without elements (an unused lifted constant, a legacy cat operand): it has no IR value."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def _input(name: str, tensor: Any, role: str, arrays: bool = False) -> Input | _Empty:
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise AuditInputError(f"input {name!r} is a {type(tensor).__name__}, not a tensor (pass tensors in example_args)")
    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype not in DTYPES:
        raise AuditInputError(f"input {name!r} has dtype {dtype}; the IR takes {', '.join(DTYPES)}")
    if any(s == 0 for s in tensor.shape):
        return _Empty(name, tuple(int(s) for s in tensor.shape), dtype)
    if torch.is_floating_point(tensor) and not bool(torch.isfinite(tensor.to(torch.float32)).all()):  # (fp8 has no
        # isfinite kernel; float32 holds every fp8 value)
        raise AuditInputError(f"input {name!r} holds inf or nan")
    return Input(name, tuple(int(s) for s in tensor.shape), dtype, role, "tensor", {"values": _values(tensor, arrays)})


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


class _Builder:
    """The IR graph as it is translated: inputs, typed nodes, each value's source line, the fx-name environment."""

    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.nodes: list[Node] = []
        self.values: dict[str, ValueInfo] = {}
        self.sources: dict[str, Source] = {}
        self.env: dict[str, Any] = {}  # fx node name -> IR value name, list of them, _Empty or _Missing
        self.taken: set[str] = set()
        self.concrete: dict[str, Any] = {}  # fx node name -> its value, where only parameters and constants make it
        self.folded: list[str] = []  # calls no record takes, computed at translation from constants (their lines)
        self.arrays = False  # inline values held as numpy arrays (the audit by blocks), not lists
        self.made: dict[str, tuple[str, int | None]] = {}  # IR value -> the fx node whose output it is (and index)

    def produced(self, fx_name: str) -> None:
        """Note which IR values fx node `fx_name` outputs (before an in-place op rebinds its name in env)."""
        value = self.env.get(fx_name)
        for index, item in ([(None, value)] if isinstance(value, str) else
                            list(enumerate(value)) if isinstance(value, (list, tuple)) else []):
            if isinstance(item, str):
                self.made.setdefault(item, (fx_name, index))

    def fresh(self, base: str) -> str:
        """An unused value name starting with `base`."""
        base = base or "v"
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def add_input(self, inp: Input | _Empty) -> Any:
        if isinstance(inp, Input):
            self.inputs.append(inp)
            self.values[inp.name] = inp.info()
            return inp.name
        return inp

    def info(self, value: Any) -> ValueInfo:
        """The static type of an operand (an empty tensor's too, so a translator can drop it)."""
        if isinstance(value, _Empty):
            return ValueInfo(value.shape, value.dtype)
        if not isinstance(value, str) or value not in self.values:
            raise _Skip("an operand that was not translated")
        return self.values[value]

    def emitter(self, fx_name: str, src: Source) -> Callable[[str, list[Any], dict[str, Any]], str]:
        """emit(op, operands, attrs) for one exported call: appends a typed node, returns its value name."""
        def emit(op: str, operands: list[Any], attrs: dict[str, Any]) -> str:
            if any(isinstance(o, (_Empty, _Missing, list)) for o in operands):
                raise _Skip("an empty or untranslated operand")
            while operands and operands[-1] is None:
                operands = operands[:-1]
            node = Node(self.fresh(fx_name), op, tuple(operands), attrs)
            try:
                self.values[node.id] = infer_node(node, self.values).value
            except IRError as exc:
                raise _Skip(str(exc).split(": ", 1)[-1]) from None
            self.nodes.append(node)
            self.sources[node.id] = src
            return node.id

        return emit

    def graph(self, outputs: list[str]) -> Graph:
        """The graph of the values the outputs need (dead nodes and unused inputs dropped)."""
        live = set(outputs)
        for node in reversed(self.nodes):
            if node.id in live:
                live.update(o for o in node.inputs if isinstance(o, str))
        return Graph(tuple(i for i in self.inputs if i.name in live), tuple(n for n in self.nodes if n.id in live),
                     tuple(dict.fromkeys(outputs)))


def _placeholders(ep: Any, module: Any, args: tuple[Any, ...], b: _Builder) -> None:
    """Inputs for the exported program's placeholders: parameters, buffers, constants, user inputs."""
    import torch
    from torch.export.graph_signature import InputKind

    state = {**dict(module.state_dict(keep_vars=False)), **{k: v for k, v in ep.state_dict.items()
                                                            if k not in module.state_dict()}}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    user_args = iter(a for a in torch.utils._pytree.tree_leaves(args))
    graph = ep.graph_module.graph
    used = {n.name for n in graph.nodes if n.users}
    for n in graph.nodes:
        if n.op != "placeholder":
            continue
        spec = specs.get(n.name)
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind == InputKind.USER_INPUT:
            value = next(user_args, None)
            if n.name in used:
                b.env[n.name] = b.add_input(_input(b.fresh(n.name), value, "input", b.arrays))
        elif kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            if n.name not in used:
                continue
            target = str(spec.target)
            tensor = state.get(target) if kind != InputKind.CONSTANT_TENSOR else ep.constants.get(target)
            if tensor is None:
                tensor = ep.constants.get(target)
            role = "param" if kind != InputKind.CONSTANT_TENSOR else "input"
            b.env[n.name] = b.add_input(_input(b.fresh(target), tensor, role, b.arrays))
            if isinstance(tensor, torch.Tensor):
                b.concrete[n.name] = tensor
        else:
            raise AuditInputError(f"placeholder {n.name!r} of kind {kind.name} is not supported")


def _aten_value(a: Any, env: dict[str, Any]) -> Any:
    """An exported call's argument as a translator sees it (see AtenCall)."""
    import torch

    if isinstance(a, torch.fx.Node):
        return env.get(a.name, _Missing())
    if isinstance(a, torch.dtype):
        return AtenDtype(str(a).replace("torch.", ""))
    if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(a, (list, tuple)):
        return [_aten_value(x, env) for x in a]
    return a


MAX_FOLDED_ELEMENTS = 1 << 16  # a folded value is inlined in the case: a bigger one is left untranslated
# factories that read only the shape, dtype and device of their tensor operand: constants whatever it holds
SHAPE_ONLY = frozenset({"new_zeros", "new_ones", "new_full", "zeros_like", "ones_like", "full_like"})
UNINITIALIZED = frozenset({"empty", "new_empty", "empty_like", "empty_strided"})  # never constants: garbage memory


def _base_name(target: Any) -> str:
    """An ATen target's name without its overload: `index_put_` of `aten.index_put_.default`."""
    return getattr(target, "__name__", str(target)).split(".")[0]


def _mutated(n: Any) -> Any:
    """The fx node an in-place call writes (its first argument), or None."""
    arg = n.args[0] if n.args else None
    return arg if _base_name(n.target).endswith("_") and hasattr(arg, "name") else None


def _fold(n: Any, concrete: dict[str, Any]) -> Any:
    """The value of call `n` where every tensor it reads is concrete (a parameter, buffer, constant, or made from
    them only), computed by PyTorch on copies; None where it reads a model input or fails."""
    import torch

    name = _base_name(n.target)
    shape_only, in_place = name in SHAPE_ONLY, _mutated(n) is not None

    def sub(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            if a.name not in concrete and shape_only and isinstance(a.meta.get("val"), torch.Tensor):
                val = a.meta["val"]  # only its shape, dtype and device are read
                return torch.zeros(tuple(int(d) for d in val.shape), dtype=val.dtype)
            if a.name not in concrete:
                raise KeyError(a.name)
            v = concrete[a.name]
            return v.clone() if in_place and isinstance(v, torch.Tensor) else v  # only an in-place call writes
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        return a

    if torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) or name in UNINITIALIZED:
        return None  # a random draw is the model's own input, and uninitialized memory no constant
    try:
        args, kwargs = sub(tuple(n.args)), {k: sub(v) for k, v in n.kwargs.items()}
        with torch.no_grad():
            return n.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a model input in reach, or an op PyTorch cannot run on its own: not folded
        return None


def _meta(n: Any) -> tuple[tuple[int, ...] | None, str | None, tuple[tuple[int, ...], ...]]:
    """(shape, dtype) of a call's one tensor result, and the shapes of a call returning several."""
    import torch

    val = n.meta.get("val")
    if isinstance(val, torch.Tensor):
        dtype = str(val.dtype).replace("torch.", "")
        return tuple(int(s) for s in val.shape), dtype if dtype in DTYPES else None, ()
    if isinstance(val, (list, tuple)):
        return None, None, tuple(tuple(int(s) for s in v.shape) for v in val if isinstance(v, torch.Tensor))
    return None, None, ()


def _calls(ep: Any, b: _Builder, model_file: str | None) -> tuple[list[str], set[Any]]:
    """Translate every call of the exported graph into `b`; (failures with their lines, targets lacking a record)."""
    import operator

    ops, keep = table(), passthrough()
    failures: list[str] = []
    unknown: set[Any] = set()
    for n in ep.graph_module.graph.nodes:
        if n.op != "call_function":
            continue
        target_name = getattr(n.target, "__name__", str(n.target))
        if any(target_name.startswith(a) for a in _ASSERTS):
            continue
        args = [_aten_value(a, b.env) for a in n.args]
        if n.target is operator.getitem:
            parts, index = args[0], args[1]
            b.env[n.name] = parts[index] if isinstance(parts, list) and parts[index] is not None else _Missing()
            whole = b.concrete.get(getattr(n.args[0], "name", ""))
            if isinstance(whole, (list, tuple)):
                b.concrete[n.name] = whole[index]
            continue
        value = _fold(n, b.concrete)
        if value is not None:
            b.concrete[n.name] = value
            if _mutated(n) is not None:
                b.concrete[_mutated(n).name] = value
        if n.target in keep:
            if n.target.__name__.startswith("dropout") and len(args) > 2 and args[2]:
                failures.append(f"dropout in training mode at {_where(source_of(n, model_file))}")
                b.env[n.name] = _Missing()
            else:
                b.env[n.name] = args[0]
            continue
        src = source_of(n, model_file)
        entry = ops.get(n.target)
        if entry is None and _folded(n, value, b, src):
            continue
        if entry is None:
            failures.append(f"{_op_name(n.target)} at {_where(src)}")
            unknown.add(n.target)
            b.env[n.name] = _Missing()
            continue
        overload, fn = entry
        if any(isinstance(a, _Missing) for a in args):
            if not _folded(n, value, b, src):
                b.env[n.name] = _Missing()  # a user of an op already listed: not listed again
            continue
        shape, dtype, shapes = _meta(n)
        call = AtenCall(overload, tuple(args), {k: _aten_value(v, b.env) for k, v in n.kwargs.items()}, shape, dtype,
                        b.emitter(n.name, src), b.info, shapes)
        try:
            b.env[n.name] = fn(call)
            b.produced(n.name)
        except (_Skip, AtenSkip) as why:
            if _folded(n, value, b, src):
                continue
            if "not translated" not in str(why):
                failures.append(f"{_op_name(n.target)} ({why}) at {_where(src)}")
            b.env[n.name] = _Missing()
            continue
        if _mutated(n) is not None:  # an in-place op: later reads see the new value
            b.env[_mutated(n).name] = b.env[n.name]
    return failures, unknown


def _folded(n: Any, value: Any, b: _Builder, src: Source) -> bool:
    """Where no record translates call `n` but its value is concrete: that value as a constant input of the graph
    (a parameter: a precision policy casts it as model.to casts the buffers it came from). False: not foldable."""
    import torch

    if not isinstance(value, torch.Tensor) or value.numel() > MAX_FOLDED_ELEMENTS:
        return False
    try:
        b.env[n.name] = b.add_input(_input(b.fresh(n.name), value, "param", b.arrays))
    except AuditInputError:
        return False
    b.folded.append(f"{_op_name(n.target)} at {_where(src)}")
    if _mutated(n) is not None:
        b.env[_mutated(n).name] = b.env[n.name]
    return True


MAX_DECOMPOSITION_ROUNDS = 3


def translate(module: Any, args: tuple[Any, ...], model_file: str | None = None, name: str = "model",
              retry_float32: bool = True, blocks: int | None = None, store: Path | None = None) -> Translation:
    """The module as a case: export, map every call through the op records, collect every untranslatable op.
    By `blocks` with a `store` folder, the block cases are spilled there (fuzzer.audit.blocks.spill).

    Calls no record takes but that PyTorch decomposes (torch.export's default table) are decomposed and
    translated again. AuditInputError when the module cannot be exported or holds ops no record takes (all of
    them listed, with their source lines).
    """
    import torch

    ep, notes = capture(module, args, retry_float32)
    retried = bool(notes)  # captured with float32 parameters (PyTorch raised on the module as it is)
    decomposed: list[str] = []
    for _ in range(MAX_DECOMPOSITION_ROUNDS + 1):
        b = _Builder()
        b.arrays = blocks is not None
        _placeholders(ep, module, args, b)
        failures, unknown = _calls(ep, b, model_file)
        table_ = torch.export.default_decompositions()
        chosen = {t: table_[t] for t in unknown if t in table_}
        if not failures or not chosen:
            break
        decomposed += sorted(_op_name(t) for t in chosen)
        ep = ep.run_decompositions(chosen)
    if decomposed:
        notes.append(f"decomposed into ops precfuzz has: {', '.join(dict.fromkeys(decomposed))}")
    if b.folded:
        notes.append("computed at translation from parameters and constants only (no op record takes them): "
                     + "; ".join(dict.fromkeys(b.folded)))
    if failures:
        raise AuditInputError(f"{len(failures)} op(s) precfuzz cannot translate: " + "; ".join(failures))
    graph = ep.graph_module.graph
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = [_aten_value(o, b.env) for o in torch.utils._pytree.tree_leaves(out_node.args)]
    computed = {nd.id for nd in b.nodes}
    if not outs or not all(isinstance(o, str) and o in computed for o in outs):
        raise AuditInputError("forward must return tensors it computes (a tensor or a tuple of tensors), but it "
                              f"returned {_describe_outputs(ep, out_node, computed, b.env)}")
    graph_ir = b.graph(outs)
    if retried:
        graph_ir, unbaked_casts = unbaked(graph_ir)
        if unbaked_casts:
            notes.append(f"{len(unbaked_casts)} cast(s) to float32 that torch.export wrote for the float32 capture, each "
                         "meeting the module's own parameters, read as casts to their dtype (a `.to(self.dtype)`: "
                         + ", ".join(unbaked_casts[:5]) + ")")
    total = sum(math.prod(i.shape) for i in graph_ir.inputs)
    if blocks is not None:
        return _by_blocks(ep, module, args, b, graph_ir, model_file, name, notes, blocks, store)
    if total > MAX_AUDIT_ELEMENTS:
        raise AuditInputError(f"the model holds {total} parameter and input values, more than the "
                              f"{MAX_AUDIT_ELEMENTS} an audit takes (use smaller example args or a smaller config)")
    try:
        check_size(graph_ir, infer(graph_ir))
    except IRError as exc:
        raise AuditInputError(f"the translated graph is invalid: {exc}") from None
    case = Case(graph_ir, ({},), {"source": f"audit:{Path(model_file).name if model_file else name}", "model": name})
    return Translation(case, {k: v for k, v in b.sources.items() if k in computed}, notes)


def unbaked(graph: Graph) -> tuple[Graph, list[str]]:
    """A graph captured with float32 parameters (capture's retry) with the casts torch.export baked from the float32
    module read as the module's own: a cast to float32 of a value already float32, which reaches (past layout ops) an op
    whose parameters have another dtype, was a `.to(self.dtype)` or `.to(query.dtype)` (diffusers' time embedding and
    attention processor in the DDPM step: each a false raise hazard at the op after it); it casts to their dtype.
    (graph, the casts retyped)."""
    from ..ops import is_cast

    typed = infer(graph)
    made = {n.id: n for n in graph.nodes}
    retype: dict[str, str] = {}
    for node_id, brk in typed.chain_breaks().items():
        value = made[node_id].inputs[brk.operand]
        while isinstance(value, str) and value in made and getattr(OPS.get(made[value].op), "family", "") == "layout":
            value = made[value].inputs[0]
        cast = made.get(value) if isinstance(value, str) else None
        if (cast is not None and is_cast(cast.op) and cast.attrs.get("dtype") == "float32" and cast.inputs
                and isinstance(cast.inputs[0], str) and typed.values[cast.inputs[0]].dtype == "float32"):
            retype[cast.id] = brk.param_dtype
    if not retype:
        return graph, []
    nodes = tuple(replace(n, attrs={**n.attrs, "dtype": retype[n.id]}) if n.id in retype else n for n in graph.nodes)
    return Graph(graph.inputs, nodes, graph.outputs), sorted(retype)


def _floating_params(graph: Graph) -> bool:
    """True when the graph has float32 parameters (what autocast runs in bfloat16)."""
    return any(i.role == "param" and i.dtype == "float32" for i in graph.inputs)


def _by_blocks(ep: Any, module: Any, args: tuple[Any, ...], b: _Builder, graph_ir: Graph, model_file: str | None,
               name: str, notes: list[str], limit: int, store: Path | None = None) -> Translation:
    """The translation of a model of any size as its distinct blocks, each fed its recorded activations; with
    `store`, each block's case is written there as soon as it is packed and let go of (blocks.spill)."""
    from .blocks import block_case, boundary, distinct, healed, packed, partition, record, spill, split_wide

    try:
        infer(graph_ir)
    except IRError as exc:
        raise AuditInputError(f"the translated graph is invalid: {exc}") from None
    sources = {k: v for k, v in b.sources.items() if k in {n.id for n in graph_ir.nodes}}
    parts = partition(graph_ir, sources, limit)
    wanted = boundary(graph_ir, parts)
    try:
        recorded, widen = record(ep, module, args, b.made, wanted), False
    except Exception as exc:  # noqa: BLE001 - the model raises as it is (a dtype break, reported as a hazard)
        recorded, widen = record(ep, module, args, b.made, wanted, widen=True), True
        notes.append(f"the model raises as it is ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}):"
                     " blocks are fed the activations of its run with every float parameter and input in float32")
    autocast = None
    if _floating_params(graph_ir) and not widen:  # the activations under autocast too: a second input set
        try:
            autocast = record(ep, module, args, b.made, wanted, autocast="bfloat16")
        except Exception as exc:  # noqa: BLE001 - the model's own code under autocast: said, not fatal
            notes.append(f"activations under torch.autocast(bfloat16) not recorded ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:120] if str(exc) else ''}): blocks are fed the float32 run's only")
    meta = {"source": f"audit:{Path(model_file).name if model_file else name}", "model": name}
    fixed = healed(graph_ir)  # past a dtype break, blocks are fed the dtypes of the model once it is fixed
    fed_dtypes = {} if fixed is graph_ir else {k: v.dtype for k, v in infer(fixed).values.items()}
    cases = []
    for part in parts:
        for bc in split_wide(block_case(graph_ir, part, recorded, sources, meta, pack_values=False, autocast=autocast,
                                        fed_dtypes=fed_dtypes), limit):
            try:
                check_size(bc.case.graph, infer(bc.case.graph))
            except IRError as exc:
                raise AuditInputError(f"block {bc.block.name} is too big to judge: {exc}") from None
            cases.append(bc)
    kept = [packed(bc) if store is None else spill(packed(bc), store, k) for k, bc in enumerate(distinct(cases))]
    fed = ("; a block is fed the float32 run's activations and, as a second input set, those of the run under "
           "torch.autocast(bfloat16)") if autocast is not None else ""
    notes.append(f"real size by blocks: {len(cases)} block(s), {len(kept)} of them distinct (blocks of one structure "
                 f"are audited once, on the parameters and activations of the one fed the largest activations{fed})")
    whole = Graph(tuple(replace(i, init={"dist": "constant", "value": 0.0}) for i in graph_ir.inputs),
                  graph_ir.nodes, graph_ir.outputs)  # its shapes only: the values are its blocks'
    case = Case(whole, ({},), {**meta, "blocks": len(cases)})
    return Translation(case, sources, notes, blocks=kept)


def as_bfloat16(module: Any, args: tuple[Any, ...], model_file: str | None, name: str,
                blocks: int | None = None, store: Path | None = None) -> tuple[Translation | None, str]:
    """The module as `model.to(torch.bfloat16)` runs it (float inputs cast too), exported and translated on its own.

    torch.export writes every runtime dtype as the example had it: `x.to(input_dtype)` (LlamaRMSNorm),
    `t_emb.to(dtype=self.dtype)` (diffusers) become casts to float32 in a float32 capture, and the bfloat16 policy
    of that graph breaks where the real bfloat16 model runs. Exporting the bfloat16 module is what runs.
    (None, why) where there is nothing to move (no float32/float64 parameters) or PyTorch refuses. `blocks`: by
    blocks, as the float32 capture (its blocks fed the bfloat16 model's own activations).
    """
    import copy

    import torch

    floats = [t for t in list(module.parameters()) + list(module.buffers()) if torch.is_floating_point(t)]
    if not floats or all(t.dtype == torch.bfloat16 for t in floats):
        return None, ""
    cast = torch.utils._pytree.tree_map(
        lambda t: t.to(torch.bfloat16) if isinstance(t, torch.Tensor) and torch.is_floating_point(t) else t, args)
    try:
        moved = copy.deepcopy(module).to(torch.bfloat16).eval()
        return translate(moved, cast, model_file, name, retry_float32=False, blocks=blocks, store=store), ""
    except AuditInputError as exc:
        return None, f"under model.to(bfloat16) with its float inputs cast, the module could not be taken: {exc}"


class _Missing:
    """The value of a node that was not translated (its users are skipped, not reported again)."""


def _op_name(target: Any) -> str:
    name = str(target)
    return name if name.startswith("aten.") else getattr(target, "__name__", name)


def _where(src: Source) -> str:
    return f"{src.where()} `{src.code}`" if src.file else "(no source line)"
