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
        # np.ascontiguousarray would turn a 0-dim array into shape [1] and change PyTorch's promotion
        return torch.from_numpy(np.array(value, dtype=np.float64, copy=True)).to(dtype).to(self.device())

    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        import torch

        args = [self.make_input(inp, inputs[inp.name]) for inp in graph.inputs]
        with torch.no_grad(), self.context():
            outs = prepared(*args)
        self.sync()
        arrays = [o.detach().to("cpu").to(torch.float64).numpy() for o in outs]
        return arrays, [str(o.dtype).replace("torch.", "") for o in outs], {}


    # ---- repro script
    ROUND_TO = '''
        def round_to(values, dtype):
            """Round float64 values to `dtype` the way torch does; back as float64."""
            if dtype.startswith("int"):
                return np.trunc(values)
            return torch.from_numpy(np.asarray(values, dtype=np.float64)).to(getattr(torch, dtype)).double().numpy()
        '''

    def repro_imports(self) -> str:
        """Import lines of the script."""
        return "import torch\nimport torch.nn.functional as F\n"

    def repro_setup(self) -> str:
        """Lines that create `device` (and anything else run_backend needs)."""
        return 'device = "cpu"\n'

    def repro_call(self) -> str:
        """Lines of run_backend that call graph(*args) into `outs`, indented 4."""
        return "    with torch.no_grad():\n        outs = graph(*args)\n"

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
        return ReproParts(self.repro_imports(), self.ROUND_TO, body, policy, self.describe(), self.env() or None)


class TorchAutocastExecutor(TorchExecutor):
    """CPU under torch.autocast('cpu', dtype=torch.bfloat16)."""

    name = "torch/autocast"
    policy = "autocast-bf16"

    def context(self) -> contextlib.AbstractContextManager:
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)

    def repro_call(self) -> str:
        return ("    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):\n"
                "        outs = graph(*args)\n")


