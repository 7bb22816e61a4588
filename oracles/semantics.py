"""The semantic oracle: a backend's status and dtypes against PyTorch eager on the CPU running the same policy.

PyTorch eager on the CPU is the semantic oracle for status and dtype. For each executor, eager runs the
PyTorch program of the executor's precision policy (its policy graph) on the same inputs. The executor
diverges only where it behaves otherwise:

- status-divergence   it raises where eager runs                                            (backend-bug)
- dtype-divergence    both run and it returns another dtype than eager                      (backend-bug)
- silent-downcast     eager raises at a mixed-dtype op, the executor runs it and returns a
                      narrower dtype than the promotion: an operand was silently downcast   (backend-bug)
- model-hazard        eager itself raises at a mixed-dtype op (a chain break): the model
                      breaks under that policy whatever the backend; one finding per break  (model-hazard)
- coverage            the executor says it cannot express the graph                         (unsupported)

Both raising, or eager raising for another reason while the executor runs, is not a divergence (the
executor's numbers are still judged by the error bound). Pure functions over outcomes: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from fuzzer.analysis import Promotion, break_trace, trace_promotion
from fuzzer.dtypes import FLOAT_FORMATS, is_float
from fuzzer.ir import Graph, TypedGraph
from fuzzer.ops import OPS
from fuzzer.ops.base import ChainBreak
from fuzzer.outcome import HARNESS_LIMIT, Outcome, first_line
from fuzzer.policy import DECLARED, Policy

from .errors import classify_error, message_key
from .evidence import policy_evidence
from .findings import Finding
from .subjects import Subject
from .vocabulary import ErrorClass, Kind, Oracle, Reaction

FAILED = ("error", "crash", "timeout")
EAGER = "eager"  # what the semantic findings are compared against


def _graph_ops(graph: Graph) -> list[str]:
    return sorted({n.op for n in graph.nodes})


# op names too common in prose to count when an error message mentions them as a word
_GENERIC_WORDS = {"add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "sin", "cos", "sum", "mean", "var", "astype"}


def _named_ops(graph: Graph, message: str | None) -> list[str]:
    """Ops of the graph that an error message names ("R.nn.conv2d", "layer_norm: only ...")."""
    text = (message or "").lower()
    return sorted({n.op for n in graph.nodes
                   if f"nn.{n.op}" in text or f".{n.op}(" in text or f"'{n.op}'" in text
                   or (n.op not in _GENERIC_WORDS and re.search(rf"(?<![a-z0-9_]){re.escape(n.op)}(?![a-z0-9_])", text))})


def _mentioned_ops(graph: Graph, message: str | None) -> list[str]:
    """Ops of the graph that an error message names, else every op."""
    return _named_ops(graph, message) or _graph_ops(graph)


def narrower(a: str, b: str) -> bool:
    """True when float dtype `a` has fewer mantissa bits than `b`."""
    return is_float(a) and is_float(b) and FLOAT_FORMATS[a].mantissa_bits < FLOAT_FORMATS[b].mantissa_bits


def _coverage(graph: Graph, s: Subject, k: int, out: Outcome) -> Finding:
    ops = _mentioned_ops(graph, out.message)
    dtypes = sorted({v.dtype for v in s.typed().values.values() if v.kind != "scalar" and is_float(v.dtype)})
    return Finding(Oracle.COVERAGE, s.name, ops, dtypes, ErrorClass.UNSUPPORTED,
                   f"{s.name} cannot run this graph: {out.summary()}", kind=Kind.UNSUPPORTED, input_set=k,
                   details={"whole_graph": len(ops) > 1 or ops == _graph_ops(graph), "stage": out.stage,
                            "op_named": bool(_named_ops(graph, out.message))})


def _status(graph: Graph, s: Subject, k: int, out: Outcome, eager: Outcome) -> Finding:
    cls = classify_error(out)
    ops = _mentioned_ops(graph, out.message)
    dtypes = sorted({v.dtype for v in s.typed().values.values() if v.kind != "scalar" and is_float(v.dtype)})
    msg = (f"{s.name} raises ({cls}: {first_line(out.message) or out.summary()}) where PyTorch eager on the CPU "
           f"runs the same program ({program_words(s.label)}) and returns {', '.join(eager.dtypes or [])}")
    return Finding(Oracle.STATUS_DIVERGENCE, s.name, ops, dtypes, cls, msg, against=EAGER, input_set=k,
                   details={"whole_graph": True, "stage": out.stage, "error_type": out.error_type,
                            "error": first_line(out.message, 400), "error_key": message_key(out.message),
                            "eager_dtypes": eager.dtypes,
                            **({"in_pass": out.info["in_pass"]} if out.info.get("in_pass") else {})})


def program_words(policy: Policy) -> str:
    """The program eager runs for a policy, in a user's words: a policy's casts are written out in it, eager runs
    it without the policy (sample29 #4: "runs the same program (autocast-bf16)" read as eager under autocast)."""
    return policy.words if policy == DECLARED else f"what {policy.words} computes, its casts written out"


def _dtype(graph: Graph, s: Subject, k: int, out: Outcome, want: list[str]) -> Finding | None:
    bad = [(v, w, g) for v, w, g in zip(graph.outputs, want, out.dtypes or []) if w != g]
    if not bad:
        return None
    value, w, g = bad[0]
    producer = next((n.op for n in graph.nodes if n.id == value), "input")
    msg = f"{value}: {s.name} returns {g} where PyTorch eager on the CPU returns {w} ({program_words(s.label)})"
    return Finding(Oracle.DTYPE_DIVERGENCE, s.name, [producer], [w, g], "dtype", msg, against=EAGER, input_set=k,
                   output=value, node=value if producer != "input" else "",
                   details={"mismatches": [list(b) for b in bad]})


def downcast_message(executor: str, node: str, op: str, brk: Any, got: str, value: str | None = None,
                     off: float | None = None) -> str:
    """What a silent downcast is: the backend runs operand dtypes PyTorch rejects (it raises) and narrows one of them;
    `off`: where the result's dtype is the promoted one, how far its numbers are from the promotion (the evidence)."""
    lost = brk.activation_dtype if narrower(brk.param_dtype, brk.activation_dtype) else brk.param_dtype
    where = f" for {value}" if value and value != node else ""
    head = (f"{executor} runs {node} ({op}) on a {brk.activation_dtype} activation with {brk.param_dtype} parameters, "
            f"where PyTorch raises (it checks that they share a dtype)")
    if off is not None:
        return (f"{head}, and returns {got}{where} {off:.3g}x further from the {got} promotion than the bound allows: "
                "an operand was narrowed inside, without a word")
    return f"{head}, and returns {got}{where} without a word" + (f": the {lost} operand was converted to {got}"
                                                                  if lost != got else "")


def _downcast(graph: Graph, s: Subject, k: int, out: Outcome) -> Finding | None:
    """Eager raised at a chain break that the executor ran: a narrower dtype than the promotion is a downcast."""
    numeric = s.typed("numeric")
    breaks = {b: brk for b, brk in s.typed().chain_breaks().items() if b not in s.bridged}
    if not breaks:
        return None
    for value, got in zip(graph.outputs, out.dtypes or []):
        want = s.reported(numeric.values[value].dtype)
        if narrower(got, want):
            node_id, brk = sorted(breaks.items())[0]
            op = graph.node(node_id).op
            msg = downcast_message(s.name, node_id, op, brk, got, value)
            return Finding(Oracle.SILENT_DOWNCAST, s.name, [op], [brk.activation_dtype, brk.param_dtype, got],
                           ErrorClass.DOWNCAST, msg, against=EAGER, input_set=k, output=value, node=node_id)
    return None


def _hazards(graph: Graph, subjects: list[Subject], eager: Mapping[str, list[Outcome]],
             keys: Mapping[str, str]) -> list[Finding]:
    """One model-hazard finding per chain break of each policy under which eager raises a dtype mismatch."""
    found: list[Finding] = []
    done: set[str] = set()
    seen: set[tuple[str, tuple[str, str]]] = set()
    bridged_last = sorted(subjects, key=lambda x: bool(x.bridged))  # an unbridged run of the same break comes first
    for s in bridged_last:
        key = keys[s.name]
        if key in done:
            continue
        done.add(key)
        outs = eager.get(key) or []
        k, raised = next(((k, o) for k, o in enumerate(outs) if o.status == "error"), (0, None))
        if raised is None or classify_error(raised) != ErrorClass.DTYPE_MISMATCH:
            continue
        typed = s.typed()
        mine = [x for x in subjects if keys[x.name] == key]
        reactions: dict[str, list[str]] = {}
        for x in mine:
            o = x.outcomes[k] if k < len(x.outcomes) else None
            kind = (Reaction.RAISED if o is not None and o.status in FAILED else
                    Reaction.BRIDGED if x.bridged else Reaction.RAN)
            reactions.setdefault(kind, []).append(x.name)
        breaks = typed.chain_breaks()
        first = next((n.id for n in s.policy.nodes if n.id in breaks), None)  # eager raises there, never later
        if first is not None and set(reactions) == {Reaction.BRIDGED} and (first, brk_dtypes(breaks[first])) in seen:
            continue  # only precfuzz's own bridging ran it: eager's hazard on its program says it all (sample29 #25:
            # tvm/decompose-inference signed it, its repro ran the bridged program and exited 0)
        for node_id, brk in ([(first, breaks[first])] if first is not None else []):
            seen.add((node_id, brk_dtypes(brk)))
            op = graph.node(node_id).op
            brk, trace, roles = _by_role(graph, typed, node_id, brk)
            culprits = list(trace.culprits) if trace else []
            sources = [_source(s.policy, c) for c in culprits]
            traced = brk.activation_dtype if roles else brk.param_dtype  # (an op of operands only: the wide one's)
            where = f"; the {traced} comes from {', '.join(culprits)}" if culprits else ""
            if trace and trace.promoted_at:
                where += f" (promoted at {', '.join(trace.promoted_at)})"
            operand = graph.node(node_id).inputs[brk.operand]
            fix = f"{operand}.to(torch.{brk.param_dtype}) before {node_id}" if isinstance(operand, str) else ""
            said = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in reactions.items())
            what = (f"a {brk.activation_dtype} activation with {brk.param_dtype} parameters" if roles else
                    f"{brk.activation_dtype} and {brk.param_dtype} operands")
            msg = (f"under {s.label}, {node_id} ({op}) gets {what} and PyTorch raises ({first_line(raised.message)}){where}"
                   + (f"; fix: {fix}" if fix else "") + f" [{said}]")
            found.append(Finding(
                Oracle.MODEL_HAZARD, s.name, [op], [brk.activation_dtype, brk.param_dtype], ErrorClass.RAISED, msg,
                kind=Kind.MODEL_HAZARD, against=EAGER, input_set=k, node=node_id,
                details={**policy_evidence(s.label), "culprits": culprits, "sources": sources,
                         "promoted_at": list(trace.promoted_at) if trace else [], "fix": fix,
                         "reactions": reactions, "error": first_line(raised.message, 400),
                         **({} if roles else {"operands_only": True})}))
    return found


def _by_role(graph: Graph, typed: TypedGraph, node_id: str,
             brk: ChainBreak) -> tuple[ChainBreak, Promotion | None, bool]:
    """The chain break with its operands in their model roles, where its odd dtype came from, and whether the roles
    hold (False: an op of operands only, as attention, whose wide operand is traced; hazards30 ba76632b8f said "a
    bfloat16 activation next to float32 parameters" for q, k float32 and v bfloat16, "the bfloat16 comes from q"): an op
    without parameter slots (matmul) takes the narrower operand as the activation, which is the parameter where a
    declared parameter was narrowed (hazards29 bc8b65c1cb: under model.to(bfloat16), x float32 @ w0 bfloat16 said
    "a bfloat16 activation next to float32 parameters", fix w0.to(float32), undoing the policy)."""
    node = graph.node(node_id)
    roles = {i.name: i.role for i in graph.inputs}
    if OPS[node.op].params:
        return brk, break_trace(graph, typed, node_id), True
    if roles.get(node.inputs[brk.operand]) != "param":  # the roles hold where a parameter is the wide side
        wide_param = any(roles.get(o) == "param" for k, o in enumerate(node.inputs) if k != brk.operand)
        return brk, break_trace(graph, typed, node_id), wide_param
    other = next((k for k, o in enumerate(node.inputs) if k != brk.operand and isinstance(o, str)
                  and roles.get(o) != "param" and typed.values[o].dtype == brk.param_dtype), None)
    if other is None:
        return brk, break_trace(graph, typed, node_id), False
    swapped = ChainBreak(other, brk.param_dtype, brk.activation_dtype)
    return swapped, trace_promotion(graph, typed, str(node.inputs[other]), swapped.activation_dtype), True


def brk_dtypes(brk: ChainBreak) -> tuple[str, str]:
    """A chain break's (activation, parameter) dtypes."""
    return brk.activation_dtype, brk.param_dtype


def _source(graph: Graph, name: str) -> str:
    """What a promoting culprit is: 'float32 tensor [1]', 'python float', 'astype node' and the like."""
    try:
        inp = graph.input(name)
    except KeyError:
        node = next((n for n in graph.nodes if n.id == name), None)
        return f"{node.op} node" if node is not None else "python scalar"
    if inp.kind == "scalar":
        return f"python {'float' if is_float(inp.dtype) else 'int'}"
    return f"{inp.dtype} {'0-dim tensor' if not inp.shape else 'tensor'} {list(inp.shape)}"


def judge(graph: Graph, subjects: list[Subject], eager: Mapping[str, list[Outcome]],
          keys: Mapping[str, str]) -> list[Finding]:
    """Every semantic finding of one case.

    `eager[keys[name]]` holds PyTorch eager's CPU outcomes (one per input set) on the policy graph of
    subject `name`. At most one status/dtype finding per subject (its first diverging input set).
    """
    found: list[Finding] = []
    for s in subjects:
        ref = eager.get(keys[s.name])
        if ref is None:
            continue
        for k, out in enumerate(s.outcomes):
            e = ref[k] if k < len(ref) else ref[0]
            if out.status in ("crash", "timeout"):
                break  # the crash oracle's
            if out.status == "unsupported" and (out.message or "").startswith(HARNESS_LIMIT):
                break  # precfuzz's own limitation: nothing to say about the backend
            if out.status == "unsupported" or (out.status == "error" and classify_error(out) == "unsupported"):
                if not e.ok:
                    continue  # eager refuses the program too: agreement, no gap (triage26 sample #24)
                found.append(_coverage(graph, s, k, out))
                break
            if out.status == "error":
                if e.ok:
                    found.append(_status(graph, s, k, out, e))
                    break
                continue  # both raise
            if not s.dtype_contract:
                f = None  # a documented mode relabels dtypes: only its status and numbers are judged
            elif e.ok:
                f = _dtype(graph, s, k, out, [s.reported(d) for d in e.dtypes or []])
            elif classify_error(e) == ErrorClass.DTYPE_MISMATCH:
                f = _downcast(graph, s, k, out)
            else:
                f = None  # eager lacks a kernel or fails otherwise: the executor's numbers are still judged
            if f is not None:
                found.append(f)
                break
    return found + _hazards(graph, subjects, eager, keys)
