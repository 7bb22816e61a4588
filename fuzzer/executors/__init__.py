"""Executors: one explicit registry of every configuration, instantiated lazily by name."""

from __future__ import annotations

import importlib
from typing import Any

from .base import Executor, Unsupported
from .neuron import registry_entries as neuron_registry_entries

# name -> ("module:Class", constructor kwargs). The one list to touch when adding a configuration.
REGISTRY: dict[str, tuple[str, dict[str, Any]]] = {
    "reference": ("fuzzer.executors.reference:ReferenceExecutor", {}),
    "emulated": ("fuzzer.executors.reference:EmulatedExecutor", {}),
    "torch/eager": ("fuzzer.executors.torch_exec:TorchExecutor", {}),
    "torch/autocast": ("fuzzer.executors.torch_exec:TorchAutocastExecutor", {}),
    "xla/native": ("fuzzer.executors.xla_exec:XlaExecutor", {}),
    "xla/bf16-model": ("fuzzer.executors.xla_exec:XlaBf16ModelExecutor", {}),
    "xla/fp16-model": ("fuzzer.executors.xla_exec:XlaFp16ModelExecutor", {}),
    "xla/autocast": ("fuzzer.executors.xla_exec:XlaAutocastExecutor", {}),
    "xla/legacy-bf16": ("fuzzer.executors.xla_exec:XlaLegacyBf16Executor", {}),  # own worker: env sets XLA_USE_BF16
    "debug/faults": ("fuzzer.executors.faults:FaultExecutor", {}),
    "tvm/default": ("fuzzer.executors.tvm_exec:TVMExecutor", {"pipeline": "default"}),
    "tvm/decompose": ("fuzzer.executors.tvm_exec:TVMExecutor", {"pipeline": "decompose"}),
    "tvm/decompose-inference": ("fuzzer.executors.tvm_exec:TVMExecutor", {"pipeline": "decompose-inference"}),
    "tvm/train": ("fuzzer.executors.tvm_exec:TVMTrainExecutor", {}),
    "tvm/passes": ("fuzzer.executors.tvm_passes_exec:TVMPassSequenceExecutor", {}),
    "tvm/mixed-precision": ("fuzzer.executors.tvm_mixed:TVMMixedPrecisionExecutor", {"out_dtype": "float32"}),
    "tvm/frontend": ("fuzzer.executors.tvm_frontend:TVMFrontendExecutor", {}),
}
REGISTRY.update(neuron_registry_entries())  # neuron/<setting>: one per row of neuron.NEURON_SETTINGS

ORACLE_EXECUTORS = ("reference", "emulated")
# Opt-in until triaged: each compiles per case (torch.export too for tvm/frontend), and new keys would fail smoke.
OPT_IN = ("tvm/passes", "tvm/mixed-precision", "tvm/frontend", "tvm/train", "xla/fp16-model")
HIDDEN = ("debug/faults",) + OPT_IN  # never selected by default; name them explicitly (or 'tvm/*')


def create(name: str) -> Executor:
    """Instantiate the executor called `name` (KeyError lists the known ones)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown executor {name!r} (known: {', '.join(REGISTRY)})")
    target, kwargs = REGISTRY[name]
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


def availability() -> dict[str, str | None]:
    """Every registered executor -> None if available here, else the reason."""
    return {name: create(name).availability() for name in REGISTRY}


__all__ = ["REGISTRY", "ORACLE_EXECUTORS", "HIDDEN", "OPT_IN", "Executor", "Unsupported", "create", "availability"]
