"""Neuron-only settings as executor variants: a small declarative table that produces registry entries.

Each row is a compiler/runtime configuration of the XLA `native` policy on PJRT_DEVICE=NEURON: neuronx-cc's
`--auto-cast` / `--auto-cast-type`, mixed-precision accumulation, the runtime's stochastic rounding (with a fixed
seed) and the compile-cache directory. Everything reaches the worker through env() (read by torch-neuronx when
it compiles and loads), and every outcome records it through describe(). Where torch-neuronx is missing the
variants are listed but unavailable, with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from ..ir import Graph
from ..ops import OPS, tagged
from .torch_exec import computed_in
from .xla_exec import XlaExecutor

UNAVAILABLE = "needs torch-neuronx and PJRT_DEVICE=NEURON"
# --auto-cast-type values the IR can express. fp8_e4m3 is documented in the neuronx-cc 2.5.0.28 release notes ("convert
# the FP32 operations selected via --auto-cast to a signed FP8 ... 4-bit exponent and 3-bit mantissa; care must be
# taken that the down-casted values are representable"): judged as PyTorch's float8_e4m3fn (max 448, no inf).
CAST_TYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "float8_e4m3fn"}
MATMULT_OPS = tagged(OPS, "contraction")  # ops on the matmult engine


@dataclass(frozen=True)
class NeuronSetting:
    """One Neuron compiler + runtime configuration."""

    auto_cast: str = "none"  # --auto-cast: none | matmult | all (fp32 ops only)
    auto_cast_type: str = "bf16"  # --auto-cast-type
    mixed_accumulation: bool | None = None  # --enable-/--disable-mixed-precision-accumulation; None: compiler default
    stochastic_rounding: bool = False  # NEURON_RT_STOCHASTIC_ROUNDING_EN
    rounding_seed: int = 1234  # NEURON_RT_STOCHASTIC_ROUNDING_SEED (fixed, so runs repeat)
    cache_dir: str = ""  # NEURON_COMPILE_CACHE_URL; "" means <tmp>/precfuzz-neuron-cache

    def cc_flags(self) -> str:
        """The NEURON_CC_FLAGS value."""
        flags = [f"--auto-cast={self.auto_cast}"]
        if self.auto_cast != "none":
            flags.append(f"--auto-cast-type={self.auto_cast_type}")
        if self.mixed_accumulation is not None:
            flags.append(f"--{'enable' if self.mixed_accumulation else 'disable'}-mixed-precision-accumulation")
        return " ".join(flags)

    def env(self) -> dict[str, str]:
        """Environment of a worker running this configuration."""
        out = {"PJRT_DEVICE": "NEURON", "NEURON_CC_FLAGS": self.cc_flags(),
               "NEURON_COMPILE_CACHE_URL": self.cache_dir or os.path.join(tempfile.gettempdir(), "precfuzz-neuron-cache"),
               "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1" if self.stochastic_rounding else "0"}
        if self.stochastic_rounding:
            out["NEURON_RT_STOCHASTIC_ROUNDING_SEED"] = str(self.rounding_seed)
        return out


# The table: registry name suffix -> configuration. Add a row to add a variant.
NEURON_SETTINGS: dict[str, NeuronSetting] = {
    "auto-cast-none": NeuronSetting(),
    "auto-cast-matmult-bf16": NeuronSetting("matmult", "bf16"),
    "auto-cast-matmult-fp16": NeuronSetting("matmult", "fp16"),
    "auto-cast-all-bf16": NeuronSetting("all", "bf16"),
    "auto-cast-all-fp16": NeuronSetting("all", "fp16"),
    "auto-cast-matmult-fp8": NeuronSetting("matmult", "fp8_e4m3"),
    "auto-cast-all-bf16-mpa-on": NeuronSetting("all", "bf16", mixed_accumulation=True),
    "auto-cast-all-bf16-mpa-off": NeuronSetting("all", "bf16", mixed_accumulation=False),
    "auto-cast-all-bf16-sr": NeuronSetting("all", "bf16", stochastic_rounding=True),
    "auto-cast-none-sr": NeuronSetting(stochastic_rounding=True),
}


def registry_entries() -> dict[str, tuple[str, dict[str, Any]]]:
    """REGISTRY rows for every Neuron setting."""
    return {f"neuron/{key}": ("fuzzer.executors.neuron:NeuronExecutor", {"setting": key}) for key in NEURON_SETTINGS}


def neuron_available() -> str | None:
    """None on a Neuron machine (torch-neuronx installed, PJRT_DEVICE unset or NEURON), else the reason."""
    if importlib.util.find_spec("torch_neuronx") is None or os.environ.get("PJRT_DEVICE", "NEURON") != "NEURON":
        return UNAVAILABLE
    return None


class NeuronExecutor(XlaExecutor):
    """`neuron/<setting>`: the XLA native policy on NEURON with one row of NEURON_SETTINGS."""

    group = "neuron"

    def __init__(self, setting: str) -> None:
        if setting not in NEURON_SETTINGS:
            raise KeyError(f"unknown Neuron setting {setting!r} (known: {', '.join(NEURON_SETTINGS)})")
        self.setting_name = setting
        self.setting = NEURON_SETTINGS[setting]
        self.name = f"neuron/{setting}"

    def availability(self) -> str | None:
        return super().availability() or neuron_available()

    def pjrt_device(self) -> str:
        return "NEURON"

    def env(self) -> dict[str, str]:
        return self.setting.env()

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "neuron": {"setting": self.setting_name, **asdict(self.setting),
                                                  "cc_flags": self.setting.cc_flags()}}

    def numeric_graph(self, graph: Graph) -> Graph:
        s = self.setting
        if s.auto_cast == "none" or s.auto_cast_type not in CAST_TYPES:
            return graph
        return computed_in(graph, MATMULT_OPS if s.auto_cast == "matmult" else None, CAST_TYPES[s.auto_cast_type])
