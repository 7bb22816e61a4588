"""tvm/frontend: the graph as a torch nn.Module, torch.export'ed, imported with from_exported_program, built for llvm.

The path TVM users take. The module's forward is the same PyTorch function torch/eager runs (torch_render);
every graph input is a forward argument (no nn.Parameters, so nothing is folded into constants), and
from_exported_program runs PyTorch's decompositions as it does by default. Where this executor and the hand
lowering (tvm/default) disagree, the difference is the frontend's (dtype handling, promotion, decompositions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph, infer
from ..ops import OPS
from . import tvm_exec
from .base import Executor, HarnessLimit
from .torch_render import TORCH_DTYPE, render_function
from .tvm_exec import TVMExecutor, classify_limitation, is_tvm_error

RUNTIME = '''
TVM_DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
              "float8_e5m2": ml_dtypes.float8_e5m2}


class Program(torch.nn.Module):
    """The graph as a torch module: forward(*inputs) -> tuple of outputs."""

    def forward(self, *args):
        return graph(*args)


def import_module():
    """torch.export the module on zero example inputs and import it with from_exported_program."""
    example = tuple(torch.zeros(shape, dtype=getattr(torch, dtype)) for shape, dtype in PARAMS.values())
    exported = torch.export.export(Program(), example)
    exported.module()(*example)  # eager on the module as exported: a program PyTorch rejects is no frontend input
    return from_exported_program(exported)


def run_module(vm, inputs):
    """Run main on dtype-rounded float64 inputs; (float64 outputs, dtype names)."""
    args = []
    for name, (shape, dtype) in PARAMS.items():
        value = np.asarray(inputs[name], dtype=np.float64).astype(TVM_DTYPES.get(dtype, dtype))
        args.append(tvm.runtime.tensor(np.array(value, order="C"), tvm.cpu()))
    outs = vm["main"](*args)
    outs = [outs] if hasattr(outs, "numpy") else list(outs)
    return [o.numpy().astype(np.float64) for o in outs], [str(o.dtype) for o in outs]
'''


def render_frontend(graph: Graph) -> str:
    """The torch function, PARAMS (name -> (shape, dtype)) and the export/import/run helpers."""
    typed = infer(graph)
    if any(i.kind == "scalar" for i in graph.inputs):
        raise HarnessLimit("tvm/frontend exports tensors only; the graph has a Python-scalar input")
    params = {i.name: (list(i.shape), typed.values[i.name].dtype) for i in graph.inputs}
    return render_function(graph, "graph") + f"\n\nPARAMS = {params!r}\n" + RUNTIME


class TVMFrontendExecutor(Executor):
    """torch.nn.Module -> torch.export -> relax from_exported_program -> tvm.compile for llvm (the users' path)."""

    name = "tvm/frontend"
    group = "tvm"
    requires = ("tvm", "torch")

    def __init__(self, cache_size: int = 32) -> None:
        self.cache_size = cache_size
        self._cache: dict[str, tuple[dict[str, Any], Any, dict[str, Any]]] = {}
        self._compiler = TVMExecutor("default")  # the worker's shared program cache (tvm_exec._PROGRAMS)
        self._compiler.name = self.name

    def packages(self) -> tuple[str, ...]:
        return ("apache-tvm", "torch", "ml_dtypes")

    def settings(self) -> dict[str, Any]:
        return {"frontend": "torch.export + relax.frontend.torch.from_exported_program", "inputs": "forward args",
                "run_ep_decomposition": True, "target": "llvm", "opt_level": 3, "device": "cpu"}

    def namespace(self) -> dict[str, Any]:
        """Globals the rendered source runs in (the imports of the repro script)."""
        import math

        import ml_dtypes
        import torch
        import torch.nn.functional as F
        import tvm
        from tvm.relax.frontend.torch import from_exported_program

        return {"torch": torch, "F": F, "math": math, "tvm": tvm, "np": np, "ml_dtypes": ml_dtypes,
                "from_exported_program": from_exported_program}

    def prepare(self, graph: Graph) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        key = graph.digest
        if tvm_exec.PROGRAM_CACHE_SIZE and key in self._cache:  # PRECFUZZ_PROGRAM_CACHE=0: no reuse at all
            namespace, vm, info = self._cache[key]
            return namespace, vm, {**info, "compiled": False}
        steps = sorted({n.op for n in graph.nodes if OPS[n.op].family == "optim"})
        if steps:  # torch.optim's functional step is not a module forward torch.export captures
            raise HarnessLimit(f"tvm/frontend exports a module's forward; an optimizer step ({', '.join(steps)}) "
                               "is run by TVM's relax.training.optimizer on tvm/default instead")
        namespace = self.namespace()
        exec(compile(render_frontend(graph), f"<precfuzz {self.name}>", "exec"), namespace)  # noqa: S102 - our render
        vm, info = self._compiler.compiled(namespace["import_module"]())
        if len(self._cache) >= self.cache_size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = (namespace, vm, info)
        return namespace, vm, info

    execute = TVMExecutor.execute  # the same prepared (namespace, vm, info) triple

    def classify(self, stage: str, exc: BaseException) -> str:
        """Unsupported: our own, or a TVM/torch.export error at compile whose message states a limitation."""
        return classify_limitation(stage, exc, lambda e: is_tvm_error(e) or "torch" in (type(e).__module__ or ""))

    def repro_parts(self, graph: Graph) -> Any:
        from ..export import ReproParts

        imports = ("import math\n\nimport ml_dtypes\nimport torch\nimport torch.nn.functional as F\nimport tvm\n"
                   "from tvm import relax as R\nfrom tvm.relax.frontend.torch import from_exported_program\n")
        body = (render_frontend(graph) + "\n\ndef run_backend(inputs):\n"
                '    """Export, import, compile for the CPU and run: (float64 outputs, dtype names)."""\n'
                "    with tvm.transform.PassContext(opt_level=3):\n"
                '        vm = R.VirtualMachine(tvm.compile(import_module(), target="llvm"), tvm.cpu())\n'
                "    return run_module(vm, inputs)\n")
        return ReproParts(imports, TVMExecutor.ROUND_TO, body, graph, self.describe(), None)


__all__ = ["TVMFrontendExecutor", "render_frontend", "TORCH_DTYPE"]
