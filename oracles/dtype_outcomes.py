"""The dtype-outcome oracle: what the executors' statuses and dtypes say, policy against policy.

Pure functions over outcomes (no I/O). Inputs: the case graph and its typed graph (fuzzer.ir.infer), the
outcomes of each executor (one per input set), and each executor's policy graph (a Graph, or its TypedGraph as
fuzzer.check passes it). Four checks, each giving oracles.findings.Finding values:

- status-divergence   one policy errors (or crashes, hangs) where another runs the same graph
- dtype-chain         an op with parameters gets an activation of another dtype; traced back to the input
                      or operand whose dtype won the promotion (raised / accepted / hidden by the policy)
- effective-precision an output reports one dtype but carries the error of a narrower one
- dtype-divergence    a reported dtype differs from what the policy graph promises, or from another executor
                      implementing the same policy (same policy label)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from fuzzer.dtypes import FLOAT_FORMATS, is_float, round_to
from fuzzer.executors import ORACLE_EXECUTORS
from fuzzer.interpret import evaluate, ideal_values
from fuzzer.ir import Graph, IRError, TypedGraph, canonical, infer
from fuzzer.ops import OPS
from fuzzer.outcome import Outcome, first_line
from fuzzer.promotion import Operand, result_type

from .bounds import error_stats
from .findings import Finding

Policy = Graph | TypedGraph
FAILED = ("error", "crash", "timeout")

# (class, pattern over "<error type>: <message>"), first match wins. Backends word these differently.
ERROR_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.IGNORECASE)) for c, p in (
    # a device compiler rejecting what the frontend let through (e.g. XLA's HLO verifier on mixed precisions)
    ("compiler-error", r"hlo verifier|neuronx-cc|NCC_[A-Z]+\d+|compil(e|ation|er) (error|fail)|failed compilation"
                       r"|HloModule|XLA compilation|tvm\.error|TVMError"),
    ("dtype-mismatch", r"type \(.*\) and .* type \(.*\) should be the same|should be the same (type|dtype)"
                       r"|expected .*(same dtype|same type|scalar type)|must have the same (dtype|type|scalar type)"
                       r"|dtype mismatch|mixed dtype|found dtype \w+ but expected|expected both .* to have the same"
                       r"|type mismatch|promot\w* .* not allowed"),
    ("unsupported", r"^NotImplementedError|not implemented for|not supported|unsupported|no (lowering|kernel)"),
))


def classify_error(outcome: Outcome) -> str:
    """dtype-mismatch | unsupported | compiler-error | runtime-error (errors), or the status itself."""
    if outcome.status in ("ok", "unsupported", "crash", "timeout"):
        return outcome.status
    text = f"{outcome.error_type or ''}: {outcome.message or ''}"
    for cls, pattern in ERROR_CLASSES:
        if pattern.search(text):
            return cls
    return "compiler-error" if outcome.stage == "compile" else "runtime-error"


# ---------------------------------------------------------------- helpers


def _typed(policy: Policy) -> TypedGraph:
    return policy if isinstance(policy, TypedGraph) else infer(policy)


def _policy_key(policy: TypedGraph) -> str:
    return canonical({k: [list(v.shape), v.dtype, v.kind] for k, v in sorted(policy.values.items())})


def _label(name: str, outs: list[Outcome], labels: Mapping[str, str] | None) -> str | None:
    if labels and name in labels:
        return labels[name]
    for o in outs:
        policy = (o.info.get("describe") or {}).get("settings", {}).get("policy")
        if policy:
            return str(policy)
    return None


def _describe(outs: list[Outcome]) -> dict[str, Any]:
    return next((o.info["describe"] for o in outs if o.info.get("describe")), {})


def _producer(graph: Graph, value: str) -> str:
    return next((n.op for n in graph.nodes if n.id == value), "input")


def _tested(outcomes: Mapping[str, list[Outcome]]) -> list[str]:
    return [n for n in outcomes if n not in ORACLE_EXECUTORS and outcomes[n]]


# ---------------------------------------------------------------- status divergence


def status_divergence(graph: Graph, outcomes: Mapping[str, list[Outcome]], policies: Mapping[str, Policy]) -> list[Finding]:
    """One finding per executor that fails an input set some other executor runs (unsupported is a limitation)."""
    found = []
    names = _tested(outcomes)
    for name in names:
        for k, out in enumerate(outcomes[name]):
            if out.status not in FAILED:
                continue
            ran = [n for n in names if n != name and k < len(outcomes[n]) and outcomes[n][k].ok
                   and not outcomes[n][k].info.get("bridged_chain_breaks")]  # our lowering's casts prove nothing
            if not ran:
                continue
            backend = name.split("/")[0]
            against = next((n for n in ran if n.split("/")[0] == backend), ran[0])
            cls = classify_error(out)
            breaks = _typed(policies.get(name, graph)).chain_breaks()
            ops = sorted({graph.node(b).op for b in breaks if b in {n.id for n in graph.nodes}}) if breaks else []
            dtypes = sorted({f"{b.activation_dtype}->{b.param_dtype}" for b in breaks.values()})
            predicted = bool(breaks) and cls == "dtype-mismatch"
            other = outcomes[against][k]
            msg = (f"{name} fails ({cls}: {first_line(out.message) or out.summary()}) where {against} runs "
                   f"(ok, {','.join(other.dtypes or [])})" + _root_cause(graph, _typed(policies.get(name, graph))))
            found.append(Finding(
                "status-divergence", name, ops or sorted({n.op for n in graph.nodes}), dtypes, cls, msg,
                against=against, input_set=k, node=",".join(sorted(breaks)),
                details={"ran": ran, "failed": [n for n in names if k < len(outcomes[n]) and outcomes[n][k].status in FAILED],
                         "stage": out.stage, "error_type": out.error_type, "error": first_line(out.message, 400),
                         "predicted_by_ir": predicted, "chain_breaks": sorted(breaks), "describe": _describe(outcomes[name])}))
            break
    return found


# ---------------------------------------------------------------- dtype-chain breaks


@dataclass(frozen=True)
class Promotion:
    """Where a dtype came from: the inputs/operands whose dtype won, and the nodes where it met another dtype."""

    culprits: tuple[str, ...]  # input names, node ids (casts, parametrized ops) or scalar literals
    promoted_at: tuple[str, ...]  # nodes whose result took `dtype` from one operand over another of another dtype
    path: tuple[str, ...]  # every value visited, from the break backwards


def trace_promotion(graph: Graph, typed: TypedGraph, value: str, dtype: str) -> Promotion:
    """Follow `value` (of `dtype`) back through the nodes that passed `dtype` on, to where it came from.

    At an elementwise node an operand "won" if dropping it changes the result dtype (leave-one-out over
    PyTorch's promotion); when no single operand decides it (all share `dtype`), every operand of `dtype` is
    followed. Inputs, explicit casts and parametrized ops (whose output dtype is their parameters') end a path.
    """
    culprits: list[str] = []
    promoted: list[str] = []
    path: list[str] = []
    nodes = {n.id: n for n in graph.nodes}
    stack = [value]
    while stack:
        name = stack.pop()
        if name in path:
            continue
        path.append(name)
        node = nodes.get(name)
        if node is None or node.op == "astype" or any(
                i < len(node.inputs) and node.inputs[i] is not None for i in OPS[node.op].params):
            culprits.append(name)
            continue
        views = [(o, _operand_view(typed, o)) for o in node.inputs if o is not None]
        winners = []
        if len(views) > 1:
            for i in range(len(views)):
                rest = [v for j, (_, v) in enumerate(views) if j != i]
                if result_type(*rest) != dtype:
                    winners.append(views[i][0])
            if winners and any(v.dtype != dtype and v.kind != "scalar" for _, v in views):
                promoted.append(name)
        if not winners:
            winners = [o for o, v in views if v.kind != "scalar" and v.dtype == dtype] or [o for o, _ in views]
        for o in winners:
            if isinstance(o, str) and o in typed.values:
                stack.append(o)
            else:
                culprits.append(repr(o))
    return Promotion(tuple(dict.fromkeys(culprits)), tuple(promoted), tuple(path))


def _operand_view(typed: TypedGraph, operand: Any) -> Operand:
    if isinstance(operand, str):
        return typed.values[operand].operand()
    return Operand("float64" if isinstance(operand, float) else "int64", "scalar")


def _break_trace(graph: Graph, typed: TypedGraph, node_id: str) -> Promotion | None:
    brk = typed.chain_breaks().get(node_id)
    node = next((n for n in graph.nodes if n.id == node_id), None)
    if brk is None or node is None:
        return None
    if OPS[node.op].params:  # conv, linear, norms: the activation's dtype is the odd one
        operand, dtype = node.inputs[brk.operand], brk.activation_dtype
    else:  # matmul/bmm: trace the operand whose (wider) dtype won
        operand, dtype = node.inputs[1 - brk.operand], brk.param_dtype
    return trace_promotion(graph, typed, operand, dtype) if isinstance(operand, str) else None


def _root_cause(graph: Graph, typed: TypedGraph) -> str:
    """'; root cause: <node> (<op>) gets ... where <culprits> promoted it' for the first chain break, or ''."""
    for node_id, brk in sorted(typed.chain_breaks().items()):
        if node_id not in {n.id for n in graph.nodes}:
            continue
        trace = _break_trace(graph, typed, node_id)
        where = f" where {', '.join(trace.culprits)} promoted it" if trace is not None and trace.culprits else ""
        return (f"; root cause: {node_id} ({graph.node(node_id).op}) gets a {brk.activation_dtype} activation with "
                f"{brk.param_dtype} parameters{where}")
    return ""


REACTION_ORDER = ("raised", "accepted", "hidden")


def chain_breaks(graph: Graph, typed: TypedGraph, outcomes: Mapping[str, list[Outcome]],
                 policies: Mapping[str, Policy]) -> list[Finding]:
    """One finding per chain break of the case: where it broke, what promoted it, and how each executor reacted.

    An executor `raised` (as PyTorch specifies), `accepted` it (ran anyway) or `hidden` it (its policy casts
    the break away). Executors whose lowering bridged it themselves (TVM: Relax has no promotion) are left out.
    A break every executor hides is the policies doing their job: no finding. The finding is filed under the
    first executor that raised (else accepted), with that reaction as its class, so its repro script shows the
    break; the other executors' reactions are in the message and details.
    """
    found = []
    case_breaks = typed.chain_breaks()
    names = _tested(outcomes)
    for node_id in sorted(case_breaks):
        brk = case_breaks[node_id]
        reactions: dict[str, list[str]] = {}
        errors: dict[str, str] = {}
        for name in names:
            outs = outcomes[name]
            if any(node_id in o.info.get("bridged_chain_breaks", []) for o in outs):
                continue
            pbreaks = _typed(policies.get(name, graph)).chain_breaks()
            failed = next((o for o in outs if o.status in FAILED), None)
            if node_id not in pbreaks:
                kind = "hidden"
            elif failed is not None:
                kind = "raised"
                errors[name] = f"{classify_error(failed)}: {first_line(failed.message) or failed.summary()}"
            else:
                kind = "accepted"
            reactions.setdefault(kind, []).append(name)
        if not (reactions.get("raised") or reactions.get("accepted")):
            continue
        trace = _break_trace(graph, typed, node_id)
        op = graph.node(node_id).op
        where = ""
        if trace is not None and trace.culprits:
            where = (f"; the chain broke where {', '.join(trace.culprits)} promoted it"
                     + (f" (at {', '.join(trace.promoted_at)})" if trace.promoted_at else ""))
        said = "; ".join(f"{kind} by {', '.join(reactions[kind])}" for kind in REACTION_ORDER if kind in reactions)
        msg = f"{node_id} ({op}) gets a {brk.activation_dtype} activation with {brk.param_dtype} parameters{where}: {said}"
        kind = "raised" if reactions.get("raised") else "accepted"
        owner = reactions[kind][0]
        failed_set = next((k for k, o in enumerate(outcomes[owner]) if o.status in FAILED), 0)
        found.append(Finding(
            "dtype-chain", owner, [op], [brk.activation_dtype, brk.param_dtype], kind, msg, node=node_id,
            input_set=failed_set,
            details={"culprits": list(trace.culprits) if trace else [], "promoted_at": list(trace.promoted_at) if trace else [],
                     "path": list(trace.path) if trace else [], "operand": brk.operand, "reactions": reactions,
                     "errors": errors, "describe": _describe(outcomes[owner])}))
    return found


def _statuses(outs: list[Outcome]) -> str:
    return "; ".join(dict.fromkeys(o.summary() for o in outs))


# ---------------------------------------------------------------- effective precision


def narrow(graph: Graph, wide: tuple[str, ...], dtype: str) -> Graph:
    """The graph with every input and cast of a `wide` dtype declared as `dtype` instead (computing in `dtype`)."""
    from dataclasses import replace

    inputs = tuple(replace(i, dtype=dtype) if i.kind == "tensor" and i.dtype in wide else i for i in graph.inputs)
    nodes = tuple(replace(n, attrs={**n.attrs, "dtype": dtype}) if n.op == "astype" and n.attrs.get("dtype") in wide else n
                  for n in graph.nodes)
    return Graph(inputs, nodes, graph.outputs)


def _policy_graph(graph: Graph, policy: Policy) -> Graph:
    """The policy as a Graph: itself, or (from a TypedGraph) the case graph with the policy's input dtypes."""
    if isinstance(policy, Graph):
        return policy
    from dataclasses import replace

    return Graph(tuple(replace(i, dtype=policy.values[i.name].dtype) if i.kind == "tensor" else i for i in graph.inputs),
                 graph.nodes, graph.outputs)


def _inputs_for(graph: Graph, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {i.name: (round_to(values[i.name], i.dtype) if i.kind == "tensor" else np.asarray(values[i.name]))
            for i in graph.inputs}


def effective_precision(graph: Graph, outcomes: Mapping[str, list[Outcome]], policies: Mapping[str, Policy],
                        expected: list[Mapping[str, np.ndarray]]) -> list[Finding]:
    """Outputs out of bound for the dtype they report that an implementation computing in a narrower dtype explains.

    `expected[k]` holds the case's values (inputs included) for input set k. The exact answer and the ideals
    are recomputed on the inputs the executor actually saw (rounded to its policy's input dtypes).
    """
    found = []
    for name in _tested(outcomes):
        base = _policy_graph(graph, policies.get(name, graph))
        hit = None
        for k, out in enumerate(outcomes[name]):
            if not out.ok or out.outputs is None or k >= len(expected):
                continue
            inputs = _inputs_for(base, expected[k])
            exact = ideal = None
            for index, (value, actual, reported) in enumerate(zip(graph.outputs, out.outputs, out.dtypes or [])):
                if not is_float(reported) or reported == "float64":
                    continue
                if exact is None:
                    exact, ideal = evaluate(base, inputs, rounded=False), ideal_values(base, inputs)
                own = error_stats(actual, exact[value], ideal[value], reported)
                if own.ratio <= 1.0 or own.nonfinite_mismatch:
                    continue
                candidates = sorted((d for d in ("float16", "bfloat16")
                                     if FLOAT_FORMATS[d].mantissa_bits < FLOAT_FORMATS[reported].mantissa_bits),
                                    key=lambda d: -FLOAT_FORMATS[d].mantissa_bits)
                per: dict[str, dict[str, float]] = {}
                explained = None
                for cand in candidates:
                    try:
                        narrowed = narrow(base, ("float32", reported), cand)
                        infer(narrowed)
                    except IRError:
                        continue
                    ideal_c = ideal_values(narrowed, _inputs_for(narrowed, inputs))
                    st = error_stats(actual, exact[value], ideal_c[value], cand)
                    per[cand] = {"max_ulp": st.max_ulp, "ratio": st.ratio}
                    # explained: within the narrower dtype's bound AND as large as its rounding (>= 1/4 ULP of
                    # it); a mere fp32-sized excess is not "carrying" fp16 or bf16 error
                    if explained is None and st.ratio <= 1.0 and st.max_ulp >= 0.25:
                        explained = cand
                if explained is not None:
                    hit = (k, index, value, reported, explained, own, per, out)
                    break
            if hit:
                break
        if hit is None:
            continue
        k, index, value, reported, explained, own, per, out = hit
        device = (out.info.get("device_dtypes") or [None] * (index + 1))[index]
        msg = (f"{value} reports {reported} but carries {explained} error: {own.max_ulp:.3g} ULP of {reported} "
               f"({own.ratio:.3g}x its bound), {per[explained]['max_ulp']:.3g} ULP of {explained} "
               f"({per[explained]['ratio']:.3g}x the {explained} bound)"
               + (f"; the device holds {device}" if device else ""))
        found.append(Finding(
            "effective-precision", name, [_producer(graph, value)], [reported, explained], f"{reported}-carries-{explained}",
            msg, ratio=own.ratio, max_ulp=own.max_ulp, input_set=k, output=value,
            node=value if value in {n.id for n in graph.nodes} else "", per_op=False,
            details={"candidates": per, "device_dtype": device, "reported": reported, "describe": _describe(outcomes[name])}))
    return found


# ---------------------------------------------------------------- output dtype divergence


def dtype_divergence(graph: Graph, outcomes: Mapping[str, list[Outcome]], policies: Mapping[str, Policy],
                     labels: Mapping[str, str] | None = None) -> list[Finding]:
    """Reported output dtypes against the policy graph, and against executors with the same policy label."""
    found = []
    names = _tested(outcomes)
    typed = {n: _typed(policies[n]) for n in names if n in policies}
    for name in names:  # the contract: what the policy graph declares
        if name not in typed:
            continue
        for k, out in enumerate(outcomes[name]):
            if not out.ok:
                continue
            declared = [typed[name].values[v].dtype for v in graph.outputs]
            bad = [(v, d, r) for v, d, r in zip(graph.outputs, declared, out.dtypes or []) if d != r]
            if bad:
                v, d, r = bad[0]
                found.append(Finding(
                    "dtype-divergence", name, [_producer(graph, v)], [d, r], "reported-vs-policy",
                    f"{v} reports {r} where {name}'s policy declares {d}", input_set=k, output=v,
                    details={"mismatches": [list(b) for b in bad], "describe": _describe(outcomes[name])}))
                break
    off_policy = {f.executor for f in found}
    groups: dict[str, list[str]] = {}
    for name in names:
        key = _label(name, outcomes[name], labels) or (_policy_key(typed[name]) if name in typed else name)
        groups.setdefault(key, []).append(name)
    for label, members in groups.items():  # same policy, same dtypes
        for k in range(max(len(outcomes[n]) for n in members)):
            oks = [n for n in members if k < len(outcomes[n]) and outcomes[n][k].ok]
            if len(oks) < 2:
                continue
            anchor = oks[0]
            for name in oks[1:]:
                if name in off_policy or anchor in off_policy:
                    continue  # the reported-vs-policy finding already names the executor that strays
                pairs = list(zip(graph.outputs, outcomes[anchor][k].dtypes or [], outcomes[name][k].dtypes or []))
                diff = [(v, a, b) for v, a, b in pairs if a != b]
                if not diff:
                    continue
                v, a, b = diff[0]
                predicted = (name in typed and anchor in typed
                             and typed[name].values[v].dtype != typed[anchor].values[v].dtype)
                found.append(Finding(
                    "dtype-divergence", name, [_producer(graph, v)], [b, a], "same-policy",
                    f"{v}: {name} reports {b}, {anchor} reports {a} under the same policy ({label})"
                    + (" (their op lists differ: the policy graphs predict it)" if predicted else ""),
                    against=anchor, input_set=k, output=v,
                    details={"policy": label, "predicted_by_policy_graphs": predicted, "describe": _describe(outcomes[name])}))
            break
    return _dedup(found)


def _dedup(found: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    return [f for f in found if not (f.signature in seen or seen.add(f.signature))]


# ---------------------------------------------------------------- all checks


def judge(graph: Graph, typed: TypedGraph, outcomes: Mapping[str, list[Outcome]], policies: Mapping[str, Policy],
          expected: list[Mapping[str, np.ndarray]] | None = None, labels: Mapping[str, str] | None = None) -> list[Finding]:
    """Every dtype-outcome finding of one case (effective precision only when `expected` values are given)."""
    found = status_divergence(graph, outcomes, policies)
    found += chain_breaks(graph, typed, outcomes, policies)
    if expected is not None:
        found += effective_precision(graph, outcomes, policies, expected)
    found += dtype_divergence(graph, outcomes, policies, labels)
    return found


def finding_dicts(found: list[Finding]) -> list[dict[str, Any]]:
    """Findings as plain dicts: Finding.record() plus the signature parts (`against` is the executor compared with)."""
    out = []
    for f in found:
        rec = f.record()
        rec["signature_parts"] = {"oracle": f.oracle, "executor": f.executor, "ops": list(f.ops),
                                  "dtypes": list(f.dtypes), "error_class": f.error_class}
        out.append(rec)
    return out
