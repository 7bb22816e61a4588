"""The op-graph IR: plain data with a JSON form, a content hash as id, and PyTorch-semantics type inference."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import check_dtype, is_float
from .ops import OPS, ChainBreak, IRError, Typed, ValueInfo, tensor
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


@dataclass(frozen=True)
class Case:
    """A graph plus one or more input sets (value-spec overrides per input) and provenance."""

    graph: Graph
    input_sets: tuple[dict[str, dict[str, Any]], ...] = ({},)
    meta: dict[str, Any] = field(default_factory=dict)

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
            {"name": i.name, "role": i.role, "kind": i.kind, "shape": list(i.shape), "dtype": i.dtype, "init": i.init}
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
    return body


def _field(obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise IRError(f"{where}: missing field {key!r}")
    if not isinstance(obj[key], kind):
        raise IRError(f"{where}: field {key!r} has the wrong type ({type(obj[key]).__name__})")
    return obj[key]


def graph_from_json(obj: Any) -> Graph:
    """Parse and validate a graph object; IRError names the node or input at fault."""
    if not isinstance(obj, dict):
        raise IRError("graph: expected a JSON object")
    fmt = obj.get("format", FORMAT)
    if fmt != FORMAT:
        raise IRError(f"graph: unsupported format {fmt!r} (expected {FORMAT!r})")
    inputs = []
    for raw in _field(obj, "inputs", "graph", list):
        where = f"input {raw.get('name', '?')!r}" if isinstance(raw, dict) else "input"
        if not isinstance(raw, dict):
            raise IRError(f"{where}: expected an object")
        shape = _field(raw, "shape", where, list)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape):
            raise IRError(f"{where}: shape must be a list of positive ints, got {shape}")
        try:
            dtype = check_dtype(_field(raw, "dtype", where, str))
        except ValueError as exc:
            raise IRError(f"{where}: {exc}") from None
        role, kind = raw.get("role", "input"), raw.get("kind", "tensor")
        if role not in ROLES or kind not in KINDS:
            raise IRError(f"{where}: role must be one of {ROLES} and kind one of {KINDS}")
        if kind == "scalar" and shape:
            raise IRError(f"{where}: a Python scalar has shape []")
        init = raw.get("init", {"dist": "normal", "seed": 0})
        try:
            check_spec(init)
        except (ValueSpecError, ValueError) as exc:
            raise IRError(f"{where}: bad init: {exc}") from None
        inputs.append(Input(_field(raw, "name", "input", str), tuple(shape), dtype, role, kind, init))
    nodes = []
    for raw in _field(obj, "nodes", "graph", list):
        if not isinstance(raw, dict):
            raise IRError("node: expected an object")
        where = f"node {raw.get('id', '?')!r}"
        ops = _field(raw, "inputs", where, list)
        for o in ops:
            if not (o is None or isinstance(o, (str, int, float))) or isinstance(o, bool):
                raise IRError(f"{where}: operand {o!r} is neither a value name, a number nor null")
        nodes.append(Node(_field(raw, "id", "node", str), _field(raw, "op", where, str), tuple(ops),
                          dict(raw.get("attrs") or {})))
    outputs = tuple(_field(obj, "outputs", "graph", list))
    graph = Graph(tuple(inputs), tuple(nodes), outputs)
    infer(graph)
    return graph


def case_from_json(obj: Any) -> Case:
    """Parse and validate a case object (a graph with optional input_sets and meta)."""
    graph = graph_from_json(obj)
    sets = obj.get("input_sets") or [{}]
    if not isinstance(sets, list) or not all(isinstance(s, dict) for s in sets):
        raise IRError("graph: input_sets must be a list of objects")
    names = {i.name for i in graph.inputs}
    for k, s in enumerate(sets):
        for name, spec in s.items():
            if name not in names:
                raise IRError(f"input set {k}: no input named {name!r}")
            try:
                check_spec(spec)
            except (ValueSpecError, ValueError) as exc:
                raise IRError(f"input set {k}, input {name!r}: {exc}") from None
    return Case(graph, tuple(sets), dict(obj.get("meta") or {}))


def load_case(path: str | Path) -> Case:
    """Read a case JSON file; IRError (one line) on any problem."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise IRError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IRError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    try:
        return case_from_json(obj)
    except IRError as exc:
        raise IRError(f"{path}: {exc}") from None


def save_case(case: Case, path: str | Path) -> Path:
    """Write a case as pretty, key-sorted JSON (byte-identical for equal cases)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(case_to_json(case), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


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
        where = f"node {node.id!r} ({node.op})"
        if node.id in values:
            raise IRError(f"{where}: duplicate value name")
        spec = OPS.get(node.op)
        if spec is None:
            raise IRError(f"{where}: unknown op {node.op!r}")
        if not spec.required <= len(node.inputs) <= len(spec.operands):
            raise IRError(f"{where}: expects {spec.required}..{len(spec.operands)} operands "
                          f"({', '.join(spec.operands)}), got {len(node.inputs)}")
        unknown = set(node.attrs) - set(spec.attrs)
        if unknown:
            raise IRError(f"{where}: unknown attribute(s) {', '.join(sorted(unknown))}")
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
                infos.append(ValueInfo((), "float64" if isinstance(operand, float) else "int64", "scalar"))
        if spec.scalars_ok is False and any(i is not None and i.is_scalar for i in infos):
            raise IRError(f"{where}: operands must be tensors, not Python scalars")
        attrs = {**spec.attrs, **node.attrs}
        try:
            result = spec.infer(infos, attrs)
        except IRError as exc:
            raise IRError(f"{where}: {exc}") from None
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
