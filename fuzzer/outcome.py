"""Outcome: what one executor did with one input set of a case, as a value (never an exception)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

STATUSES = ("ok", "unsupported", "error", "crash", "timeout")


@dataclass
class Outcome:
    """ok(outputs, dtypes) / unsupported(stage, message) / error(stage, type, message) / crash(signal) / timeout(seconds)."""

    status: str
    outputs: list[np.ndarray] | None = None  # float64 copies of the outputs (values exactly as the backend produced)
    dtypes: list[str] | None = None  # dtypes the backend reports for the outputs
    stage: str | None = None  # prepare | compile | run | transfer
    error_type: str | None = None
    message: str | None = None
    signal: int | None = None
    seconds: float | None = None
    compile_s: float = 0.0
    run_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    # a training case (Graph.wrt): the loss's gradients with respect to those inputs, in their order, from the
    # backend's own autodiff; or why its backward failed while the forward ran (`backward_error`: type, message)
    grads: list[np.ndarray] | None = None
    grad_dtypes: list[str] | None = None
    backward_error: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        """True for an ok outcome."""
        return self.status == "ok"

    def summary(self) -> str:
        """One line for tables and logs."""
        if self.status == "ok":
            return f"ok {','.join(self.dtypes or [])}"
        if self.status in ("error", "unsupported"):
            return f"{self.status} at {self.stage}: {self.error_type or ''} {first_line(self.message)}".strip()
        if self.status == "crash":
            return f"crash (signal {self.signal})"
        return f"timeout after {self.seconds:.0f}s"

    def to_json(self) -> dict[str, Any]:
        """JSON form without the output arrays."""
        out = {k: v for k, v in {
            "status": self.status, "dtypes": self.dtypes, "stage": self.stage, "error_type": self.error_type,
            "message": self.message, "signal": self.signal, "seconds": self.seconds,
        }.items() if v is not None}
        out.update(compile_s=round(self.compile_s, 4), run_s=round(self.run_s, 4))
        if self.grad_dtypes is not None:
            out["grad_dtypes"] = self.grad_dtypes
        if self.backward_error is not None:
            out["backward_error"] = self.backward_error
        if self.info:
            out["info"] = self.info
        return out


HARNESS_LIMIT = "precfuzz cannot express this graph for this executor"  # our limitation, never the backend's


def first_line(text: str | None, limit: int = 160) -> str:
    """First non-empty line of a message, shortened."""
    for line in (text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def ok(outputs: list[np.ndarray], dtypes: list[str], **kw: Any) -> Outcome:
    """An ok outcome."""
    return Outcome("ok", outputs=outputs, dtypes=dtypes, **kw)


def unsupported(stage: str, message: str, **kw: Any) -> Outcome:
    """The backend cannot run this graph (a limitation, not a bug)."""
    return Outcome("unsupported", stage=stage, message=message, **kw)


def error(stage: str, error_type: str, message: str, **kw: Any) -> Outcome:
    """The backend raised."""
    return Outcome("error", stage=stage, error_type=error_type, message=message, **kw)


def crash(signal: int | None, message: str = "", **kw: Any) -> Outcome:
    """The worker process died (signal number, or None for a plain non-zero exit)."""
    return Outcome("crash", signal=signal, message=message, **kw)


def timeout(seconds: float, **kw: Any) -> Outcome:
    """The backend did not answer in time."""
    return Outcome("timeout", seconds=seconds, **kw)


def compiles(outcome: Outcome, index: int) -> int:
    """Backend compilations one outcome cost: XLA counts its own, TVM says whether its program cache missed.

    The input sets of a case share one prepare (its cost is on the first outcome), except where the worker
    prepared each on its own (info["alone"], PRECFUZZ_BATCH_VARIANTS=0).
    """
    if "xla_compiles" in outcome.info:
        return int(outcome.info["xla_compiles"])
    first = index == 0 or bool(outcome.info.get("alone"))
    if first and outcome.info.get("compiled"):
        return 1
    return 1 if first and outcome.status in ("error", "unsupported") and outcome.stage == "compile" else 0


def compile_seconds(outcome: Outcome, index: int) -> float:
    """Backend compile seconds one outcome cost: the shared prepare's on the first outcome (or on each one
    prepared alone), plus what XLA compiled during this input set's own run (a value-specialized recompile)."""
    if index == 0 or outcome.info.get("alone"):
        return float(outcome.compile_s)
    return float(outcome.info.get("xla_compile_s", 0.0))
