"""Bugs, not signatures: the key that groups findings of one root cause, and the one-line title a maintainer reads.

A finding is one oracle verdict on one executor (a policy of torch_xla, a pipeline of TVM). One root
cause shows as many findings: the same XLA float16 layer_norm under four policies, as out-of-bound
errors and as inf, in every dtype combination of its operands. The bug key keeps what identifies the
cause and drops what does not:

    kind | backend | op | class | dtype class | variant

- backend: the family (torch_xla, tvm, torch, neuron; `model` for model hazards), not the policy;
- op: the op the finding is localized on (after minimization: the essential op); for a backend's bug, the op
  family where a backend lowers the family to one primitive (conv1d/2d/3d: one convolution; matmul/bmm: one
  dot), so one lowering's bug is one record; `*` for a silent downcast (a backend that runs mixed operand
  dtypes PyTorch rejects lacks one check, whatever op shows it) and an importer's non-accuracy errors;
- class: what went wrong, coarsened: `accuracy` merges out-of-bound errors, non-finite values and
  computing in a narrower format; `underflow`; the status error class; `dtype`; `downcast`; `hazard`;
- dtype class: the narrowest floating-point dtype the op computes in (`float32`; float16 and bfloat16
  are one class for accuracy and wrong dtypes, where one cause shows in both; `*` for crashes, hangs and
  compile errors, whose message names the cause; for torch_xla's batch-norm-training accuracy, whose one-pass
  variance fails in every float dtype), or the pair that met at a
  mixed-dtype op for a model hazard (activation > parameters: `float16>bfloat16`); `mixed` for a silent downcast (a backend that does
  not check its operands' dtypes does so for every pair);
- variant: for TVM, the pipeline when only that pipeline's passes show it (`decompose`), or `pass:<Name>` for
  a pass sequence's finding that names the pass whose removal makes it disappear; `*` when the default
  pipeline shows it too; `*` elsewhere.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from fuzzer.dtypes import FLOAT_FORMATS, FP8, LOW_PRECISION
from fuzzer.ops import OPS, tagged
from fuzzer.tvm_passes import PIPELINES

from .evidence import Evidence
from .findings import Finding
from .gradients import factor_text
from .vocabulary import BASE_VARIANT, ErrorClass, ExecutorName, Kind, Oracle

DTYPE = re.compile(r"float8_e4m3fn|float8_e5m2|bfloat16|float16|float32|float64")
ONE_PRIMITIVE = ("conv", "matmul")
# ops that sum many 16-bit values: a backend accumulating them in the 16-bit dtype (XLA's reduce with an f16/bf16
# accumulator, TVM's topi sum) is one cause at each (triage8: 4 torch_xla and 4 TVM records of it, one each)
SUMMING = frozenset({"sum", "mean", "var", "cumsum", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
                     "adaptive_avg_pool2d", "adaptive_avg_pool3d"})
# norms DecomposeOpsForTraining turns into 16-bit R.mean/R.variance: the pass only exposes TVM's 16-bit sum, one
# cause with it (triage13 b6d999e4ee: layer_norm NaN after the pass, R.mean of [30000] * 4 in float16 is inf alone)
TVM_TRAINING_MEAN = tagged(OPS, "relax-training-mean")
EXPOSES_SUMS = ("decompose", "pass:DecomposeOpsForTraining", "train")  # tvm/train runs the pass before Gradient
# (triage21 b69a2a07e4: its float16 layer_norm, filed apart from the same 16-bit mean after the pass)
CAST_SEMANTICS = ErrorClass.DTYPE_SEMANTICS.value  # oracles.cast_semantics
# TVM converts float8 in one legalization (FpToFp on LLVM) with two defects: an encode that wraps past the range, and
# a decode of zero, subnormal and NaN codes, which a scaled_mm's lowering uses too (triage11: 3 records; sample30:
# one record per direction)
TVM_FP8_CONVERTING = frozenset({"astype"}) | tagged(OPS, "relax-fp8-astype")
TVM_ONE_PASS_VARIANCE = tagged(OPS, "relax-one-pass-variance")
TVM_ONE_FORMULA = tagged(OPS, "relax-one-formula")
UPDATE_HAZARDS = (ErrorClass.UPDATE_LOST, ErrorClass.UPDATE_NONFINITE)  # oracles.training_hazards: an update lost
GRADIENT_HAZARDS = (ErrorClass.GRAD_UNDERFLOW, ErrorClass.GRAD_OVERFLOW)  # a gradient lost to under- or overflow
TRAINING_HAZARDS = UPDATE_HAZARDS + GRADIENT_HAZARDS
WHOLE_MODULE_FLOWS = ("tvm/train",)  # a raise of theirs is the whole module's (Gradient): see KEY_RULES
FRONTENDS = ("tvm/frontend",)  # importers: their dtype handling is one policy, whatever op shows it  # op families a backend lowers to one primitive (XLA convolution, dot_general)


def error_family(finding: Finding) -> str:
    """The class part of the key (a gradient finding's is its forward counterpart's, prefixed `backward-`: one op's
    backward is another kernel, another lowering, another fix upstream than its forward)."""
    if finding.details.get("grad") is not None:
        plain = replace(finding, details={k: v for k, v in finding.details.items() if k != "grad"},
                        error_class=finding.error_class.removeprefix("grad-").replace(ErrorClass.BACKWARD_RAISES, "raises"))
        # an op whose forward alone is off already (its gradient only carries it) is the forward's cause (triage25
        # b5e4011b9a: torch_xla's float32 layer_norm variance, seen through the gradient of gamma)
        return ("" if finding.details.get("forward_wrong") else "backward-") + error_family(plain)
    if finding.oracle in (Oracle.ERROR_BOUND, Oracle.EFFECTIVE_PRECISION):
        if finding.error_class in (CAST_SEMANTICS, "shape", "masked-rows"):
            return finding.error_class  # a cast saturating past the fp8 range; a node of another shape than PyTorch's
        return "underflow" if finding.error_class == ErrorClass.UNDERFLOW else "accuracy"
    if finding.oracle == Oracle.MODEL_HAZARD and finding.error_class in (ErrorClass.PRECISION, *TRAINING_HAZARDS):
        cause = finding.details.get("cause", "underflow")  # a gradient lost to what no scale reaches is another
        return finding.error_class + ("" if cause == "underflow" else f":{cause}")  # record (triage26 bb32db210a)
    if finding.oracle == Oracle.STATUS_DIVERGENCE and finding.details.get("error_key"):
        return f"{finding.error_class}:{finding.details['error_key']}"  # one error message class, one cause
    return {Oracle.DTYPE_DIVERGENCE: "dtype", Oracle.SILENT_DOWNCAST: "downcast", Oracle.MODEL_HAZARD: "hazard",
            Oracle.COVERAGE: ErrorClass.UNSUPPORTED}.get(finding.oracle, finding.error_class)


def dtype_class(finding: Finding) -> str:
    """The narrowest float dtype at fault, or the sorted pair that met at a mixed-dtype op."""
    names = DTYPE.findall(" ".join(finding.dtypes))
    if finding.oracle == Oracle.SILENT_DOWNCAST:
        return "mixed"
    if finding.kind == Kind.BACKEND_BUG and finding.oracle not in (Oracle.ERROR_BOUND, Oracle.EFFECTIVE_PRECISION, Oracle.DTYPE_DIVERGENCE,
                                                                Kind.MODEL_HAZARD):
        return "*"  # a crash, hang or compile error: the message names it, the dtypes it met do not split it
    if finding.oracle == Oracle.MODEL_HAZARD and finding.error_class == ErrorClass.RAISED:
        return ">".join(names[:2]) or "-"  # activation > parameters: the fix casts one way (sample30 #1: a float16
        # activation beside float32 parameters filed in the float32-beside-float16 record, whose fix casts down)
    if finding.oracle == Oracle.MODEL_HAZARD:
        return "+".join(sorted(set(names[:2]))) or "-"
    if error_family(finding) in ("shape", "masked-rows"):
        return "*"  # a wrong shape, NaN for fully masked rows: one lowering's, whatever dtype shows it
    floats = [d for d in names if d in FLOAT_FORMATS]
    if not floats:
        return "-"
    narrowest = min(floats, key=lambda d: FLOAT_FORMATS[d].mantissa_bits)
    if error_family(finding) in ("accuracy", "underflow", "dtype") and narrowest in LOW_PRECISION:
        return "float16/bfloat16"  # one accumulation or intermediate-precision cause shows in both
    if error_family(finding) in ("accuracy", "underflow", "dtype", CAST_SEMANTICS) and narrowest in FP8:
        return "float8"  # one conversion routine serves both formats
    return narrowest


def variant_of(finding: Finding, pipeline_specific: bool | None) -> str:
    """The variant part: a TVM pipeline when only its passes show the bug, else '*' (always for model hazards).

    A finding of a pass sequence (tvm/passes) that names its culprit pass (the one whose removal makes it
    disappear) has that pass as its variant, unless the default pipeline shows the same cause.
    """
    head = ExecutorName.parse(finding.executor).family
    if finding.kind == Kind.MODEL_HAZARD:
        return "*"
    culprit = finding.details.get("culprit_pass")
    if culprit and pipeline_specific is not False:
        # a pass that is a pipeline of its own (DecomposeOpsForTraining is tvm/decompose): one record for both
        return next((v for v, passes in PIPELINES.items() if passes == (culprit,)), f"pass:{culprit}")
    if head in BASE_VARIANT and pipeline_specific and finding.variant != BASE_VARIANT[head]:
        return finding.variant
    return "*"


def op_part(op: str, kind: str, backend: str = "") -> str:
    """An op as the key names it: its family where the backend lowers the family to one primitive (torch_xla's
    layer/group/instance norm: one HLO batch-norm-training)."""
    spec = OPS.get(op)
    if kind == Kind.MODEL_HAZARD or spec is None:
        return op
    if spec.family in ONE_PRIMITIVE:
        return spec.family
    if backend == "torch_xla" and "xla-batch-norm-training" in spec.tags:
        return "batch-norm-training"
    return op


def mixed_16_bit(finding: Finding) -> bool:
    """An elementwise op whose operands mix float16 and bfloat16 (PyTorch promotes both to float32): a backend that
    converts one 16-bit operand into the other first shows it at add, sub, mul and div alike (triage11 b4365aa9ef
    div, triage12 b997d25324 add: torch_xla's one promotion routine)."""
    if len(finding.ops) != 1 or getattr(OPS.get(finding.ops[0]), "family", None) != "elementwise":
        return False
    operands = {d for entry in finding.dtypes for d in DTYPE.findall(entry.split("->")[0])}
    return {"float16", "bfloat16"} <= operands


@dataclass(frozen=True)
class KeyParts:
    """The six parts of a bug key, as the module docstring defines them."""

    kind: str
    backend: str
    ops: str
    family: str
    dtypes: str
    variant: str

    def text(self) -> str:
        """The key."""
        return "|".join([self.kind, self.backend, self.ops, self.family, self.dtypes, self.variant])


@dataclass(frozen=True)
class KeyRule:
    """One grouping rule: where `applies(finding, parts, pipeline_specific)`, the parts named in `sets` take those
    values. `taught_by` is the triage that showed two records of one cause (tests/test_key_rules.py holds an example
    finding per rule, and fails on a rule without one)."""

    name: str
    taught_by: str
    applies: Callable[[Finding, KeyParts, bool | None], bool]
    sets: dict[str, str]


def _low_accuracy_bug(f: Finding, k: KeyParts) -> bool:
    """A backend bug of accuracy in float16 or bfloat16."""
    return f.kind == Kind.BACKEND_BUG and k.family == "accuracy" and k.dtypes == "float16/bfloat16"


def _low_broadcast_sum_gradient(f: Finding, k: KeyParts) -> bool:
    """A backend bug of a 16-bit gradient summed over its operand's broadcast axes (a bias's, a norm weight's)."""
    return (f.kind == Kind.BACKEND_BUG and k.family == "backward-accuracy"
            and k.dtypes in ("float16", "bfloat16", "float16/bfloat16") and bool(f.details.get("broadcast_sum")))


def _tvm_float8(f: Finding, k: KeyParts) -> bool:
    """A TVM backend bug of a float8 conversion (accuracy or dtype semantics)."""
    return (f.kind == Kind.BACKEND_BUG and k.backend == "tvm" and k.dtypes == "float8"
            and k.family in ("accuracy", CAST_SEMANTICS) and bool(f.ops) and set(f.ops) <= TVM_FP8_CONVERTING)


def _encodes_float8(f: Finding) -> bool:
    """True when the finding's result is a float8 (a cast to it), not a float8 read into a wider dtype."""
    out = " ".join(f.dtypes).rsplit("->", 1)[-1]
    return any(d in out for d in FP8)


# In order: each rule sees the parts the rules before it set.
KEY_RULES: tuple[KeyRule, ...] = (
    KeyRule("importer-dtype-policy", "triage13: from_exported_program keeping float32 after linear, conv, ...: one "
            "importer rule, many ops (where tvm/default shows it on the imported program too, that lowering's record)",
            lambda f, k, specific: f.executor in FRONTENDS and k.family == "dtype" and specific is not False,
            {"ops": "*"}),
    KeyRule("16-bit-sum", "triage8: 4 torch_xla and 4 TVM records of one 16-bit accumulator (see SUMMING)",
            lambda f, k, specific: _low_accuracy_bug(f, k) and bool(f.ops) and set(f.ops) <= SUMMING,
            {"ops": "16-bit-sum"}),
    KeyRule("xla-16-bit-sum-backward", "triage30 b0a5795659, b521ee6a3d, bd86210ab6 (conv2d, group_norm, linear backward: "
            "the bias's or beta's gradient summed over its broadcast axes) beside bdbc4ac54b (mean): torch_xla's one "
            "16-bit reduce (HLO reduce with a bfloat16 add), forward or backward; triage29 b2d3b5a110 the same",
            lambda f, k, specific: k.backend == "torch_xla" and _low_broadcast_sum_gradient(f, k),
            {"ops": "16-bit-sum", "family": "accuracy", "dtypes": "float16/bfloat16"}),
    KeyRule("torch-16-bit-sum-backward", "triage30 be85b7cb69 / be80d1a267 (float16 beta, bfloat16 gamma): PyTorch's CPU "
            "layer_norm backward sums the gamma and beta gradients in a scratch buffer of x's 16-bit dtype: one "
            "record across the 16-bit dtypes",
            lambda f, k, specific: k.backend == "torch" and _low_broadcast_sum_gradient(f, k),
            {"dtypes": "float16/bfloat16"}),
    KeyRule("tvm-training-mean", "triage13 b6d999e4ee: layer_norm NaN after DecomposeOpsForTraining is TVM's 16-bit "
            "R.mean (see TVM_TRAINING_MEAN); triage21 b69a2a07e4: the same from tvm/train, which runs the pass",
            lambda f, k, specific: (_low_accuracy_bug(f, k) and k.backend == "tvm" and bool(f.ops)
                                    and set(f.ops) <= TVM_TRAINING_MEAN and k.variant in EXPOSES_SUMS),
            {"ops": "16-bit-sum", "variant": "*"}),
    KeyRule("mixed-16-bit", "triage11 b4365aa9ef div, triage12 b997d25324 add: torch_xla's one promotion routine "
            "(see mixed_16_bit)",
            lambda f, k, specific: f.kind == Kind.BACKEND_BUG and k.family == "accuracy" and mixed_16_bit(f),
            {"ops": "mixed-16-bit"}),
    KeyRule("tvm-float8-decode", "triage11: 3 records of TVM's float8 conversion (see TVM_FP8_CONVERTING); sample30 #2, "
            "#23: decoding (float8 -> wider: 0 read as 0.0078125, exponent-0 codes) and encoding (wrapping past the "
            "range) are two defects, one record each",
            lambda f, k, specific: _tvm_float8(f, k) and not _encodes_float8(f),
            {"ops": "float8-decode", "family": "accuracy"}),
    KeyRule("tvm-float8-encode", "sample30 #2, #23: TVM's cast to float8 wraps past the range into the sign bit (500 ->"
            " -0) and flushes subnormals, in accuracy and dtype-semantics findings alike",
            lambda f, k, specific: _tvm_float8(f, k) and _encodes_float8(f),
            {"ops": "float8-encode", "family": "accuracy"}),
    KeyRule("missing-dtype-check", "triage7: operands of mixed dtypes run where PyTorch checks them: one missing "
            "check, every op it lowers",
            lambda f, k, specific: f.oracle == Oracle.SILENT_DOWNCAST, {"ops": "*"}),
    KeyRule("tvm-gradient-raises", "triage19: relax.transform.Gradient refusing bfloat16 parameters filed 8 times, "
            "once per op list; triage21: where the default pipeline raises the same (silu's LLVM verification), "
            "that pipeline's record",
            lambda f, k, specific: (f.oracle == Oracle.STATUS_DIVERGENCE and f.executor in WHOLE_MODULE_FLOWS
                                    and specific is not False),
            {"ops": "*"}),
    KeyRule("coverage-gap", "an op or dtype a backend cannot lower, subnormals it flushes: one per backend, class "
            "and dtype; an op's own legality check, named in its error, one per op (sample29 #2: TVM's bf16 "
            "layer_norm refusal filed in the group_norm record)",
            lambda f, k, specific: f.kind == Kind.UNSUPPORTED and not f.details.get("op_named"), {"ops": "*"}),
    KeyRule("xla-one-pass-variance", "triage21 bc8a3da88d, b1ab1c5acd: HLO batch-norm-training's one-pass variance "
            "E[x^2] - E[x]^2 in the operand's dtype fails a float32 instance_norm and a float16 layer_norm alike",
            lambda f, k, specific: (f.kind == Kind.BACKEND_BUG and k.backend == "torch_xla" and k.family == "accuracy"
                                    and k.ops == "batch-norm-training"),
            {"dtypes": "*"}),
    KeyRule("tvm-one-pass-variance", "triage25 b4377ff1d6, b37ea4b019, ba0d982096: topi's group_norm and instance_norm "
            "take the variance as E[x^2] - E[x]^2 in float32: the same cancellation on offset rows in float16 and "
            "float32, three records by op and dtype",
            lambda f, k, specific: (f.kind == Kind.BACKEND_BUG and k.backend == "tvm" and k.family == "accuracy"
                                    and bool(f.ops) and set(f.ops) <= TVM_ONE_PASS_VARIANCE),
            {"ops": "one-pass-variance", "dtypes": "*"}),
    KeyRule("tvm-one-formula", "triage29 b2ecdbde0c / b77d880499 (tanh's cancelling formula, float32 and float16), "
            "b8948f55ce / b2ec291c20 (nn.attention's causal mask as 0, float32 and float16): TVM lowers these ops by "
            "one formula in every dtype (see TVM_ONE_FORMULA); triage30 b1ca6657d9: a 16-bit finding right when the op "
            "runs alone in float32 is that dtype's own (fp16 scores inside attention), not the formula's",
            lambda f, k, specific: (f.kind == Kind.BACKEND_BUG and k.backend == "tvm" and k.family == "accuracy"
                                    and bool(f.ops) and set(f.ops) <= TVM_ONE_FORMULA
                                    and f.details.get("wrong_in_float32", True)),
            {"dtypes": "*"}),
    KeyRule("torch-autocast-scaled-mm", "triage29 b150d2acc4 / b3d664bf7c: without AMX, torch._scaled_mm on the CPU "
            "runs _scaled_mm_out_cpu_emulated, whose inner at::matmul CPU autocast casts to bfloat16: one record "
            "whatever the operands' formats",
            lambda f, k, specific: (f.kind == Kind.BACKEND_BUG and k.backend == "torch" and k.family == "accuracy"
                                    and f.ops == ["scaled_mm"] and ExecutorName.parse(f.executor).variant == "autocast"),
            {"dtypes": "*"}),
)


def key_parts(finding: Finding, pipeline_specific: bool | None = None,
              rules: tuple[KeyRule, ...] = KEY_RULES) -> KeyParts:
    """The parts of a finding's key: the default parts, then each rule of `rules` that applies, in order."""
    backend = "model" if finding.kind == Kind.MODEL_HAZARD else finding.details.get("cause_in", finding.backend)
    parts = KeyParts(finding.kind, backend,
                     "+".join(dict.fromkeys(op_part(op, finding.kind, backend) for op in finding.ops)) or "-",
                     error_family(finding), dtype_class(finding), variant_of(finding, pipeline_specific))
    for rule in rules:
        if rule.applies(finding, parts, pipeline_specific):
            parts = replace(parts, **rule.sets)
    return parts


def bug_key(finding: Finding, pipeline_specific: bool | None = None) -> str:
    """The grouping key of a finding (see the module docstring and KEY_RULES)."""
    return key_parts(finding, pipeline_specific).text()


def bug_id(key: str) -> str:
    """A short stable id for a key."""
    return "b" + hashlib.sha256(key.encode()).hexdigest()[:9]


def pytorch_autocast_raises_too(f: Finding, found: list[Finding]) -> bool:
    """A torch_xla autocast error that CPU autocast (torch/autocast) raises too, at the same op with the same
    message: the error is in PyTorch's autocast itself (at::autocast::prioritize on a float8 cat), not torch_xla's."""
    if f.oracle != Oracle.STATUS_DIVERGENCE or ExecutorName.parse(f.executor).variant != "autocast" or f.backend == "torch":
        return False
    if f.details.get("cpu_autocast_raises"):  # the checker ran torch.autocast("cpu") on the case for it
        return True
    return any(g.executor == "torch/autocast" and g.oracle == f.oracle and g.ops == f.ops
               and error_family(g) == error_family(f) for g in found)


def same_cause(a: Finding, b: Finding) -> bool:
    """True when two findings of one case name the same op, class and dtype class."""
    return (a.ops, error_family(a), dtype_class(a)) == (b.ops, error_family(b), dtype_class(b))


def case_keys(findings: Iterable[Finding], tested: Iterable[str]) -> dict[str, str]:
    """signature -> bug key for the findings of one check (pipeline-specific where the base variant ran clean)."""
    found = list(findings)
    ran = set(tested)
    out = {}
    for f in found:
        if pytorch_autocast_raises_too(f, found):  # PyTorch's own autocast code raises: PyTorch's bug, one record
            f = replace(f, details={**f.details, "cause_in": "torch"})
        base = ExecutorName.parse(f.executor).base
        specific = f.details.get("variant_specific")  # the checker's ablation (the base run on the variant's program)
        if specific is None and base is not None and f.executor != base and base in ran:
            specific = not any(g.executor == base and same_cause(f, g) for g in found)
        out[f.signature] = bug_key(f, specific)
    for f in found:  # a whole-module flow raising what another pipeline raises: that pipeline's record (triage22:
        # `full`'s PrimType error and interpolate_linear's divide by zero, filed from tvm/decompose and from tvm/train)
        same = [g for g in found if f.executor in WHOLE_MODULE_FLOWS and f.oracle == Oracle.STATUS_DIVERGENCE
                and g.executor not in WHOLE_MODULE_FLOWS and g.backend == f.backend and g.oracle == f.oracle
                and error_family(g) == error_family(f)]
        if same:
            out[f.signature] = out[same[0].signature]
    return out


def policy_words(d: Evidence) -> str:
    """How a user writes a hazard's policy (its executor's Policy.words, carried in the evidence)."""
    return str(d.get("policy_words") or d.get("policy") or "the declared dtypes")


def dtype_label(finding: Finding) -> str:
    """The dtypes as a title shows them: 'float16', or '(float16, bfloat16 -> float32)' where they differ."""
    names = DTYPE.findall(" ".join(finding.dtypes))
    if finding.oracle in (Oracle.ERROR_BOUND, Oracle.STATUS_DIVERGENCE) and len(set(names)) > 1 and "->" in " ".join(finding.dtypes):
        ins, out = " ".join(finding.dtypes).split("->", 1)
        return f"({', '.join(dict.fromkeys(DTYPE.findall(ins)))} -> {out.strip()})"
    floats = [d for d in names if d in FLOAT_FORMATS]
    if finding.oracle in (Oracle.SILENT_DOWNCAST, Oracle.MODEL_HAZARD) or not floats:
        return dtype_class(finding)
    return min(floats, key=lambda d: FLOAT_FORMATS[d].mantissa_bits)


def _pass_names(describe: dict[str, Any]) -> str:
    return str(describe.get("settings", {}).get("passes", "")).strip("[]").replace('"', "")


def title(finding: Finding, executors: Iterable[str] = (), describe: dict[str, Any] | None = None,
          variant: str = "*") -> str:
    """One line a maintainer would use as an issue title."""
    backend = {"torch_xla": "torch_xla", "tvm": "TVM", "torch": "PyTorch", "neuron": "Neuron"}.get(finding.backend,
                                                                                                finding.backend)
    op = "+".join(finding.ops)
    if finding.details.get("fused_into") and finding.details.get("consumer_op"):  # right alone, wrong fused (triage29
        op += f" fused into the {finding.details['consumer_op']} after it"  # b0b2d8eefd: XLA's mul -> softmax FMA)
    dc = dtype_label(finding)
    if error_family(finding) == "accuracy" and key_parts(finding).dtypes == "*":  # a record of every dtype (triage29
        dc = "(any dtype)"  # b2ec291c20: TVM's causal mask as 0, one formula in every dtype, titled "float16")
    names = sorted(set(executors)) or [finding.executor]
    where = f" ({', '.join(names)})"
    culprit = finding.details.get("culprit_pass")
    passes = culprit or _pass_names(describe or {})
    scope = f" after {passes}" if (variant != "*" or culprit) and passes else ""
    fam = error_family(finding)
    grad = finding.details.get("grad")
    if grad is not None:
        what = {ErrorClass.GRAD_NONFINITE: "is inf/nan where an fp32-accumulating backward is finite",
                ErrorClass.GRAD_DTYPE: f"has dtype {(finding.dtypes or ['?'])[-1].split('->')[-1]} where PyTorch's "
                              + (f"is {finding.details['expected_dtype']}" if "expected_dtype" in finding.details
                                 else "differs"),
                ErrorClass.BACKWARD_RAISES: f"raises ({clip(finding.message, 80)}) where PyTorch's backward runs"}.get(
            finding.error_class, f"is {finding.ratio or 0:.3g}x less accurate than an fp32-accumulating backward")
        part = "forward (off alone, seen through its backward)" if finding.details.get("forward_wrong") else "backward"
        if finding.details.get("broadcast_sum") and part == "backward":
            part = f"backward (the sum over {finding.details.get('operand', grad)}'s broadcast axes)"
        if finding.details.get("row_scale") and finding.error_class == ErrorClass.GRAD_BOUND:
            what += f" (the exact gradient times {factor_text(finding.details['row_scale'])} per row: a wrong saved 1/std)"
        return f"[{backend}] {dc} {op} {part}: the gradient of {grad} {what}{scope}{where}"
    if finding.kind == Kind.MODEL_HAZARD and finding.error_class in GRADIENT_HAZARDS:
        d = finding.details
        how = {"subnormal": "is lost to subnormal activations a kernel reads as 0",
               "overflow": "is lost to an overflow in its forward"}.get(str(d.get("cause", "")), "underflows")
        return (f"Training hazard: {dc} {op} backward: the gradient of {d.get('gradient', '?')} {how} "
                f"({float(d.get('loss', 0)):.0%} lost) under "
                f"{policy_words(d)}; "
                + (f"scale the loss by {float(d.get('scale', 0)):g} (GradScaler)" if d.get("scale") else
                   "no loss scale helps" if d.get("cause") in ("subnormal", "overflow") else
                   "compute its path in float32, forward and backward"))
    if finding.kind == Kind.MODEL_HAZARD and finding.error_class in UPDATE_HAZARDS:
        d = finding.details
        what = ("gives inf/NaN updates" if finding.error_class == ErrorClass.UPDATE_NONFINITE
                else f"loses {float(d.get('loss', 0)):.0%} of its update" if float(d.get("frozen", 1.0)) >= 0.5
                else f"gets its update {float(d.get('loss', 0)):.0%} wrong")
        return (f"Training hazard: {dc} {op} {what} under "
                f"{policy_words(d)}; {clip(str(d.get('fix', '')), 90)}")
    if finding.kind == Kind.MODEL_HAZARD and finding.error_class == ErrorClass.PRECISION:
        d = finding.details
        who = (f"the {dc} rounding of input `{d['culprit']}`" if d.get("culprit_is_input") and d.get("culprit")
               else f"{dc} {op}")  # an input's rounding is not the op's (hazards30 b93a9d81db: the title said "keep
        # group_norm in float32", which loses as much; the message's fix, "pass x as float32", works)
        return (f"Precision hazard: {who} loses the model's output ({float(d.get('loss', 0)):.2g} relative error "
                f"against float32) under {policy_words(d)}; {d.get('fix') or 'keep it in float32'}")
    if finding.kind == Kind.MODEL_HAZARD:
        d = finding.details
        src = str((d.get("sources") or ["upstream tensor"])[0])
        act, param = (finding.dtypes + ["?", "?"])[:2]
        how = "promoted by" if d.get("promoted_at") or not d.get("culprits") else "from"  # a declared input is not
        # a promotion (hazards29 ba09fbe2cc: "promoted by a float16 tensor" where the float16 was declared)
        meets = (f"{act} and {param} operands (the {param} {how}" if d.get("operands_only") else
                 f"a {act} activation next to {param} parameters ({how}")
        return (f"Model hazard: {op} gets {meets} {'an' if src[:1] in 'aeiou' else 'a'} {src}); "
                f"PyTorch raises under {policy_words(d)}")
    if fam == CAST_SEMANTICS:
        how, gives = finding.details.get("cast_range", "saturates"), finding.details.get("pytorch_gives", "NaN")
        return f"[{backend}] {dc} {op} {how} past the format's range where PyTorch's cast gives {gives}{where}"
    if fam == "masked-rows":
        return f"[{backend}] {op} returns NaN for fully masked rows where PyTorch returns 0 (its safe softmax){where}"
    if fam == "underflow":
        return f"[{backend}] {dc} {op} loses subnormal values ({finding.ratio or 0:.3g}x the bound){where}"
    if finding.kind == Kind.UNSUPPORTED:
        return f"[{backend}] {dc} {op} is not supported{where}"
    if fam == "accuracy" and finding.ops == ["astype"] and finding.oracle == Oracle.ERROR_BOUND:  # a cast is exact:
        # its bound is ~0, so a ratio says nothing (triage30 b1e2721d62: "1.12e+43x less accurate")
        if finding.error_class == ErrorClass.NONFINITE:  # either way round (triage31 b8126a7ee2: TVM decodes the NaN
            # code as a finite -480; the title said it "returns inf/nan")
            return (f"[{backend}] {dc} astype gets inf/nan wrong (non-finite where the correctly rounded cast is finite, "
                    f"or finite where it is NaN){scope}{where}")
        bad = f"values up to {finding.max_ulp:.3g} ULP off" if finding.max_ulp is not None else "other values"
        return f"[{backend}] {dc} astype returns {bad} where the correctly rounded cast is exact{scope}{where}"
    if fam == "accuracy" and finding.details.get("update_dropped"):
        return (f"[{backend}] {dc} {op} leaves {float(finding.details['update_dropped']):.0%} of the parameters it "
                f"should move unchanged (the update is lost){scope}{where}")
    if fam == "accuracy" and finding.details.get("garbage"):
        return f"[{backend}] {dc} {op} returns garbage (changes between runs){scope}{where}"
    if fam == "accuracy" and finding.details.get("worst_nonfinite") and finding.error_class != ErrorClass.NONFINITE:
        size = int(finding.details["worst_nonfinite"])
        ratio = f"{finding.ratio:.3g}x " if finding.ratio is not None else ""
        return (f"[{backend}] {dc} {op} is {ratio}less accurate than an fp32-accumulating implementation, and "
                f"returns inf/nan on some inputs of {size} values{scope}{where}")  # the repro shows the ratio
    if fam == "accuracy" and finding.oracle == Oracle.EFFECTIVE_PRECISION:
        return f"[{backend}] {dc} {op} computes in {finding.dtypes[-1]}{scope}{where}"
    if fam == "accuracy" and finding.error_class == ErrorClass.NONFINITE:
        return f"[{backend}] {dc} {op} returns inf/nan where an fp32-accumulating implementation is finite{scope}{where}"
    if fam == "accuracy":
        ratio = f"{finding.ratio:.3g}x " if finding.ratio is not None else ""
        return f"[{backend}] {dc} {op} is {ratio}less accurate than an fp32-accumulating implementation{scope}{where}"
    if fam == "dtype":
        want, got = (finding.dtypes + ["?", "?"])[:2]
        return f"[{backend}] {op} returns {got} where PyTorch returns {want}{where}"
    if fam == "downcast":
        act, param, got = (finding.dtypes + ["?", "?", "?"])[:3]
        return (f"[{backend}] {op} runs a {act} input with {param} parameters (PyTorch raises) and silently "
                f"returns {got}{where}")
    if finding.oracle == Oracle.STATUS_DIVERGENCE and finding.details.get("cpu_autocast_raises"):
        err = finding.details.get("error") or finding.message
        return (f"[PyTorch] {op} raises under autocast ({finding.error_class}: {clip(err, 80)}) on the CPU and "
                f"on XLA, where PyTorch without autocast runs it{where}")
    if finding.oracle == Oracle.STATUS_DIVERGENCE:
        err = finding.details.get("error") or finding.message
        low = f"{dc} " if dc in LOW_PRECISION else ""  # a dtype the minimizer could not widen to float32 matters
        if finding.details.get("in_pass"):  # the pass that refused, not the op it met (triage26 bfb0a4e4c1)
            return (f"[{backend}] {finding.details['in_pass']} raises on a {low}{op} program ({finding.error_class}: "
                    f"{clip(err, 80)}) where PyTorch runs it{where}")
        return f"[{backend}] {low}{op} raises ({finding.error_class}: {clip(err, 80)}) where PyTorch runs it{where}"
    return f"[{backend}] {op} ({dc}): {clip(finding.message.splitlines()[0], 120)}"


def clip(text: str, width: int) -> str:
    """`text` cut at a word boundary within `width` characters, with an ellipsis where it was cut."""
    if len(text) <= width:
        return text
    cut = text[:width - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return f"{cut}…"
