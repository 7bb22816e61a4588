"""The verdict a model author reads: policy x backend table, model hazards with source lines and fixes, backend bugs.

Pure functions over check results (no I/O, no backends): the session (fuzzer.audit.session) runs the checks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from oracles.bugs import GRADIENT_HAZARDS, TRAINING_HAZARDS, UPDATE_HAZARDS
from oracles.findings import Finding
from oracles.vocabulary import ErrorClass, ExecutorName, Kind, Oracle, Reaction

from ..analysis import break_trace
from ..check import CheckResult
from ..dtypes import is_float
from ..ir import Graph, infer
from ..policy import DECLARED, Policy
from .source import Source

SEMANTIC_ORACLE = "torch/eager"


@dataclass(frozen=True)
class Scenario:
    """One check of the audit: its label, the executors' policies and backend columns, and the result."""

    label: str  # "" for the graph as captured; else what changed ("before the migration", "x as bfloat16")
    result: CheckResult
    policies: dict[str, Policy]  # executor -> its precision policy
    policy_graphs: dict[str, Graph]  # executor -> the PyTorch program its policy runs
    sources: dict[str, "Source"] | None = None  # a graph captured on its own (the moved module): its own lines
    not_judged: dict[str, str] = field(default_factory=dict)  # executor -> why its numbers are not judged


@dataclass
class Cell:
    """One executor under one policy: runs / raises / wrong dtype / unsupported, and the accuracy ratio."""

    row: str
    backend: str
    executor: str
    status: str
    ratio: float | None = None
    bug: bool = False
    detail: str = ""
    backward: str = ""  # --train: the gradients in a word (worst ratio to the bound, raises, non-finite)


@dataclass
class Hazard:
    """A model hazard: where PyTorch itself raises under a policy, located in the user's code."""

    rows: list[str]
    executors: list[str]
    node: str
    op: str
    where: str
    code: str
    module: str
    activation_dtype: str
    param_dtype: str
    promoted_by: list[str]  # culprit descriptions (the tensor whose dtype won), with their source lines
    promoted_at: list[str]
    fix: str
    error: str
    caller_cast: bool = False  # the odd dtype is a model input itself: the caller owes the cast
    precision: float | None = None  # a precision hazard: the relative error the policy's ideal leaves on the outputs
    update: str = ""  # a training hazard of the optimizer step (update-lost, update-nonfinite): node is the parameter


@dataclass
class Bug:
    """A backend bug (divergence from eager or out of the error bound) with its repro, once minimized."""

    executor: str
    oracle: str
    kind: str
    message: str
    ratio: float | None
    node: str
    where: str
    code: str
    signature: str
    repro: str | None = None
    case: str | None = None


@dataclass
class Verdict:
    """Everything `precfuzz audit` prints (and --json writes)."""

    model: str
    cells: list[Cell]
    hazards: list[Hazard]
    bugs: list[Bug]
    coverage: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    graph: dict[str, int] = field(default_factory=dict)  # what was judged: nodes, inputs, values (issue 37)

    @property
    def model_hazards(self) -> list[Hazard]:
        """Hazards of the model itself (input casts the caller owes are not counted)."""
        return [h for h in self.hazards if not h.caller_cast]

    @property
    def exit_status(self) -> int:
        """0 clean, 1 a model hazard or a backend bug."""
        return 1 if self.model_hazards or self.bugs else 0

    def to_json(self) -> dict[str, Any]:
        """The --json object."""
        return {"model": self.model, "exit_status": self.exit_status, "seconds": round(self.seconds, 1),
                "graph": self.graph,
                "table": [_clean(asdict(c)) for c in self.cells],
                "hazards": [asdict(h) for h in self.model_hazards],
                "input_casts": [asdict(h) for h in self.hazards if h.caller_cast],
                "bugs": [_clean(asdict(b)) for b in self.bugs], "coverage": self.coverage, "notes": self.notes}


def graph_size(graph: Any) -> dict[str, int]:
    """The size of a captured graph: nodes, inputs (parameters among them) and the values they hold."""
    return {"nodes": len(graph.nodes), "inputs": len(graph.inputs),
            "parameters": sum(1 for i in graph.inputs if i.role == "param"),
            "values": sum(int(math.prod(i.shape)) for i in graph.inputs)}


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def backend_column(executor: str) -> str:
    """The table column of an executor: torch (cpu), torch_xla, or tvm/<pipeline>."""
    return {"torch": "torch (cpu)", "xla": "torch_xla"}.get(ExecutorName.parse(executor).family, executor)


def row_label(policy: Policy, scenario: str, bf16_module: bool) -> str:
    """The table row of a policy in one scenario."""
    if policy == DECLARED and scenario.startswith("model.to("):  # a module captured after the move
        return scenario
    label = policy.row
    if policy == DECLARED and bf16_module:
        label += " (= model.to(bfloat16))"
    return f"{label}, {scenario}" if scenario else label


def module_is_bf16(graph: Graph) -> bool:
    """True when every floating-point parameter is bfloat16 (the module was moved with model.to(bfloat16))."""
    params = [i.dtype for i in graph.inputs if i.role == "param" and is_float(i.dtype)]
    return bool(params) and all(d == "bfloat16" for d in params)


def cells_of(sc: Scenario, bf16_module: bool) -> list[Cell]:
    """The table cells of one scenario (PyTorch eager's own run of a policy no torch executor covers included)."""
    res = sc.result
    out = []
    covered = {(sc.policies[n], backend_column(n)) for n in res.outcomes}
    for name in res.outcomes:
        r = res.row(name)
        mine = [f for f in res.findings if f.executor == name]
        status = {"ok": "runs", "error": "raises"}.get(r["status"], r["status"])
        if r["status"] == "ok" and any(f.oracle in (Oracle.DTYPE_DIVERGENCE, Oracle.SILENT_DOWNCAST) for f in mine):
            status = "wrong dtype"
        bug = any(f.kind == Kind.BACKEND_BUG for f in mine)
        detail = r["detail"]
        if status == "runs" and r["ratio"] is None:  # every cell says what it judged (issue 37)
            detail = (f"runs; its accuracy is not judged: {sc.not_judged[name]}" if name in sc.not_judged else
                      "runs; no accuracy figure (no floating-point output compared with the reference)")
        out.append(Cell(row_label(sc.policies[name], sc.label, bf16_module), backend_column(name), name, status,
                        r["ratio"], bug, detail, res.backward.get(name, "")))
    for name, outs in res.eager.items():  # eager on the CPU under an XLA-only policy
        key = (sc.policies[name], "torch (cpu)")
        if key in covered or not outs:
            continue
        covered.add(key)
        worst = next((o for o in outs if not o.ok), outs[0])
        status = {"ok": "runs", "error": "raises"}.get(worst.status, worst.status)
        out.append(Cell(row_label(sc.policies[name], sc.label, bf16_module), "torch (cpu)", f"{SEMANTIC_ORACLE} (oracle)",
                        status, None, False, worst.summary() if not worst.ok else ""))
    return out


def _src(sources: dict[str, Source], name: str) -> Source | None:
    return sources.get(name)


def _describe_value(graph: Graph, typed: Any, sources: dict[str, Source], name: str) -> str:
    """`sigma = timestep.float() / 1000` (denoiser.py:30, float32) or input `x` (float32 [1, 8, 32]); a block's input
    the model computed (an activation another block feeds it) by the model's line that computed it."""
    src = _src(sources, name)
    if name in typed.values and any(i.name == name for i in graph.inputs) and src is None:
        inp = graph.input(name)
        what = "parameter" if inp.role == "param" else "input"
        return f"{what} `{name}` ({inp.dtype} {list(inp.shape)})"
    dtype = typed.values[name].dtype if name in typed.values else "?"
    if src is None:
        return f"`{name}` ({dtype})"
    return f"`{src.code}` ({src.where()}, {dtype})"


def precision_hazard_of(f: Finding, sc: Scenario, sources: dict[str, Source], bf16_module: bool) -> Hazard:
    """A precision hazard (the policy's own rounding loses the outputs) located in the user's code, with its fix."""
    src = sources.get(f.node) or Source("", 0, "")
    row = row_label(sc.policies.get(f.executor, DECLARED), sc.label, bf16_module)
    fix = str(f.details.get("fix", ""))
    if src.file:
        fix = f"{src.where()}: {fix}"
    return Hazard([row], [f.executor], f.node, f.ops[0] if f.ops else "?", src.where(), src.code, src.module,
                  f.dtypes[0] if f.dtypes else "?", "float32", [], [], fix, f.message,
                  precision=float(f.details.get("loss", 0.0)))


def update_hazard_of(f: Finding, sc: Scenario, bf16_module: bool) -> Hazard:
    """A training hazard of the optimizer step (--train): the parameter tensor whose update is lost, with its fix."""
    row = row_label(sc.policies.get(f.executor, DECLARED), sc.label, bf16_module)
    param = f.node.removesuffix("_new")  # a step's node is `<param>_new`; a gradient's hazard names the parameter
    return Hazard([row], [f.executor], param, f.ops[0] if f.ops else "?", "", "", "", f.dtypes[0] if f.dtypes else "?",
                  f.dtypes[0] if f.dtypes else "?", [], [], str(f.details.get("fix", "")), f.message,
                  precision=float(f.details.get("loss", 0.0)), update=f.error_class)


def hazard_of(f: Finding, sc: Scenario, sources: dict[str, Source], bf16_module: bool) -> Hazard:
    """A model-hazard finding located in the user's code, with its one-line fix."""
    if f.error_class == ErrorClass.PRECISION:
        return precision_hazard_of(f, sc, sources, bf16_module)
    if f.error_class in TRAINING_HAZARDS:
        return update_hazard_of(f, sc, bf16_module)
    graph = sc.policy_graphs[f.executor]
    typed = infer(graph)
    node = graph.node(f.node)
    brk = typed.chain_breaks()[f.node]
    trace = break_trace(graph, typed, f.node)
    reactions = f.details.get("reactions", {})
    executors = sorted({n for names in reactions.values() for n in names} | {f.executor})
    raised = sorted(set(reactions.get(Reaction.RAISED, [])) | {f.executor})
    rows = sorted({row_label(sc.policies[n], sc.label, bf16_module) for n in raised if n in sc.policies})
    culprits = list(trace.culprits) if trace else []
    promoted = list(trace.promoted_at) if trace else []
    operand = node.inputs[brk.operand] if brk.operand < len(node.inputs) else None
    src = sources.get(f.node) or Source("", 0, "")
    caller = isinstance(operand, str) and from_inputs(graph, typed, f.node)
    if caller:
        names = ", ".join(f"`{c}`" for c in culprits)
        fix = (f"pass {names} as {brk.param_dtype} under this policy "
               f"(`{culprits[0]}.to(torch.{brk.param_dtype})` at the call site)")
    else:
        losers = _losers(graph, typed, promoted, brk.activation_dtype)
        at = sources.get(str(operand)) if isinstance(operand, str) else None
        same = [o for o in losers if typed.values[o].dtype == brk.param_dtype]  # not an int index (DDPM's timestep)
        like = f"{same[0]}.dtype" if same else f"torch.{brk.param_dtype}"
        if at is not None and at.code:
            fix = f"{at.where()}: cast the result of `{at.code}` back with `.to({like})`"
        else:
            fix = f"cast `{operand}` with `.to({like})` before {f.node}"
    return Hazard(rows, executors, f.node, node.op, src.where(), src.code, src.module, brk.activation_dtype,
                  brk.param_dtype, [_describe_value(graph, typed, sources, c) for c in culprits],
                  [f"{p} ({sources[p].where()})" if p in sources else p for p in promoted], fix,
                  str(f.details.get("error", "")), caller)


def from_inputs(graph: Graph, typed: Any, node_id: str, depth: int = 0) -> bool:
    """True when the odd dtype at chain break `node_id` is a model input's own (no promotion inside the model),
    directly or through earlier chain breaks of the same kind (a cascade of one missing input cast)."""
    trace = break_trace(graph, typed, node_id)
    if trace is None or trace.promoted_at or not trace.culprits or depth > 64:
        return False
    inputs = {i.name: i for i in graph.inputs}
    breaks = typed.chain_breaks()
    return all((c in inputs and inputs[c].role == "input") or (c in breaks and from_inputs(graph, typed, c, depth + 1))
               for c in trace.culprits)


def input_culprits(graph: Graph, typed: Any, node_id: str, depth: int = 0) -> list[str]:
    """The model inputs whose dtype reaches chain break `node_id` (through earlier breaks), in graph order."""
    trace = break_trace(graph, typed, node_id)
    if trace is None or depth > 64:
        return []
    inputs = [i.name for i in graph.inputs]
    breaks = typed.chain_breaks()
    found: list[str] = []
    for c in trace.culprits:
        found += [c] if c in inputs else (input_culprits(graph, typed, c, depth + 1) if c in breaks else [])
    return sorted(set(found), key=inputs.index)


def _losers(graph: Graph, typed: Any, promoted: list[str], wide: str) -> list[str]:
    """Operands that lost the promotion at the nodes where `wide` met a narrower dtype (inputs first)."""
    out: list[str] = []
    order = {n.id: k for k, n in enumerate(graph.nodes)}
    for p in sorted(promoted, key=lambda n: order.get(n, 0)):
        for o in graph.node(p).inputs:
            if isinstance(o, str) and typed.values[o].kind != "scalar" and typed.values[o].dtype != wide:
                out.append(o)
    inputs = {i.name for i in graph.inputs}
    return sorted(dict.fromkeys(out), key=lambda o: (o not in inputs, out.index(o)))


def bug_of(f: Finding, sources: dict[str, Source]) -> Bug:
    """A backend-bug finding with the source line of the node it is pinned on."""
    src = sources.get(f.node) or Source("", 0, "")
    return Bug(f.executor, f.oracle, f.kind, f.message, f.ratio, f.node, src.where() if src.file else "", src.code,
               f.signature)


def build(model: str, scenarios: list[Scenario], sources: dict[str, Source], notes: list[str]) -> Verdict:
    """The verdict of every scenario's check (hazards and bugs deduplicated by signature)."""
    graph = scenarios[0].result.case.graph
    bf16 = module_is_bf16(graph)
    cells: list[Cell] = []
    hazards: list[Hazard] = []
    bugs: list[Bug] = []
    coverage: list[str] = []
    seen: set[str] = set()
    notes = list(notes)
    for sc in scenarios:
        cells += cells_of(sc, bf16)
        lines = sc.sources if sc.sources is not None else sources
        for f in sc.result.findings:
            key = f"{sc.label}|{f.signature}" + (f"|{f.node}" if f.error_class in TRAINING_HAZARDS else "")  # per tensor
            if key in seen:
                continue
            seen.add(key)
            if f.kind == Kind.MODEL_HAZARD:
                hazards.append(hazard_of(f, sc, lines, bf16))
            elif f.kind == Kind.BACKEND_BUG:
                bugs.append(bug_of(f, lines))
            else:
                coverage.append(f"{f.executor}: {f.message}")
        notes += sc.result.notes
    return Verdict(model, cells, without_follow_ons(hazards), bugs, coverage, notes)


def without_follow_ons(hazards: list[Hazard]) -> list[Hazard]:
    """Drop input casts caused by another input cast's op (its float32 result meets bf16 parameters next).

    Casting the model input fixes the first break and, with it, every break downstream of it: listing those
    too would ask the caller to cast values that are not theirs.
    """
    casts = [h for h in hazards if h.caller_cast]
    direct = [h for h in casts if all(p.startswith("input `") for p in h.promoted_by)]
    if not direct:
        return hazards
    return [h for h in hazards if not h.caller_cast or h in direct]


# ---------------------------------------------------------------- text


def _cell_text(c: Cell) -> str:
    if c.status == "runs" and c.ratio is not None:
        text = f"runs {c.ratio:.2g}" if math.isfinite(c.ratio) else "runs inf"
    elif c.status == "runs":
        text = "runs (not judged)"
    else:
        text = c.status
    if c.backward and c.backward != "-":
        text += f", grad {c.backward}"
    return text + (" BUG" if c.bug else "")


def table_text(cells: list[Cell]) -> str:
    """The policy x backend table: each cell runs (accuracy ratio = observed error / allowed error), raises, ..."""
    rows = list(dict.fromkeys(c.row for c in cells))
    cols = list(dict.fromkeys(c.backend for c in cells))
    grid = {(c.row, c.backend): _cell_text(c) for c in cells}
    head = ["policy \\ backend"] + cols
    body = [[r] + [grid.get((r, k), "-") for k in cols] for r in rows]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body])


def render(v: Verdict) -> str:
    """The human verdict."""
    out = [f"precfuzz audit: {v.model}", "", table_text(v.cells),
           "  (runs R: max error / allowed error on the model's outputs, R <= 1 within the bound; grad G: the same "
           "for the gradients (--train); raises: the policy fails; BUG: a backend bug below)"]
    raised = [c for c in v.cells if c.detail]
    if raised:
        out.append("")
        out += [f"  {c.row} / {c.executor}: {c.detail}" for c in raised]
    out.append("")
    if v.model_hazards:
        out.append(f"{len(v.model_hazards)} model hazard(s):")
        for h in [h for h in v.model_hazards if not h.update]:
            out += _hazard_lines(h)
        out += _update_lines([h for h in v.model_hazards if h.update])
    else:
        out.append("no model hazard")
    casts = [h for h in v.hazards if h.caller_cast]
    if casts:
        out.append("")
        out.append("input casts the caller owes (not hazards of the model):")
        for h in casts:
            out.append(f"  under {', '.join(h.rows)}: {h.op} at {h.where} gets {h.activation_dtype} from "
                       f"{'; '.join(h.promoted_by)}; {h.fix}")
    out.append("")
    if v.bugs:
        out.append(f"{len(v.bugs)} backend bug(s):")
        for b in v.bugs:
            where = f" at {b.where} `{b.code}`" if b.where else ""
            out.append(f"  [{b.oracle}] {b.executor}{where}: {b.message}")
            if b.repro:
                out.append(f"      minimized repro: {b.repro}")
    else:
        out.append("no backend bug")
    if v.coverage:
        out.append("")
        out.append("coverage gaps (a backend cannot express an op; not bugs):")
        out += [f"  {c}" for c in v.coverage]
    for n in v.notes:
        out.append(f"note: {n}")
    out.append("")
    out.append(f"verdict: {'HAZARDS OR BUGS' if v.exit_status else 'clean'} ({v.seconds:.0f} s)")
    return "\n".join(out)


def _update_lines(hazards: list[Hazard]) -> list[str]:
    """The optimizer step's hazards, one entry per (row, kind, fix): the parameter tensors it names, worst first."""
    groups: dict[tuple[str, str, str, str], list[Hazard]] = {}
    for h in hazards:
        groups.setdefault((", ".join(h.rows), h.update, h.param_dtype, h.fix), []).append(h)
    out = []
    for (rows, kind, dtype, fix), hs in groups.items():
        hs.sort(key=lambda h: -(h.precision or 0.0))
        tensors = ", ".join(f"`{h.node}` {h.precision:.0%}" if kind != ErrorClass.UPDATE_NONFINITE else f"`{h.node}`" for h in hs)
        if kind in GRADIENT_HAZARDS:
            how = "lost to an overflow of the forward" if kind == ErrorClass.GRAD_OVERFLOW else "lost to 16-bit underflow"
            out += [f"  under {rows}: the gradients of {len(hs)} parameter tensor(s) are {how} in the {dtype} "
                    f"backward (relative RMS lost against the exact gradient): {tensors}", f"      fix: {fix}"]
            continue
        what = "give inf/NaN updates" if kind == ErrorClass.UPDATE_NONFINITE else "lose this much of their update"
        out += [f"  under {rows}: the {dtype} {hs[0].op} of {len(hs)} parameter tensor(s) {what} (relative RMS "
                f"against the exact step), on every backend, eager included: {tensors}", f"      fix: {fix}"]
    return out


def _hazard_lines(h: Hazard) -> list[str]:
    module = f" [{h.module}]" if h.module else ""
    if h.update:
        what = ("gives inf/NaN updates" if h.update == ErrorClass.UPDATE_NONFINITE
                else f"loses {h.precision:.0%} of its update (relative RMS against the exact step)")
        return [f"  under {', '.join(h.rows)}: the {h.param_dtype} {h.op} of parameter `{h.node}` {what}, on every "
                "backend, eager included", f"      fix: {h.fix}"]
    if h.precision is not None:
        return [f"  under {', '.join(h.rows)}: {h.op} `{h.node}`{module} at {h.where} `{h.code}`: its "
                f"{h.activation_dtype} rounding leaves the model's outputs {h.precision:.3g} off (relative RMS error "
                "against the float32 model) on every backend, eager included", f"      fix: {h.fix}"]
    lines = [f"  under {', '.join(h.rows)}: {h.op} `{h.node}`{module} at {h.where} `{h.code}` gets a "
             f"{h.activation_dtype} activation next to {h.param_dtype} parameters; PyTorch raises ({h.error})"]
    if h.promoted_by:
        at = f", promoted at {', '.join(h.promoted_at)}" if h.promoted_at else ""
        lines.append(f"      the {h.activation_dtype} comes from {'; '.join(h.promoted_by)}{at}")
    lines.append(f"      fix: {h.fix}")
    return lines


# ---------------------------------------------------------------- the audit by blocks (issue 37)


@dataclass
class BlockVerdict:
    """One distinct block's verdict, and the blocks of the same structure it stands for."""

    name: str
    members: list[str]
    verdict: Verdict


def _worst(cells: list[Cell], column: str) -> str:
    """A block's cell for one backend column: a bug first, then a failure, else the largest accuracy ratio."""
    mine = [c for c in cells if c.backend == column]
    if not mine:
        return "-"
    if any(c.bug for c in mine):
        return "BUG"
    failed = next((c.status for c in mine if c.status != "runs"), None)
    ratios = [c.ratio for c in mine if c.status == "runs" and c.ratio is not None]
    text = (f"runs {max(ratios):.2g}" if ratios else "runs") if failed is None else failed
    return text if failed is None or len(mine) == 1 else f"{text} ({sum(c.status != 'runs' for c in mine)}/{len(mine)})"


def blocks_table(blocks: list[BlockVerdict]) -> str:
    """One row per distinct block: what it stands for, its size, the worst cell per backend, hazards and bugs."""
    order = ["torch (cpu)", "torch_xla"]
    cols = sorted(dict.fromkeys(c.backend for b in blocks for c in b.verdict.cells),
                  key=lambda k: (order.index(k) if k in order else len(order), k))
    head = ["block", "blocks", "nodes", "values"] + cols + ["hazards", "bugs"]
    body = [[b.name, str(len(b.members)), str(b.verdict.graph.get("nodes", "")), str(b.verdict.graph.get("values", ""))]
            + [_worst(b.verdict.cells, k) for k in cols]
            + [str(len(b.verdict.model_hazards)), str(len(b.verdict.bugs))] for b in blocks]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body])


def blocks_exit_status(blocks: list[BlockVerdict]) -> int:
    """0 clean, 1 where any block has a model hazard or a backend bug."""
    return max((b.verdict.exit_status for b in blocks), default=0)


def render_blocks(model: str, blocks: list[BlockVerdict], graph: dict[str, int], notes: list[str],
                  seconds: float) -> str:
    """The human verdict of an audit by blocks: the block table, then each block's hazards, bugs and gaps."""
    out = [f"precfuzz audit: {model} at real size, by blocks ({sum(len(b.members) for b in blocks)} blocks, "
           f"{len(blocks)} distinct; {graph.get('nodes', 0)} nodes, {graph.get('values', 0)} parameter and input "
           "values)", "", blocks_table(blocks),
           "  (per backend, the worst cell of the block over every policy: runs R = max error / allowed error, "
           "R <= 1 within the bound; BUG: a backend bug below)"]
    unjudged = dict.fromkeys(f"{c.row} / {c.executor}: {c.detail}" for b in blocks for c in b.verdict.cells
                             if c.detail.startswith("runs;"))
    out += [f"  {line}" for line in unjudged]
    for b in blocks:
        v = b.verdict
        failed = [c for c in v.cells if c.detail and not c.detail.startswith("runs;")]
        if not (v.model_hazards or v.bugs or v.coverage or failed):
            continue
        also = f" (stands for {', '.join(b.members)})" if len(b.members) > 1 else ""
        out += ["", f"== block {b.name}{also}"]
        out += [f"  {c.row} / {c.executor}: {c.detail}" for c in failed]
        for h in [h for h in v.model_hazards if not h.update]:
            out += _hazard_lines(h)
        for bug in v.bugs:
            where = f" at {bug.where} `{bug.code}`" if bug.where else ""
            out.append(f"  [{bug.oracle}] {bug.executor}{where}: {bug.message}")
            if bug.repro:
                out.append(f"      minimized repro: {bug.repro}")
        out += [f"  coverage gap: {c}" for c in v.coverage]
        out += [f"  note: {n}" for n in v.notes]
    out.append("")
    out += [f"note: {n}" for n in notes]
    status = blocks_exit_status(blocks)
    out.append(f"verdict: {'HAZARDS OR BUGS' if status else 'clean'} ({seconds:.0f} s)")
    return "\n".join(out)


def blocks_json(model: str, blocks: list[BlockVerdict], graph: dict[str, int], notes: list[str],
                seconds: float) -> dict[str, Any]:
    """The --json object of an audit by blocks."""
    return {"model": model, "by_blocks": True, "exit_status": blocks_exit_status(blocks),
            "seconds": round(seconds, 1), "graph": graph, "notes": notes,
            "blocks": [{"name": b.name, "members": b.members, **b.verdict.to_json()} for b in blocks]}
