"""PyTorch executors on the CPU: declared dtypes (eager) and bf16 autocast. XLA executors build on these hooks."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from ..dtypes import is_float
from ..ir import Graph, Input
from .base import Executor, Inputs
from .torch_render import render_function


class TorchExecutor(Executor):
    """Runs the rendered PyTorch function; subclasses change device, parameter dtypes and context."""

    name = "torch/eager"
    group = "torch"
    requires = ("torch",)
    policy = "eager"

    def packages(self) -> tuple[str, ...]:
        return ("torch",)

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy, "device": "cpu"}

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

        namespace: dict[str, Any] = {"torch": torch, "F": F, "math": math}
        exec(compile(render_function(graph), f"<precfuzz {self.name}>", "exec"), namespace)  # noqa: S102 - our own render
        return namespace["graph"]

    def make_input(self, inp: Input, value: np.ndarray) -> Any:
        """A torch tensor (or Python scalar) for one input value."""
        import torch

        if inp.kind == "scalar":
            return float(value) if is_float(inp.dtype) else int(value)
        dtype = getattr(torch, self.input_dtype(inp))
        return torch.from_numpy(np.ascontiguousarray(value)).to(dtype).to(self.device())

    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        import torch

        args = [self.make_input(inp, inputs[inp.name]) for inp in graph.inputs]
        with torch.no_grad(), self.context():
            outs = prepared(*args)
        self.sync()
        arrays = [o.detach().to("cpu").to(torch.float64).numpy() for o in outs]
        return arrays, [str(o.dtype).replace("torch.", "") for o in outs], {}


class TorchAutocastExecutor(TorchExecutor):
    """CPU under torch.autocast('cpu', dtype=torch.bfloat16)."""

    name = "torch/autocast"
    policy = "autocast-bf16"

    def context(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)


