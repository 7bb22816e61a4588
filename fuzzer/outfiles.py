"""Writing files the user names, or the campaign keeps, without destroying what is in their place.

Every writer goes through `replace_file`: it writes a temp file beside the target, fsyncs it and renames it over
the target. A rename replaces whatever the name points at, so the target is checked first: a path that exists and
is not a regular file (a device, FIFO, socket or directory) is refused with an OSError naming it. A symlink is
followed: the file it points at is replaced and the link itself is kept (like a shell's `>`). The temp file is
removed when anything fails, so no `.NAME.<pid>.<tid>.tmp` is left behind.

One rule decides whether an existing file may be replaced: precfuzz replaces only a file it can prove it wrote,
else it refuses with `NotOurs` (an OSError whose message names `--force`). The proof is either

- a generated header (`style`: python, markdown, xml, json) carrying the sha256 of the rest of the file, written
  by `stamp`: a file someone edited, or wrote, has no header whose hash matches its content; or
- a manifest (`.precfuzz-manifest.json` in a results directory, itself stamped) listing the sha256 of each file
  precfuzz wrote there, for files that cannot hold a header (the report's PNG plots).

An empty file holds nothing to lose and is replaced. Campaign bookkeeping (state.json, findings.jsonl, ...) is
written without a proof: a campaign reads, checks and quarantines those files before it replaces them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import threading
from pathlib import Path

STYLES = ("python", "markdown", "xml", "json")
MANIFEST = ".precfuzz-manifest.json"  # name -> sha256 of what precfuzz last wrote under that name in its directory
FORCE_HINT = "pass --force to replace it"
_HEADERS = {  # the exact header line of each style ({h}: the sha256 of the file without this line)
    "python": "# precfuzz-generated sha256:{h}",
    "markdown": "<!-- precfuzz-generated sha256:{h} -->",
    "xml": "<!-- precfuzz-generated sha256:{h} -->",
    "json": ' "precfuzz-generated": "sha256:{h}",',
}
_HEADER_LINES = [re.compile(re.escape(t).replace(re.escape("{h}"), "([0-9a-f]{64})") + "\n?")
                 for t in dict.fromkeys(_HEADERS.values())]
MAX_PROOF_BYTES = 256 * 2**20  # a larger file is not read to look for a proof (precfuzz writes no such file)


class NotOurs(OSError):
    """An existing file precfuzz cannot prove it wrote (replacing it would lose someone's data)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(errno.EEXIST, f"exists and was not written by precfuzz; {FORCE_HINT}", str(path))


def kind_of(mode: int) -> str:
    """A file type in words (for messages)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def not_regular(path: str | Path) -> str | None:
    """Why `path` (followed through symlinks) cannot be replaced by a file: None when it does not exist or is a
    regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return None  # the write itself will say why (permissions, a loop of links)
    return None if stat.S_ISREG(mode) else kind_of(mode)


def target_of(path: str | Path) -> Path:
    """The file a write to `path` replaces (a symlink's target); OSError if it exists and is not a regular file."""
    path = Path(path)
    what = not_regular(path)
    if what is not None:
        raise OSError(errno.EEXIST, f"exists and is {what}; not replacing it (give a file name)", str(path))
    return Path(os.path.realpath(path)) if path.is_symlink() else path


# ---------------------------------------------------------------- proofs


def digest(data: str | bytes) -> str:
    """The sha256 of text (UTF-8) or bytes, in hex."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def stamp(text: str, style: str) -> str:
    """`text` with precfuzz's generated header (the sha256 of `text`) in its place: the first line, after a shebang
    or XML declaration, or (json) the first line inside the top-level object."""
    header = _HEADERS[style].format(h=digest(text)) + "\n"
    lines = text.splitlines(keepends=True)
    if style == "json":
        if not lines or lines[0] != "{\n" or len(lines) < 3:
            raise ValueError("a JSON stamp needs an object of at least one key written one key a line")
        at = 1
    else:
        at = 1 if lines and (lines[0].startswith("#!") or lines[0].startswith("<?xml")) else 0
    return "".join(lines[:at]) + header + "".join(lines[at:])


def proven(data: bytes) -> bool:
    """True when `data` carries a generated header (line 1 or 2) whose hash is that of the rest of `data`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = text.splitlines(keepends=True)
    for at in (0, 1):
        if at < len(lines):
            for pattern in _HEADER_LINES:
                m = pattern.fullmatch(lines[at])
                if m and digest("".join(lines[:at] + lines[at + 1:])) == m.group(1):
                    return True
    return False


def _manifest(folder: Path) -> dict[str, str]:
    """name -> sha256 listed in folder's manifest (empty when it is missing, unproven or unreadable)."""
    path = folder / MANIFEST
    try:
        if not_regular(path) or not path.is_file() or path.stat().st_size > MAX_PROOF_BYTES:
            return {}
        data = path.read_bytes()
        files = json.loads(data).get("files", {}) if proven(data) else {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(files, dict) else {}


def owned(path: str | Path, manifest: bool = False) -> bool:
    """True when replacing `path` loses nothing of anyone else's: it does not exist, is empty, carries a generated
    header with its own hash, or (with `manifest`) is listed with its hash in its directory's manifest."""
    path = Path(path)
    try:
        if not path.exists():  # (a dangling link: the write creates its target)
            return True
        if not path.is_file():
            return False
        size = path.stat().st_size
        if size == 0:
            return True
        if size > MAX_PROOF_BYTES:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    if proven(data):
        return True
    return manifest and _manifest(path.parent).get(path.name) == digest(data)


def claim(path: str | Path, force: bool = False, manifest: bool = False) -> None:
    """NotOurs unless `force` or `path` may be replaced (owned()); OSError if it is no regular file."""
    target_of(path)
    if not force and not owned(path, manifest):
        raise NotOurs(path)


def _record(path: Path, data: bytes) -> None:
    """List `data` as what precfuzz wrote at `path` in its directory's manifest."""
    files = _manifest(path.parent)
    files[path.name] = digest(data)
    text = json.dumps({"about": "files precfuzz wrote here (name: sha256); it replaces only these, or files with "
                                "its generated header", "files": dict(sorted(files.items()))}, indent=1) + "\n"
    replace_file(path.parent / MANIFEST, text, sync=False, style="json", force=False)


# ---------------------------------------------------------------- the writer


def replace_file(path: str | Path, data: str | bytes, mode: int | None = None, sync: bool = True,
                 style: str | None = None, force: bool = False, manifest: bool = False) -> Path:
    """Atomically put `data` at `path` (see the module doc; `sync`: fsync before the rename); returns `path`.

    With a `style`, the text gets its generated header and an existing file is replaced only when precfuzz
    proves it wrote it (NotOurs otherwise, unless `force`); with `manifest`, the proof is the directory's
    manifest, which records the new content. Without either, the file is campaign bookkeeping (no proof asked).
    """
    if style is not None:
        if not isinstance(data, str):
            raise TypeError("a stamped file is text")
        data = stamp(data, style)
    raw = data.encode() if isinstance(data, str) else data
    proof = style is not None or manifest
    if proof:
        claim(path, force, manifest)
    target = target_of(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        target_of(path)  # checked again just before the rename: something may have taken the name meanwhile
        if proof:
            claim(path, force, manifest)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if manifest:
        _record(target, raw)
    return Path(path)
