"""The audit at real size (issue 37): the captured graph cut into blocks by module path, each block a case of its
own with its real parameters and the activations the whole model feeds it.

A real model (resnet18's 11.7M parameters, a 1B decoder) is too big for one case: its float64 reference, its
compiles and its minimization would hold the whole model at once. Its blocks are not: a transformer layer, a
ResNet stage's block, a UNet's resnet / attention block. `partition` cuts the graph top-down along the module tree
(torch.export's nn_module_stack) until each block holds at most `limit` parameter values or is one module;
ops of no submodule between them (a residual add in the model's own forward, a flatten) are glue blocks of their
own. `block_case` makes a block a case: the parameters it reads, and every value it reads from another block as
an input holding the value the float32 eager run of the whole model gave it (`record`). Blocks of one structure
(the same ops, attributes, shapes and dtypes: a transformer's layers) are audited once (`distinct`).

Pure functions over the graph, except `record`, which runs the exported program in PyTorch eager.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ir import Case, Graph, Input, infer
from ..values import inline, pack
from .translate import Source

BLOCK_VALUES = 2**23  # parameter values one block may hold (float64 8M values: 64 MiB per copy) unless it is one module


@dataclass(frozen=True)
class Block:
    """A part of the captured graph: its name (a module path, or `glue` after one), its nodes in graph order."""

    name: str
    nodes: tuple[str, ...]
    members: tuple[str, ...] = ()  # the blocks of the same structure it stands for (itself first)


@dataclass
class BlockCase:
    """A block as a case of its own, with the sources of its values and what it stands for."""

    block: Block
    case: Case
    sources: dict[str, Source] = field(default_factory=dict)
    fed: tuple[str, ...] = ()  # the inputs holding values another block computed (recorded activations)


def module_path(source: Source | None) -> tuple[str, ...]:
    """The module path of the value's deepest submodule as components ("layers", "3", "self_attn"); () at the root."""
    if source is None or not source.module:
        return ()
    path = source.module.rsplit(" (", 1)[0]
    return tuple(path.split(".")) if path else ()


def _param_values(graph: Graph, ids: list[str]) -> int:
    """Values of the parameters (and other graph inputs) the nodes `ids` read."""
    names = {i.name: i for i in graph.inputs}
    nodes = {n.id: n for n in graph.nodes}
    read = {o for k in ids for o in nodes[k].inputs if isinstance(o, str) and o in names}
    return sum(int(math.prod(names[r].shape)) for r in read)


def partition(graph: Graph, sources: dict[str, Source], limit: int = BLOCK_VALUES) -> list[Block]:
    """The graph's nodes as blocks in graph order (by each block's first node): top-down along the module tree, a
    module whose parameters fit `limit` (or that has no submodule) is one block; the nodes of a module outside its
    submodules, in runs between them, are glue blocks (`<module> glue`)."""
    paths = {n.id: module_path(sources.get(n.id)) for n in graph.nodes}
    order = {n.id: k for k, n in enumerate(graph.nodes)}

    def split(ids: list[str], depth: int, prefix: tuple[str, ...]) -> list[Block]:
        name = ".".join(prefix) or "model"
        if _param_values(graph, ids) <= limit or all(len(paths[i]) <= depth for i in ids):
            return [Block(name, tuple(ids))]
        children: dict[str, list[str]] = {}
        runs: list[list[str]] = []
        last_glue = False
        for i in ids:
            if len(paths[i]) > depth:
                children.setdefault(paths[i][depth], []).append(i)
                last_glue = False
            else:
                if not last_glue:
                    runs.append([])
                runs[-1].append(i)
                last_glue = True
        out = [b for key, kids in children.items() for b in split(kids, depth + 1, prefix + (key,))]
        out += [Block(f"{name} glue" if len(runs) == 1 else f"{name} glue {k + 1}", tuple(run))
                for k, run in enumerate(runs)]
        return out

    blocks = split([n.id for n in graph.nodes], 0, ())
    return sorted(blocks, key=lambda b: order[b.nodes[0]])


def boundary(graph: Graph, blocks: list[Block]) -> set[str]:
    """The node values one block computes and another reads (what `record` must keep)."""
    owner = {k: b.name for b in blocks for k in b.nodes}
    return {o for n in graph.nodes for o in n.inputs
            if isinstance(o, str) and o in owner and owner[o] != owner[n.id]}


def block_case(graph: Graph, block: Block, recorded: dict[str, np.ndarray], sources: dict[str, Source],
               meta: dict[str, Any], pack_values: bool = True) -> BlockCase:
    """The block as a case: the graph inputs it reads as they are, each value it reads from another block as an
    input holding its recorded value, and as outputs the values other blocks or the model's outputs read.
    `pack_values=False`: its parameters stay the translation's arrays (shared, no copy) until `packed` is called on the
    blocks kept (a 1B model's blocks, all packed as float64 text, are 12 GB; its distinct ones 2 GB)."""
    typed = infer(graph)
    inside = set(block.nodes)
    nodes = tuple(n for n in graph.nodes if n.id in inside)
    inputs = {i.name: i for i in graph.inputs}
    read = list(dict.fromkeys(o for n in nodes for o in n.inputs if isinstance(o, str) and o not in inside))
    fed = [r for r in read if r not in inputs]
    missing = [r for r in fed if r not in recorded]
    if missing:
        raise KeyError(f"block {block.name}: no recorded value for {', '.join(missing[:3])}")
    # a fed activation is what the block before made: under model.to(bfloat16) that block made it in bfloat16, so
    # the policy must cast it as it casts the parameters (role "param"; fed as float32 it read as an input cast the
    # caller owes, and eager raised at every conv of real-size resnet18)
    made = [Input(r, typed.values[r].shape, typed.values[r].dtype, "param", typed.values[r].kind,
                  pack(recorded[r]) if typed.values[r].kind == "tensor" else
                  {"values": np.asarray(recorded[r], dtype=np.float64).tolist()}) for r in fed]
    ins = tuple(inputs[r] if r in inputs else made[fed.index(r)] for r in read)
    later = {o for n in graph.nodes if n.id not in inside for o in n.inputs if isinstance(o, str)}
    outs = [n.id for n in nodes if n.id in later or n.id in graph.outputs] or [nodes[-1].id]
    sub = Graph(tuple(_listed(i) if pack_values else i for i in ins), nodes, tuple(outs))
    case = Case(sub, ({},), {**meta, "block": block.name, "members": list(block.members or (block.name,))})
    return BlockCase(block, case, {k: v for k, v in sources.items() if k in inside}, tuple(fed))


def packed(bc: BlockCase) -> BlockCase:
    """The block case with its inline parameter values packed (what a case saved or sent holds)."""
    g = bc.case.graph
    return replace(bc, case=replace(bc.case, graph=Graph(tuple(_listed(i) for i in g.inputs), g.nodes, g.outputs)))


def _listed(inp: Input) -> Input:
    """An input whose inline values are packed (a translation at real size holds them as arrays)."""
    values = (inp.init or {}).get("values")
    if isinstance(values, np.ndarray):
        return replace(inp, init=pack(values))
    return inp


def structure(case: Case) -> str:
    """A block's structure: its ops, attributes, value shapes and dtypes and edges, names and values left out (two
    layers of one transformer share it)."""
    g = case.graph
    index: dict[str, int] = {}

    def ref(o: Any) -> str:
        return f"%{index[o]}" if isinstance(o, str) and o in index else repr(o)

    parts = []
    for i in g.inputs:
        index[i.name] = len(index)
        parts.append(f"in {i.role} {i.kind} {i.dtype} {list(i.shape)}")
    for n in g.nodes:
        parts.append(f"{n.op} {sorted(n.attrs.items())!r} ({', '.join(ref(o) for o in n.inputs)})")
        index[n.id] = len(index)
    parts.append("out " + " ".join(ref(o) for o in g.outputs))
    return "\n".join(parts)


def fed_magnitude(bc: BlockCase) -> float:
    """The largest magnitude among the activations a block is fed (0 for a block fed none)."""
    g = bc.case.graph
    return max((float(np.max(np.abs(inline(g.input(name).init)), initial=0.0))
                for name in bc.fed), default=0.0)


def distinct(cases: list[BlockCase]) -> list[BlockCase]:
    """One block case per structure, naming the blocks it stands for in its Block.members (itself first): the one
    fed the largest activations (16-bit range and precision hazards grow with magnitude: a deep layer's residual
    stream is larger than the first's), the first in graph order among equals."""
    groups: dict[str, list[BlockCase]] = {}
    for bc in cases:
        groups.setdefault(structure(bc.case), []).append(bc)
    out = []
    for same in groups.values():
        first = max(same, key=fed_magnitude)  # max keeps the first of equals
        members = (first.block.name,) + tuple(b.block.name for b in same if b is not first)
        block = replace(first.block, members=members)
        out.append(replace(first, block=block,
                           case=replace(first.case, meta={**first.case.meta, "members": list(members)})))
    return out


def record(ep: Any, module: Any, args: tuple[Any, ...], made: dict[str, tuple[str, int | None]],
           wanted: set[str]) -> dict[str, np.ndarray]:
    """The values the exported program's eager run (the model as captured, in its own dtypes) gives the IR values
    `wanted`, as float64 arrays: the activations a block is fed. `made` maps an IR value to the fx node whose output
    it is (and the index into a tuple output)."""
    import torch
    from torch.export.graph_signature import InputKind

    want: dict[str, list[tuple[int | None, str]]] = {}
    for w in wanted:
        if w in made:
            want.setdefault(made[w][0], []).append((made[w][1], w))
    state = {**dict(module.state_dict(keep_vars=False)), **dict(ep.state_dict)}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    user = iter(torch.utils._pytree.tree_leaves(args))
    feed = []
    for n in ep.graph_module.graph.nodes:
        if n.op != "placeholder":
            continue
        spec = specs.get(n.name)
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind == InputKind.USER_INPUT:
            feed.append(next(user, None))
        else:
            target = str(spec.target)
            feed.append(state.get(target) if target in state else ep.constants.get(target))
    got: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            for index, name in want.get(n.name, ()):
                value = out if index is None else out[index]
                if isinstance(value, torch.Tensor):
                    got[name] = value.detach().to("cpu").to(torch.float64).numpy()
            return out

    with torch.no_grad():
        Recorder(ep.graph_module).run(*feed)
    return got
