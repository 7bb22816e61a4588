"""The op-graph IR: plain data with a JSON form, a content hash as id, and PyTorch-semantics type inference."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from . import arrays, limits
from .dtypes import check_dtype, is_float
from .ops import OPS, ChainBreak, IRError, Typed, ValueInfo, tensor
from .promotion import PromotionError
from .tvm_passes import PassSequenceError, check_sequence
from .values import ValueSpecError, check_spec, make_values

FORMAT = "precfuzz-graph/1"
ROLES = ("input", "param")
KINDS = ("tensor", "scalar")
Operand = str | float | int | None  # a value name, a Python-scalar literal, or an absent optional operand


@dataclass(frozen=True)
class Input:
    """A graph input: a tensor (any rank, 0-dim included) or a Python scalar, with how its values are made."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = "input"
    kind: str = "tensor"
    init: dict[str, Any] = field(default_factory=lambda: {"dist": "normal", "seed": 0})
    grad: bool = False  # a training case checks the gradient of its loss (the first output) with respect to this input

    def info(self) -> ValueInfo:
        """Static type of this input."""
        if self.kind == "scalar":
            return ValueInfo((), "float64" if is_float(self.dtype) else "int64", "scalar")
        return tensor(self.shape, self.dtype)


@dataclass(frozen=True)
class Node:
    """One op application; its output value is named by `id`."""

    id: str
    op: str
    inputs: tuple[Operand, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Graph:
    """Inputs, nodes in topological order, and output value names."""

    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]

    @cached_property
    def text(self) -> str:
        """canonical(graph_to_json(self)), made once per graph: the key of programs, numbers and reference code (a
        real model's graph holds its weights: megabytes of JSON, which a check of it keyed 30 times)."""
        return canonical(graph_to_json(self))

    @cached_property
    def form(self) -> str:
        """`text` without the inputs' values: what code made from the graph depends on (the reference interpreter's
        compiled function), a key that stays small for a block of real weights."""
        body = graph_to_json(self)
        for inp in body["inputs"]:
            inp["init"] = {"dist": "constant", "value": 0.0}
        return canonical(body)

    @cached_property
    def digest(self) -> str:
        """sha256 of `text`: the key of caches that outlive one check (a real block's text is megabytes of weights:
        kept as the key of 32 compiled programs per TVM pipeline, it grew a worker by gigabytes over a UNet)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the cached text (it is made again where needed)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("text", "form")}

    def input(self, name: str) -> Input:
        """The input called `name`."""
        for inp in self.inputs:
            if inp.name == name:
                return inp
        raise KeyError(name)

    def node(self, name: str) -> Node:
        """The node whose output is `name`."""
        for node in self.nodes:
            if node.id == name:
                return node
        raise KeyError(name)

    @property
    def wrt(self) -> tuple[str, ...]:
        """The inputs whose gradients a training case checks (empty for a forward-only case)."""
        return tuple(i.name for i in self.inputs if i.grad)


@dataclass(frozen=True)
class Case:
    """A graph plus one or more input sets (value-spec overrides per input) and provenance."""

    graph: Graph
    input_sets: tuple[dict[str, dict[str, Any]], ...] = ({},)
    meta: dict[str, Any] = field(default_factory=dict)
    tvm_passes: tuple[str, ...] | None = None  # the Relax pass sequence tvm/passes runs (None: derived, see options)

    @property
    def id(self) -> str:
        """Content hash of graph and input sets (meta excluded)."""
        body = case_to_json(self)
        body.pop("meta", None)
        return hashlib.sha256(canonical(body).encode()).hexdigest()[:16]

    def with_graph(self, graph: Graph) -> "Case":
        """The same input sets over another graph (overrides for inputs it lacks are dropped)."""
        names = {i.name for i in graph.inputs}
        sets = tuple({k: v for k, v in s.items() if k in names} for s in self.input_sets)
        return replace(self, graph=graph, input_sets=sets)


def canonical(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces) used for hashing and byte-identical files."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- JSON


def graph_to_json(graph: Graph) -> dict[str, Any]:
    """The JSON object of a graph."""
    return {
        "format": FORMAT,
        "inputs": [
            {"name": i.name, "role": i.role, "kind": i.kind, "shape": list(i.shape), "dtype": i.dtype, "init": i.init,
             **({"grad": True} if i.grad else {})}  # written only when set: forward-only cases keep their ids
            for i in graph.inputs
        ],
        "nodes": [{"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": n.attrs} for n in graph.nodes],
        "outputs": list(graph.outputs),
    }


def case_to_json(case: Case) -> dict[str, Any]:
    """The JSON object of a case."""
    body = graph_to_json(case.graph)
    body["input_sets"] = [dict(s) for s in case.input_sets]
    body["meta"] = dict(case.meta)
    if case.tvm_passes is not None:
        body["tvm_passes"] = list(case.tvm_passes)
    return body


def case_options(case: Case) -> dict[str, Any]:
    """The per-case settings executors read (Executor.bind): the pass sequence where the case has one."""
    return {} if case.tvm_passes is None else {"tvm_passes": list(case.tvm_passes)}


def _field(obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise IRError(f"{where}: missing field {key!r}")
    if not isinstance(obj[key], kind):
        raise IRError(f"{where}: field {key!r} has the wrong type ({type(obj[key]).__name__})")
    return obj[key]


def _show(value: Any, width: int = 60) -> str:
    """A short repr for error messages (long values cut)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 256 else f"<int of {value.bit_length()} bits>"
    return text if len(text) <= width else text[: width - 3] + "..."


def _plain(text: str) -> str:
    """Text as is when it is a short printable word, else its short repr (error messages stay one line)."""
    return text if isinstance(text, str) and text.isprintable() and len(text) <= 60 else _show(text)


def _name(raw: dict[str, Any], key: str, where: str, trusted: bool) -> str:
    name = _field(raw, key, where, str)
    if not trusted and (not name or len(name) > limits.MAX_NAME_CHARS):
        raise IRError(f"{where}: field {key!r} must be a non-empty string of at most {limits.MAX_NAME_CHARS} characters")
    return name


def _shape(raw: dict[str, Any], where: str, trusted: bool) -> tuple[int, ...]:
    shape = _field(raw, "shape", where, list)
    if trusted:
        return tuple(shape)
    if len(shape) > limits.MAX_RANK or not all(
            isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= limits.MAX_DIM for s in shape):
        raise IRError(f"{where}: shape must be a list of at most {limits.MAX_RANK} ints in 1..{limits.MAX_DIM}, "
                      f"got {_show(shape)}")
    if math.prod(shape) > limits.MAX_VALUE_ELEMENTS:
        raise IRError(f"{where}: shape {_show(shape)} has {math.prod(shape)} elements, more than the "
                      f"{limits.MAX_VALUE_ELEMENTS} one value may have")
    return tuple(shape)


def graph_from_json(obj: Any, input_sets: int = 1, trusted: bool = False) -> Graph:
    """Parse and validate a graph object; IRError names the node or input at fault (one line).

    trusted=True is for graphs precfuzz made itself (a policy graph sent to a worker): types are checked, the
    limits on outside input (fuzzer.limits: names, counts, sizes) are not.
    """
    if not isinstance(obj, dict):
        raise IRError("graph: expected a JSON object")
    fmt = obj.get("format", FORMAT)
    if fmt != FORMAT:
        raise IRError(f"graph: unsupported format {_show(fmt)} (expected {FORMAT!r})")
    raw_inputs, raw_nodes = _field(obj, "inputs", "graph", list), _field(obj, "nodes", "graph", list)
    if not trusted and (len(raw_inputs) > limits.MAX_INPUTS or len(raw_nodes) > limits.MAX_NODES):
        raise IRError(f"graph: at most {limits.MAX_INPUTS} inputs and {limits.MAX_NODES} nodes")
    inputs = []
    for raw in raw_inputs:
        if not isinstance(raw, dict):
            raise IRError("input: expected an object")
        where = f"input {_show(raw.get('name', '?'))}"
        name = _name(raw, "name", where, trusted)
        shape = _shape(raw, where, trusted)
        try:
            dtype = check_dtype(_field(raw, "dtype", where, str))
        except IRError:
            raise  # already says where
        except ValueError as exc:
            raise IRError(f"{where}: {exc}") from None
        role, kind = raw.get("role", "input"), raw.get("kind", "tensor")
        if role not in ROLES or kind not in KINDS:
            raise IRError(f"{where}: role must be one of {ROLES} and kind one of {KINDS}")
        if kind == "scalar" and shape:
            raise IRError(f"{where}: a Python scalar has shape []")
        init = raw.get("init", {"dist": "normal", "seed": 0})
        try:
            check_spec(init, shape)
        except (ValueSpecError, ValueError) as exc:
            raise IRError(f"{where}: bad init: {exc}") from None
        grad = raw.get("grad", False)
        if not isinstance(grad, bool) or (grad and (kind != "tensor" or not is_float(dtype))):
            raise IRError(f"{where}: grad must be true or false, and true only on a floating-point tensor")
        inputs.append(Input(name, shape, dtype, role, kind, init, grad))
    nodes = []
    for raw in raw_nodes:
        if not isinstance(raw, dict):
            raise IRError("node: expected an object")
        where = f"node {_show(raw.get('id', '?'))}"
        node_id = _name(raw, "id", where, trusted)
        ops = _field(raw, "inputs", where, list)
        for o in ops:
            if not (o is None or isinstance(o, (str, int, float))) or isinstance(o, bool):
                raise IRError(f"{where}: operand {_show(o)} is neither a value name, a number nor null")
        attrs = raw.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise IRError(f"{where}: attrs must be an object, got {type(attrs).__name__}")
        nodes.append(Node(node_id, _field(raw, "op", where, str), tuple(ops), dict(attrs)))
    outputs = _field(obj, "outputs", "graph", list)
    if not all(isinstance(o, str) for o in outputs):
        raise IRError(f"graph: outputs must be value names, got {_show(outputs)}")
    graph = Graph(tuple(inputs), tuple(nodes), tuple(outputs))
    typed = infer(graph)
    check_training(graph, typed)
    if not trusted:
        check_size(graph, typed, input_sets)
    return graph


def forward_inputs(graph: Graph) -> tuple[Input, ...]:
    """A graph's inputs without gradient flags: a probe, prefix or cut of a training case is a forward program (its
    output is no loss; triage21: every forward finding of a training case went unlocalized, named the loss;
    triage22: attribution's cut at a departed node raised as an invalid training case)."""
    return tuple(replace(i, grad=False) if i.grad else i for i in graph.inputs)


def check_training(graph: Graph, typed: "TypedGraph") -> None:
    """IRError unless a training graph's first output is its loss (a 0-dim float) and its gradients are of float
    tensors (a forward-only graph passes)."""
    if not graph.wrt:
        return
    if any(i.grad and (i.kind != "tensor" or not is_float(i.dtype)) for i in graph.inputs):
        raise IRError("graph: a gradient is taken of floating-point tensor inputs only")
    loss = typed.values[graph.outputs[0]] if graph.outputs else None
    if loss is None or loss.kind == "scalar" or loss.shape != () or not is_float(loss.dtype):
        raise IRError("graph: a training case's first output is its loss: a 0-dim floating-point tensor")


def check_size(graph: Graph, typed: "TypedGraph", input_sets: int = 1) -> None:
    """IRError when the case would need more memory, or more float64 work of the reference, than fuzzer.limits
    allows (checked before allocating anything)."""
    sizes = {f"value {name!r}": math.prod(info.shape) for name, info in typed.values.items()}
    try:
        for node in graph.nodes:
            for what, count in reference_work(node, typed).items():
                sizes[f"node {_show(node.id)} ({what})"] = count
            if OPS[node.op].reference.__name__ == "adaptive_avg_pool":  # one Python step per output position
                limits.check_loops(f"node {_show(node.id)}", math.prod(typed.values[node.id].shape[2:]))
        limits.check_working_memory(sum(sizes.values()), max(sizes.items(), key=lambda kv: kv[1]), input_sets)
        macs = {f"node {_show(node.id)} ({node.op})": reference_macs(node, typed) for node in graph.nodes}
        if macs:  # a training case's gradients take about twice the forward's work again
            limits.check_multiply_adds(sum(macs.values()) * (3 if graph.wrt else 1),
                                       max(macs.items(), key=lambda kv: kv[1]), input_sets)
    except limits.LimitError as exc:
        raise IRError(f"graph: {exc}") from None


def reference_macs(node: Node, typed: "TypedGraph") -> int:
    """Multiply-adds the float64 reference does for `node` (matmul, linear, convolutions, attention; 0 for the
    others, whose work is a few passes over their values, which the value caps bound)."""
    family, ref = OPS[node.op].family, OPS[node.op].reference.__name__
    out = typed.values[node.id].shape
    shape = lambda k: typed.values[node.inputs[k]].shape  # type: ignore[index]  # noqa: E731
    if family in ("matmul", "linear", "scaled_mm"):  # each output element is a dot of the inner dim
        inner = shape(1)[-1] if family == "linear" else shape(0)[-1]  # (linear's weight is [out, in])
        return math.prod(out) * inner
    if family == "conv":  # each output element: C_in / groups x kernel
        return math.prod(out) * math.prod(shape(1)[1:])
    if family == "conv_transpose":  # each input element scatters into C_out / groups x kernel outputs
        return math.prod(shape(0)) * math.prod(shape(1)[1:])
    if ref == "sdpa":  # q . k for every score, then the scores times v
        q, k = shape(0), shape(1)
        scores = math.prod(out[:-1]) * (k[-2] if len(k) >= 2 else 1)
        return scores * (q[-1] + out[-1])
    return 0


def reference_work(node: Node, typed: "TypedGraph") -> dict[str, int]:
    """Elements the float64 reference forms for `node` beyond its output: the windows of a convolution or a pooling
    (N x C x output positions x kernel), an adaptive pooling's boxes, an attention's scores (batch x L x S)."""
    family, ref = OPS[node.op].family, OPS[node.op].reference.__name__
    out = typed.values[node.id].shape
    if family in ("conv", "conv_transpose"):  # the reference copies every sliding window
        x, w = typed.values[node.inputs[0]], typed.values[node.inputs[1]]  # type: ignore[index]
        return {"its sliding windows": x.shape[0] * x.shape[1] * math.prod(out[2:]) * math.prod(w.shape[2:])}
    if ref in ("max_pool", "avg_pool"):  # every window element is read (a max or a sum over a strided view)
        nd = len(out) - 2
        kernel = node.attrs.get("kernel_size", 1)
        kernel = [kernel] * nd if isinstance(kernel, int) else list(kernel)
        return {"its pooling windows": math.prod(out) * math.prod(int(k) for k in kernel[:nd])}
    if ref == "adaptive_avg_pool":  # each output position sums its box: at most ceil(n / o) + 1 per dim
        x = typed.values[node.inputs[0]].shape  # type: ignore[index]
        return {"its pooling boxes": math.prod(out) * math.prod(-(-n // max(o, 1)) + 1 for n, o in zip(x[2:], out[2:]))}
    if ref == "sdpa":  # the scores: one per (batch..., query, key)
        k = typed.values[node.inputs[1]].shape  # type: ignore[index]
        return {"its attention scores": math.prod(out[:-1]) * (k[-2] if len(k) >= 2 else 1)}
    return {}


def case_from_json(obj: Any) -> Case:
    """Parse and validate a case object (a graph with optional input_sets and meta)."""
    if not isinstance(obj, dict):
        raise IRError("graph: expected a JSON object")
    sets = obj.get("input_sets", [{}])
    if sets == []:
        sets = [{}]
    if not isinstance(sets, list) or not all(isinstance(s, dict) for s in sets):
        raise IRError("graph: input_sets must be a list of objects")
    if len(sets) > limits.MAX_INPUT_SETS:
        raise IRError(f"graph: at most {limits.MAX_INPUT_SETS} input sets, got {len(sets)}")
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise IRError(f"graph: meta must be an object, got {type(meta).__name__}")
    passes = obj.get("tvm_passes")
    if passes is not None:
        if not isinstance(passes, list):
            raise IRError(f"graph: tvm_passes must be a list of pass names, got {type(passes).__name__}")
        try:
            passes = check_sequence(passes)
        except PassSequenceError as exc:
            raise IRError(str(exc)) from None
    graph = graph_from_json(obj, len(sets))
    shapes = {i.name: i.shape for i in graph.inputs}
    for k, s in enumerate(sets):
        for name, spec in s.items():
            if name not in shapes:
                raise IRError(f"input set {k}: no input named {_show(name)}")
            try:
                check_spec(spec, shapes[name])
            except (ValueSpecError, ValueError) as exc:
                raise IRError(f"input set {k}, input {name!r}: {exc}") from None
    check_int_inputs(graph, sets)
    return Case(graph, tuple(sets), dict(meta), passes)


def check_int_inputs(graph: Graph, sets: list[dict[str, Any]]) -> None:
    """IRError when an int input's values (any input set) lie beyond its dtype's range (the size was checked)."""
    for inp in graph.inputs:
        if inp.dtype not in ("int32", "int64"):
            continue
        dtype = inp.dtype if inp.kind == "tensor" else "int64"
        for k, s in enumerate(sets):
            try:
                make_values(s.get(inp.name, inp.init), inp.shape, dtype)
            except (ValueSpecError, ValueError) as exc:
                where = f"input set {k}, input {_show(inp.name)}" if inp.name in s else f"input {_show(inp.name)}"
                raise IRError(f"{where}: {exc}") from None


def parse_case(text: str, where: str = "case", folder: Path | None = None) -> Case:
    """A case from JSON text; IRError (one line) on malformed, too deeply nested or invalid input. `folder`: where
    the array files its references name lie (the case file's folder; fuzzer.arrays)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IRError(f"{where}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise IRError(f"{where}: JSON nested deeper than {limits.MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise IRError(f"{where}: malformed JSON: {exc}") from None
    try:
        limits.check_json(obj)
        arrays.attach(obj, folder)
        return case_from_json(obj)
    except (limits.LimitError, arrays.ArrayFileError) as exc:
        raise IRError(f"{where}: {exc}") from None
    except IRError as exc:
        raise IRError(f"{where}: {exc}") from None


def read_limited(path: str | Path, limit: int = limits.MAX_FILE_BYTES) -> bytes:
    """At most `limit` bytes of a file (IRError beyond that, so /dev/zero or a huge file is refused quickly)."""
    try:
        if Path(path).is_dir():
            raise IRError(f"{path}: is a directory, not a case file")
        if Path(path).is_fifo() or Path(path).is_socket():  # opening a FIFO blocks until someone writes to it
            raise IRError(f"{path}: is a pipe or socket, not a case file")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise IRError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # an embedded NUL in the path
        raise IRError(f"{path!r}: cannot read ({exc})") from None
    if len(data) > limit:
        raise IRError(f"{path}: larger than {limit // 2**20} MiB, the most a case file may hold")
    return data


def load_case(path: str | Path) -> Case:
    """Read a case JSON file; IRError (one line) on any problem."""
    data = read_limited(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IRError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_case(text, str(path), Path(path).parent)


def save_case(case: Case, path: str | Path, force: bool = False) -> Path:
    """Write a case as pretty, key-sorted JSON (byte-identical for equal cases) with precfuzz's generated header:
    never over a device, FIFO or directory, nor over a file precfuzz did not write unless `force`. Arrays of more
    than arrays.ARRAY_FILE_VALUES values (a real block's weights) go to `<name>.npz` beside it (fuzzer.arrays)."""
    from .outfiles import replace_file

    body = case_to_json(case)
    held = arrays.detach(body, Path(path).with_suffix(".npz").name)
    if held:  # written first: the JSON never names an array file that is not there yet
        replace_file(Path(path).with_suffix(".npz"), arrays.npz_bytes(held), sync=False, manifest=True, force=force)
    return replace_file(path, json.dumps(body, indent=1, sort_keys=True) + "\n", sync=False, style="json",
                        force=force)


# ---------------------------------------------------------------- typing


@dataclass(frozen=True)
class TypedGraph:
    """Type inference result: every value's static type, and each node's typing details."""

    values: dict[str, ValueInfo]
    nodes: dict[str, Typed]

    def chain_breaks(self) -> dict[str, ChainBreak]:
        """Nodes whose activation dtype differs from their parameters' dtype."""
        return {k: t.chain_break for k, t in self.nodes.items() if t.chain_break is not None}


def infer(graph: Graph) -> TypedGraph:
    """Check the graph and infer every value's shape and dtype as PyTorch would; IRError names the culprit."""
    values: dict[str, ValueInfo] = {}
    for inp in graph.inputs:
        if inp.name in values:
            raise IRError(f"input {inp.name!r}: duplicate name")
        values[inp.name] = inp.info()
    typed: dict[str, Typed] = {}
    for node in graph.nodes:
        result = infer_node(node, values)
        values[node.id] = result.value
        typed[node.id] = result
    if not graph.outputs:
        raise IRError("graph: no outputs")
    for out in graph.outputs:
        if out not in values:
            raise IRError(f"graph: output {out!r} is not a value of the graph")
        if values[out].is_scalar:
            raise IRError(f"graph: output {out!r} is a Python scalar, not a tensor")
    return TypedGraph(values, typed)


def infer_node(node: Node, values: dict[str, ValueInfo]) -> Typed:
    """Type one node against the types of the values before it; IRError names the node."""
    where = f"node {node.id!r} ({_plain(node.op)})"
    if node.id in values:
        raise IRError(f"{where}: duplicate value name")
    spec = OPS.get(node.op)
    if spec is None:
        raise IRError(f"{where}: unknown op {_show(node.op)}")
    if not spec.required <= len(node.inputs) <= len(spec.operands):
        raise IRError(f"{where}: expects {spec.required}..{len(spec.operands)} operands "
                      f"({', '.join(spec.operands)}), got {len(node.inputs)}")
    unknown = set(node.attrs) - set(spec.attrs)
    if unknown:
        raise IRError(f"{where}: unknown attribute(s) {', '.join(_plain(k) for k in sorted(map(str, unknown)))}")
    attrs = {**spec.attrs, **node.attrs}
    for key, rule in spec.attr_types.items():
        if not rule.accepts(attrs[key]):
            raise IRError(f"{where}: attribute {key!r} must be {rule.what}, got {_show(attrs[key])}")
    infos: list[ValueInfo | None] = []
    for slot, operand in zip(spec.operands + ("",) * 8, list(node.inputs) + [None] * (len(spec.operands) - len(node.inputs))):
        if operand is None:
            if not slot.endswith("?"):
                raise IRError(f"{where}: operand {slot!r} is required")
            infos.append(None)
        elif isinstance(operand, str):
            if operand not in values:
                raise IRError(f"{where}: operand {operand!r} is not defined before this node")
            infos.append(values[operand])
        else:
            if not spec.scalars_ok:
                raise IRError(f"{where}: operand {slot!r} cannot be a Python scalar")
            if not _literal_ok(operand):
                raise IRError(f"{where}: literal operand {_show(operand)} must be a finite float or an int of "
                              f"magnitude <= {limits.MAX_INT_LITERAL}")
            infos.append(ValueInfo((), "float64" if isinstance(operand, float) else "int64", "scalar"))
    if spec.scalars_ok is False and any(i is not None and i.is_scalar for i in infos):
        raise IRError(f"{where}: operands must be tensors, not Python scalars")
    try:
        result = spec.infer(infos, attrs)
    except (IRError, PromotionError) as exc:
        raise IRError(f"{where}: {exc}") from None
    return result


def _literal_ok(value: float | int) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return abs(value) <= limits.MAX_INT_LITERAL


def redeclare(graph: Graph, wide: tuple[str, ...], dtype: str) -> Graph:
    """The graph with every tensor input, cast and constant of a `wide` dtype declared as `dtype` instead. A constant
    filled with its dtype's "min" or "max" keeps the number it held (a float16 attention mask's -65504 stays -65504:
    as float64's lowest, it swamped fully masked rows' scores and the float64 gradient reference computed another
    function; triage26 bc4c631c89, bcb6015512)."""
    from .ops.constants import fill_value

    def wider(n: Node) -> Node:
        attrs = {**n.attrs, "dtype": dtype}
        if "dtype-limit-value" in OPS[n.op].tags and attrs.get("value") in ("min", "max"):
            attrs["value"] = fill_value(attrs["value"], n.attrs["dtype"])
        return replace(n, attrs=attrs)

    inputs = tuple(replace(i, dtype=dtype) if i.kind == "tensor" and i.dtype in wide else i for i in graph.inputs)
    nodes = tuple(wider(n) if n.attrs.get("dtype") in wide else n for n in graph.nodes)
    return Graph(inputs, nodes, graph.outputs)


def input_values(case: Case, index: int) -> dict[str, np.ndarray]:
    """The dtype-rounded values of input set `index` (float64 arrays; 0-dim arrays for Python scalars)."""
    overrides = case.input_sets[index] if case.input_sets else {}
    return {
        inp.name: make_values(overrides.get(inp.name, inp.init), inp.shape,
                              inp.dtype if inp.kind == "tensor" else ("float64" if is_float(inp.dtype) else "int64"))
        for inp in case.graph.inputs
    }


def op_attrs(node: Node) -> dict[str, Any]:
    """A node's attributes with the op's defaults filled in."""
    return {**OPS[node.op].attrs, **node.attrs}
