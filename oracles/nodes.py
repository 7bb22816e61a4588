"""Judging one node at a time on the backend's own operand values: the bound per node, excess precision,
flush-to-zero, undefined float->int casts (pure functions; the checker runs the backends and hands them values).

A node is judged on the values the backend itself fed it: a probe run outputs every node, and each node's
exact answer and ideals are computed from those operands. So an error an earlier node made and a later one
carried is pinned on the earlier node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzzer.dtypes import (
    flush,
    FLOAT_FORMATS,
    LOW_PRECISION,
    cast_results,
    cast_undefined,
    is_float,
    round_to,
)
from fuzzer.interpret import evaluate, ideal_values, undefined_cast_reach
from fuzzer.ir import Graph, Input, IRError, Node, infer, op_attrs
from fuzzer.ops import OPS, is_cast, tagged
from fuzzer.ops.linalg import accumulated_magnitude
from fuzzer.ops.norms import scale_shift_magnitude

from .bounds import ErrorStats, computed_floor, error_stats, slack_ulps
from .precision import narrower_format

Values = dict[str, np.ndarray]
LIFTABLE = ("elementwise", "activation", "cast")  # each result element a function of its operands': lifting separates
GATED = tagged(OPS, "gated")  # judged at their operand's magnitude (see fuzzer.ops.base TAGS)
SINGLE_ROUNDING = tagged(OPS, "single-rounding")  # casts: held to correct rounding (oracles.bounds.rounding_ratio)
BIAS_ADD_SPLITS = tagged(OPS, "bias-add-splits")  # a product op whose bias add a backend may fuse into the consumer
CONTRACTIONS = tagged(OPS, "contraction")  # bilinear accumulations: judged at sqrt(K) sum |a b| (accumulated_magnitude)
GATE_ULPS = 2.0  # what a float kernel's gate may add, in ULPs at the operand's magnitude (its own rounding, the product)


def rounded_inputs(graph: Graph, values: Values) -> Values:
    """Input values rounded to the dtypes `graph` declares (a policy may declare params in bf16)."""
    return {i.name: (round_to(values[i.name], i.dtype) if i.kind == "tensor" else np.asarray(values[i.name]))
            for i in graph.inputs}


def node_graph(graph: Graph, node_id: str) -> Graph:
    """The one-node graph computing `node_id` from its operands, each an input of its own."""
    typed = infer(graph)
    node = graph.node(node_id)
    inputs = []
    for operand in dict.fromkeys(o for o in node.inputs if isinstance(o, str)):
        info = typed.values[operand]
        inputs.append(Input(operand, info.shape if info.kind != "scalar" else (), info.dtype,
                            kind="scalar" if info.kind == "scalar" else "tensor"))
    return Graph(tuple(inputs), (node,), (node_id,))


def int_casts(graph: Graph, typed: Any) -> list[Node]:
    """The nodes casting a float tensor to an int dtype."""
    return [n for n in graph.nodes if is_cast(n.op) and not is_float(typed.values[n.id].dtype)
            and isinstance(n.inputs[0], str) and is_float(typed.values[n.inputs[0]].dtype)]


def undefined_casts(graph: Graph, typed: Any, expected: list[Values],
                    ideal: list[dict[str, list[np.ndarray]]],
                    inputs: list[Values] | None = None) -> dict[int, tuple[list[str], set[str]]]:
    """Per input set: the float->int casts meeting NaN, inf or a value beyond the int type (in the reference or
    an ideal implementation), and every value computed from them. C and PyTorch leave such a conversion
    undefined, so whatever int a backend returns there (PyTorch eager's included) is not a wrong answer.

    With the input sets, a value counts as computed from such a cast only where the undefined ints reach it
    (fuzzer.interpret.undefined_cast_reach: it changes with them); else every value downstream counts."""
    casts = int_casts(graph, typed)
    out: dict[int, tuple[list[str], set[str]]] = {}
    for k in range(len(expected)):
        hit = [n.id for n in casts
               if any(cast_undefined(a, typed.values[n.id].dtype).any()
                      for a in [expected[k][n.inputs[0]], *ideal[k].get(n.inputs[0], [])])]
        if hit:
            reached = set(hit)
            for node in graph.nodes:
                if any(isinstance(o, str) and o in reached for o in node.inputs):
                    reached.add(node.id)
            if inputs is not None:
                reached = (reached & undefined_cast_reach(graph, inputs[k])) | set(hit)
            out[k] = (hit, reached)
    return out


@dataclass(frozen=True)
class NodeVerdict:
    """One node of a probe run judged on the backend's own operands."""

    node: str
    stats: ErrorStats
    underflow: bool  # the error goes away when subnormal operands and results are flushed to zero
    narrow: str | None  # a narrower format all its values lie on (effective-precision evidence)
    device: str | None  # the element type the device reports for it
    excess: bool = False  # judged fused with its 16-bit producers computing in float32 (XLA's excess precision)
    shape: tuple[int, ...] | None = None  # the shape the backend returned where it is not the declared (PyTorch's) one
    alone: tuple[Graph, dict[str, Any]] | None = None  # where underflow: the node alone and the operands it saw


def judge_nodes(numeric: Graph, inputs: Values, observed: dict[str, np.ndarray],
                device: dict[str, str | None] | None = None,
                approximate: dict[str, float] | None = None) -> list[NodeVerdict]:
    """Judge every observed node of `numeric` on its own operands: observed values where there are, else ideal ones.

    `approximate` (op -> relative error budget) widens the bound of those ops (documented approximate math).
    """
    typed = infer(numeric)
    env: dict[str, Any] = dict(rounded_inputs(numeric, inputs))
    casts = {n.id for n in int_casts(numeric, typed)}
    verdicts = []
    for node in numeric.nodes:
        dtype = typed.values[node.id].dtype
        if node.id not in observed or typed.values[node.id].kind == "scalar":
            env[node.id] = ideal_value(node, typed, env)
            continue
        shape = tuple(np.shape(observed[node.id]))
        if shape != typed.values[node.id].shape:  # another shape than PyTorch's: a verdict of its own, never fed on
            env[node.id] = ideal_value(node, typed, env)
            wrong = ErrorStats(float("inf"), float("inf"), float("inf"), -1, max(1, int(np.prod(shape))))
            verdicts.append(NodeVerdict(node.id, wrong, False, None, (device or {}).get(node.id), shape=shape))
            continue
        if node.id in casts and cast_undefined(env[node.inputs[0]], dtype).any():  # no int is wrong there
            env[node.id] = np.asarray(observed[node.id], dtype=np.float64)
            continue
        sub = node_graph(numeric, node.id)
        sub_inputs = {i.name: env[i.name] for i in sub.inputs}
        exact = evaluate(sub, sub_inputs, rounded=False)[node.id]
        ideal = ideal_values(sub, sub_inputs)[node.id]
        actual = observed[node.id]
        gated = node.op in GATED
        floor = (np.asarray(sub_inputs[node.inputs[0]], dtype=np.float64) if gated
                 else passed_through(node, sub_inputs, dtype))
        slack = slack_ulps(dtype, (approximate or {}).get(node.op, 0.0)) + (GATE_ULPS if gated else 0.0)
        st = node_stats(node.op, actual, exact, ideal, dtype, slack_ulps=slack, floor=floor)
        excess = False
        if st.ratio > 1.0:
            carried = excess_precision_stats(numeric, typed, node, sub, sub_inputs, env, actual, dtype)
            if carried is not None and carried.ratio < st.ratio:  # either reading is allowed: the kinder one
                st, excess = carried, True
        narrow = narrower_format(actual, exact, dtype) if st.ratio > 1.0 else None
        underflow = st.ratio > 1.0 and flushing_explains(sub, sub_inputs, actual, dtype)
        verdicts.append(NodeVerdict(node.id, st, underflow, narrow, (device or {}).get(node.id), excess,
                                    alone=(sub, sub_inputs) if underflow else None))
        env[node.id] = np.asarray(actual, dtype=np.float64)
    return verdicts


def passed_through(node: Node, operands: Values, dtype: str) -> np.ndarray | None:
    """The error scale's floor from the magnitudes a node's float kernel passes through (None: none beyond its result).

    A centering norm's scale-and-shift kernel cancels terms of size |x| * rstd * |weight| in float32: a result near 0
    is judged at an ULP of float32 there (issue 33: a float16 group_norm of one-element groups, exactly 0, where
    PyTorch's fp16, bf16 and fp32 kernels all return an ULP of float32 at x * scale, was filed as its bug); a
    contraction's float32 accumulation, about sqrt(K) ULPs of float32 at sum |a b| (`accumulated_magnitude`)."""
    if not is_float(dtype):
        return None
    args = [operands[o] if isinstance(o, str) else o for o in node.inputs]
    with np.errstate(all="ignore"):
        if node.op in CONTRACTIONS:
            terms = accumulated_magnitude(OPS[node.op].reference, args, op_attrs(node))
        else:
            terms = scale_shift_magnitude(node.op, args, op_attrs(node))
    return None if terms is None else np.nan_to_num(computed_floor(terms, dtype), nan=0.0, posinf=0.0)


def node_stats(op: str, actual: Any, exact: Any, ideal: list[np.ndarray], dtype: str, **bound: Any) -> ErrorStats:
    """One node's values under the bound: a single-rounding op (a cast) against its correctly rounded exact answer."""
    rounded = cast_results(exact, dtype) if op in SINGLE_ROUNDING and is_float(dtype) else None
    return error_stats(actual, exact, ideal, dtype, rounded=rounded, **bound)


def excess_precision_stats(numeric: Graph, typed: Any, node: Any, sub: Graph, sub_inputs: Values,
                           env: dict[str, Any], actual: np.ndarray, dtype: str) -> ErrorStats | None:
    """The node judged fused with its 16-bit producers, which then compute in float32 (None: it has none).

    XLA keeps a fused intermediate in float32 where the program rounds it to bf16/fp16 (its documented
    xla_allow_excess_precision, on by default): the next op then sees a more precise operand than the one a
    probe observes, and judging it on the observed one blames it for the rounding XLA skipped. The fused
    graph starts from the producers' own (observed) operands, so its ideals feel the float32 rounding of the
    intermediate too.
    """
    producers = {n.id: n for n in numeric.nodes}

    def producer(name: str) -> Any:
        """The 16-bit node an operand comes from, through a widening cast (None: not one)."""
        prod, info = producers.get(name), typed.values[name]
        if prod is None or info.kind == "scalar":
            return None
        if is_cast(prod.op) and info.dtype == "float32" and isinstance(prod.inputs[0], str):
            return producer(prod.inputs[0])
        return prod if info.dtype in LOW_PRECISION else None

    def fused_graph(split_bias: bool) -> tuple[Graph, dict[str, Input]] | None:
        """The node over its producers recomputed in float32; with `split_bias`, a linear or conv producer's product
        rounded to its 16-bit dtype and only its bias add kept in float32 (XLA's autocast linear: the dot is its own
        bf16 HLO, the bias add fuses into the consumer; triage26 b0b2d8eefd, b8050003d8, b7b533c83a: 1 bf16 ULP of the
        dot, filed at 2e3x on the float32 op after it; triage31 b8050003d8: a conv3d's, 1.4e3x on the sub after it)."""
        inputs: dict[str, Input] = {}
        nodes: list[Node] = []
        operands: list[Any] = []
        split = False
        for o in node.inputs:
            prod = producer(o) if isinstance(o, str) else None
            if prod is None:
                if isinstance(o, str) and o not in inputs:
                    inputs[o] = next(i for i in sub.inputs if i.name == o)
                operands.append(o)
                continue
            args: list[Any] = []
            for a in prod.inputs:
                if not isinstance(a, str):
                    args.append(a)
                    continue
                info = typed.values[a]
                inputs.setdefault(a, Input(a, info.shape if info.kind != "scalar" else (), info.dtype,
                                           kind="scalar" if info.kind == "scalar" else "tensor"))
                if info.kind != "scalar" and info.dtype in LOW_PRECISION:
                    nodes.append(Node(f"{a}__f32", "astype", (a,), {"dtype": "float32"}))
                    args.append(f"{a}__f32")
                else:
                    args.append(a)
            if split_bias and prod.op in BIAS_ADD_SPLITS and len(args) > 2 and isinstance(args[2], str):
                low, rank = typed.values[prod.id].dtype, len(typed.values[prod.id].shape)
                bias = args[2]
                if OPS[prod.op].family == "conv":  # a channel's bias: [C] as [C, 1, ...] against [N, C, spatial...]
                    nodes.append(Node(f"{prod.id}__bias", "reshape", (bias,),
                                      {"shape": [*typed.values[prod.inputs[2]].shape, *[1] * (rank - 2)]}))
                    bias = f"{prod.id}__bias"
                nodes += [Node(f"{prod.id}__dot", prod.op, tuple(args[:2]), dict(prod.attrs)),
                          Node(f"{prod.id}__dot16", "astype", (f"{prod.id}__dot",), {"dtype": low}),
                          Node(f"{prod.id}__dot32", "astype", (f"{prod.id}__dot16",), {"dtype": "float32"}),
                          Node(f"{prod.id}__f32", "add", (f"{prod.id}__dot32", bias), {})]
                split = True
            else:
                nodes.append(Node(f"{prod.id}__f32", prod.op, tuple(args), dict(prod.attrs)))
            operands.append(f"{prod.id}__f32")
        if not any(isinstance(o, str) and o.endswith("__f32") for o in operands) or (split_bias and not split):
            return None
        nodes.append(Node(node.id, node.op, tuple(operands), dict(node.attrs)))
        fused = Graph(tuple(inputs.values()), tuple(dict((n.id, n) for n in nodes).values()), (node.id,))
        try:
            if infer(fused).values[node.id].dtype != dtype:
                return None
        except IRError:  # a fused form the IR does not type is not an explanation
            return None
        return fused, inputs

    best: ErrorStats | None = None
    for split_bias in (False, True):
        made = fused_graph(split_bias)
        if made is None:
            continue
        fused, inputs = made
        values = {name: env[name] for name in inputs}
        exact = evaluate(fused, values, rounded=False)[node.id]
        st = error_stats(actual, exact, ideal_values(fused, values)[node.id], dtype)
        if best is None or (st.nonfinite_mismatch, st.ratio) < (best.nonfinite_mismatch, best.ratio):
            best = st
    return best


def flushing_explains(sub: Graph, inputs: Values, actual: np.ndarray, dtype: str) -> bool:
    """True when the backend's result is within the bound of an ideal one-node computation whose subnormal
    operands and results are flushed to zero: the error comes from flush-to-zero, not from the op."""
    flushed = {i.name: (flush(inputs[i.name], i.dtype) if i.kind == "tensor" else inputs[i.name]) for i in sub.inputs}
    if all(np.array_equal(flushed[k], inputs[k]) for k in flushed):
        exact = evaluate(sub, inputs, rounded=False)[sub.outputs[0]]
        if np.array_equal(flush(exact, dtype), exact):
            return False  # nothing subnormal anywhere: flushing cannot explain anything
    out = sub.outputs[0]
    op = sub.node(out).op
    shape = np.shape(actual)
    per_element = getattr(OPS.get(sub.node(out).op), "family", "") in LIFTABLE
    if per_element and np.ndim(actual) > 0 and all(_broadcasts(np.shape(v), shape) for v in flushed.values()):
        # elementwise: the elements flushing does not touch must be within the bound on their own (triage: a
        # normal-range tanh(1e-4) = 0 next to subnormal elements was filed as flushing); not for ops that mix
        # elements (triage16 b1ab1c5acd: a group_norm of subnormals, whose one zero element is normalized by the
        # group's flushed mean)
        touched = np.zeros(shape, dtype=bool)
        for i in sub.inputs:
            if i.kind == "tensor":
                v = np.broadcast_to(np.asarray(inputs[i.name], dtype=np.float64), shape)
                touched |= np.broadcast_to(flush(v, i.dtype) != v, shape)
        plain = evaluate(sub, inputs, rounded=False)[out]
        touched |= flush(plain, dtype) != plain
        keep = ~touched
        if keep.any():
            rest = node_stats(op, np.asarray(actual)[keep], np.asarray(plain)[keep],
                              [np.broadcast_to(i, shape)[keep] for i in ideal_values(sub, inputs)[out]], dtype)
            if rest.ratio > 1.0:
                return False
    exact = flush(evaluate(sub, flushed, rounded=False)[out], dtype)
    ideal = [flush(i, dtype) for i in ideal_values(sub, flushed)[out]]
    return node_stats(op, actual, exact, ideal, dtype).ratio <= 1.0


def lifted(sub: Graph, inputs: Values, times: float = 1.0) -> dict[str, Any]:
    """The operands of a one-node graph with every non-zero float value below `times` x the smallest normal of its
    dtype set to that magnitude (sign kept): what flushing cannot touch."""
    out: dict[str, Any] = {}
    for i in sub.inputs:
        v = inputs[i.name]
        if i.kind == "tensor" and i.dtype in FLOAT_FORMATS:
            low = times * 2.0 ** FLOAT_FORMATS[i.dtype].min_exponent
            a = np.asarray(v, dtype=np.float64)
            v = np.where((a != 0) & (np.abs(a) < low), np.sign(a) * low, a)
        out[i.name] = v
    return out


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """True when `shape` broadcasts to `to` (an elementwise operand of a result of shape `to`)."""
    try:
        return tuple(np.broadcast_shapes(shape, to)) == tuple(to)
    except ValueError:
        return False


def ideal_value(node: Any, typed: Any, env: dict[str, Any]) -> np.ndarray:
    """A node's value computed exactly from `env` and rounded to its dtype (Python scalars stay exact)."""
    args = [env[o] if isinstance(o, str) else o for o in node.inputs]
    attrs = op_attrs(node)
    with np.errstate(all="ignore"):
        value = np.asarray(OPS[node.op].reference(*args, **attrs), dtype=np.float64)
    info = typed.values[node.id]
    return value if info.kind == "scalar" else round_to(np.broadcast_to(value, info.shape), info.dtype)
