"""The gradient reference of a training case: float64 gradients of the same program on the same rounded inputs.

A training case (Graph.wrt) asks for the gradient of its loss (the first output) with respect to some inputs. Each
backend computes it with its own autodiff; the reference is PyTorch autograd in float64 on the CPU, a stated
independent reference: float64 CPU kernels share no code path with the 16-bit kernels, fusions and decompositions
under test, though they do share PyTorch's derivative formulas (derivatives.yaml), so a wrong formula in PyTorch
itself would be missed (torch_xla runs those formulas too; TVM's are its own).

The exact gradient differentiates the exact program (every float value in float64, casts included, as the forward
reference computes). An ideal 16-bit backward computes each op's VJP with wide accumulation on the forward's rounded
values and rounds each gradient once to the dtype of the value it is the gradient of: the program with every value
rounded to its declared dtype and back (`astype` there and to float64), whose autograd rounds the gradient at the
same points (the backward of a cast casts the gradient back). Two such ideals set the scale of the bound, as for the
forward pass: one in float64 arithmetic, one in float32 (a float32 backward's own accumulation).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .dtypes import FLOAT_FORMATS, LOW_PRECISION, computed_floor, flush, is_float, round_to
from .identifiers import fresh_name
from .ir import Graph, Node, infer, redeclare
from .ops import OPS, tagged

Values = dict[str, np.ndarray]
NARROWER = ("float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float32")
NEEDS_WEIGHT = tagged(OPS, "autograd-needs-weight")  # see with_weights


def grad_name(name: str) -> str:
    """The name a gradient goes by in findings and tables."""
    return f"grad:{name}"


def program(graph: Graph, arithmetic: str, rounded: bool, narrowed: bool = False) -> Graph:
    """The graph computing in `arithmetic` (float64 or float32); with `rounded`, every float value of the original
    graph rounded to its declared dtype after the op that makes it (and its gradient rounded there in the backward).
    With `narrowed` too, a wider float operand of an op whose result is 16-bit (a float32 0-dim tensor times a
    bfloat16 one is bfloat16) is read through a cast to that dtype: the op's gradient of it, reduced over its
    broadcast axes, rounds to the op's dtype, as PyTorch's does (triage31 b8b7e62481, bf2b7acf42: a float32 scalar's
    gradient through a bfloat16 mul or div, the correctly rounded bfloat16 sum, filed at 8.2e3x and 571x)."""
    typed = infer(graph)
    wide = with_weights(
        redeclare(graph, tuple(d for d in NARROWER if d != arithmetic) + ("float64",), arithmetic), arithmetic)
    if not rounded:
        return wide
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for node in wide.nodes:
        operands = [rename.get(o, o) if isinstance(o, str) else o for o in node.inputs]
        out = typed.values.get(node.id)
        if narrowed and out is not None and out.kind != "scalar" and out.dtype in LOW_PRECISION:
            for k, (o, original) in enumerate(zip(operands, node.inputs)):
                info = typed.values.get(original) if isinstance(original, str) else None
                if info is not None and info.kind != "scalar" and info.dtype in FLOAT_FORMATS and \
                        FLOAT_FORMATS[info.dtype].mantissa_bits > FLOAT_FORMATS[out.dtype].mantissa_bits:
                    narrow = fresh_name(f"{node.id}__{original}_as_{out.dtype}", taken)
                    back = fresh_name(f"{node.id}__{original}_read", taken)
                    nodes += [Node(narrow, "astype", (o,), {"dtype": out.dtype}),
                              Node(back, "astype", (narrow,), {"dtype": arithmetic})]
                    operands[k] = back
        nodes.append(replace(node, inputs=tuple(operands)))
        info = typed.values.get(node.id)
        if info is None or info.kind == "scalar" or not is_float(info.dtype) or info.dtype in (arithmetic, "float64"):
            continue
        narrow, back = fresh_name(f"{node.id}__to_{info.dtype}", taken), fresh_name(f"{node.id}__rounded", taken)
        nodes += [Node(narrow, "astype", (node.id,), {"dtype": info.dtype}),
                  Node(back, "astype", (narrow,), {"dtype": arithmetic})]
        rename[node.id] = back
    return Graph(wide.inputs, tuple(nodes), tuple(rename.get(o, o) for o in wide.outputs))


def with_weights(graph: Graph, arithmetic: str) -> Graph:
    """`graph` with a per-channel weight of ones (`full`, in `arithmetic`) given to each op tagged
    `autograd-needs-weight` that has a bias but no weight: the same function (x_hat * 1 + bias is exact), but
    PyTorch's CPU group_norm backward allocates the bias gradient with empty_like(weight), which raises "tensor does
    not have a device" on an undefined weight (torch 2.9; triage22 b3e61a53b2: the minimizer dropped a group_norm's
    weight and kept its bias's gradient)."""
    typed = infer(graph)
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    nodes: list[Node] = []
    for node in graph.nodes:
        slots = OPS[node.op].operands
        if node.op in NEEDS_WEIGHT:
            w, b = slots.index("weight?"), slots.index("bias?")
            ops = tuple(node.inputs) + (None,) * (len(slots) - len(node.inputs))
            if ops[w] is None and ops[b] is not None:
                ones = fresh_name(f"{node.id}__ones", taken)
                channels = typed.values[ops[0]].shape[1]
                nodes.append(Node(ones, "full", (), {"shape": [channels], "value": 1.0, "dtype": arithmetic}))
                node = replace(node, inputs=tuple(ones if k == w else o for k, o in enumerate(ops)))
        nodes.append(node)
    return replace(graph, nodes=tuple(nodes))


def autograd(graph: Graph, values: Values) -> list[np.ndarray]:
    """Gradients of graph.outputs[0] with respect to graph.wrt, by PyTorch autograd on the CPU (float64 arrays)."""
    import torch

    outs, leaves = _run_with_leaves(graph, values)
    loss = outs[0]
    if not loss.requires_grad:
        return [np.zeros(leaf.shape) for leaf in leaves]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [np.zeros(leaf.shape) if g is None else g.detach().to(torch.float64).numpy() for g, leaf in zip(grads, leaves)]


def _run_with_leaves(graph: Graph, values: Values) -> tuple[Any, list[Any]]:
    """(outputs, leaves): `graph` run by PyTorch on the CPU with every input it takes gradients of as a leaf."""
    from .executors.torch_exec import TorchExecutor

    ex = TorchExecutor()
    fn = ex.prepare(graph)
    args: list[Any] = [ex.make_input(inp, values[inp.name]) for inp in graph.inputs]
    leaves = []
    for k, inp in enumerate(graph.inputs):
        if inp.grad:
            args[k] = args[k].detach().requires_grad_(True)
            leaves.append(args[k])
    return fn(*args), leaves


def reference(graph: Graph, values: Values) -> tuple[list[np.ndarray], list[list[np.ndarray]], list[float]]:
    """(exact gradients, [ideal gradients per ideal implementation], error-scale floors) of `graph` (a numeric graph)
    on `values`, which are already rounded to the graph's declared input dtypes. Each ideal's gradient of an input
    is rounded once more to that input's declared dtype (the gradient has the parameter's dtype).

    A gradient's floor is the magnitude of the terms its backward sums, estimated from cancellation: the RMS
    difference between the same program's gradients in float32 and float64, times 2^24. Where the exact gradient
    is zero by cancellation (the loss sums a normalized output: sum(softmax), a layer_norm without weight), its
    error is judged at that magnitude, not at the dtype's smallest spacing (triage19: ratios of 2e3 to 7e38).

    The ideals: the rounded program in float64 and in float32 arithmetic, and, where an input or a gradient is
    subnormal, the float64 one on inputs flushed to zero with its gradients flushed (flush-to-zero is a documented
    choice of XLA's CPU code and of bf16 GEMMs: triage19 filed four such gradients as bugs)."""
    exact = autograd(program(graph, "float64", rounded=False), values)
    wrt = [graph.input(name) for name in graph.wrt]
    rounded = program(graph, "float64", rounded=True)
    ideals = []
    for arithmetic in ("float64", "float32"):
        grads = autograd(rounded if arithmetic == "float64" else program(graph, arithmetic, rounded=True), values)
        ideals.append([round_to(g, inp.dtype) for g, inp in zip(grads, wrt)])
    narrowed = program(graph, "float64", rounded=True, narrowed=True)
    if len(narrowed.nodes) > len(rounded.nodes):  # an op computing in a dtype narrower than an operand's
        ideals.append([round_to(g, inp.dtype) for g, inp in zip(autograd(narrowed, values), wrt)])
    single = autograd(program(graph, "float32", rounded=False), values)
    floors = [cancellation(g32, g) for g32, g in zip(single, exact)]
    lucky = [f == 0.0 or float(np.max(np.abs(np.nan_to_num(g)), initial=0.0)) <= f for f, g in zip(floors, exact)]
    if any(lucky):  # float32 as exact as float64, or an exact zero's float32 off by less than its terms' ULP: one
        # summation order's luck is no estimate (triage30 bfb5aaf24e: d sum(softmax(x)) / dx, float32 off by 2e-18,
        # a floor of 3.6e-11 where TVM's order gives 1.3e-9 = one ULP of sum(p) times p; the terms are 0.0097)
        terms = term_magnitudes(graph, values)
        floors = [max(f, t) if luck else f for f, t, luck in zip(floors, terms, lucky)]
    floors = [max(f, n) for f, n in zip(floors, normalized_terms(graph, values))]
    in_order = summed_in_order(graph, values)
    if any(g is not None for g in in_order):
        ideals.append([i if g is None else g for g, i in zip(in_order, ideals[1])])
    flushed = {i.name: (flush(values[i.name], i.dtype) if i.kind == "tensor" else values[i.name]) for i in graph.inputs}
    if any(not np.array_equal(flushed[k], values[k]) for k in flushed) or any(
            not np.array_equal(flush(g, i.dtype), g) for g, i in zip(ideals[0], wrt)):
        grads = autograd(rounded, flushed)
        ideals.append([flush(round_to(g, inp.dtype), inp.dtype) for g, inp in zip(grads, wrt)])
    return exact, ideals, floors


def cancellation(single: np.ndarray, exact: np.ndarray) -> float:
    """The magnitude of the terms a gradient sums, from how far its float32 computation is off: the RMS difference
    where both are finite, times 2^24 (scaled by the largest difference first: the square of a huge one overflows)."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are infinite, masked out (triage22:
        # numpy's warning went to the campaign's terminal)
        d = np.where(np.isfinite(single) & np.isfinite(exact), np.asarray(single, dtype=np.float64) - exact, 0.0)
    top = float(np.max(np.abs(d), initial=0.0))
    if top == 0.0 or not np.isfinite(top):
        return 0.0
    return float(np.sqrt(np.mean((d / top) ** 2))) * top * 2.0 ** 24


BROADCASTING = ("elementwise", "activation", "compare")  # op families whose operands broadcast to the result's shape


def summed_in_order(graph: Graph, values: Values) -> list[np.ndarray | None]:
    """Per gradient of graph.wrt, the float32 ideal of an input its consumers broadcast, whose per-copy contributions
    (the float32 rounded program's gradient of the input made full-size) are summed one after another in float32, then
    rounded once to the input's dtype; None where no consumer broadcasts it. A float32 kernel may reduce in order: the
    forward's float32 ideal sums in order too, while PyTorch's float32 autograd sums pairwise (triage23 b52df0b7f3:
    TVM's collapse_sum of a float32 scalar's 364 copies, 30 ULPs off, as its forward sum is, was filed at 14.6x)."""
    typed = infer(graph)
    out: list[np.ndarray | None] = []
    for name in graph.wrt:
        inp = graph.input(name)
        users = [n for n in graph.nodes if name in n.inputs]
        shapes = {typed.values[n.id].shape for n in users}
        wide = next(iter(shapes)) if len(shapes) == 1 else None
        if (wide is None or inp.kind != "tensor" or any(OPS[n.op].family not in BROADCASTING for n in users)
                or int(np.prod(wide)) <= int(np.prod(inp.shape)) or np.broadcast_shapes(inp.shape, wide) != wide):
            out.append(None)
            continue
        full = replace(graph, inputs=tuple(replace(i, shape=tuple(wide)) if i.name == name else i for i in graph.inputs))
        grads = autograd(program(full, "float32", rounded=True),
                         {**values, name: np.broadcast_to(values[name], wide).copy()})
        copies = np.asarray(grads[full.wrt.index(name)], np.float32)
        lead = len(wide) - len(inp.shape)
        axes = [a for a in range(len(wide)) if a < lead or (inp.shape[a - lead] == 1 and wide[a] != 1)]
        stacked = np.moveaxis(copies, axes, list(range(len(axes)))).reshape((-1,) + tuple(
            d for a, d in enumerate(wide) if a not in axes))
        with np.errstate(all="ignore"):
            total = np.cumsum(stacked, axis=0, dtype=np.float32)[-1]  # numpy's cumsum adds in order
        out.append(round_to(np.asarray(total, np.float64).reshape(inp.shape), inp.dtype))
    return out


def term_magnitudes(graph: Graph, values: Values, seed: int = 0) -> list[float]:
    """The magnitude of the terms each gradient of graph.wrt sums, where float32 cancels as exactly as float64 (triage23
    b521ee6a3d: d sum(group_norm(x)) / dx is 0 in both for one group of 4, so the floor was 0 and eager's bfloat16
    rounding of terms near 1 was filed at 4e37x): the RMS of the float64 gradient of sum_n <node_n, r_n>, where r_n
    is the exact upstream gradient at every float node n with random signs (a seeded RNG). A structural zero (a
    normalized output summed, an upstream in a Jacobian's null space) needs the exact upstream's signs; with random
    ones each op's backward sums its terms without cancelling, at the size they have. Independent of every backend
    under test: float64 autograd on the CPU, as the reference."""
    import torch

    upstream = intermediate_grads(graph, values)
    if not upstream:
        return [0.0] * len(graph.wrt)
    exact = program(graph, "float64", rounded=False)
    names = tuple(upstream)
    outs, leaves = _run_with_leaves(Graph(exact.inputs, exact.nodes, names), values)
    rng = np.random.default_rng(seed)
    total = sum((out * torch.as_tensor(np.abs(upstream[n]) * rng.choice((-1.0, 1.0), size=np.shape(upstream[n])),
                                       dtype=torch.float64)).sum()
                for n, out in zip(names, outs) if out.requires_grad)
    if not torch.is_tensor(total) or not total.requires_grad:
        return [0.0] * len(leaves)
    grads = torch.autograd.grad(total, leaves, allow_unused=True)
    return [0.0 if g is None else float(torch.sqrt(torch.mean(g.detach() ** 2))) for g in grads]


def normalized_terms(graph: Graph, values: Values) -> list[float]:
    """Per gradient of graph.wrt, the floor a norm's weight gradient is judged at where that weight is the input: an
    ULP of float32 at the size of its terms, sum |dy| * max(|x|, |mean|) * rstd over the axes the weight broadcasts
    along, as a floor in the weight's dtype (computed_floor; 0 for other inputs).

    The normalized value x_hat = (x - mean) * rstd carries an ULP of float32 at |x| * rstd whatever it is: a mean
    computed as sum * (1/N) misses by an ULP of |x|, and 1/sqrt(eps) = 316 amplifies it on a constant row, whose
    x_hat is exactly 0 (triage27 b521ee6a3d: XLA's float32 mean of 95 threes gave x_hat = 7.5e-5, the weight's
    gradient sum(dy * x_hat) 7.8e-5 where the exact one is 0, filed at 4.23e35x)."""
    from .interpret import evaluate
    from .ops.norms import scale_shift_magnitude

    out = [0.0] * len(graph.wrt)
    upstream = None
    forward = None
    for node in graph.nodes:
        slots = OPS[node.op].operands
        at = slots.index("weight?") if "weight?" in slots else None
        weight = node.inputs[at] if at is not None and at < len(node.inputs) else None
        if not isinstance(weight, str) or weight not in graph.wrt:
            continue
        if upstream is None:
            upstream, forward = intermediate_grads(graph, values), evaluate(graph, values, rounded=False)
        if node.id not in upstream:
            continue
        args = [forward[o] if isinstance(o, str) else o for o in node.inputs]
        args[at] = None  # the terms at weight 1: the gradient's terms are dy * x_hat
        with np.errstate(all="ignore"):
            m = scale_shift_magnitude(node.op, args, {**OPS[node.op].attrs, **node.attrs})
        if m is None:
            continue
        terms = np.abs(np.broadcast_to(upstream[node.id], np.shape(m))) * m
        w = np.shape(forward[weight])
        axes = (tuple(range(terms.ndim - len(w))) if terms.shape[terms.ndim - len(w):] == tuple(w) else
                tuple(a for a in range(terms.ndim) if a != 1) if w == (terms.shape[1],) else None)
        if axes is None:
            continue
        summed = np.nan_to_num(terms.sum(axis=axes), nan=0.0, posinf=0.0)
        k = graph.wrt.index(weight)
        size = float(np.sqrt(np.mean(summed**2))) if summed.size else 0.0
        out[k] = max(out[k], float(computed_floor(size, graph.input(weight).dtype)))  # an ULP of float32 there
    return out


def intermediate_grads(graph: Graph, values: Values) -> dict[str, np.ndarray]:
    """The exact gradient of the loss with respect to every float node's value (what each op's backward receives)."""
    import torch

    typed = infer(graph)
    exact = program(graph, "float64", rounded=False)
    inner = tuple(n.id for n in exact.nodes if n.id in typed.values  # (not the ones with_weights adds)
                  and is_float(typed.values[n.id].dtype) and typed.values[n.id].kind != "scalar")
    outs, _ = _run_with_leaves(Graph(exact.inputs, exact.nodes, (exact.outputs[0],) + inner), values)
    live = [(name, t) for name, t in zip(inner, outs[1:]) if t.requires_grad]
    if not outs[0].requires_grad or not live:
        return {}
    grads = torch.autograd.grad(outs[0], [t for _, t in live], allow_unused=True)
    return {name: g.detach().to(torch.float64).numpy() for (name, _), g in zip(live, grads) if g is not None}
