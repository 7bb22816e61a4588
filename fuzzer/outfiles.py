"""Writing files the user names, or the campaign keeps, without destroying what is in their place.

Every writer goes through `replace_file`: it writes a temp file beside the target, fsyncs it and renames it over
the target. A rename replaces whatever the name points at, so the target is checked first: a path that exists and
is not a regular file (a device, FIFO, socket or directory) is refused with an OSError naming it. A symlink is
followed: the file it points at is replaced and the link itself is kept (like a shell's `>`). The temp file is
removed when anything fails, so no `.NAME.<pid>.<tid>.tmp` is left behind.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path


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


def replace_file(path: str | Path, data: str | bytes, mode: int | None = None, sync: bool = True) -> Path:
    """Atomically put `data` at `path` (see the module doc; `sync`: fsync before the rename); returns `path`."""
    target = target_of(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        target_of(path)  # checked again just before the rename: something may have taken the name meanwhile
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return Path(path)
