"""The Relax passes a case may run (tvm/passes): one declared table, sequence validation and the seeded draw.

Plain data, no TVM import: the IR validates a case's `tvm_passes` against this table (an unknown name is a
one-line error; nothing named in a case file is ever looked up as code), and the executor turns each entry
into `getattr(relax.transform, name)(**kwargs)`.

Each pass declares its stage and what it promises:

- stage `graph`: works on high-level Relax ops (before LegalizeOps); `legalize`: LegalizeOps itself; `tir`:
  works on legalized call_tir functions, so it needs LegalizeOps earlier in the sequence.
- promise `exact`: the rewrite keeps the values of every op up to the rounding an ideal fp32-accumulating
  implementation makes (reassociating exact sums is allowed; dropping an accumulator dtype is not);
  `training` / `inference`: batch_norm computed from the batch's / the running statistics;
  `approximate`: approximate math with a stated relative-error budget (FAST_MATH_BUDGET).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Union

# FastMathTransform (python/tvm/relax/transform/fast_math.py) swaps relax.exp, relax.tanh, relax.erf and
# relax.nn.softmax for topi.fast_exp / fast_tanh / fast_erf / nn.fast_softmax. fast_exp_float32
# (include/tvm/topi/elemwise.h) is the Cephes expf polynomial (about 2e-7 relative error) clamped to
# [-88.376, 88.376]; fast_tanh and fast_erf are Eigen's rational approximations (a few float32 ULP). The budget
# is an extra 1e-6 relative error (about 17 float32 ULP) on those ops, beyond the exact bound; in float16 it
# is a small fraction of an ULP, so float16 graphs are judged as if the pass were exact.
FAST_MATH_BUDGET = 1e-6
FAST_MATH_OPS = ("exp", "tanh", "softmax")  # IR ops whose Relax lowering FastMathTransform replaces

STAGES = ("graph", "legalize", "tir")
PROMISES = ("exact", "training", "inference", "approximate")

PassEntry = Union[str, tuple[str, dict[str, Any]]]

# pipeline name -> relax.transform passes applied (in order) before tvm.compile's own pipeline (tvm/<name>).
PIPELINES: dict[str, tuple[PassEntry, ...]] = {
    "default": (),
    "decompose": ("DecomposeOpsForTraining",),
    "decompose-inference": ("DecomposeOpsForInference",),
    "train": ("DecomposeOpsForTraining",),  # then relax.transform.Gradient on a training case (tvm_exec.TVMTrainExecutor)
}


@dataclass(frozen=True)
class PassSpec:
    """One Relax pass: how to call it, where it may run, what it promises, and how often the draw picks it."""

    name: str
    stage: str
    promise: str
    weight: int  # draw weight (0: never drawn; a case may still name it)
    kwargs: dict[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()  # IR ops the pass rewrites (the draw favours passes whose ops the graph has)
    note: str = ""


PASS_TABLE: dict[str, PassSpec] = {p.name: p for p in (
    PassSpec("ExpandMatmulOfSum", "graph", "exact", 4, targets=("matmul", "bmm"),
             note="matmul(x, A + B) -> matmul(x, A) + matmul(x, B)"),
    PassSpec("CombineParallelMatmul", "graph", "exact", 3, targets=("matmul", "bmm", "linear"),
             note="matmuls sharing an input -> one matmul of the concatenated weights, then split"),
    PassSpec("AdjustMatmulOrder", "graph", "exact", 1, targets=("matmul", "bmm"),
             note="x @ (A @ B) -> (x @ A) @ B where cheaper (reassociates a product of exact sums)"),
    PassSpec("FuseTransposeMatmul", "graph", "exact", 3, targets=("linear",),
             note="matmul(x, permute_dims(w)) -> one fused TIR function"),
    PassSpec("DecomposeOpsForInference", "graph", "inference", 2,
             targets=("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"),
             note="composite ops as elementary ones; batch_norm from the running statistics"),
    PassSpec("DecomposeOpsForTraining", "graph", "training", 2,
             targets=("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"),
             note="composite ops as elementary ones; batch_norm from the batch statistics"),
    PassSpec("FastMathTransform", "graph", "approximate", 2, targets=FAST_MATH_OPS,
             note=f"exp/tanh/erf/softmax approximated (budget {FAST_MATH_BUDGET:g} relative)"),
    PassSpec("ConvertLayout", "graph", "exact", 2, {"desired_layouts": {"relax.nn.conv2d": ["NHWC", "OHWI"]}},
             targets=("conv2d",), note="conv2d in NHWC/OHWI with layout transforms around it"),
    PassSpec("FoldBatchnormToConv2D", "graph", "inference", 0, targets=("conv2d", "batch_norm"),
             note="folds batch_norm into conv2d weights; needs constant weights (precfuzz passes them as "
                  "parameters, so it is a no-op here and never drawn)"),
    PassSpec("FoldConstant", "graph", "exact", 1, note="evaluates constant subexpressions at compile time"),
    PassSpec("EliminateCommonSubexpr", "graph", "exact", 1, note="shares repeated subexpressions"),
    PassSpec("CanonicalizeBindings", "graph", "exact", 1, note="removes trivial bindings"),
    PassSpec("LegalizeOps", "legalize", "exact", 0, note="high-level ops -> call_tir of TOPI PrimFuncs"),
    PassSpec("AnnotateTIROpPattern", "tir", "exact", 0, note="marks PrimFuncs with their fusion pattern"),
    PassSpec("FuseOps", "tir", "exact", 0, note="groups bindings into fused functions"),
    PassSpec("FuseTIR", "tir", "exact", 0, note="fuses grouped PrimFuncs into one"),
)}
FUSION_TAIL = ("LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR")  # drawn together, as users write it
MAX_GRAPH_PASSES = 4


class PassSequenceError(ValueError):
    """A pass sequence that names an unknown pass or runs a pass outside its stage."""


def check_sequence(names: Iterable[Any]) -> tuple[str, ...]:
    """The sequence as a tuple of known pass names in a valid order; PassSequenceError (one line) otherwise."""
    out: list[str] = []
    legalized = False
    decompose: str | None = None
    for name in names:
        if not isinstance(name, str):
            raise PassSequenceError(f"tvm_passes: {name!r} is not a pass name")
        spec = PASS_TABLE.get(name)
        if spec is None:
            shown = name if name.isprintable() and len(name) <= 60 else repr(name[:60])
            raise PassSequenceError(f"tvm_passes: unknown pass {shown} (known: {', '.join(PASS_TABLE)})")
        if spec.stage == "graph" and legalized:
            raise PassSequenceError(f"tvm_passes: {name} works on high-level ops and cannot follow LegalizeOps")
        if spec.stage == "tir" and not legalized:
            raise PassSequenceError(f"tvm_passes: {name} needs LegalizeOps earlier in the sequence")
        if spec.stage == "legalize":
            legalized = True
        if spec.promise in ("training", "inference") and name.startswith("Decompose"):
            if decompose is not None and decompose != name:
                raise PassSequenceError(f"tvm_passes: {decompose} and {name} promise different batch_norm semantics")
            decompose = name
        out.append(name)
    if len(out) > 32:
        raise PassSequenceError(f"tvm_passes: at most 32 passes, got {len(out)}")
    return tuple(out)


def draw_sequence(rng: random.Random, ops: Iterable[str]) -> tuple[str, ...]:
    """A valid pass sequence for a graph with `ops`: 1-4 graph passes (favouring those that rewrite its ops), then
    the fusion tail sometimes."""
    present = set(ops)
    table = []
    for spec in PASS_TABLE.values():
        if spec.stage != "graph" or spec.weight == 0:
            continue
        table.append((spec.name, spec.weight * (4 if present & set(spec.targets) else 1)))
    chosen: list[str] = []
    for _ in range(rng.randint(1, MAX_GRAPH_PASSES)):
        pool = [(n, w) for n, w in table if n not in chosen
                and not (n.startswith("Decompose") and any(c.startswith("Decompose") for c in chosen))]
        if not pool:
            break
        names, weights = zip(*pool)
        chosen.append(rng.choices(names, weights)[0])
    if rng.random() < 0.3:
        chosen += FUSION_TAIL
    return check_sequence(chosen)


def derive_sequence(seed_text: str, ops: Iterable[str]) -> tuple[str, ...]:
    """The sequence a case without `tvm_passes` runs: drawn from a generator seeded by `seed_text`."""
    digest = hashlib.sha256(f"precfuzz-passes/1:{seed_text}".encode()).hexdigest()
    return draw_sequence(random.Random(digest), ops)


def promise_of(names: Iterable[str], promise: str) -> bool:
    """True when some pass of the sequence makes `promise`."""
    return any(PASS_TABLE[n].promise == promise for n in names)


def batch_norm_mode(names: Iterable[str]) -> bool | None:
    """The batch_norm mode the first decomposition of the sequence promises (True: training), None without one."""
    for n in names:
        if PASS_TABLE[n].name.startswith("Decompose"):
            return PASS_TABLE[n].promise == "training"
    return None


def entries(names: Iterable[str]) -> list[str | tuple[str, dict[str, Any]]]:
    """The sequence as executor pass entries: a name, or (name, kwargs) where the pass takes arguments."""
    return [(n, dict(PASS_TABLE[n].kwargs)) if PASS_TABLE[n].kwargs else n for n in names]
