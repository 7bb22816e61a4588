"""`precfuzz audit --train` (issue 36): one training step of the user's model, checked like its forward pass.

The model file may define `loss(output, *inputs)` (default: the mean of the squared output, in float32) and
`optimizer(params)` (default: AdamW, lr 1e-4). The module and its loss are captured as one graph whose output is
the loss and whose parameters are the gradient's inputs (a training case: every executor's autodiff against float64),
and the optimizer's step of every parameter tensor, with the float64 gradient, is a second case: its updates are
judged per parameter tensor (oracles.training_hazards: an update lost below half an ULP of bfloat16 weights, a
non-finite fp16 Adam step) on every policy and backend.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..dtypes import is_float, round_to
from ..ir import Case, Graph, Input, Node, infer

DEFAULT_OPTIMIZER: dict[str, Any] = {"kind": "adamw", "lr": 1e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                     "weight_decay": 0.01}
KINDS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}  # torch.optim classes a step case models


class TrainingError(ValueError):
    """A model file whose loss or optimizer an audit cannot take (one line)."""


def loss_module(model: Any, loss: Callable[..., Any] | None) -> Any:
    """The model and its loss as one module: forward(*inputs) is the 0-dim loss."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            out = self.model(*inputs)
            if loss is not None:
                return loss(out, *inputs)
            first = out[0] if isinstance(out, (tuple, list)) else out
            return first.float().square().mean()

    return WithLoss()


def optimizer_spec(make: Callable[..., Any] | None, model: Any, where: str) -> tuple[dict[str, Any], str]:
    """(the step's hyperparameters, a note) from the file's optimizer(params), or AdamW lr 1e-4 without one."""
    if make is None:
        return dict(DEFAULT_OPTIMIZER), "optimizer: AdamW(lr=1e-4) (the default; define optimizer(params) for yours)"
    try:
        opt = make(list(model.parameters()))
    except Exception as exc:  # noqa: BLE001 - the user's code
        raise TrainingError(f"{where}: optimizer(params) raised {type(exc).__name__}: {exc}") from None
    kind = KINDS.get(type(opt).__name__)
    group = getattr(opt, "param_groups", [{}])[0]
    if kind is None:
        return dict(DEFAULT_OPTIMIZER), (f"optimizer: {type(opt).__name__} is not modelled (SGD, Adam and AdamW are): "
                                         "the update hazards are judged for AdamW(lr=1e-4)")
    lr = group.get("lr", DEFAULT_OPTIMIZER["lr"])
    spec: dict[str, Any] = {"kind": kind, "lr": float(lr), "weight_decay": float(group.get("weight_decay", 0.0))}
    if kind == "sgd":
        spec.update(momentum=float(group.get("momentum", 0.0)), nesterov=bool(group.get("nesterov", False)))
        if group.get("dampening", 0.0):
            return dict(DEFAULT_OPTIMIZER), "optimizer: SGD with dampening is not modelled: judged for AdamW(lr=1e-4)"
    else:
        beta1, beta2 = group.get("betas", (0.9, 0.999))
        spec.update(beta1=float(beta1), beta2=float(beta2), eps=float(group.get("eps", 1e-8)))
        if group.get("amsgrad"):
            return dict(DEFAULT_OPTIMIZER), "optimizer: amsgrad is not modelled: judged for AdamW(lr=1e-4)"
    return spec, f"optimizer: {type(opt).__name__}({', '.join(f'{k}={v}' for k, v in spec.items() if k != 'kind')})"


def describe(spec: dict[str, Any]) -> str:
    """AdamW(lr=0.0001) and the like."""
    name = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}[spec["kind"]]
    return f"{name}(lr={spec['lr']:g})"


def trainable(model: Any) -> frozenset[str]:
    """The names of the module's parameters that take a gradient (buffers, such as running statistics, do not)."""
    return frozenset(name for name, p in model.named_parameters() if p.requires_grad)


def with_gradients(case: Case, names: frozenset[str] | None = None) -> Case:
    """The captured loss graph as a training case: a gradient for every trainable floating-point parameter
    (`names`; every float parameter input when None)."""
    graph = case.graph

    def takes(i: Input) -> bool:
        return i.role == "param" and i.kind == "tensor" and is_float(i.dtype) and (names is None or i.name in names)

    if not any(takes(i) for i in graph.inputs):
        raise TrainingError("the model has no floating-point parameters to train")
    inputs = tuple(replace(i, grad=True) if takes(i) else i for i in graph.inputs)
    trained = Graph(inputs, graph.nodes, graph.outputs)
    loss = infer(trained).values[trained.outputs[0]]
    if loss.shape != () or not is_float(loss.dtype):
        raise TrainingError(f"the loss must be a 0-dim floating-point tensor, got {loss.dtype} {list(loss.shape)} "
                            "(define loss(output, *inputs) returning one)")
    return case.with_graph(trained)


STATE = {"sgd": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq"), "adamw": ("exp_avg", "exp_avg_sq")}


def state_names(spec: dict[str, Any]) -> tuple[str, ...]:
    """The optimizer state tensors a parameter carries (SGD without momentum: none)."""
    return () if spec["kind"] == "sgd" and not spec.get("momentum") else STATE[spec["kind"]]


def exact_step(spec: dict[str, Any], p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray],
               step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Step number `step` of the update rule in float64 (fuzzer.ops.optim's reference), with the state it leaves."""
    from ..ops.optim import adam_step, sgd_step

    wd = spec["weight_decay"]
    if spec["kind"] == "sgd":
        new = sgd_step(p, g, state.get("momentum_buffer"), lr=spec["lr"], momentum=spec.get("momentum", 0.0),
                       dampening=0.0, weight_decay=wd, nesterov=spec.get("nesterov", False), impl="single")
        if not spec.get("momentum"):
            return new, {}
        d = g + wd * p
        return new, {"momentum_buffer": state["momentum_buffer"] * spec["momentum"] + d}
    decoupled = spec["kind"] == "adamw"
    new = adam_step(p, g, state["exp_avg"], state["exp_avg_sq"], lr=spec["lr"], beta1=spec["beta1"],
                    beta2=spec["beta2"], eps=spec["eps"], weight_decay=wd, decoupled=decoupled, step=step, impl="single")
    d = g if decoupled or not wd else g + wd * p
    return new, {"exp_avg": state["exp_avg"] + (1 - spec["beta1"]) * (d - state["exp_avg"]),
                 "exp_avg_sq": state["exp_avg_sq"] * spec["beta2"] + (1 - spec["beta2"]) * d * d}


def advance(case: Case, spec: dict[str, Any], steps: int,
            gradients: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
            values: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                    dict[str, dict[str, np.ndarray]]]:
    """The trained parameters, their gradients and their state before step `steps` of exact (float64) training from
    `values`: steps - 1 exact steps, each with the exact gradient at the parameters it starts from."""
    names = list(case.graph.wrt)
    params = {n: np.asarray(values[n], np.float64) for n in names}
    state = {n: {s: np.zeros_like(params[n]) for s in state_names(spec)} for n in names}
    grads = gradients(params)
    for k in range(1, steps):
        for n in names:
            params[n], state[n] = exact_step(spec, params[n], grads[n], state[n], k)
        grads = gradients(params)
    return params, grads, state


def step_case(case: Case, grads: dict[str, np.ndarray], spec: dict[str, Any], step: int = 1,
              params: dict[str, np.ndarray] | None = None,
              state: dict[str, dict[str, np.ndarray]] | None = None) -> Case:
    """Optimizer step number `step` of every trained parameter with its float64 gradient (`params` and `state` as
    training left them, each rounded to the parameter's dtype; at step 1 the case's own values and zero state), as a
    case whose outputs are the updated parameters (`<name>_new`)."""
    graph = case.graph
    inputs: list[Input] = []
    nodes: list[Node] = []

    def held(name: str, dtype: str, values: np.ndarray) -> dict[str, Any]:
        return {"values": np.asarray(round_to(np.asarray(values, np.float64), dtype), np.float64).tolist()}

    for inp in graph.inputs:
        if not inp.grad or inp.name not in grads:
            continue
        weight = replace(inp, grad=False) if params is None else replace(inp, grad=False,
                                                                        init=held(inp.name, inp.dtype, params[inp.name]))
        inputs += [weight, Input(f"{inp.name}__grad", inp.shape, inp.dtype, "param", "tensor",
                                 held(inp.name, inp.dtype, grads[inp.name]))]
        for s in state_names(spec):
            init = ({"dist": "constant", "value": 0.0} if state is None
                    else held(inp.name, inp.dtype, state[inp.name][s]))
            inputs.append(Input(f"{inp.name}__{s}", inp.shape, inp.dtype, "param", "tensor", init))
        operands = (inp.name, f"{inp.name}__grad", *(f"{inp.name}__{s}" for s in state_names(spec)))
        if spec["kind"] == "sgd":
            attrs = {"lr": spec["lr"], "momentum": spec.get("momentum", 0.0), "dampening": 0.0,
                     "weight_decay": spec["weight_decay"], "nesterov": spec.get("nesterov", False), "impl": "foreach"}
            nodes.append(Node(f"{inp.name}_new", "sgd_step", operands, attrs))
        else:
            attrs = {"lr": spec["lr"], "beta1": spec["beta1"], "beta2": spec["beta2"], "eps": spec["eps"],
                     "weight_decay": spec["weight_decay"], "decoupled": spec["kind"] == "adamw", "step": step,
                     "impl": "foreach"}
            nodes.append(Node(f"{inp.name}_new", "adam_step", operands, attrs))
    graph_ = Graph(tuple(inputs), tuple(nodes), tuple(n.id for n in nodes))
    infer(graph_)
    return Case(graph_, ({},), {**case.meta, "source": f"{case.meta.get('source', 'audit')} optimizer step {step}"})
