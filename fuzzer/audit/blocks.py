"""The audit at real size (issue 37): the captured graph cut into blocks by module path, each block a case of its
own with its real parameters and the activations the whole model feeds it.

A real model (resnet18's 11.7M parameters, a 1B decoder) is too big for one case: its float64 reference, its
compiles and its minimization would hold the whole model at once. Its blocks are not: a transformer layer, a
ResNet stage's block, a UNet's resnet / attention block. `partition` cuts the graph top-down along the module tree
(torch.export's nn_module_stack) until each block holds at most `limit` parameter values or is one module;
ops of no submodule between them (a residual add in the model's own forward, a flatten) are glue blocks of their
own. `block_case` makes a block a case: the parameters it reads, and every value it reads from another block as
an input holding the value the float32 eager run of the whole model gave it (`record`). Blocks of one structure
(the same ops, attributes, shapes and dtypes: a transformer's layers) are audited once (`distinct`). Two exact
rewrites keep a block to the values it computes with: an embedding table narrowed to the rows its ids read
(`narrow_lookups`), one linear layer or ungrouped conv past the limit split by output features (`split_wide`).

Pure functions over the graph, except `record`, which runs the exported program in PyTorch eager.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..ir import Case, Graph, Input, Node, infer, load_case, save_case
from ..ops import OPS, tagged
from ..values import has_inline, inline, pack
from .source import Source

ROW_LOOKUP = tagged(OPS, "row-lookup")  # embedding: its table narrowed to the rows read
ROW_PER_OUTPUT = tagged(OPS, "row-per-output")  # linear: split by output features
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
    case: Case | None  # None once spilled to `path` (its real weights on disk until the block is audited)
    sources: dict[str, Source] = field(default_factory=dict)
    fed: tuple[str, ...] = ()  # the inputs holding values another block computed (recorded activations)
    path: str | None = None  # the case file it was spilled to (`spill`)

    def loaded(self) -> Case:
        """The block's case: held, or read back from its spilled file."""
        if self.case is not None:
            return self.case
        assert self.path is not None, "a block case neither held nor spilled"
        return load_case(self.path)


def spill(bc: BlockCase, folder: Path, index: int) -> BlockCase:
    """The block case written to `folder` (its arrays in an .npz beside it) and let go of: a real model's blocks
    are gigabytes, and the audit needs one at a time (issue 37: memory that follows the block, not the model)."""
    assert bc.case is not None
    folder.mkdir(parents=True, exist_ok=True)
    path = save_case(bc.case, folder / f"block{index:04d}.json")
    return replace(bc, case=None, path=str(path))


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
               meta: dict[str, Any], pack_values: bool = True,
               autocast: dict[str, np.ndarray] | None = None, fed_dtypes: dict[str, str] | None = None) -> BlockCase:
    """The block as a case: the graph inputs it reads as they are, each value it reads from another block as an
    input holding its recorded value, and as outputs the values other blocks or the model's outputs read.
    `autocast`: the same values recorded under autocast; where a fed value differs there, a second input set feeds
    them (the activations the block sees when the model runs under autocast).
    `pack_values=False`: its parameters stay the translation's arrays (shared, no copy) until `packed` is called on the
    blocks kept (a 1B model's blocks, all packed as float64 text, are 12 GB; its distinct ones 2 GB).
    `fed_dtypes`: the dtypes a fed activation is declared in where they are not the graph's (`healed`)."""
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
    made = [Input(r, typed.values[r].shape, (fed_dtypes or {}).get(r, typed.values[r].dtype), "param", typed.values[r].kind,
                  pack(recorded[r]) if typed.values[r].kind == "tensor" else
                  {"values": np.asarray(recorded[r], dtype=np.float64).tolist()}) for r in fed]
    ins = tuple(inputs[r] if r in inputs else made[fed.index(r)] for r in read)
    later = {o for n in graph.nodes if n.id not in inside for o in n.inputs if isinstance(o, str)}
    outs = [n.id for n in nodes if n.id in later or n.id in graph.outputs] or [nodes[-1].id]
    sub = narrow_lookups(Graph(ins, nodes, tuple(outs)))
    sub = _packed_graph(sub) if pack_values else sub
    sets: tuple[dict[str, Any], ...] = ({},)
    other = {r: autocast[r] for r in fed if autocast is not None and r in autocast and typed.values[r].kind == "tensor"
             and np.shape(autocast[r]) == np.shape(recorded[r]) and not np.array_equal(autocast[r], recorded[r])}
    if other:
        sets = ({}, {r: pack(v) for r, v in other.items()})
        meta = {**meta, "fed_sets": ["the float32 eager run", "the run under torch.autocast(bfloat16)"]}
    case = Case(sub, sets, {**meta, "block": block.name, "members": list(block.members or (block.name,))})
    mine = inside | set(fed)  # a fed activation is described by the model's line that computed it
    return BlockCase(block, case, {k: v for k, v in sources.items() if k in mine}, tuple(fed))


def healed(graph: Graph, rounds: int = 32) -> Graph:
    """The graph with its dtype breaks fixed as a user would, first break first: the activation operand of an op whose
    parameters have another dtype (PyTorch raises) cast to theirs. Its dtypes are what the values past a break have
    once it is fixed: blocks past it are fed those, so the break is one hazard of its own block, not one of every
    block after it (issue 37: the DDPM step around the default UNet, whose float32 schedule meets the bf16 conv_in)."""
    for _ in range(rounds):
        breaks = infer(graph).chain_breaks()
        first = next((n for n in graph.nodes if n.id in breaks), None)
        if first is None:
            return graph
        brk = breaks[first.id]
        src = first.inputs[brk.operand]
        if not isinstance(src, str):
            return graph
        taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
        names = (f"{src}_as_{brk.param_dtype}{k or ''}" for k in range(len(taken) + 1))
        cast = next(name for name in names if name not in taken)
        fixed = replace(first, inputs=tuple(cast if k == brk.operand else o for k, o in enumerate(first.inputs)))
        nodes = []
        for n in graph.nodes:
            nodes += [Node(cast, "astype", (src,), {"dtype": brk.param_dtype}), fixed] if n.id == first.id else [n]
        graph = Graph(graph.inputs, tuple(nodes), graph.outputs)
    return graph


def _held(inp: Input) -> np.ndarray | None:
    """The values an input holds inline (an array, a list or packed), else None."""
    init = inp.init or {}
    if isinstance(init.get("values"), np.ndarray):
        return init["values"]
    return inline(init) if has_inline(init) else None


def narrow_lookups(g: Graph) -> Graph:
    """Each embedding whose table is an input only it reads, and whose indices the case holds (read by it alone), with
    its table narrowed to the rows the indices read and the indices renumbered: the same values looked up (a
    32000-row vocabulary read by 16 tokens is 16 rows, 65M values fewer for every backend and the reference)."""
    inputs = {i.name: i for i in g.inputs}
    readers: dict[str, int] = {}
    for n in g.nodes:
        for o in n.inputs:
            if isinstance(o, str):
                readers[o] = readers.get(o, 0) + 1
    changed: dict[str, Input] = {}
    for n in g.nodes:
        if n.op not in ROW_LOOKUP or len(n.inputs) != 2:
            continue
        w, ids = n.inputs
        if w not in inputs or ids not in inputs or readers.get(w) != 1 or readers.get(ids) != 1 or w == ids:
            continue
        table, idx = _held(inputs[w]), _held(inputs[ids])
        if table is None or idx is None or table.ndim != 2 or not idx.size:
            continue
        rows, inverse = np.unique(np.asarray(idx, dtype=np.int64), return_inverse=True)
        if rows[0] < 0 or rows[-1] >= table.shape[0] or len(rows) >= table.shape[0]:
            continue
        changed[w] = replace(inputs[w], shape=(len(rows), table.shape[1]), init={"values": np.asarray(table[rows])})
        changed[ids] = replace(inputs[ids], init={"values": inverse.reshape(idx.shape).astype(np.float64)})
    if not changed:
        return g
    return Graph(tuple(changed.get(i.name, i) for i in g.inputs), g.nodes, g.outputs)


def split_wide(bc: BlockCase, limit: int = BLOCK_VALUES) -> list[BlockCase]:
    """A block that is one linear layer or ungrouped convolution holding more than `limit` weight values (an LM
    head: 32000 x 2048; a UNet's 2560 -> 1280 3x3 conv), as blocks of equal slices of its output features, weight
    rows (a conv's output channels) and bias alike: each output feature reads its own row only, so a slice computes
    exactly those outputs; slices of one shape share a structure and are audited once. Any other block as it is."""
    g = bc.case.graph
    if len(g.nodes) != 1 or g.nodes[0].op not in ROW_PER_OUTPUT or g.nodes[0].attrs.get("groups", 1) != 1:
        return [bc]
    node = g.nodes[0]
    inputs = {i.name: i for i in g.inputs}
    w = node.inputs[1] if len(node.inputs) > 1 else None
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if w not in inputs or len(inputs[w].shape) < 2 or math.prod(inputs[w].shape) <= limit:
        return [bc]
    rows, row = inputs[w].shape[0], tuple(inputs[w].shape[1:])
    cols = math.prod(row)
    table = _held(inputs[w])
    bias = _held(inputs[b]) if isinstance(b, str) and b in inputs else None
    if table is None or (isinstance(b, str) and (b not in inputs or bias is None)):
        return [bc]
    k = next((k for k in range(2, rows + 1) if rows % k == 0 and rows // k * cols <= limit), None)
    if k is None:
        return [bc]
    step, out = rows // k, []
    for start in range(0, rows, step):
        part = {w: replace(inputs[w], shape=(step,) + row, init={"values": np.asarray(table[start:start + step])})}
        if bias is not None:
            part[b] = replace(inputs[b], shape=(step,), init={"values": np.asarray(bias[start:start + step])})
        name = f"{bc.block.name} [outputs {start}:{start + step}]"
        sub = Graph(tuple(part.get(i.name, i) for i in g.inputs), g.nodes, g.outputs)
        out.append(BlockCase(replace(bc.block, name=name), replace(bc.case, graph=sub, meta={**bc.case.meta,
                                                                                            "block": name}),
                             bc.sources, bc.fed))
    return out


def packed(bc: BlockCase) -> BlockCase:
    """The block case with its inline parameter values packed (what a case saved or sent holds)."""
    return replace(bc, case=replace(bc.case, graph=_packed_graph(bc.case.graph)))


def _packed_graph(g: Graph) -> Graph:
    """`g` with every input's inline array values packed."""
    return Graph(tuple(_listed(i) for i in g.inputs), g.nodes, g.outputs)


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
           wanted: set[str], autocast: str | None = None, widen: bool = False) -> dict[str, np.ndarray]:
    """The values the exported program's eager run (the model as captured, in its own dtypes) gives the IR values
    `wanted`, as float64 arrays: the activations a block is fed. `made` maps an IR value to the fx node whose output
    it is (and the index into a tuple output). `autocast` (a 16-bit dtype): the run under `torch.autocast("cpu")`
    in it, the activations a block sees when the whole model runs under autocast. `widen`: every floating parameter
    and input in float32 (a model eager raises on as it is, at a dtype break: the float32 run's activations)."""
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
    if widen:
        feed = [t.float() if isinstance(t, torch.Tensor) and torch.is_floating_point(t) else t for t in feed]
    got: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            if autocast is not None and n.op == "call_function" and str(n.target).startswith("aten._assert_tensor"):
                return None  # export's check of the dtypes it traced: under autocast they are the 16-bit ones
                # (UNet2DModel(): "Tensor dtype mismatch! Expected: Float, Got: c10::BFloat16")
            out = super().run_node(n)
            for index, name in want.get(n.name, ()):
                value = out if index is None else out[index]
                if isinstance(value, torch.Tensor):
                    got[name] = value.detach().to("cpu").to(torch.float64).numpy()
            return out

    with torch.no_grad(), torch.autocast("cpu", dtype=getattr(torch, autocast or "bfloat16"),
                                         enabled=autocast is not None):
        Recorder(ep.graph_module).run(*feed)
    return got
