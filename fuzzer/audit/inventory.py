"""The ATen overloads a model's exported graph holds, counted by occurrence, and which the translation lacks.

`python -m fuzzer.audit.inventory MODEL.py[:FUNC]` prints one JSON object (the zoo harness runs it in a child
process per model). Three forms of the graph are counted (FORMS): what `torch.export.export` gives (what
`translate` reads today); `ep.run_decompositions({})`, the same ops made functional (in-place `relu_`, `add_`,
`copy_` into a slice become `relu`, `add`, `slice_scatter`; dropout and dead code gone; linear, conv,
layer_norm and scaled_dot_product_attention kept); and `ep.run_decompositions()`, core ATen (linear becomes
addmm, attention its math form). Each op also says whether it depends on a model input: an op fed only by
constants, parameters and buffers (a causal mask built from `arange`, a rotary table) could be computed once at
translation time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

ASSERT_PREFIXES = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range", "_assert_async")
MAX_CALLS = 4  # distinct calls kept per op and graph
FORMS = {  # form -> what it is (the decomposition it takes)
    "export": "torch.export.export (what the audit translates today)",
    "functional": "ep.run_decompositions({}) (functional: no in-place ops, no dead code; no op decomposed)",
    "core": "ep.run_decompositions() (core ATen)",
}


@dataclass
class OpCount:
    """One ATen overload in one graph: occurrences, output dtypes, how many need no model input, translated or not."""

    op: str
    count: int
    dtypes: list[str]
    input_free: int  # occurrences fed by no model input (only constants, parameters, buffers)
    translated: bool  # the translation takes it as it is (an op record's overload, a pass-through, getitem)
    core: bool  # a core-ATen op (run_decompositions keeps it)
    dead: int = 0  # occurrences whose result reaches no output (dead code the graph still holds)
    decomposable: bool = False  # untranslated, but torch.export's default table decomposes it (translate tries)
    calls: list[str] = field(default_factory=list)  # distinct calls (tensors as dtype[shape]), MAX_CALLS at most


@dataclass
class Constant:
    """A tensor the export lifted out of forward (a CONSTANT_TENSOR input), with the ops that use it."""

    name: str
    target: str
    shape: list[int]
    dtype: str
    users: list[str]


@dataclass
class Inventory:
    """What one model's export holds; `error` is set when a stage failed (a value, never raised)."""

    model: str
    stage: str = "done"  # the stage reached: load, export, functional, core, done
    error: str = ""
    seconds: dict[str, float] = field(default_factory=dict)  # form -> seconds to make its graph
    values: int = 0  # parameter, buffer and input values the translation would hold inline
    forms: dict[str, list[OpCount]] = field(default_factory=dict)  # form (FORMS) -> its ops, most frequent first
    constants: list[Constant] = field(default_factory=list)
    translate_error: str = ""  # fuzzer.audit.translate.translate's one line ("" when it translates)

    def ops(self, form: str = "export") -> list[OpCount]:
        """The ops of the graph of `form` (empty when that form was not reached)."""
        return self.forms.get(form, [])

    def met(self, form: str = "export") -> int:
        """Occurrences of ops in the graph of `form`."""
        return sum(o.count for o in self.ops(form))

    def translated(self, form: str = "export") -> int:
        """Occurrences of those the audit's table translates."""
        return sum(o.count for o in self.ops(form) if o.translated)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Inventory:
        """The inverse of to_json."""
        inv = Inventory(**{k: v for k, v in data.items() if k not in ("forms", "constants")})
        inv.forms = {form: [OpCount(**o) for o in ops] for form, ops in data.get("forms", {}).items()}
        inv.constants = [Constant(**c) for c in data.get("constants", [])]
        return inv


def op_name(target: Any) -> str:
    """`aten.conv2d.default`, `getitem`, or the callable's name."""
    name = str(target)
    if name.startswith("aten.") or name.startswith("prims.") or name.startswith("higher_order."):
        return name
    return getattr(target, "__name__", name)


def _is_assert(target: Any) -> bool:
    name = getattr(target, "__name__", str(target))
    return any(name.startswith(p) or f".{p}" in name for p in ASSERT_PREFIXES)


def _dtypes(val: Any) -> list[str]:
    import torch

    vals = val if isinstance(val, (tuple, list)) else [val]
    return sorted({str(v.dtype).replace("torch.", "") for v in vals if isinstance(v, torch.Tensor)})


def _is_core(target: Any) -> bool:
    import torch

    tags = getattr(target, "tags", None)
    return bool(tags) and torch.Tag.core in tags


def count_ops(ep: Any, translated: set[Any]) -> list[OpCount]:
    """Every call_function of the exported program's graph, grouped by overload (assert ops left out)."""
    import operator

    import torch
    from torch.export.graph_signature import InputKind

    graph = ep.graph_module.graph
    user_inputs = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    fed: set[str] = set()  # nodes that depend on a model input
    live = _live(graph)
    counts: Counter[str] = Counter()
    free: Counter[str] = Counter()
    dead: Counter[str] = Counter()
    dtypes: dict[str, set[str]] = {}
    flags: dict[str, tuple[bool, bool]] = {}
    calls: dict[str, list[str]] = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            if n.name in user_inputs:
                fed.add(n.name)
            continue
        if n.op != "call_function":
            continue
        if any(a.name in fed for a in n.all_input_nodes):
            fed.add(n.name)
        if _is_assert(n.target):
            continue
        name = op_name(n.target)
        counts[name] += 1
        free[name] += n.name not in fed
        dead[name] += n.name not in live
        dtypes.setdefault(name, set()).update(_dtypes(n.meta.get("val")))
        flags[name] = (n.target in translated or n.target is operator.getitem, _is_core(n.target))
        seen = calls.setdefault(name, [])
        if len(seen) < MAX_CALLS and (call := render_call(n)) not in seen:
            seen.append(call)
    decomposes = {op_name(t) for t in torch.export.default_decompositions()}
    return [OpCount(op, c, sorted(dtypes[op]), free[op], *flags[op], dead[op], not flags[op][0] and op in decomposes,
                    calls[op]) for op, c in counts.most_common()]


def render_call(n: Any) -> str:
    """`(float32[1, 2, 12, 32], float32[1, 2, 12, 32], float32[1, 2, 12, 32], is_causal=True) -> float32[...]`."""
    import torch

    def show(a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            val = a.meta.get("val")
            if isinstance(val, torch.Tensor):
                return f"{str(val.dtype).replace('torch.', '')}{list(val.shape)}"
            return a.name
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(show(x) for x in a) + "]"
        return str(a).replace("torch.", "") if not isinstance(a, float) else f"{a:.6g}"

    args = [show(a) for a in n.args] + [f"{k}={show(v)}" for k, v in n.kwargs.items()]
    out = n.meta.get("val")
    result = show(n) if isinstance(out, torch.Tensor) else ("(" + ", ".join(
        f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}" for v in out if isinstance(v, torch.Tensor)) + ")"
        if isinstance(out, (tuple, list)) else "?")
    return f"({', '.join(args)}) -> {result}"


def _live(graph: Any) -> set[str]:
    """Names of the nodes an output or a mutation depends on (an in-place op, `copy_` into a slice view of a
    buffer, has an effect whatever uses its result: it is kept, as fx's dead-code elimination keeps it)."""
    def mutates(n: Any) -> bool:
        schema = getattr(getattr(n, "target", None), "_schema", None)
        return n.op == "call_function" and schema is not None and schema.is_mutable

    live: set[str] = set()
    stack = [n for n in graph.nodes if n.op == "output" or mutates(n)]
    while stack:
        n = stack.pop()
        if n.name not in live:
            live.add(n.name)
            stack.extend(n.all_input_nodes)
    return live


def lifted_constants(ep: Any) -> list[Constant]:
    """The CONSTANT_TENSOR inputs of the export (tensors created inside forward), with the ops using them."""
    from torch.export.graph_signature import InputKind

    nodes = {n.name: n for n in ep.graph_module.graph.nodes}
    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind != InputKind.CONSTANT_TENSOR:
            continue
        value = ep.constants.get(spec.target)
        node = nodes.get(spec.arg.name)
        users = [f"{op_name(u.target)}" for u in (node.users if node is not None else [])]
        out.append(Constant(spec.arg.name, str(spec.target), [int(s) for s in getattr(value, "shape", [])],
                            str(getattr(value, "dtype", "?")).replace("torch.", ""), users))
    return out


def inventory(module: Any, args: tuple[Any, ...], model: str, model_file: str | None = None) -> Inventory:
    """The model's op inventory in both forms, and what `translate` says of it."""
    import math

    import torch

    from .translate import AuditInputError, capture, passthrough, table, translate

    inv = Inventory(model)
    ops = set(table()) | set(passthrough())
    inv.stage = "export"
    t0 = time.perf_counter()
    try:
        ep, _notes = capture(module, args)
    except AuditInputError as exc:
        inv.error = str(exc)
        return inv
    inv.seconds["export"] = round(time.perf_counter() - t0, 2)
    inv.values = sum(math.prod(t.shape) for t in list(ep.state_dict.values()) + list(ep.constants.values())
                     if isinstance(t, torch.Tensor)) + sum(math.prod(a.shape) for a in args)
    inv.forms["export"] = count_ops(ep, ops)
    inv.constants = lifted_constants(ep)
    try:
        translate(module, args, model_file, model)
    except AuditInputError as exc:
        inv.translate_error = str(exc)
    except Exception as exc:  # noqa: BLE001 - an internal error of the translation is recorded, not raised
        inv.translate_error = f"internal error: {type(exc).__name__}: {exc}"
    for form, table_ in (("functional", {}), ("core", None)):
        inv.stage = form
        t0 = time.perf_counter()
        try:
            graph = ep.run_decompositions(table_) if table_ is not None else ep.run_decompositions()
        except Exception as exc:  # noqa: BLE001 - recorded as a value
            inv.error = f"run_decompositions ({form}) failed: {type(exc).__name__}: " \
                        f"{(str(exc).strip().splitlines() or [''])[0][:300]}"
            return inv
        inv.seconds[form] = round(time.perf_counter() - t0, 2)
        inv.forms[form] = count_ops(graph, ops)
    inv.stage = "done"
    return inv


def main(argv: list[str] | None = None) -> int:
    """Print the inventory of MODEL.py[:FUNC] as one JSON object; exit 0, or 2 when the model cannot be loaded."""
    from .load import load_model, split_target
    from .translate import AuditInputError

    parser = argparse.ArgumentParser(prog="python -m fuzzer.audit.inventory", description=__doc__)
    parser.add_argument("model", help="MODEL.py[:FUNC] (FUNC defaults to make; the file is imported and run)")
    args = parser.parse_args(argv)
    try:
        path, func = split_target(args.model)
        module, example = load_model(path, func)
    except AuditInputError as exc:
        inv = Inventory(args.model, stage="load", error=str(exc))
        print(json.dumps(inv.to_json()))
        return 2
    inv = inventory(module, example, args.model, str(path))
    print(json.dumps(inv.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
