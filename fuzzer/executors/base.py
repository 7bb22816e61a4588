"""The executor interface and the one place that turns a backend's exceptions into Outcome values."""

from __future__ import annotations

import importlib.util
import time
import traceback
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from .. import outcome as oc
from ..ir import Graph
from ..policy import DECLARED, Policy

Inputs = dict[str, np.ndarray]

IN_PASS = "precfuzz_in_pass"  # attribute an executor sets on an exception a named compiler pass raised


def raised_in(exc: BaseException, name: str) -> BaseException:
    """`exc`, marked as raised by compiler pass `name` (its outcome says so in info["in_pass"])."""
    try:
        setattr(exc, IN_PASS, name)
    except AttributeError:  # an exception type without a __dict__: the mark is lost, the error is not
        pass
    return exc


class Unsupported(Exception):
    """Raised by an executor for a graph its backend cannot express (a limitation, not a finding)."""


class HarnessLimit(Unsupported):
    """Raised where precfuzz itself cannot express a graph for an executor: skipped, never reported as the backend's."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{oc.HARNESS_LIMIT}: {why}")


class Executor(ABC):
    """Runs graphs on one backend configuration; instantiated inside its isolated worker."""

    name: str = ""
    group: str = ""  # executors of one group share a worker process (same environment)
    isolated: bool = True  # False only for the in-process numpy executors (reference, emulated)
    requires: tuple[str, ...] = ()  # importable modules this executor needs
    description: str = ""  # one line for `precfuzz executors` (default: the first line of the class docstring)
    case_options: tuple[str, ...] = ()  # per-case settings this executor reads (fuzzer.ir.case_options keys)

    def summary(self) -> str:
        """One line saying what this configuration runs."""
        own = self.__dict__.get("description") or type(self).__dict__.get("description")  # not a base class's
        return own or (type(self).__doc__ or "").strip().splitlines()[0]

    def bind(self, options: dict[str, Any]) -> "Executor":
        """Take a case's per-case settings (see case_options) before prepare/run/repro; most executors read none."""
        return self

    def approximations(self) -> dict[str, float]:
        """IR op -> relative error this configuration may add beyond the exact bound (documented approximate math)."""
        return {}

    def env(self) -> dict[str, str]:
        """Environment variables of this executor's worker process (on top of the parent's)."""
        return {}

    def availability(self) -> str | None:
        """None when usable here, else why not (cheap: no heavy imports)."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        return f"not installed: {', '.join(missing)}" if missing else None

    def describe(self) -> dict[str, Any]:
        """Name, versions and settings, recorded with every outcome and finding."""
        return {"name": self.name, "settings": self.settings(), "versions": self.versions()}

    def settings(self) -> dict[str, Any]:
        """Settings of this configuration (flags, policies, device)."""
        return {}

    def versions(self) -> dict[str, str]:
        """Versions of the backend packages."""
        from importlib.metadata import PackageNotFoundError, version

        out = {}
        for pkg in self.packages():
            try:
                out[pkg] = version(pkg)
            except PackageNotFoundError:
                pass
        return out

    def packages(self) -> tuple[str, ...]:
        """Distribution names whose versions matter."""
        return ()

    @abstractmethod
    def prepare(self, graph: Graph) -> Any:
        """Build/compile the graph once; raise Unsupported for what the backend cannot express."""

    @abstractmethod
    def execute(self, prepared: Any, graph: Graph, inputs: Inputs) -> tuple[list[np.ndarray], list[str], dict[str, Any]]:
        """Run one input set: (float64 outputs, reported dtypes, extra info).

        On a training case (graph.wrt) info also carries `grads` and `grad_dtypes` (the loss's gradients from the
        backend's own autodiff), or `backward_error` ({type, message}) where the backward raised after the forward ran.
        """

    def classify(self, stage: str, exc: BaseException) -> str:
        """'unsupported' for backend limitations, else 'error'."""
        return "unsupported" if isinstance(exc, Unsupported) else "error"

    precision: Policy = DECLARED  # its precision policy, declared by its backend (see policy_graph)

    @property
    def policy(self) -> str:
        """The policy's label, as records carry it."""
        return self.precision.label

    def policy_graph(self, graph: Graph) -> Graph:
        """The PyTorch program this configuration runs: the graph rewritten by its precision policy.

        PyTorch eager on the CPU runs this graph too; its status and dtypes are what the executor must match.
        """
        return graph

    def numeric_graph(self, graph: Graph) -> Graph:
        """The graph whose declared dtypes the executor computes in (its error bound); the policy graph by default.

        It differs where a documented mode computes narrower than it reports (XLA_USE_BF16, Neuron --auto-cast).
        """
        return self.policy_graph(graph)

    dtype_contract: bool = True  # False where a documented mode relabels dtypes inconsistently (XLA_USE_BF16)
    judge_numbers: bool = True  # False where a documented mode's arithmetic is not an fp32-accumulating one
    not_judged: str = ""  # what is not judged and why, where judge_numbers or dtype_contract is False (repro scripts)

    def reported_dtypes(self) -> dict[str, str]:
        """dtype -> the dtype this configuration reports for it, where its documented mode relabels dtypes."""
        return {}

    def bridged(self, graph: Graph) -> frozenset[str]:
        """Chain breaks (PyTorch raises) that this executor's own lowering bridges with casts (nothing to judge)."""
        return frozenset()

    def repro_parts(self, graph: Graph) -> Any:
        """The backend pieces of a standalone repro script (a fuzzer.export.ReproParts)."""
        raise NotImplementedError(f"{self.name} has no repro exporter")

    def run_case(self, graph: Graph, input_sets: list[Inputs]) -> list[oc.Outcome]:
        """Prepare once, run every input set; exceptions become outcomes, never escape."""
        t0 = time.perf_counter()
        try:
            prepared = self.prepare(graph)
        except Exception as exc:  # noqa: BLE001 - every backend failure is a value
            return [self._failure("compile", exc, compile_s=time.perf_counter() - t0)] * len(input_sets)
        compile_s = time.perf_counter() - t0
        results = []
        for inputs in input_sets:
            t1 = time.perf_counter()
            try:
                outputs, dtypes, info = self.execute(prepared, graph, inputs)
                outputs = [np.array(o, dtype=np.float64) for o in outputs]
                grads, grad_dtypes, failed = info.pop("grads", None), info.pop("grad_dtypes", None), info.pop(
                    "backward_error", None)
                results.append(oc.ok(outputs, dtypes, compile_s=compile_s, run_s=time.perf_counter() - t1, info=info,
                                     grads=None if grads is None else [np.array(g, dtype=np.float64) for g in grads],
                                     grad_dtypes=grad_dtypes, backward_error=failed))
            except Exception as exc:  # noqa: BLE001
                results.append(self._failure("run", exc, compile_s=compile_s, run_s=time.perf_counter() - t1))
        return results

    def _failure(self, stage: str, exc: BaseException, **kw: Any) -> oc.Outcome:
        message = str(exc) or repr(exc)
        kind = self.classify(stage, exc)
        if kind == "unsupported":
            return oc.unsupported(stage, message, error_type=type(exc).__name__, **kw)
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)
        info = {"traceback": "".join(tb)[-2000:]}
        if getattr(exc, IN_PASS, None):
            info["in_pass"] = getattr(exc, IN_PASS)
        return oc.error(stage, type(exc).__name__, message, info=info, **kw)
