"""The words findings and bugs are made of: kinds, oracles, error classes, executor names (typed, one place).

The enums are `str` enums (Word): a value is its own JSON string, prints as itself and compares equal to it, so
records written before them read back the same; code names them here, never as string literals.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Word(str, Enum):
    """A word of the vocabulary: a str in every use (str(), f-strings, repr, JSON, hashing) as well as an enum member."""

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__


class Kind(Word):
    """What a person does with a finding."""

    BACKEND_BUG = "backend-bug"  # report it upstream
    MODEL_HAZARD = "model-hazard"  # fix the model (PyTorch raises too, or the policy loses the precision)
    UNSUPPORTED = "unsupported"  # a coverage gap: the backend cannot express the op in that dtype


class Reaction(Word):
    """What an executor did with a program PyTorch eager refuses (a model hazard's `reactions`)."""

    RAISED = "raised"  # refused it too
    RAN = "ran"  # ran it
    BRIDGED = "bridged"  # ran it only because precfuzz's lowering bridged the mixed dtypes


class Oracle(Word):
    """Which oracle made a finding."""

    ERROR_BOUND = "error-bound"  # numbers out of the ideal-implementation bound
    EFFECTIVE_PRECISION = "effective-precision"  # computes in a narrower format than it declares
    STATUS_DIVERGENCE = "status-divergence"  # raises where eager runs
    DTYPE_DIVERGENCE = "dtype-divergence"  # returns another dtype than eager
    SILENT_DOWNCAST = "silent-downcast"  # runs mixed dtypes eager rejects, returning a narrower one
    MODEL_HAZARD = "model-hazard"  # eager raises too, or the policy's own rounding loses the outputs
    COVERAGE = "coverage"  # the backend says it cannot
    CRASH = "crash"  # the worker died
    TIMEOUT = "timeout"  # the worker hung


class ErrorClass(Word):
    """The fixed error classes (a crash's class names its signal, `crash-signal-11`, and an effective-precision
    finding the formats, `float16-carries-bfloat16`: those stay plain strings)."""

    BOUND = "bound"
    NONFINITE = "nonfinite"
    UNDERFLOW = "underflow"
    PRECISION = "precision"  # a precision hazard
    RAISED = "raised"  # a model hazard where eager raises
    DOWNCAST = "downcast"
    DTYPE = "dtype"
    DTYPE_MISMATCH = "dtype-mismatch"
    COMPILER_ERROR = "compiler-error"
    RUNTIME_ERROR = "runtime-error"
    UNSUPPORTED = "unsupported"
    TIMEOUT = "timeout"
    DTYPE_SEMANTICS = "dtype-semantics"  # a cast finite past the fp8 range where PyTorch gives NaN/inf
    SHAPE = "shape"  # a node of another shape than PyTorch's
    UPDATE_LOST = "update-lost"  # an optimizer step whose 16-bit update rounds away (oracles.training_hazards)
    UPDATE_NONFINITE = "update-nonfinite"  # an optimizer step inf/NaN where the exact one is finite
    GRAD_UNDERFLOW = "grad-underflow"  # a gradient the 16-bit backward flushes to 0 (loss scaling, or activations)
    GRAD_OVERFLOW = "grad-overflow"  # a gradient lost to an overflow in its forward, which no loss scale helps
    GRAD_BOUND = "grad-bound"  # a gradient out of the bound of an fp32-accumulating backward (oracles.gradients)
    GRAD_NONFINITE = "grad-nonfinite"  # a gradient inf/NaN where the exact one is finite
    GRAD_DTYPE = "grad-dtype"  # a gradient of another dtype than PyTorch's
    BACKWARD_RAISES = "backward-raises"  # the backward raises where PyTorch's runs


BACKENDS = {"xla": "torch_xla", "tvm": "tvm", "torch": "torch", "neuron": "neuron", "debug": "debug"}
BASE_VARIANT = {"tvm": "default"}  # the variant whose verdict tells a pass's or importer's bug from the op's own


@dataclass(frozen=True)
class ExecutorName:
    """`family/variant` (`tvm/mixed-precision`): the family, the variant, the backend, the family's base variant."""

    family: str
    variant: str

    @classmethod
    def parse(cls, name: str) -> "ExecutorName":
        """Split an executor name (a name without '/' is a family with no variant)."""
        family, _, variant = name.partition("/")
        return cls(family, variant)

    @property
    def backend(self) -> str:
        """The backend family as bug records name it: torch_xla, tvm, torch, neuron."""
        return BACKENDS.get(self.family, self.family)

    @property
    def base(self) -> str | None:
        """The family's base executor (`tvm/default`), where it has one."""
        return f"{self.family}/{BASE_VARIANT[self.family]}" if self.family in BASE_VARIANT else None

    def __str__(self) -> str:
        return f"{self.family}/{self.variant}" if self.variant else self.family
