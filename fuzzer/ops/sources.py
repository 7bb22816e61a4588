"""The source of the op records' reference functions: what a repro script pastes, and the names it defines.

The exact reference a script runs is byte for byte the one precfuzz judged with: the reference function of
each op, the module-level helpers it calls and the plain constants it reads, collected transitively.
"""

from __future__ import annotations

import inspect
import linecache
import sys
from types import FunctionType
from typing import Any

CONSTANT_TYPES = (int, float, str, tuple, frozenset)


def _names(code: Any) -> list[str]:
    """Global names a code object reads, those of its comprehensions and nested functions included."""
    out = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            out += _names(const)
    return out


def helpers(fn: FunctionType, seen: dict[str, Any]) -> None:
    """Collect fn, the module-level functions it calls and the plain constants it reads, transitively."""
    if fn.__name__ in seen:
        return
    seen[fn.__name__] = fn
    for name in _names(fn.__code__):
        obj = fn.__globals__.get(name)
        if isinstance(obj, FunctionType) and obj.__module__.startswith("fuzzer.ops"):
            helpers(obj, seen)
        elif isinstance(obj, CONSTANT_TYPES) and not isinstance(obj, bool) and name.isupper() and name not in seen:
            seen[name] = obj


_SNAPSHOT: dict[str, list[str]] = {}  # file -> its lines as this process first read them
_BLOCKS: dict[tuple[str, int, str], str] = {}  # (file, first line, name) -> the function's block in the snapshot


def snapshot_loaded() -> None:
    """Keep the text of every precfuzz module loaded now: a campaign runs for days, and a `git pull` meanwhile
    must not put another version's functions into its repro scripts (inspect.getsource reads the file as it is
    on disk at that moment: triage9's repro_full.py scripts pasted ideal_values where meaningful was meant)."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and name.split(".")[0] in ("fuzzer", "oracles") and file not in _SNAPSHOT:
            _SNAPSHOT[file] = list(linecache.getlines(file))


def function_source(fn: FunctionType) -> str:
    """fn's source from the text its module was loaded from (see snapshot_loaded); raises RuntimeError where the
    file on disk changed before any snapshot and no longer holds fn at its line."""
    file = fn.__code__.co_filename
    if file not in _SNAPSHOT:
        _SNAPSHOT[file] = list(linecache.getlines(file))
    key = (file, fn.__code__.co_firstlineno, fn.__name__)
    if key not in _BLOCKS:  # the snapshot never changes: each function is tokenized once per process
        _BLOCKS[key] = "".join(inspect.getblock(_SNAPSHOT[file][fn.__code__.co_firstlineno - 1:]))
    text = _BLOCKS[key]
    if not text.lstrip().startswith((f"def {fn.__name__}(", "@")):
        raise RuntimeError(f"the source of {fn.__module__}.{fn.__name__} changed on disk since precfuzz started: "
                           "restart it to write repro scripts")
    return text


def source(name: str, obj: Any) -> str:
    """A helper's source, or a constant's assignment."""
    return function_source(obj).rstrip() if isinstance(obj, FunctionType) else f"{name} = {obj!r}"


def reference_helper_names() -> set[str]:
    """Names of every reference function and helper a repro script may define."""
    seen: dict[str, Any] = {}
    from . import OPS  # the registry imports this module's siblings, not this module

    for spec in OPS.values():
        helpers(spec.reference, seen)  # type: ignore[arg-type]
    return set(seen)
