"""Op records shared by the op-family tables: value types, op specs, shape/dtype helpers."""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..dtypes import DTYPES
from ..promotion import Operand, promote_types

ATTR_INT_LIMIT = 2**31 - 1  # ints in attributes (dims, strides, paddings, groups) stay far from int64 overflow


class IRError(ValueError):
    """Bad graph input; the message names the node or input at fault."""


@dataclass(frozen=True)
class ValueInfo:
    """Static type of a graph value: shape, dtype and kind (tensor / zerodim / scalar)."""

    shape: tuple[int, ...]
    dtype: str
    kind: str = "tensor"

    @property
    def is_scalar(self) -> bool:
        """True for Python scalars (not 0-dim tensors)."""
        return self.kind == "scalar"

    def operand(self) -> Operand:
        """The promotion view of this value."""
        return Operand(self.dtype, self.kind)


def tensor(shape: tuple[int, ...] | list[int], dtype: str) -> ValueInfo:
    """A tensor ValueInfo with the right kind for its rank."""
    shape = tuple(int(s) for s in shape)
    return ValueInfo(shape, dtype, "tensor" if shape else "zerodim")


@dataclass(frozen=True)
class ChainBreak:
    """An op whose activation dtype differs from the dtype of its parameters (PyTorch raises)."""

    operand: int  # index of the activation operand
    activation_dtype: str
    param_dtype: str


@dataclass(frozen=True)
class Typed:
    """Result of type inference for one node."""

    value: ValueInfo
    chain_break: ChainBreak | None = None
    compute_dtype: str | None = None  # dtype the ideal implementation computes in (inputs cast to it)


@dataclass(frozen=True)
class AttrType:
    """What one attribute accepts; fuzzer.ir.infer checks every attribute against its op's types."""

    what: str  # for the error message: "must be <what>"
    accepts: Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -ATTR_INT_LIMIT <= v <= ATTR_INT_LIMIT


def _ints(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(_int(x) for x in v)


def int_or_ints(least: int) -> AttrType:
    """An int >= least, or a list of them."""
    return AttrType(f"an int >= {least} or a list of them",
                    lambda v: (_int(v) and v >= least) or (_ints(v) and all(x >= least for x in v)))


def one_of(*values: Any) -> AttrType:
    """One of a few strings."""
    return AttrType("one of " + ", ".join(map(repr, values)), lambda v: isinstance(v, str) and v in values)


INT = AttrType("an int", _int)
POSITIVE_INT = AttrType("an int >= 1", lambda v: _int(v) and v >= 1)
NONNEGATIVE_INT = AttrType("an int >= 0", lambda v: _int(v) and v >= 0)
OPTIONAL_INT = AttrType("null or an int", lambda v: v is None or _int(v))
BOOL = AttrType("true or false", lambda v: isinstance(v, bool))
EPS = AttrType("a finite number >= 0", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v) and v >= 0)
DIMS = AttrType("null or a non-empty list of ints", lambda v: v is None or (_ints(v) and len(v) > 0))
SHAPE = AttrType("a non-empty list of ints >= 1", lambda v: _ints(v) and len(v) > 0 and all(x >= 1 for x in v))
DTYPE = one_of(*DTYPES)

@dataclass(frozen=True)
class TorchCall:
    """What an op's PyTorch renderer gets: one rendered operand per slot ("None" where absent), its attributes."""

    args: list[str]
    attrs: dict[str, Any]
    scalar: bool  # the first operand is a Python number (math.exp, not torch.exp)


@dataclass(frozen=True)
class RelaxCall:
    """What an op's Relax renderer gets: the lowering (fuzzer.executors.tvm_render), the node, its compute dtype."""

    low: Any  # operand(), param(), emit(), dt(), name_of(), typed
    node: Any
    dtype: str  # the dtype the node computes in (its operands are cast to it)
    attrs: dict[str, Any]
    x_shape: tuple[int, ...]  # shape of the first operand (() for a Python number)

    def arg(self, i: int, dtype: str | None = None) -> str:
        """Operand slot `i` as a Relax value of `dtype` (the compute dtype by default)."""
        ins = list(self.node.inputs) + [None] * 5
        return self.low.operand(ins[i], dtype or self.dtype)

    def slot(self, i: int) -> Any:
        """The raw operand in slot `i` (None where absent)."""
        ins = list(self.node.inputs) + [None] * 5
        return ins[i]


@dataclass(frozen=True)
class NumpyCall:
    """What an op's numpy renderer gets (float64 arrays in scope, np and math imported): operands, attributes, shapes."""

    args: list[str]  # one per operand slot, "None" where absent
    attrs: dict[str, Any]
    shapes: list[tuple[int, ...] | None]  # static shape per slot (None where absent or a Python number)
    dtype: str  # the node's declared output dtype (int casts truncate)


ExampleInput = tuple[str, tuple[int, ...], str, dict[str, Any], "str | None"]


@dataclass(frozen=True)
class Example:
    """A small valid use of an op: inputs (name, shape, role, init, dtype: None for the example's), operands, attributes."""

    inputs: tuple[ExampleInput, ...]
    operands: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


OTHER_FLOAT = "<another float dtype>"  # an Example attribute: float32 for a float16 example, else float16
SAME_DTYPE = "<the example's dtype>"  # an Example attribute: the dtype the example is made in


def example_input(name: str, shape: list[int], role: str = "input", init: dict[str, Any] | None = None,
                  dtype: str | None = None) -> ExampleInput:
    """One Example input: normal values seeded by its name and shape unless `init` says otherwise; `dtype` fixes its
    dtype (int64 indices, bool masks) whatever the example's."""
    return (name, tuple(shape), role, dict(init or {"dist": "normal", "seed": len(name) + sum(shape)}), dtype)


POSITIVE = {"dist": "uniform", "low": 0.5, "high": 2.0, "seed": 2}  # Example values where an op needs x > 0


class AtenSkip(Exception):
    """An exported ATen call an op record cannot translate faithfully (the audit lists it with the reason)."""


@dataclass(frozen=True)
class AtenCall:
    """What an op record's ATen translator gets from fuzzer.audit.translate: plain values, no torch objects.

    Tensor arguments are IR value names (str), lists of them stay lists, numbers stay numbers; `info` gives the
    static type of a value name, `emit` appends an IR node and returns its value name.
    """

    target: str  # the overload, e.g. "add_.Tensor"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    shape: tuple[int, ...] | None  # the exported node's output shape (None where it is not one tensor)
    dtype: str | None  # its output dtype (None where it is not one tensor or not a dtype the IR has)
    emit: Callable[[str, list[Any], dict[str, Any]], str]
    info: Callable[[str], "ValueInfo"]
    shapes: tuple[tuple[int, ...], ...] = ()  # output shapes of a call returning several tensors (split, unbind)

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Argument `index` (positional) or `name` (keyword), else `default`."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)


AtenFn = Callable[[AtenCall], Any]  # returns the IR value name of the result (or a list of them)
InferFn = Callable[[list["ValueInfo | None"], dict[str, Any]], Typed]
RefFn = Callable[..., np.ndarray]  # fn(*operands, **attrs) in float64; pasted into repro scripts
IntervalRule = Callable[[list[Any], list["ValueInfo | None"], dict[str, Any], ValueInfo], tuple[float, float]]

# What the rest of precfuzz asks of an op by tag (one list each, read off the table):
#   contraction        conv/linear/matmul: float32 accumulators for low-precision operands (TVM out_dtype,
#                      Neuron's matmult engine)
#   autocast-lower     torch.autocast casts its float operands to the low-precision dtype (CPU and XLA)
#   autocast-lower-cpu torch.autocast("cpu") alone does (scaled_dot_product_attention)
#   autocast-lower-xla torch.autocast("xla") alone does (relu, max_pool2d: torch_xla's list)
#   autocast-fp32-xla  torch.autocast("xla") casts its float operands to float32
#   autocast-inner-xla torch.autocast("xla") leaves its dtypes but lowers the contractions of its decomposition to
#                      bfloat16 (scaled_dot_product_attention: its matmuls): it computes in bfloat16, reports its dtype
#   autocast-fp32-cpu  torch.autocast("cpu") casts its float operands to float32 (the 3-d pools)
#   amp-always         TVM ToMixedPrecision runs it in float16, accumulating in out_dtype (kAlways)
#   amp-follow         TVM ToMixedPrecision runs it in float16 when every tensor operand is float16 (kFollow)
#   gated              its result is its operand times a gate in [0, 1] (gelu, silu, hardswish): judged at the
#                      operand's magnitude, since any float kernel's gate (1 + erf(x) cancelling) costs eps * |x|
#   amp-unmodelled     TVM ToMixedPrecision rewrites its lowering in a way no IR policy states (scaled_mm: its float32
#                      accumulator stored in float16 before the scales): tvm/mixed-precision declares a harness limit
#   float32-scales     its operands 2 and 3 are float32 scales PyTorch takes in no other dtype (scaled_mm): a policy
#                      that narrows every float32 value (XLA_USE_BF16) casts them back to float32 before it
#   xla-batch-norm-training  torch_xla lowers it to HLO batch-norm-training (layer/group/instance norm): a bug of
#                      that lowering is one cause at each (oracles.bugs keys it once)
#   relax-fp8-astype   its Relax lowering converts its float8 operands with astype (scaled_mm), so TVM's float8
#                      conversion routine is the cause of a float8 accuracy finding at it (oracles.bugs keys it so)
#   relax-training-mean  Relax DecomposeOpsForTraining expands it into R.mean/R.variance in its own dtype (layer_norm,
#                      batch_norm): a 16-bit accuracy finding only that pass shows is TVM's 16-bit sum (oracles.bugs)
#   single-rounding    its ideal is the exact result rounded once to its dtype (astype): judged correctly rounded, half
#                      an ULP of the target format allowed (oracles.bounds.rounding_ratio), not by the arithmetic bound
#   stepwise           its ideal rounds inside the op (an optimizer step: torch.optim rounds the state to the parameter's
#                      dtype at every in-place op): the interpreter hands its reference `stepwise`, a rounding to the
#                      node's dtype (identity for the exact answer)
#   autograd-needs-weight  PyTorch's CPU backward raises on a bias whose (per-channel) weight is absent (group_norm:
#                      dbeta = empty_like(weight)): the float64 gradient reference passes a weight of ones
#   row-lookup         reads rows of its first operand (a table) at the indices of its second: the table may be
#                      narrowed to the rows the indices read, indices renumbered (embedding; the audit by blocks)
#   bias-add-splits    a product whose bias add a backend may fuse into the next op, the product alone rounded
#                      (torch_xla under autocast: linear, and conv, triage31 b8050003d8: bf16(conv) + bias in float32)
#   row-per-output     output feature j reads row j of its second operand and element j of its third (optional): the
#                      op may be split by output features, rows and bias alike (linear, and conv where groups is 1: a
#                      grouped conv's channel j also reads its group's inputs; the audit by blocks)
#   relax-one-formula  TVM lowers it by one formula in every float dtype (tir.tanh's (1 - e^-2x) / (1 + e^-2x), the
#                      causal mask of nn.attention as trilu's 0): an accuracy bug of it is one record across dtypes
#   opmath-scalar      PyTorch's CPU kernel reads a 0-dim second operand at float precision (add, sub, mul, div:
#                      TensorIterator's original scalar), so a 16-bit result is computed in float32 (TVM's program)
TAGS = ("contraction", "autocast-lower", "autocast-lower-cpu", "autocast-lower-xla", "autocast-fp32-xla", "autocast-inner-xla",
        "autocast-fp32-cpu", "amp-always", "amp-follow", "gated", "amp-unmodelled", "float32-scales", "opmath-scalar",
        "xla-batch-norm-training", "relax-fp8-astype", "relax-training-mean", "single-rounding", "stepwise",
        "autograd-needs-weight", "relax-one-pass-variance", "dtype-limit-value", "bias-add-splits",
        "linear-reduction", "relax-one-formula", "row-lookup", "row-per-output")


@dataclass(frozen=True)
class OpSpec:
    """One op, everything about it: type rule, fp64 reference, PyTorch and Relax lowerings, value interval, example.

    Renderers, generators, autocast policies and tests read these records; adding an op is adding one.
    """

    name: str
    family: str
    operands: tuple[str, ...]  # slot names; a trailing '?' marks an optional slot (null in JSON)
    attrs: dict[str, Any]
    infer: InferFn
    reference: RefFn
    torch: Callable[[TorchCall], str]  # the PyTorch expression (torch, F, math in scope)
    relax: Callable[[RelaxCall], str]  # the final Relax call (R in scope), its operands bound through the lowering
    interval: IntervalRule  # an interval holding every value the fp64 reference can produce (generators)
    example: Example
    params: tuple[int, ...] = ()  # operand slots holding parameters (weights, biases, running stats)
    scalars_ok: bool = False  # accepts Python scalars
    attr_types: dict[str, AttrType] = field(default_factory=dict)  # what each attribute accepts (one per attr)
    tags: frozenset[str] = frozenset()  # see TAGS
    relax_dtype: Callable[[RelaxCall], str] | None = None  # the dtype the Relax op yields, where not the compute one
    numpy: Callable[[NumpyCall], str] | None = None  # a float64 numpy expression for short repro scripts (None: none)
    round_scalars: bool = False  # Python-number operands are first converted to the compute dtype (comparisons)
    aten: dict[str, AtenFn] = field(default_factory=dict)  # ATen overloads ("relu_.default") that become this op,
    # each with its translator (fuzzer.audit.translate builds its table from these)

    @property
    def required(self) -> int:
        """Number of mandatory operand slots."""
        return sum(1 for s in self.operands if not s.endswith("?"))


def tagged(ops: dict[str, OpSpec], tag: str) -> frozenset[str]:
    """Names of the ops carrying `tag`."""
    if tag not in TAGS:
        raise KeyError(f"unknown op tag {tag!r} (known: {', '.join(TAGS)})")
    return frozenset(name for name, spec in ops.items() if tag in spec.tags)


def broadcast_shapes(node_shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy/torch broadcasting of shapes, or IRError."""
    try:
        return tuple(int(s) for s in np.broadcast_shapes(*node_shapes))
    except ValueError as exc:
        raise IRError(f"shapes {', '.join(str(list(s)) for s in node_shapes)} do not broadcast") from exc


def require_float(info: ValueInfo, what: str) -> None:
    """Raise unless `info` is floating point."""
    if not info.dtype.startswith(("float", "bfloat")):
        raise IRError(f"{what} must be floating point, got {info.dtype}")


def norm_dim(dim: int, rank: int, what: str = "dim") -> int:
    """Normalize a possibly negative dim, or IRError."""
    if not -rank <= dim < max(rank, 1):
        raise IRError(f"{what} {dim} out of range for rank {rank}")
    return dim % max(rank, 1)


def param_dtype_rule(activation: ValueInfo, params: list[ValueInfo]) -> tuple[str, ChainBreak | None]:
    """PyTorch's same-dtype rule for parametrized ops: (output dtype, chain break if the activation differs).

    PyTorch raises at a chain break, so no PyTorch run defines its output dtype; a backend that runs it
    anyway is judged against a correct promotion (compute and return the promoted dtype), so that a
    silent downcast of either side shows as such.
    """
    dtypes = sorted({p.dtype for p in params})
    if len(dtypes) > 1:
        raise IRError(f"parameters disagree in dtype ({', '.join(dtypes)})")
    if not params or activation.dtype == params[0].dtype:
        return activation.dtype, None
    return promote_types(activation.dtype, params[0].dtype), ChainBreak(0, activation.dtype, params[0].dtype)


def acc_sum(x, axis=None, keepdims=False):
    """Sum over axis; float32 values are added one after another in float32 (the least accurate common order).

    Reference functions sum through this, so the float32-arithmetic ideal implementation accumulates like
    a plain fp32 loop; float64 values (the exact reference) use numpy's summation.
    """
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim == 0:
        return np.sum(x, axis=axis, keepdims=keepdims)
    axes = tuple(range(x.ndim)) if axis is None else tuple(int(a) % x.ndim for a in np.atleast_1d(axis))
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,))
    out = np.cumsum(flat, axis=-1, dtype=np.float32)[..., -1]
    return np.expand_dims(out, axes) if keepdims else out


def acc_mean(x, axis=None, keepdims=False):
    """Mean over axis via acc_sum."""
    x = np.asarray(x)
    axes = tuple(range(x.ndim)) if axis is None else tuple(int(a) % x.ndim for a in np.atleast_1d(axis))
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return acc_sum(x, axes, keepdims) / x.dtype.type(count) if x.dtype == np.float32 else np.mean(x, axis=axes, keepdims=keepdims)


# How float32 reference arithmetic forms a variance: "two-pass" (mean, then the mean of squared deviations, as
# PyTorch's CPU kernels do) or "one-pass" (E[x^2] - E[x]^2 in one sweep, as XLA's and TVM's norm lowerings do).
# Both are common float32 kernels; the ideal implementations include both (fuzzer.interpret.ARITHMETICS).
VARIANCE_FORM: ContextVar[str] = ContextVar("variance_form", default="two-pass")


def acc_moments(x, axes) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased variance over axes (kept), in the VARIANCE_FORM for float32 values; exact otherwise."""
    x = np.asarray(x)
    mu = acc_mean(x, axes, keepdims=True)
    if x.dtype == np.float32 and VARIANCE_FORM.get() == "one-pass":
        return mu, np.maximum(acc_mean(x * x, axes, keepdims=True) - mu * mu, np.float32(0.0))
    return mu, acc_mean((x - mu) ** 2, axes, keepdims=True)
