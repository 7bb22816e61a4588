"""Large value arrays beside the files that use them (issue 37): a case's real weights and recorded activations in an
.npz next to its JSON, a repro script's next to the script.

A real block's parameters are millions of numbers; packed into the JSON (base64 of float64) they make a case file
of hundreds of MB that no one can read, and a repro script no editor opens. Written beside it as a NumPy archive,
the JSON keeps the graph and a reference per array (`{"array": key, "file": "case.npz", "shape": [...]}`), the
script one `np.load`. Reading takes plain float64 arrays only (`allow_pickle=False`: no code from data), from a
file named in the case that lies in the case's own folder, within the case-size limit.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from . import limits
from .values import LISTED, PACKED, ValueSpecError, inline, pack

ARRAY = "array"  # a spec holding a reference: {"array": key, "file": name, "shape": [...]}
ARRAY_FILE_VALUES = LISTED  # arrays of more values than a script lists go to the array file
FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.npz$")  # a plain name in the case's own folder
SCRIPT_BLOB = re.compile(r"np\.frombuffer\(__import__\('base64'\)\.b64decode\('([A-Za-z0-9+/=]*)'\), '<f8'\)")


class ArrayFileError(ValueError):
    """An array reference or array file that cannot be read (one line)."""


def is_reference(spec: Any) -> bool:
    """True for a spec whose values lie in an array file."""
    return isinstance(spec, dict) and ARRAY in spec


def _specs(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(array key, the dict holding the spec, its key there) for every value spec of a case's JSON object."""
    out = []
    for inp in body.get("inputs") or []:
        if isinstance(inp, dict) and isinstance(inp.get("name"), str):
            out.append((inp["name"], inp, "init"))
    for k, overrides in enumerate(body.get("input_sets") or []):
        if isinstance(overrides, dict):
            out += [(f"set{k}:{name}", overrides, name) for name in overrides if isinstance(name, str)]
    return out


def detach(body: dict[str, Any], file_name: str) -> dict[str, np.ndarray]:
    """Move every packed spec of more than ARRAY_FILE_VALUES values out of the case JSON object `body` (in place) into
    the returned arrays; each becomes a reference to `file_name`."""
    arrays: dict[str, np.ndarray] = {}
    for key, holder, field in _specs(body):
        spec = holder.get(field)
        if isinstance(spec, dict) and PACKED in spec:
            values = inline(spec)
            if values.size > ARRAY_FILE_VALUES:
                arrays[key] = values
                holder[field] = {ARRAY: key, "file": file_name, "shape": list(values.shape)}
    return arrays


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The arrays as an uncompressed .npz (float64: the values exactly as the case holds them)."""
    buf = io.BytesIO()
    np.savez(buf, **{k: np.ascontiguousarray(v, dtype="<f8") for k, v in arrays.items()})
    return buf.getvalue()


def read_npz(path: Path, limit: int | None = None) -> dict[str, np.ndarray]:
    """Every array of an .npz written by `npz_bytes`: float64 only, no pickles, at most `limit` bytes unpacked
    (default: the case-size limit); ArrayFileError (one line) otherwise."""
    limit = limits.max_case_bytes() if limit is None else limit
    try:
        if not path.is_file():
            raise ArrayFileError(f"{path}: no such array file (it belongs beside the case)")
        with zipfile.ZipFile(path) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
            if unpacked > limit:
                raise ArrayFileError(f"{path}: {unpacked} bytes unpacked, more than the {limit} a case may hold "
                                     f"(set {limits.ENV_MAX_CASE_BYTES} to raise it)")
        with np.load(path, allow_pickle=False) as npz:
            out = {name: npz[name] for name in npz.files}
    except ArrayFileError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ArrayFileError(f"{path}: not a readable array file ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:120] if str(exc) else 'empty'})") from None
    for name, arr in out.items():
        if arr.dtype != np.float64:
            raise ArrayFileError(f"{path}: array {name!r} is {arr.dtype}, not float64")
    return out


def attach(obj: Any, folder: Path | None) -> None:
    """Replace each array reference of a case's JSON object `obj` (in place) by its values, packed, read from the
    array file it names in `folder` (the case file's own); ArrayFileError (one line) on any problem."""
    if not isinstance(obj, dict):
        return
    refs = [(holder, field, holder[field]) for _, holder, field in _specs(obj) if is_reference(holder.get(field))]
    files: dict[str, dict[str, np.ndarray]] = {}
    for holder, field, spec in refs:
        name, key, shape = spec.get("file"), spec.get(ARRAY), spec.get("shape")
        if not isinstance(name, str) or not FILE_NAME.match(name):
            raise ArrayFileError(f"array reference {str(key)[:60]!r}: 'file' must be a plain .npz name in the case's "
                                 f"folder, got {str(name)[:60]!r}")
        if folder is None:
            raise ArrayFileError(f"array reference {str(key)[:60]!r}: a case read from text has no folder to find "
                                 f"{name} in (load the case file itself)")
        if name not in files:
            files[name] = read_npz(folder / name)
        if not isinstance(key, str) or key not in files[name]:
            raise ArrayFileError(f"{folder / name}: no array {str(key)[:60]!r}")
        values = files[name][key]
        if not isinstance(shape, list) or list(values.shape) != shape:
            raise ArrayFileError(f"{folder / name}: array {key!r} has shape {list(values.shape)}, the case says "
                                 f"{str(shape)[:60]}")
        holder[field] = pack(values)


def detach_script(text: str, key_prefix: str = "a") -> tuple[str, dict[str, np.ndarray]]:
    """A repro script's packed arrays (base64 literals of float64) moved into arrays, each read instead from the .npz
    of the script's own name beside it (`repro.py` reads `repro.npz`); the text unchanged where it holds none."""
    arrays: dict[str, np.ndarray] = {}

    def load(m: re.Match[str]) -> str:
        key = f"{key_prefix}{len(arrays)}"
        try:
            arrays[key] = np.frombuffer(__import__("base64").b64decode(m.group(1)), "<f8").copy()
        except (ValueError, TypeError) as exc:  # not ours: leave it as written
            raise ValueSpecError(f"a packed array of the script cannot be read: {exc}") from None
        return f"_arrays()[{key!r}]"

    out = SCRIPT_BLOB.sub(load, text)
    if not arrays:
        return text, {}
    helper = ("\n\ndef _arrays(held={}):\n"
              '    """The large input arrays, from the .npz beside this script (same name; plain float64, no pickle)."""\n'
              "    if not held:\n"
              "        import pathlib\n"
              "        with np.load(pathlib.Path(__file__).with_suffix('.npz'), allow_pickle=False) as npz:\n"
              "            held.update({k: npz[k] for k in npz.files})\n"
              "    return held\n")
    return _after_imports(out, helper), arrays


def _after_imports(text: str, block: str) -> str:
    """`block` inserted after the script's last top-level import line."""
    lines = text.split("\n")
    last = max((k for k, line in enumerate(lines) if line.startswith(("import ", "from "))), default=0)
    return "\n".join(lines[:last + 1]) + block + "\n".join([""] + lines[last + 1:])
