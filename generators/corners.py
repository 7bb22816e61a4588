"""Predicates for the numerically hard corners the generators aim at (the two seed bugs)."""

from __future__ import annotations

import math

from fuzzer.ir import Case, Graph, TypedGraph, infer, op_attrs

LONG_REDUCTION = 4096
STALLING_DISTS = ("alternating", "offset")
SCHEDULE_NUMEL = 64  # a schedule tensor holds one value per sample at most
REDUCING_NORMS = ("layer_norm", "rms_norm", "group_norm", "instance_norm")
WIDE = ("float32", "float64")


def ancestors(graph: Graph, name: str) -> set[str]:
    """Every value name `name` depends on, itself included."""
    producers = {n.id: n for n in graph.nodes}
    seen: set[str] = set()
    todo = [name]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in producers:
            todo.extend(o for o in producers[v].inputs if isinstance(o, str))
    return seen


def _dists(case: Case, name: str) -> set[str]:
    specs = [case.graph.input(name).init] + [s[name] for s in case.input_sets if name in s]
    return {s.get("dist", "values") for s in specs}


def norm_length(typed: TypedGraph, graph: Graph, node_id: str) -> int:
    """Elements per normalization group of a norm node (0 for batch_norm: it reduces nothing)."""
    node = graph.node(node_id)
    attrs = op_attrs(node)
    shape = typed.values[node.inputs[0]].shape  # type: ignore[index]
    if node.op in ("layer_norm", "rms_norm"):
        return math.prod(attrs["normalized_shape"])
    if node.op == "group_norm":
        return math.prod(shape[1:]) // attrs["num_groups"]
    if node.op == "instance_norm":
        return math.prod(shape[2:])
    return 0


def long_fp16_norm(case: Case, typed: TypedGraph | None = None) -> bool:
    """An fp16 norm over >= 4096 elements whose input comes from alternating or offset values (the TVM seed)."""
    graph = case.graph
    typed = typed or infer(graph)
    inputs = {i.name for i in graph.inputs}
    for node in graph.nodes:
        if node.op not in REDUCING_NORMS or typed.values[node.inputs[0]].dtype != "float16":  # type: ignore[index]
            continue
        if norm_length(typed, graph, node.id) < LONG_REDUCTION:
            continue
        sources = ancestors(graph, node.inputs[0]) & inputs  # type: ignore[arg-type]
        if any(_dists(case, s) & set(STALLING_DISTS) for s in sources):
            return True
    return False


def schedule_promotions(graph: Graph, typed: TypedGraph) -> set[str]:
    """Binary nodes where a small fp32/fp64 tensor of rank >= 1 upcasts a larger bf16 activation."""
    found = set()
    for node in graph.nodes:
        if node.op not in ("add", "sub", "mul", "div") or typed.values[node.id].dtype not in WIDE:
            continue
        infos = [typed.values[o] for o in node.inputs if isinstance(o, str)]
        bf16 = [i for i in infos if i.dtype == "bfloat16" and i.kind == "tensor"]
        sched = [i for i in infos if i.dtype in WIDE and i.kind == "tensor" and math.prod(i.shape) <= SCHEDULE_NUMEL]
        if bf16 and sched and max(math.prod(i.shape) for i in bf16) > max(math.prod(i.shape) for i in sched):
            found.add(node.id)
    return found


def schedule_chain_break(case: Case, typed: TypedGraph | None = None) -> bool:
    """A [1] (or [B,1,..]) fp32 schedule tensor upcasts bf16 latents that then meet a bf16 param op (XLA seed)."""
    graph = case.graph
    typed = typed or infer(graph)
    promotions = schedule_promotions(graph, typed)
    if not promotions:
        return False
    for node_id, brk in typed.chain_breaks().items():
        if brk.param_dtype != "bfloat16" or brk.activation_dtype not in WIDE:
            continue
        activation = graph.node(node_id).inputs[brk.operand]
        if isinstance(activation, str) and ancestors(graph, activation) & promotions:
            return True
    return False
