"""What a finding carries beside its verdict: typed evidence per detector, one schema for memory and disk.

Each detector's keys are a TypedDict of their own; `Evidence` is their union (a finding holds the keys of the
detectors that touched it: the error bound, then localization, then attribution). `read` validates evidence read
back from disk against this schema, so a record saved by the campaign comes back whole and typed.
"""

from __future__ import annotations

import math
import types
from collections import abc
from typing import Any, Sequence, TypedDict, Union, get_args, get_origin, get_type_hints

import numpy as np

from fuzzer.policy import Policy


class BoundEvidence(TypedDict, total=False):
    """oracles.error_bounds: the worst element of the worst output."""

    max_abs: float
    worst_index: Sequence[int] | int | None
    violating_outputs: int
    violating_sets: list[int]
    worst_nonfinite: int  # the largest input size whose output was inf/NaN (the minimizer shrinks below it)
    garbage: bool  # the backend returns other numbers on a second run of the same case


class LocalizedEvidence(TypedDict, total=False):
    """oracles.localize: the node a numeric finding is pinned on, and what it does there."""

    localized: bool
    excess_precision: bool
    output_ratio: float | None
    fails_above_subnormals: bool
    evidence: str  # why a node computes in a narrower format
    chain_break: bool
    fused_into: str  # the consumer a right-alone producer is wrong fused into
    consumer_op: str
    decoded: str  # the float8 operand read wrong before any arithmetic
    cast_range: str  # how a cast past the format's range misbehaves ("wraps", "saturates")
    pytorch_gives: str
    masked_rows: int
    seen_at: str
    raised_at: str
    update_dropped: float  # an optimizer step leaving this share of the parameters it should move unchanged
    cause_in: str  # the backend the cause lives in, where it is not the executor's (a bug key reads it)
    wrong_in_float32: bool  # a 16-bit op of one formula in every dtype is as wrong run alone in float32


class SemanticEvidence(TypedDict, total=False):
    """oracles.semantics and oracles.crashes: status, dtype and coverage outcomes against eager's."""

    whole_graph: bool
    stage: str | None
    op_named: bool  # a refusal names one of the graph's ops (its own legality check)
    error_type: str | None
    error: str
    error_key: str  # the error message as a class (oracles.errors.message_key)
    eager_dtypes: list[str] | None
    in_pass: str
    mismatches: list[list[str]]
    expected_dtype: str
    cpu_autocast_raises: bool


class HazardEvidence(TypedDict, total=False):
    """oracles.semantics, precision_hazards and training_hazards: what a model hazard is and how to fix it."""

    policy: str  # the policy's label
    policy_words: str  # how a user writes it (fuzzer.policy.Policy.words): titles read it
    culprits: list[str]
    sources: list[str]
    promoted_at: list[str]
    fix: str
    operands_only: bool  # the op has no parameter side (attention): its dtypes are operands', not roles
    reactions: dict[str, list[str]]  # a vocabulary.Reaction -> the executors that did it
    culprit: str
    culprit_is_input: bool
    start: str
    with_fix: float
    loss: float  # share of the output (or gradient, or update) lost
    gradient: str
    cause: str  # a gradient hazard: underflow | subnormal | overflow; an update hazard: UpdateLoss.mechanism
    scale: float | None
    with_scale: float
    zeroed: float
    checked_on: str
    nonfinite: int
    frozen: float


class GradientEvidence(TypedDict, total=False):
    """oracles.gradients: which gradient is off and the op whose backward is at fault."""

    grad: str
    located: bool
    operand: str
    broadcast_sum: bool
    forward_wrong: bool
    row_scale: list[float]


class AttributionEvidence(TypedDict, total=False):
    """oracles.attribution: the pass or pipeline stage at fault."""

    culprit_pass: str
    passes: list[str]
    culprits_tried: list[str]
    variant_specific: bool
    ablation: str


class Evidence(BoundEvidence, LocalizedEvidence, SemanticEvidence, HazardEvidence, GradientEvidence,
               AttributionEvidence, total=False):
    """Every key a finding's evidence may hold."""


KEYS: dict[str, Any] = get_type_hints(Evidence)


def policy_evidence(policy: Policy) -> HazardEvidence:
    """A hazard's policy as its evidence carries it: the label records key on, the words titles read
    (fuzzer.policy.Policy)."""
    return HazardEvidence(policy=policy.label, policy_words=policy.words)


class EvidenceError(ValueError):
    """Evidence that does not fit the schema."""


def jsonable(value: Any) -> Any:
    """A value as JSON holds it: numpy scalars and arrays as Python numbers and lists, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _fits(value: Any, hint: Any) -> bool:
    """True when a JSON value fits a type hint of the schema (a float takes an int, and "inf" as the store writes it)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin in (list, Sequence, abc.Sequence):
        return isinstance(value, (list, tuple)) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is type(None):
        return value is None
    if hint is float:  # (the store writes NaN as null)
        return (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in ("inf", "-inf", None)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def read(raw: Any) -> Evidence:
    """Evidence read back from JSON, checked key by key against the schema (EvidenceError names the first misfit);
    "inf" strings (how the store writes non-finite floats) come back as floats."""
    if not isinstance(raw, dict):
        raise EvidenceError(f"evidence must be an object, not {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KEYS:
            raise EvidenceError(f"evidence key {key!r} is not in the schema (oracles/evidence.py)")
        if not _fits(value, KEYS[key]):
            raise EvidenceError(f"evidence {key!r}: {value!r} is not a {KEYS[key]}")
        out[key] = float(value) if isinstance(value, str) and value in ("inf", "-inf") else value
    return Evidence(**out)  # type: ignore[typeddict-item]


def checked(evidence: Evidence) -> Evidence:
    """Evidence made in memory, checked against the schema as JSON would carry it (a test helper for detectors)."""
    return read({k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in
                 jsonable(evidence).items()})
