"""PyTorch executors on the CPU: declared dtypes (eager) and bf16 autocast. XLA executors build on these hooks.

A precision policy is a graph rewrite (`policy_graph`): the graph whose declared dtypes the configuration
promises. The rewrites shared by the torch and XLA policies live here.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from typing import Any

import numpy as np

from .. import outcome as oc
from ..dtypes import FLOAT_FORMATS, FP8, is_float
from ..identifiers import fresh_name
from ..ir import Graph, Input, Node, infer
from ..ops import OPS, ValueInfo, is_cast, tagged
from ..policy import Policy
from .base import Executor, Inputs
from .torch_render import render_function

# torch.autocast op lists, read off the op records' tags. Measured on torch 2.9.1 / torch_xla 2.9.0 and
# checked by tests/test_xla_executors.py (the policy graph's dtypes must match what autocast returns).
AUTOCAST_BF16 = Policy("autocast-bf16", "torch.autocast(dtype=torch.bfloat16)", "autocast(bfloat16)")  # CPU and XLA
AUTOCAST_LOWER = tagged(OPS, "autocast-lower")
CPU_AUTOCAST_LOWER = AUTOCAST_LOWER | tagged(OPS, "autocast-lower-cpu")
CPU_AUTOCAST_FP32 = tagged(OPS, "autocast-fp32-cpu")  # the 3-d pools (softmax and norms run as given on CPU)


def _value_types(inputs: tuple[Input, ...], nodes: list[Node]) -> dict[str, ValueInfo]:
    """Static types of the values of a partial graph."""
    probe = next((i.name for i in inputs if i.kind == "tensor"), None)
    if probe is None:
        return {}
    return infer(Graph(inputs, tuple(nodes), (probe,))).values


def autocast_graph(graph: Graph, lower: frozenset[str], fp32: frozenset[str], dtype: str = "bfloat16") -> Graph:
    """The graph autocast runs: float operands of lower-list ops cast to `dtype`, of fp32-list ops to float32.

    Like autocast's cached_cast, only eligible tensors are cast (floating point, not float64; Python scalars
    never); every other op runs on whatever dtypes reach it, with PyTorch promotion.
    """
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    nodes: list[Node] = []
    casts: dict[tuple[str, str], str] = {}
    for node in graph.nodes:
        target = dtype if node.op in lower else ("float32" if node.op in fp32 else None)
        if target is None:
            nodes.append(node)
            continue
        values = _value_types(graph.inputs, nodes)
        operands: list[Any] = []
        for operand in node.inputs:
            info = values.get(operand) if isinstance(operand, str) else None
            if info is None or info.is_scalar or not is_float(info.dtype) or info.dtype in ("float64", target):
                operands.append(operand)
                continue
            if (operand, target) not in casts:
                casts[(operand, target)] = fresh_name(f"{operand}_to_{target}", taken)
                nodes.append(Node(casts[(operand, target)], "astype", (operand,), {"dtype": target}))
            operands.append(casts[(operand, target)])
        nodes.append(replace(node, inputs=tuple(operands)))
    return Graph(graph.inputs, tuple(nodes), graph.outputs)


def computed_in(graph: Graph, ops: frozenset[str] | None, dtype: str, declared: tuple[str, ...] = ("float32",)) -> Graph:
    """Each op of `ops` (None: every op) whose result is declared in one of `declared` computes in `dtype`.

    The op's tensor operands of a `declared` dtype are cast to `dtype`, the op runs there, and its result is cast
    back to its declared dtype under the op's own name, so the rest of the graph sees what it saw. Neuron's
    --auto-cast promises this of float32 ops; torch.autocast("xla") does it inside an op it leaves alone but
    whose decomposition's contractions it lowers (scaled_dot_product_attention: tag autocast-inner-xla).
    """
    typed = infer(graph)
    taken = {i.name for i in graph.inputs} | {n.id for n in graph.nodes}
    nodes: list[Node] = []
    for node in graph.nodes:
        out = typed.values[node.id].dtype
        if is_cast(node.op) or (ops is not None and node.op not in ops) or out not in declared:
            nodes.append(node)
            continue
        operands = []
        for operand in node.inputs:
            info = typed.values.get(operand) if isinstance(operand, str) else None
            if info is not None and not info.is_scalar and info.dtype in declared:
                if dtype in FP8:  # Neuron's documented caveat: out of range is the user's risk, judged as saturating
                    top = FLOAT_FORMATS[dtype].max_value
                    clamped = fresh_name(f"{operand}_within_{dtype}_for_{node.id}", taken)
                    nodes.append(Node(clamped, "clamp", (operand,), {"min": -top, "max": top}))
                    operand = clamped
                cast = fresh_name(f"{operand}_to_{dtype}_for_{node.id}", taken)
                nodes.append(Node(cast, "astype", (operand,), {"dtype": dtype}))
                operand = cast
            operands.append(operand)
        inner = fresh_name(f"{node.id}_{dtype}", taken)
        nodes.append(replace(node, id=inner, inputs=tuple(operands)))
        nodes.append(Node(node.id, "astype", (inner,), {"dtype": out}))
    return Graph(graph.inputs, tuple(nodes), graph.outputs)


def recast_inputs(graph: Graph, role: str | None, dtype: str, only: tuple[str, ...] | None = None) -> Graph:
    """The graph with floating-point tensor inputs of `role` (None: any) declared as `dtype` (model.to(dtype) for params).

    `only` limits the rewrite to inputs declared in one of those dtypes.
    """
    inputs = tuple(replace(i, dtype=dtype) if (role is None or i.role == role) and i.kind == "tensor"
                   and is_float(i.dtype) and (only is None or i.dtype in only) else i for i in graph.inputs)
    return Graph(inputs, graph.nodes, graph.outputs)


def host(tensors: list[Any]) -> list[np.ndarray]:
    """Tensors (any device) as float64 numpy arrays."""
    import torch

    return [t.detach().to("cpu").to(torch.float64).numpy() for t in tensors]


def tensor_dtypes(tensors: list[Any]) -> list[str]:
    """The dtypes tensors report, as the IR names them."""
    return [str(t.dtype).replace("torch.", "") for t in tensors]


def host_grads(trained: dict[str, Any]) -> dict[str, Any]:
    """forward_backward's gradients as the info keys of Executor.execute (after the device has synced)."""
    if "grads" not in trained:
        return dict(trained)
    return {"grads": host(trained["grads"]), "grad_dtypes": tensor_dtypes(trained["grads"])}


class TorchExecutor(Executor):
    """Runs the rendered PyTorch function; subclasses change device, parameter dtypes and context."""

    name = "torch/eager"
    description = "PyTorch eager on the CPU in the declared dtypes (the semantic oracle for status and dtypes)"
    group = "torch"
    requires = ("torch",)

    def packages(self) -> tuple[str, ...]:
        return ("torch",)

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy, "device": "cpu"}

    def describe(self) -> dict[str, Any]:
        if getattr(self, "_described", None) is None:
            self._described = super().describe()
        return self._described

    def run_case(self, graph: Graph, input_sets: list[Inputs]) -> list[oc.Outcome]:
        """Base run_case; every outcome records the executor's description (device, versions, settings)."""
        outcomes = super().run_case(graph, input_sets)
        for o in outcomes:
            o.info.setdefault("describe", self.describe())
        return outcomes

    # ---- hooks
    def device(self) -> Any:
        """The torch device tensors live on."""
        return "cpu"

    def input_dtype(self, inp: Input) -> str:
        """Dtype an input is created in under this policy (the declared one by default)."""
        return inp.dtype

    def context(self) -> contextlib.AbstractContextManager:
        """Context the graph runs in (autocast for the autocast policies)."""
        return contextlib.nullcontext()

    def sync(self) -> None:
        """Wait for the device (XLA executes lazily)."""

    # ---- executor
    def prepare(self, graph: Graph) -> Any:
        import torch  # noqa: F401 - the rendered code needs it in its namespace
        import torch.nn.functional as F  # noqa: N812

        namespace: dict[str, Any] = {"torch": torch, "F": F, "math": math, "device": self.device()}
        exec(compile(render_function(graph), f"<precfuzz {self.name}>", "exec"), namespace)  # noqa: S102 - our own render
        return namespace["graph"]

    def make_input(self, inp: Input, value: np.ndarray) -> Any:
        """A torch tensor (or Python scalar) for one input value."""
        import torch

        if inp.kind == "scalar":
            return float(value) if is_float(inp.dtype) else int(value)
        dtype = getattr(torch, self.input_dtype(inp))
        # np.ascontiguousarray would turn a 0-dim array into shape [1] and change PyTorch's promotion
        return torch.from_numpy(np.array(value, dtype=np.float64, copy=True)).to(dtype).to(self.device())

    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        args = [self.make_input(inp, inputs[inp.name]) for inp in graph.inputs]
        outs, trained = self.forward_backward(prepared, graph, args)
        self.sync()
        return host(outs), tensor_dtypes(outs), host_grads(trained)

    def forward_backward(self, prepared: Any, graph: Graph, args: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        """The outputs under the policy's context; on a training case also the loss's gradients with respect to
        graph.wrt from the backend's own autograd (`grads`), or why its backward raised (`backward_error`).

        The forward runs under the context (autocast), the backward after it, as PyTorch's AMP recipe has it."""
        import torch

        wrt = [k for k, inp in enumerate(graph.inputs) if inp.grad]
        if not wrt:
            with torch.no_grad(), self.context():
                return list(prepared(*args)), {}
        leaves = [args[k].detach().requires_grad_(True) for k in wrt]
        for k, leaf in zip(wrt, leaves):
            args[k] = leaf
        with self.context():
            outs = list(prepared(*args))
        if not outs[0].requires_grad:  # the loss does not depend on them: every gradient is zero
            return outs, {"grads": [torch.zeros_like(leaf) for leaf in leaves]}
        try:
            grads = torch.autograd.grad(outs[0], leaves, allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - the backward's failure is a value beside the forward's outputs
            return outs, {"backward_error": {"type": type(exc).__name__, "message": (str(exc) or repr(exc))[:4000]}}
        return outs, {"grads": [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]}


    # ---- repro script
    ROUND_TO = '''
        def round_to(values, dtype):
            """Round float64 values to `dtype` the way torch does; back as float64."""
            if dtype.startswith("int"):
                return np.trunc(values)
            if dtype == "bool":
                return np.asarray(values) != 0
            return torch.from_numpy(np.asarray(values, dtype=np.float64)).to(getattr(torch, dtype)).double().numpy()
        '''

    def repro_imports(self) -> str:
        """Import lines of the script."""
        return "import torch\nimport torch.nn.functional as F\n"

    def repro_setup(self) -> str:
        """Lines that create `device` (and anything else run_backend needs)."""
        return 'device = "cpu"\n'

    def repro_context(self) -> str:
        """The context the graph runs under besides torch.no_grad(), as source ('' for none)."""
        return ""

    def repro_sync(self) -> str:
        """The statement that waits for a lazy device ('' when eager)."""
        return ""

    def repro_call(self) -> str:
        """Lines of run_backend that call graph(*args) into `outs`, indented 4."""
        ctx = ", ".join(["torch.no_grad()"] + ([self.repro_context()] if self.repro_context() else []))
        sync = f"    {self.repro_sync()}\n" if self.repro_sync() else ""
        return f"    with {ctx}:\n        outs = graph(*args)\n" + sync

    def repro_parts(self, graph: Graph) -> Any:
        from ..export import ReproParts

        policy = self.policy_graph(graph)
        make = []
        for inp in graph.inputs:
            if inp.kind == "scalar":
                make.append(f"{'float' if is_float(inp.dtype) else 'int'}(inputs[{inp.name!r}])")
            else:
                make.append(f"torch.from_numpy(inputs[{inp.name!r}]).to(torch.{self.input_dtype(inp)}).to(device)")
        body = (self.repro_setup() + "\n\n" + render_function(graph) + "\n\n"
                "def run_backend(inputs):\n"
                "    args = [\n" + "".join(f"        {m},\n" for m in make) + "    ]\n"
                + self.repro_call()
                + "    return ([o.detach().to('cpu').double().numpy() for o in outs],\n"
                "            [str(o.dtype).replace('torch.', '') for o in outs])\n")
        numeric = self.numeric_graph(graph)
        return ReproParts(self.repro_imports(), self.ROUND_TO, body, policy, self.describe(), self.repro_env() or None,
                          numeric if numeric != policy else None, self.judge_numbers, self.dtype_contract,
                          self.not_judged)

    def repro_env(self) -> dict[str, str]:
        """Environment the script sets (with setdefault) before importing the backend."""
        return self.env()


class TorchAutocastExecutor(TorchExecutor):
    """CPU under torch.autocast('cpu', dtype=torch.bfloat16)."""

    name = "torch/autocast"
    precision = AUTOCAST_BF16

    def context(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)

    def policy_graph(self, graph: Graph) -> Graph:
        return autocast_graph(graph, CPU_AUTOCAST_LOWER, CPU_AUTOCAST_FP32)

    def repro_context(self) -> str:
        return "torch.autocast('cpu', dtype=torch.bfloat16)"


