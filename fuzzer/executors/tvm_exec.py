"""TVM Relax executors on the CPU: the graph lowered with R.BlockBuilder, a named pass pipeline, tvm.compile, the Relax VM.

A configuration is a pipeline name: PIPELINES maps it to the relax.transform passes applied before
tvm.compile (each a pass name, or a (name, kwargs) pair). The repro script holds the same list as PASSES.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import Graph
from ..ops import has_training_mode
from ..tvm_passes import PIPELINES, PassEntry  # noqa: F401 - re-exported: the pipelines are plain data there
from .base import Executor, HarnessLimit, Inputs, Unsupported, raised_in
from .tvm_render import bridged, render_runtime

# One line per pipeline for `precfuzz executors`.
DESCRIPTIONS: dict[str, str] = {
    "default": "hand-lowered Relax (R.BlockBuilder, explicit casts, float32 accumulators) through TVM's default pipeline",
    "decompose": "hand-lowered Relax after DecomposeOpsForTraining (batch_norm from batch statistics)",
    "decompose-inference": "hand-lowered Relax after DecomposeOpsForInference (batch_norm from running statistics)",
    "train": ("TVM's training flow: DecomposeOpsForTraining, then relax.transform.Gradient on a training case's loss "
              "(the forward alone on other cases)"),
}

# The semantics a pipeline's passes promise, where they differ from the graph as given: DecomposeOpsForTraining
# computes batch_norm from the batch's statistics (training mode), DecomposeOpsForInference from the running ones.
BATCH_NORM_TRAINING: dict[str, bool] = {"decompose": True, "decompose-inference": False, "train": True}

# Compiled Relax VMs shared by every TVM executor of one worker process, keyed by the structural hash of the
# module after its pipeline's passes: a pipeline whose passes leave a graph alone compiles nothing new, and
# neither does a case that differs from an earlier one only in its values (the minimizer's bread and butter).
_PROGRAMS: OrderedDict[int, tuple[Any, Any, str]] = OrderedDict()  # hash -> (module after passes, vm, compiled by)
PROGRAM_CACHE_SIZE = int(os.environ.get("PRECFUZZ_PROGRAM_CACHE", "64"))  # 0 turns the sharing off (make bench)

# Messages of TVM errors that state a backend limitation (an op/dtype it cannot lower), not a wrong answer.
LIMITATION_PATTERNS = (
    "not supported",
    "unsupported",
    "does not support",
    "not implemented",
    "only support",
    "cannot handle",
    "must be float, but got",
    "fprimalgradient has not been registered",  # relax.transform.Gradient: an op without a registered gradient
)


class TVMExecutor(Executor):
    """Compiles the rendered Relax module with one pipeline for target llvm and runs it on tvm.cpu()."""

    group = "tvm"
    requires = ("tvm",)

    def __init__(self, pipeline: str = "default", cache_size: int = 32) -> None:
        if pipeline not in PIPELINES:
            raise KeyError(f"unknown TVM pipeline {pipeline!r} (known: {', '.join(PIPELINES)})")
        self.pipeline = pipeline
        self.passes = PIPELINES[pipeline]
        self.name = f"tvm/{pipeline}"
        self.description = DESCRIPTIONS[pipeline]
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[dict[str, Any], Any]] = OrderedDict()

    def packages(self) -> tuple[str, ...]:
        return ("apache-tvm", "ml_dtypes")

    def settings(self) -> dict[str, Any]:
        out = {"pipeline": self.pipeline, "passes": render_passes(self.passes), "target": "llvm",
               "opt_level": 3, "device": "cpu"}
        if self.pipeline in BATCH_NORM_TRAINING:
            out["batch_norm"] = "training (batch statistics)" if BATCH_NORM_TRAINING[self.pipeline] else "inference"
        return out

    def policy_graph(self, graph: Graph) -> Graph:
        """The graph with the semantics this pipeline's passes promise (batch_norm mode, see BATCH_NORM_TRAINING)."""
        return self.with_batch_norm_mode(graph, BATCH_NORM_TRAINING.get(self.pipeline))

    @staticmethod
    def with_batch_norm_mode(graph: Graph, mode: bool | None) -> Graph:
        """The graph with every batch_norm in training (True) or inference (False) mode; None leaves it alone."""
        if mode is None or not any(has_training_mode(n.op) for n in graph.nodes):
            return graph
        nodes = tuple(replace(n, attrs={**n.attrs, "training": mode}) if has_training_mode(n.op) else n for n in graph.nodes)
        return Graph(graph.inputs, nodes, graph.outputs)

    def bridged(self, graph: Graph) -> frozenset[str]:
        return frozenset(bridged(self.policy_graph(graph)))

    def program_graph(self, graph: Graph) -> Graph:
        """The graph this executor lowers to Relax before its passes (the policy graph by default)."""
        return self.policy_graph(graph)

    def namespace(self) -> dict[str, Any]:
        """Globals the rendered source runs in (the imports of the repro script)."""
        import ml_dtypes
        import tvm
        from tvm import relax

        return {"tvm": tvm, "R": relax, "np": np, "ml_dtypes": ml_dtypes}

    def prepare(self, graph: Graph) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        key = graph.digest + render_passes(self.passes)
        if PROGRAM_CACHE_SIZE and key in self._cache:  # PRECFUZZ_PROGRAM_CACHE=0: no reuse at all
            self._cache.move_to_end(key)
            namespace, vm, info = self._cache[key]
            return namespace, vm, {**info, "compiled": False}
        namespace = self.namespace()
        try:
            source = render_runtime(graph)
        except Exception as exc:  # noqa: BLE001 - our lowering's gap is a coverage gap, not a TVM bug
            raise HarnessLimit(f"no Relax lowering: {type(exc).__name__}: {exc}") from exc
        exec(compile(source, f"<precfuzz {self.name}>", "exec"), namespace)  # noqa: S102 - our own render
        vm, info = self.compiled(namespace["apply_passes"](namespace["build_module"](), list(self.passes)))
        if PROGRAM_CACHE_SIZE:
            self._cache[key] = (namespace, vm, info)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return namespace, vm, info

    def compiled(self, mod: Any) -> tuple[Any, dict[str, Any]]:
        """A Relax VM for a transformed module: from the worker's program cache, else compiled (and cached)."""
        import tvm
        import tvm_ffi
        from tvm import relax

        program = int(tvm_ffi.structural_hash(mod)) & 0xFFFFFFFFFFFFFFFF
        hit = _PROGRAMS.get(program) if PROGRAM_CACHE_SIZE else None
        if hit is not None and tvm_ffi.structural_equal(hit[0], mod):
            _PROGRAMS.move_to_end(program)
            return hit[1], {"program": f"{program & 0xFFFFFFFFFFFF:012x}", "compiled": False, "shared_with": hit[2]}
        with tvm.transform.PassContext(opt_level=3):
            executable = tvm.compile(mod, target="llvm")
        vm = relax.VirtualMachine(executable, tvm.cpu())
        if PROGRAM_CACHE_SIZE:
            _PROGRAMS[program] = (mod, vm, self.name)
            while len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
                _PROGRAMS.popitem(last=False)
        return vm, {"program": f"{program & 0xFFFFFFFFFFFF:012x}", "compiled": True}

    def execute(self, prepared: tuple[dict[str, Any], Any, dict[str, Any]], graph: Graph,
                inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        namespace, vm, info = prepared
        outputs, dtypes = namespace["run_module"](vm, inputs)
        return outputs, dtypes, dict(info)

    def classify(self, stage: str, exc: BaseException) -> str:
        """Unsupported: our own Unsupported, or a TVM error (at compile) whose message states a limitation."""
        return classify_limitation(stage, exc, is_tvm_error)

    # ---- repro script
    ROUND_TO = '''
        def round_to(values, dtype):
            """Round float64 values to `dtype` as TVM receives them (numpy / ml_dtypes casts, RNE); back as float64."""
            values = np.asarray(values, dtype=np.float64)
            if dtype.startswith("int"):
                return np.trunc(values)
            if dtype == "bool":
                return values != 0
            return values.astype(getattr(ml_dtypes, dtype, dtype)).astype(np.float64)  # bfloat16, float8_*
        '''

    def repro_imports(self) -> str:
        """Import lines of the script, and the pass list under test (PASSES) where a reader sees it first."""
        return (f"{NO_TORCH}\nimport ml_dtypes\nimport tvm\nfrom tvm import relax as R\n\n"
                "# The Relax passes applied before tvm.compile; PASSES = [] is TVM's default pipeline.\n"
                f"PASSES = {render_passes(self.passes)}\n")

    def repro_parts(self, graph: Graph) -> Any:
        from ..export import ReproParts

        body = (render_runtime(graph) + "\n\ndef run_backend(inputs):\n"
                '    """Compile with PASSES and run: (float64 outputs, dtype names)."""\n'
                "    return run_module(compile_module(PASSES), inputs)\n")
        return ReproParts(self.repro_imports(), self.ROUND_TO, body, self.policy_graph(graph), self.describe(),
                          self.env() or None)


# `import tvm` imports torch where it is installed, only to JIT-compile a torch DLPack addon into ~/.cache/tvm-ffi
# (tvm_ffi._optional_torch_c_dlpack, tvm.relax.base_py_module): 30-90 s on a first run (a fresh HOME), 2 s of
# importing torch on every later one. A script running a Relax module on numpy arrays needs no torch: it says so.
NO_TORCH = ('sys.modules.setdefault("torch", None)  # TVM would import torch only to JIT-compile a DLPack addon '
            '(30-90 s on a first run); not needed here')


def render_passes(passes: tuple[PassEntry, ...] | list[PassEntry]) -> str:
    """A pass list as Python source (double-quoted names, (name, kwargs) tuples)."""
    items = [json.dumps(p) if isinstance(p, str) else f"({json.dumps(p[0])}, {p[1]!r})" for p in passes]
    return "[" + ", ".join(items) + "]"


def classify_limitation(stage: str, exc: BaseException, from_backend: Any) -> str:
    """'unsupported' for our own Unsupported or a backend error at compile stating a limitation, else 'error'."""
    if isinstance(exc, Unsupported):
        return "unsupported"
    if stage == "compile" and from_backend(exc) and is_limitation(str(exc)):
        return "unsupported"
    return "error"


def is_tvm_error(exc: BaseException) -> bool:
    """True for errors TVM raised: its own error classes, or a builtin one thrown from TVM's Python or C++ code."""
    if (type(exc).__module__ or "").startswith(("tvm", "tvm_ffi")):
        return True
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "tvm_ffi" in filename or "/tvm/" in filename or filename.endswith((".cc", ".h", ".pxi")):
            return True
        tb = tb.tb_next
    return False


def is_limitation(message: str) -> bool:
    """True when a TVM error message states that an op or dtype is not supported."""
    text = message.lower()
    return any(p in text for p in LIMITATION_PATTERNS)


class TVMTrainExecutor(TVMExecutor):
    """`tvm/train`: TVM's training flow (DecomposeOpsForTraining, then relax.transform.Gradient, then tvm.compile's
    legalization and build, as tvm.relax.training sets it up); on a training case it runs main_adjoint and returns
    the loss's gradients with respect to graph.wrt beside the outputs."""

    def __init__(self, cache_size: int = 32) -> None:
        super().__init__("train", cache_size)

    def prepare(self, graph: Graph) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        if not graph.wrt:
            return super().prepare(graph)
        namespace = self.namespace()
        try:
            source = render_runtime(graph, separate_outputs=True)
        except Exception as exc:  # noqa: BLE001 - our lowering's gap is a coverage gap, not a TVM bug
            raise HarnessLimit(f"no Relax lowering: {type(exc).__name__}: {exc}") from exc
        exec(compile(source, f"<precfuzz {self.name}>", "exec"), namespace)  # noqa: S102 - our own render
        mod = namespace["apply_passes"](namespace["build_module"](), list(self.passes))
        try:
            mod = gradient_of(mod, graph.wrt)
        except Exception as exc:  # noqa: BLE001 - re-raised, marked with the pass that refused
            raised_in(exc, "relax.transform.Gradient")
            raise
        vm, info = self.compiled(mod)
        return namespace, vm, {**info, "function": "main_adjoint"}

    def execute(self, prepared: tuple[dict[str, Any], Any, dict[str, Any]], graph: Graph,
                inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        namespace, vm, info = prepared
        if not graph.wrt:
            return super().execute(prepared, graph, inputs)
        args = namespace["main_args"](inputs)
        value, grads = vm["main_adjoint"](*args)
        outs = [value] if len(graph.outputs) == 1 else list(value)
        info = {k: v for k, v in info.items() if k != "function"}
        info.update(grads=[g.numpy().astype(np.float64) for g in grads], grad_dtypes=[str(g.dtype) for g in grads])
        return [o.numpy().astype(np.float64) for o in outs], [str(o.dtype) for o in outs], info


def gradient_of(mod: Any, wrt: tuple[str, ...]) -> Any:
    """relax.transform.Gradient of main's returned loss (its first output) with respect to the parameters `wrt`."""
    from tvm import relax

    params = [p for p in mod["main"].params if p.name in wrt]
    return relax.transform.Gradient("main", require_grads=params, target_index=0)(mod)
