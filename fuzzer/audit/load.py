"""Loading MODEL.py[:FUNC]: this runs the user's own Python file (its whole purpose), unlike case JSON, which is data."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from .translate import AuditInputError

DEFAULT_FUNC = "make"


def split_target(target: str) -> tuple[Path, str]:
    """`MODEL.py[:FUNC]` -> (path, func); AuditInputError naming what is wrong with it."""
    path_text, func = target, ""
    if ":" in target and not Path(target).exists():
        path_text, _, func = target.rpartition(":")
    func = func or DEFAULT_FUNC
    path = Path(path_text)
    if not path_text:
        raise AuditInputError("audit needs a model file (MODEL.py[:FUNC])")
    if not path.exists():
        raise AuditInputError(f"{path_text}: no such file")
    if path.is_dir() or path.suffix != ".py":
        raise AuditInputError(f"{path_text}: not a Python file (expected MODEL.py[:FUNC])")
    if not func.isidentifier():
        raise AuditInputError(f"{func!r} is not a Python function name")
    return path, func


def load_model(path: Path, func: str) -> tuple[Any, tuple[Any, ...]]:
    """Import the file and call FUNC(); (module, example_args) or AuditInputError (one line)."""
    import torch

    name = f"precfuzz_audit_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AuditInputError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except SystemExit as exc:  # the model file must not decide the audit's exit status
        raise AuditInputError(f"{path}: importing it called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - the user's file raised
        raise AuditInputError(f"{path}: importing it raised {type(exc).__name__}: {_first(exc)}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise AuditInputError(f"{path}: has no function {func!r} (FUNC must return (module, example_args))")
    try:
        made = fn()
    except SystemExit as exc:
        raise AuditInputError(f"{path}:{func}() called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001
        raise AuditInputError(f"{path}:{func}() raised {type(exc).__name__}: {_first(exc)}") from None
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)
            and isinstance(made[1], tuple)):
        raise AuditInputError(f"{path}:{func}() must return (nn.Module, tuple of example args), "
                              f"got {type(made).__name__}")
    module, args = made
    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise AuditInputError(f"{path}:{func}(): example_args must be a non-empty tuple of tensors")
    if any(a.device.type != "cpu" for a in args) or any(p.device.type != "cpu" for p in module.parameters()):
        raise AuditInputError(f"{path}:{func}(): the module and its example args must be on the CPU")
    return module, args


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else "")[:200]
