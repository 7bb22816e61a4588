"""Optimizer steps (issue 36): one SGD / momentum SGD / Adam / AdamW step of one parameter tensor, as a node.

A node takes the parameter, its gradient and the optimizer state (momentum buffer; Adam's first and second moments
with the number of steps already taken as an attribute) and yields the updated parameter. PyTorch runs it through
torch.optim's own functional step (single-tensor, foreach or fused: the `impl` attribute), torch_xla the same code
on the device, TVM through relax.training.optimizer (SGD, MomentumSGD, Adam; AdamW as the decoupled decay
`p * (1 - lr * wd)` followed by Adam without decay, which is what AdamW is).

The exact answer is the update rule in float64. The ideal implementation of the declared dtypes is the update as
PyTorch writes it (torch/optim/adam.py, sgd.py: every in-place op rounds the state to the parameter's dtype, Python
floats scalars at float precision), each of its elementary results rounded once: `stepwise` is the rounding the
interpreter hands in (identity for the exact answer). So fp16 Adam whose `eps` rounds away in `denom.add_(eps)` is
the program's own loss (a model hazard), and a backend whose constants round beta2 to 1.0 is less accurate than it.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from . import intervals as iv
from .base import (
    BOOL,
    EPS,
    AttrType,
    Example,
    IRError,
    OpSpec,
    RelaxCall,
    TorchCall,
    Typed,
    ValueInfo,
    example_input,
    one_of,
    require_float,
    tensor,
)

IMPLS = ("single", "foreach", "fused")  # torch.optim's three implementations (fused: float32 math inside)
UNIT = AttrType("a number in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v) and 0 <= v < 1)
LR = AttrType("a finite number > 0", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v) and 0 < v <= 1e6)
STEP = AttrType("an int in 1..1000000", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**6)


def _same(v: Any) -> Any:
    return v


def _infer_step(what: str, slots: tuple[str, ...]) -> Callable[[list[ValueInfo | None], dict[str, Any]], Typed]:
    """Every operand present is a float tensor of the parameter's shape and dtype (torch.optim's state is)."""
    def rule(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        param = ops[0]
        assert param is not None
        for name, info in zip(slots, ops):
            if info is None:
                continue
            if info.is_scalar:
                raise IRError(f"{what}: {name} must be a tensor, not a Python number")
            require_float(info, f"{what}: {name}")
            if info.shape != param.shape:
                raise IRError(f"{what}: {name} has shape {list(info.shape)}, the parameter {list(param.shape)} "
                              "(optimizer state has the parameter's shape)")
            if info.dtype != param.dtype:
                raise IRError(f"{what}: {name} is {info.dtype}, the parameter {param.dtype} (torch.optim keeps the "
                              "gradient and state in the parameter's dtype; cast before the step)")
        if what == "sgd_step":
            if (attrs["momentum"] > 0) != (ops[2] is not None):
                raise IRError("sgd_step: a momentum buffer is given exactly when momentum > 0")
            if attrs["nesterov"] and (attrs["momentum"] <= 0 or attrs["dampening"] != 0):
                raise IRError("sgd_step: nesterov needs momentum > 0 and zero dampening (torch.optim.SGD raises)")
        return Typed(tensor(param.shape, param.dtype))
    return rule


# ---- the update rules, in float64 (exact) or with `stepwise` rounding each elementary result (the ideal)

def sgd_step(param, grad, momentum_buffer=None, lr=0.01, momentum=0.0, dampening=0.0, weight_decay=0.0,
             nesterov=False, impl="single", stepwise=None) -> np.ndarray:
    """torch.optim.sgd's single-tensor step; the last add (param.add_(grad, alpha=-lr)) is rounded by the caller."""
    r = stepwise or _same
    p, g = np.asarray(param), np.asarray(grad)
    if weight_decay:
        g = r(g + weight_decay * p)
    if momentum:
        buf = r(r(np.asarray(momentum_buffer) * momentum) + (1 - dampening) * g)
        g = r(g + momentum * buf) if nesterov else buf
    return p - lr * g


def adam_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step, impl,
              stepwise=None) -> np.ndarray:
    """torch.optim.adam's single-tensor step number `step`; the last addcdiv is rounded by the caller."""
    r = stepwise or _same
    p, g, m, v = (np.asarray(a) for a in (param, grad, exp_avg, exp_avg_sq))
    if weight_decay:
        if decoupled:
            p = r(p * (1 - lr * weight_decay))
        else:
            g = r(g + weight_decay * p)
    m = r(m + (1 - beta1) * (g - m))  # exp_avg.lerp_(grad, 1 - beta1)
    v = r(r(v * beta2) + (1 - beta2) * g * g)  # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = r(r(r(np.sqrt(v)) / math.sqrt(bias_correction2)) + eps)
        return p - (lr / bias_correction1) * m / denom


# ---- PyTorch: torch.optim's functional step on clones (the inputs stay as they were)

def _impl_flags(impl: str) -> str:
    return {"single": "foreach=False", "foreach": "foreach=True", "fused": "fused=True"}[impl]


def _torch_sgd(c: TorchCall) -> str:
    a = c.attrs
    p, g, buf = c.args[:3]
    bufs = "[None]" if buf == "None" else f"[{buf}.detach().clone()]"
    return (f"(lambda p: (torch.optim._functional.sgd([p], [{g}.detach().clone()], {bufs}, {_impl_flags(a['impl'])}, "
            f"weight_decay={a['weight_decay']!r}, momentum={a['momentum']!r}, lr={a['lr']!r}, "
            f"dampening={a['dampening']!r}, nesterov={a['nesterov']!r}, maximize=False), p)[1])"
            f"({p}.detach().clone())")


def _torch_adam(c: TorchCall) -> str:
    a = c.attrs
    p, g, m, v = c.args[:4]
    return (f"(lambda p: (torch.optim._functional.adam([p], [{g}.detach().clone()], [{m}.detach().clone()], "
            f"[{v}.detach().clone()], [], [torch.tensor({float(a['step'] - 1)!r})], {_impl_flags(a['impl'])}, "
            f"amsgrad=False, beta1={a['beta1']!r}, beta2={a['beta2']!r}, lr={a['lr']!r}, "
            f"weight_decay={a['weight_decay']!r}, eps={a['eps']!r}, maximize=False, "
            f"decoupled_weight_decay={a['decoupled']!r}), p)[1])({p}.detach().clone())")


# ---- TVM: relax.training.optimizer's function, added to the module and called from main

def _tvm_optimizer(c: RelaxCall, make: str, state: list[str], params: list[str]) -> str:
    """Add the optimizer function `make` builds for one parameter of the node's shape and dtype; call it on
    (params), (grad), (state); the updated parameter. TVM 0.27's Adam.init() raises building its runtime state
    (np.ones with a TVM dtype object), so the function is built without it: its text does not depend on the state."""
    low, hint = c.low, c.low.name_of(c.node.id)
    var = f"R.Var('param', R.TensorType({list(c.x_shape)!r}, {low.dt(c.dtype)}))"
    opt = low.define(make, f"{hint}_optimizer")
    low.lines.append(f"{opt}._set_params_and_dtype([{var}])")
    low.lines.append(f"{opt}.state = ()  # not read by get_function")
    low.lines.append(f"{opt}.name = {hint + '_step'!r}  # its global symbol: one per step in the module")
    fn = low.define(f"bb.add_func({opt}.get_function(), {hint + '_step'!r})", f"{hint}_fn")
    call = low.emit(f"R.Call({fn}, [R.Tuple([{', '.join(params)}]), R.Tuple([{c.arg(1)}]), "
                    f"R.Tuple([{', '.join(state)}])])", f"{hint}_call")
    new = low.emit(f"R.TupleGetItem({call}, 0)", f"{hint}_params")
    return f"R.TupleGetItem({new}, 0)"


def _relax_sgd(c: RelaxCall) -> str:
    a = c.attrs
    steps = "R.const(0, 'int64')"
    if a["momentum"] <= 0:
        return _tvm_optimizer(c, f"R.training.optimizer.SGD({a['lr']!r}, {a['weight_decay']!r})", [steps], [c.arg(0)])
    make = (f"R.training.optimizer.MomentumSGD({a['lr']!r}, {a['momentum']!r}, {a['dampening']!r}, "
            f"{a['weight_decay']!r}, {a['nesterov']!r})")
    return _tvm_optimizer(c, make, [steps, c.arg(2)], [c.arg(0)])


def _relax_adam(c: RelaxCall) -> str:
    a, dt = c.attrs, c.low.dt(c.dtype)
    done = a["step"] - 1
    p, wd = c.arg(0), a["weight_decay"]
    if wd and a["decoupled"]:  # AdamW: param.mul_(1 - lr * wd), then Adam without decay
        p = c.low.emit(f"R.op.multiply({p}, R.const({1 - a['lr'] * wd!r}, {dt}))", f"{c.low.name_of(c.node.id)}_decayed")
        wd = 0.0
    state = [f"R.const({done}, 'int64')", f"R.const({a['beta1'] ** done!r}, {dt})",
             f"R.const({a['beta2'] ** done!r}, {dt})", c.arg(2), c.arg(3)]
    make = f"R.training.optimizer.Adam({a['lr']!r}, ({a['beta1']!r}, {a['beta2']!r}), {a['eps']!r}, {wd!r})"
    return _tvm_optimizer(c, make, state, [p])


# ---- intervals (generators); short scripts paste the update rules above (no one-line numpy form)

def _sgd_interval(ivs: list[Any], infos: list[Any], attrs: dict[str, Any], out: ValueInfo) -> iv.Interval:
    p, g, buf = ivs[0], ivs[1], ivs[2]
    grad = iv.magnitude(g) + attrs["weight_decay"] * iv.magnitude(p)
    if attrs["momentum"]:
        velocity = attrs["momentum"] * iv.magnitude(buf) + (1 - attrs["dampening"]) * grad
        grad = grad + attrs["momentum"] * velocity if attrs["nesterov"] else velocity
    return iv.add(p, iv.symmetric(attrs["lr"] * grad))


def _adam_interval(ivs: list[Any], infos: list[Any], attrs: dict[str, Any], out: ValueInfo) -> iv.Interval:
    """|m_hat / (sqrt(v_hat) + eps)| is at most |m_hat| / eps (state drawn apart from the gradient)."""
    p, g, m = ivs[0], ivs[1], ivs[2]
    grad = iv.magnitude(g) + attrs["weight_decay"] * iv.magnitude(p)
    m_hat = max(iv.magnitude(m), grad) / (1 - attrs["beta1"] ** attrs["step"])
    ratio = m_hat / attrs["eps"] if attrs["eps"] > 0 else math.inf
    return iv.add(p, iv.symmetric(attrs["lr"] * ratio))


# ---- loss scaling: GradScaler's unscale_ and its inf check (torch._amp_foreach_non_finite_check_and_unscale_)

def _infer_grad_op(what: str, result: Callable[[ValueInfo], ValueInfo]) -> Callable[..., Typed]:
    """The type rule of a loss-scaling op on one float gradient tensor."""
    def rule(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
        (g,) = ops
        assert g is not None
        if g.is_scalar:
            raise IRError(f"{what}: grad must be a tensor, not a Python number")
        require_float(g, f"{what}: grad")
        return Typed(result(g))
    return rule


_infer_unscale = _infer_grad_op("amp_unscale", lambda g: tensor(g.shape, g.dtype))
_infer_found_inf = _infer_grad_op("amp_found_inf", lambda g: tensor((), "float32"))  # GradScaler's found_inf flag


def amp_unscale(grad, inv_scale=1.0) -> np.ndarray:
    """grad * inv_scale (GradScaler.unscale_ multiplies by the float32 reciprocal of the scale)."""
    return np.asarray(grad) * inv_scale


def amp_found_inf(grad) -> np.ndarray:
    """1.0 where any element of grad is inf or NaN, else 0.0 (the found_inf GradScaler.step skips on)."""
    return np.asarray(0.0 if np.all(np.isfinite(np.asarray(grad))) else 1.0)


def _torch_unscale(c: TorchCall) -> str:
    g, inv = c.args[0], c.attrs["inv_scale"]
    return (f"(lambda g: (torch._amp_foreach_non_finite_check_and_unscale_([g], torch.zeros(1, device=g.device), "
            f"torch.full((1,), {inv!r}, device=g.device)), g)[1])({g}.detach().clone())")


def _torch_found_inf(c: TorchCall) -> str:
    """The kernel's flag on a float32 copy (every 16-bit value is exact there; GradScaler's gradients are float32)."""
    g = c.args[0]
    return (f"(lambda f: (torch._amp_foreach_non_finite_check_and_unscale_([{g}.detach().float()], f, "
            f"torch.ones(1, device=f.device)), f.reshape(()))[1])(torch.zeros(1, device={g}.device))")


def _relax_unscale(c: RelaxCall) -> str:
    return f"R.op.multiply({c.arg(0)}, R.const({c.attrs['inv_scale']!r}, {c.low.dt(c.dtype)}))"


def _relax_found_inf(c: RelaxCall) -> str:
    """1.0 where any element is not finite: max over not(isfinite), as float32."""
    hint = c.low.name_of(c.node.id)
    bad = c.low.emit(f"R.op.astype(R.op.logical_not(R.op.isfinite({c.arg(0)})), {c.low.dt('float32')})",
                     f"{hint}_bad")
    return f"R.op.max({bad})"


def _unscale_interval(ivs: list[Any], infos: list[Any], attrs: dict[str, Any], out: ValueInfo) -> iv.Interval:
    return iv.mul(ivs[0], (attrs["inv_scale"], attrs["inv_scale"]))


# ---- loss scaling: GradScaler.update's scale (torch._amp_update_scale_): back off on inf, grow every interval

def _infer_update_scale(ops: list[ValueInfo | None], attrs: dict[str, Any]) -> Typed:
    """scale: a one-element float32 tensor; growth_tracker: a one-element int32 tensor; found_inf: one float32."""
    scale, tracker, found = ops
    assert scale is not None and tracker is not None and found is not None
    for name, info, dtype in (("scale", scale, "float32"), ("growth_tracker", tracker, "int32"),
                              ("found_inf", found, "float32")):
        if info.is_scalar or info.dtype != dtype or math.prod(info.shape) != 1:
            raise IRError(f"amp_update_scale: {name} must be a one-element {dtype} tensor (GradScaler's state), got "
                          f"{'a Python number' if info.is_scalar else f'{info.dtype} {list(info.shape)}'}")
    return Typed(tensor(scale.shape, "float32"))


def amp_update_scale(scale, growth_tracker, found_inf, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000) -> np.ndarray:
    """The scale after GradScaler.update (ATen's _amp_update_scale_ on the CPU): times backoff_factor where found_inf,
    else times growth_factor when this is the growth_interval-th successful step in a row, and only if that product
    is finite in float32 (the scale's dtype), else unchanged."""
    s = np.asarray(scale, dtype=np.float64)
    if float(np.asarray(found_inf).ravel()[0]) != 0.0:
        return s * backoff_factor
    if int(np.asarray(growth_tracker).ravel()[0]) + 1 != growth_interval:
        return s
    grown = s * growth_factor
    with np.errstate(over="ignore"):
        return grown if np.all(np.isfinite(grown.astype(np.float32))) else s


def _torch_update_scale(c: TorchCall) -> str:
    s, t, f = c.args
    a = c.attrs
    return (f"(lambda s, t, f, like: torch._amp_update_scale_(s, t, f, {a['growth_factor']!r}, "
            f"{a['backoff_factor']!r}, {a['growth_interval']!r}).reshape(like.shape).to(like.dtype))("
            f"{s}.detach().float().reshape(1).clone(), {t}.detach().to(torch.int32).reshape(1).clone(), "
            f"{f}.detach().float().reshape(1), {s})")  # the kernel takes float32 state (a float64 run included)


def _relax_update_scale(c: RelaxCall) -> str:
    a, f32 = c.attrs, c.low.dt("float32")
    hint = c.low.name_of(c.node.id)
    scale = c.arg(0, "float32")
    grown = c.low.emit(f"R.op.multiply({scale}, R.const({float(a['growth_factor'])!r}, {f32}))", f"{hint}_grown")
    kept = c.low.emit(f"R.op.where(R.op.isfinite({grown}), {grown}, {scale})", f"{hint}_kept")
    due = c.low.emit(f"R.op.equal(R.op.add({c.arg(1, 'int32')}, R.const(1, {c.low.dt('int32')})), "
                     f"R.const({int(a['growth_interval'])}, {c.low.dt('int32')}))", f"{hint}_due")
    calm = c.low.emit(f"R.op.where({due}, {kept}, {scale})", f"{hint}_calm")
    return (f"R.op.where(R.op.not_equal({c.arg(2, 'float32')}, R.const(0.0, {f32})), "
            f"R.op.multiply({scale}, R.const({float(a['backoff_factor'])!r}, {f32})), {calm})")


def _update_scale_interval(ivs: list[Any], infos: list[Any], attrs: dict[str, Any], out: ValueInfo) -> iv.Interval:
    lo, hi = ivs[0]
    return (min(lo * attrs["backoff_factor"], lo), max(hi * attrs["growth_factor"], hi))


_P = example_input("p", [3, 4], role="param", init={"dist": "normal", "mean": 1.0, "std": 0.1, "seed": 1})
_G = example_input("g", [3, 4], role="param", init={"dist": "normal", "std": 0.1, "seed": 2})
_M = example_input("m", [3, 4], role="param", init={"dist": "normal", "std": 0.05, "seed": 3})
_V = example_input("v", [3, 4], role="param", init={"dist": "uniform", "low": 0.001, "high": 0.01, "seed": 4})
_SGD = {"lr": 0.01, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "impl": "single"}
_ADAM = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, "decoupled": False, "step": 1,
         "impl": "single"}
OPS: list[OpSpec] = [
    OpSpec("sgd_step", "optim", ("param", "grad", "momentum_buffer?"), _SGD,
           _infer_step("sgd_step", ("param", "grad", "momentum_buffer")), sgd_step, _torch_sgd, _relax_sgd,
           _sgd_interval,
           Example((_P, _G, _M), ("p", "g", "m"), {**_SGD, "momentum": 0.9, "weight_decay": 0.01}),
           params=(0, 1, 2), attr_types={"lr": LR, "momentum": UNIT, "dampening": UNIT, "weight_decay": EPS,
                                         "nesterov": BOOL, "impl": one_of(*IMPLS)},
           tags=frozenset({"stepwise"})),
    OpSpec("adam_step", "optim", ("param", "grad", "exp_avg", "exp_avg_sq"), _ADAM,
           _infer_step("adam_step", ("param", "grad", "exp_avg", "exp_avg_sq")), adam_step, _torch_adam, _relax_adam,
           _adam_interval,
           Example((_P, _G, _M, _V), ("p", "g", "m", "v"), {**_ADAM, "weight_decay": 0.01, "decoupled": True, "step": 3}),
           params=(0, 1, 2, 3), attr_types={"lr": LR, "beta1": UNIT, "beta2": UNIT, "eps": EPS, "weight_decay": EPS,
                                            "decoupled": BOOL, "step": STEP, "impl": one_of(*IMPLS)},
           tags=frozenset({"stepwise"})),
    OpSpec("amp_unscale", "optim", ("grad",), {"inv_scale": 1.0}, _infer_unscale, amp_unscale, _torch_unscale,
           _relax_unscale, _unscale_interval,
           Example((example_input("g", [3, 4], init={"dist": "normal", "std": 1000.0, "seed": 5}),), ("g",),
                   {"inv_scale": 2.0**-10}),
           attr_types={"inv_scale": LR}, relax_dtype=lambda c: c.dtype),
    OpSpec("amp_found_inf", "optim", ("grad",), {}, _infer_found_inf, amp_found_inf, _torch_found_inf,
           _relax_found_inf, lambda ivs, infos, attrs, out: (0.0, 1.0),
           Example((example_input("g", [3, 4]),), ("g",)),
           relax_dtype=lambda c: "float32"),
    OpSpec("amp_update_scale", "optim", ("scale", "growth_tracker", "found_inf"),
           {"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}, _infer_update_scale,
           amp_update_scale, _torch_update_scale, _relax_update_scale, _update_scale_interval,
           Example((example_input("scale", [1], init={"dist": "constant", "value": 65536.0}, dtype="float32"),
                    example_input("tracker", [1], init={"dist": "constant", "value": 1999}, dtype="int32"),
                    example_input("found", [1], init={"dist": "constant", "value": 0.0}, dtype="float32")),
                   ("scale", "tracker", "found")),
           attr_types={"growth_factor": LR, "backoff_factor": UNIT, "growth_interval": STEP},
           relax_dtype=lambda c: "float32"),
]
