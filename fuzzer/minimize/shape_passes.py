"""Shape shrink passes: smaller dims (to 1, then halved) and fewer dims, tied dims changed together."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

import numpy as np

from ..ir import Case, Node
from .candidates import Candidate, offer
from .edit import reshape_input

SHAPE_ATTRS = ("normalized_shape",)  # attributes holding sizes that follow the input dims they describe


def _slicer(axis: int, size: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda arr: arr[(slice(None),) * axis + (slice(0, size),)]


def _squeezer(axis: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda arr: np.squeeze(arr, axis=axis)


def _resize_attrs(node: Node, old: int, new: int) -> Node:
    """A node whose size-holding attributes have every `old` entry replaced by `new`."""
    attrs: dict[str, Any] = dict(node.attrs)
    for key in SHAPE_ATTRS:
        val = attrs.get(key)
        if isinstance(val, list):
            attrs[key] = [new if v == old else v for v in val]
        elif isinstance(val, int) and val == old:
            attrs[key] = new
    return replace(node, attrs=attrs) if attrs != node.attrs else node


def _resize_one(case: Case, name: str, axis: int, new: int) -> Case:
    """Input `name` with dim `axis` set to `new`."""
    shape = case.graph.input(name).shape
    return reshape_input(case, name, shape[:axis] + (new,) + shape[axis + 1:], _slicer(axis, new))


def _resize_tied(case: Case, old: int, new: int) -> Case:
    """Every tensor-input dim of size `old` (and matching shape attributes) set to `new`."""
    for inp in case.graph.inputs:
        for axis, n in enumerate(inp.shape):
            if n == old:
                case = _resize_one(case, inp.name, axis, new)
    nodes = tuple(_resize_attrs(n, old, new) for n in case.graph.nodes)
    return replace(case, graph=replace(case.graph, nodes=nodes))


def _squeeze_one(case: Case, name: str, axis: int) -> Case:
    """Input `name` without its size-1 dim `axis`."""
    shape = case.graph.input(name).shape
    return reshape_input(case, name, shape[:axis] + shape[axis + 1:], _squeezer(axis))


def _squeeze_tied(case: Case, rank: int, axis: int) -> Case:
    """Every tensor input of rank `rank` with a size-1 dim at `axis` without that dim."""
    for inp in case.graph.inputs:
        if inp.kind == "tensor" and len(inp.shape) == rank and inp.shape[axis] == 1:
            case = _squeeze_one(case, inp.name, axis)
    return case


def smaller_dims(case: Case) -> Iterator[Candidate]:
    """Each input dim set to 1, cut to a sixteenth, then halved: alone, then with every dim (and shape attribute)
    of the same size. The sixteenth makes a long axis short in a few steps rather than one halving at a time."""
    cands = []
    for inp in case.graph.inputs:
        if inp.kind != "tensor":
            continue
        for axis, n in enumerate(inp.shape):
            for m in dict.fromkeys((1, n // 16, n // 2)):
                if 1 <= m < n:
                    cands.append(Candidate(f"{inp.name} dim {axis}: {n} -> {m}", _resize_one(case, inp.name, axis, m)))
                    cands.append(Candidate(f"every dim {n} -> {m} (from {inp.name})", _resize_tied(case, n, m)))
    yield from offer(case, cands)


def fewer_dims(case: Case) -> Iterator[Candidate]:
    """Drop a size-1 dim of one input: alone, then from every input of the same rank."""
    cands = []
    for inp in case.graph.inputs:
        if inp.kind != "tensor":
            continue
        rank = len(inp.shape)
        for axis, n in enumerate(inp.shape):
            if n == 1:
                cands.append(Candidate(f"{inp.name}: drop dim {axis}", _squeeze_one(case, inp.name, axis)))
                cands.append(Candidate(f"every rank-{rank} input: drop dim {axis} (from {inp.name})", _squeeze_tied(case, rank, axis)))
    yield from offer(case, cands)
