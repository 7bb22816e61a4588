"""Loading MODEL.py[:FUNC]: this runs the user's own Python file (its whole purpose), unlike case JSON, which is data."""

from __future__ import annotations

import importlib.util
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from ..terminating import default_in_child
from .blocks import BLOCK_VALUES
from .translate import AuditInputError, Translation

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
    if not path.is_file():  # a FIFO or a device (a link to /dev/zero): importing would block or never end
        raise AuditInputError(f"{path_text}: not a regular file (expected MODEL.py[:FUNC])")
    if not func.isidentifier():
        raise AuditInputError(f"{func!r} is not a Python function name")
    return path, func


def _module_name(path: Path) -> str:
    """The name the model file is imported under (its loss() and optimizer() are read from it)."""
    return f"precfuzz_audit_{abs(hash(str(path.resolve())))}"


def load_model(path: Path, func: str, stage: Callable[[str], None] = lambda _: None) -> tuple[Any, tuple[Any, ...]]:
    """Import the file and call FUNC(); (module, example_args) or AuditInputError (one line).

    `stage` is told "import" and "make" as each begins (so a process that dies can say where it died).
    """
    import torch

    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AuditInputError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    stage("import")
    try:
        spec.loader.exec_module(mod)
    except SystemExit as exc:  # the model file must not decide the audit's exit status
        raise AuditInputError(f"{path}: importing it called sys.exit({_code(exc)})") from None
    except BaseException as exc:  # noqa: BLE001 - the user's file raised (KeyboardInterrupt too: see capture_isolated)
        raise AuditInputError(f"{path}: importing it raised {type(exc).__name__}: {_first(exc)}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise AuditInputError(f"{path}: has no function {func!r} (FUNC must return (module, example_args))")
    stage("make")
    try:
        made = fn()
    except SystemExit as exc:
        raise AuditInputError(f"{path}:{func}() called sys.exit({_code(exc)})") from None
    except BaseException as exc:  # noqa: BLE001
        raise AuditInputError(f"{path}:{func}() raised {type(exc).__name__}: {_first(exc)}") from None
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)
            and isinstance(made[1], tuple)):
        raise AuditInputError(f"{path}:{func}() must return (nn.Module, tuple of example args), but it returned "
                              f"{_describe(made)}{_hint(made)}")
    module, args = made
    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise AuditInputError(f"{path}:{func}(): example_args must be a non-empty tuple of tensors")
    if any(a.device.type != "cpu" for a in args) or any(p.device.type != "cpu" for p in module.parameters()):
        raise AuditInputError(f"{path}:{func}(): the module and its example args must be on the CPU")
    return module, args


def held_values(module: Any, example: tuple[Any, ...]) -> int:
    """The parameter, buffer and input values a model holds (what a case would have to carry)."""
    import torch

    state = module.state_dict() if hasattr(module, "state_dict") else {}
    tensors = [t for t in state.values() if isinstance(t, torch.Tensor)]
    tensors += [t for t in torch.utils._pytree.tree_leaves(example) if isinstance(t, torch.Tensor)]
    return sum(int(t.numel()) for t in tensors)


def _describe(value: Any, depth: int = 0) -> str:
    """What a value is, in a few words: `a tuple (Linear, Tensor)`, `an int`, `None`."""
    import torch

    if value is None:
        return "None"
    kind = type(value).__name__
    if isinstance(value, torch.nn.Module):
        return f"{kind} module" if depth else f"an nn.Module ({kind})"
    if isinstance(value, (tuple, list)) and depth == 0:
        items = ", ".join(_describe(v, 1) for v in value[:4]) + (", ..." if len(value) > 4 else "")
        return f"a {kind} of {len(value)} ({items})"
    return kind if depth else f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _hint(made: Any) -> str:
    import torch

    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], torch.Tensor):
        return " (a single example arg x is written (x,))"
    return ""


STAGES = {"import": "importing it", "make": "calling {func}()", "export": "exporting the module with torch.export",
          "forward": "running the module under eager PyTorch on its example args"}


def eager_error(module: Any, example: tuple[Any, ...]) -> str:
    """What the model raises under eager PyTorch on its own example args, in a line ("" when it runs)."""
    import torch

    try:
        with torch.no_grad():
            module(*example)
    except SystemExit as exc:
        return f"SystemExit (sys.exit({_code(exc)}))"
    except Exception as exc:  # noqa: BLE001 - the user's model
        return f"{type(exc).__name__}: {_first(exc)}"
    return ""


def capture_isolated(path: Path, func: str, name: str, timeout: float,
                     log: Callable[[str], None] = lambda _: None, train: bool = False,
                     blocks: int | None = None, store: Path | None = None) -> Translation:
    """Import MODEL.py, call FUNC() and translate the module, in a forked child process; the Translation.

    The model is the user's code: it may end the process (os._exit, a crash, a signal) or never finish, which
    no try/except in this process survives. The child does the work and sends the Translation back through a
    pipe; the parent turns a child that died, or ran past `timeout` seconds, into an AuditInputError naming the
    stage (import, FUNC(), torch.export). The child's stdout goes to stderr: stdout is the verdict's (--json).
    Where fork is missing (not POSIX), the work runs in this process. `blocks` (the most parameter values a block
    holds), or a model holding more values than one case takes (translate.MAX_AUDIT_ELEMENTS): the audit at real
    size, by blocks (fuzzer.audit.blocks); with `store`, a folder that outlives the call, the blocks' cases are
    spilled there and come back as paths (a real model's weights never travel through the pickle).
    """
    from .translate import MAX_AUDIT_ELEMENTS, as_bfloat16, translate

    def work(stage: Callable[[str], None]) -> Translation:
        module, example = load_model(path, func, stage)
        spec, said = None, ""
        if train:  # the model with its loss is what is captured; the optimizer's hyperparameters are read here
            from .training import TrainingError, loss_module, optimizer_spec

            hooks = sys.modules[_module_name(path)]
            try:
                spec, said = optimizer_spec(getattr(hooks, "optimizer", None), module, str(path))
            except TrainingError as exc:
                raise AuditInputError(str(exc)) from None
            module = loss_module(module, getattr(hooks, "loss", None))
        stage("export")
        held = held_values(module, example)
        by_blocks = blocks is not None or held > MAX_AUDIT_ELEMENTS
        if by_blocks and train:
            raise AuditInputError(f"{path}:{func}: --train takes a model of at most {MAX_AUDIT_ELEMENTS} parameter and "
                                  f"input values (this one holds {held}); the audit by blocks is forward only")
        log(f"exporting {path}:{func}{' with its loss' if train else ''} with torch.export"
            + (f" ({held} parameter and input values: audited by blocks)" if by_blocks else ""))
        limit = (blocks or BLOCK_VALUES) if by_blocks else None
        tr = translate(module, example, str(path), name, blocks=limit,
                       store=store / "float32" if store is not None else None)
        tr.bf16, why = as_bfloat16(module, example, str(path), name, blocks=limit,
                                   store=store / "bfloat16" if store is not None else None)
        if why:
            tr.notes.append(why)
        if spec is not None:
            from .training import trainable

            tr.optimizer, tr.trainable = spec, trainable(module)
            tr.notes.append(said)
        stage("forward")  # after the export: whatever forward changes in the module, the case holds what was exported
        tr.eager_error = eager_error(module, example)
        return tr

    if not hasattr(os, "fork"):
        return work(lambda _: None)
    torch_loaded = "torch" in sys.modules
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    spill = tempfile.mkdtemp(prefix="precfuzz-audit-")  # the translation comes back through a file, streamed: a
    # real-size model's is gigabytes, which a pipe would hold whole in both processes at once (bytes, then objects)
    spilled = os.path.join(spill, "translation.pickle")
    ours = _children()  # this process's children before the model's: never touched
    reaper = _subreaper(True)  # orphans of the model's processes (a new session too) become our children
    pid = os.fork()
    if pid == 0:  # the child: never returns, whatever the model does
        code = 0
        try:
            os.close(read_fd)
            os.setpgid(0, 0)  # its own group: a timeout ends whatever the model started too
            default_in_child()  # a SIGTERM ends it (the audit's handler is for the audit)
            _die_with_parent()
            os.dup2(2, 1)
            sys.stdout = sys.stderr
            if torch_loaded:  # OpenMP's pool does not survive fork: a threaded op would hang the child
                import torch

                torch.set_num_threads(1)

            def stage(what: str) -> None:
                os.write(write_fd, what[:1].encode())

            try:
                message: tuple[Any, ...] = ("ok", work(stage))
            except AuditInputError as exc:
                message = ("bad", str(exc))
            except SystemExit as exc:
                message = ("bad", f"{path}: the model called sys.exit({_code(exc)}) while it was exported")
            except Exception as exc:  # noqa: BLE001 - precfuzz's own code failed: an internal error in the parent
                message = ("internal", f"{type(exc).__name__}: {_first(exc)}", traceback.format_exc())
            except BaseException as exc:  # noqa: BLE001 - only the model raises these (KeyboardInterrupt too: this
                # process has its own group, so a Ctrl-C at the terminal reaches the audit, not it)
                message = ("bad", f"{path}: the model raised {type(exc).__name__}: {_first(exc)} while it was "
                                  "exported")
            try:
                with open(spilled, "wb") as out:
                    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - a translation that does not pickle is precfuzz's bug
                with open(spilled, "wb") as out:
                    pickle.dump(("internal", f"{type(exc).__name__}: {_first(exc)}", traceback.format_exc()), out)
            os.write(write_fd, b"R")  # written whole: the file holds the message
        except BaseException:  # noqa: BLE001 - nothing may escape the child
            code = 70
        finally:
            try:
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        if not _collect(pid, read_fd, chunks, deadline):
            raise AuditInputError(f"{path}: {_stage(chunks, func)} did not finish within {timeout:g} s "
                                  f"(--timeout); the model was stopped")
    except BaseException:
        shutil.rmtree(spill, ignore_errors=True)
        raise
    finally:  # whatever the outcome: the model's process group, and every process it left, ends here
        os.close(read_fd)
        status = _kill(pid)
        _end_orphans(ours)
        if reaper:
            _subreaper(False)
    try:  # from our own child, which ran only precfuzz's code and the user's model
        message = None
        if b"R" in b"".join(chunks):
            with open(spilled, "rb") as spilled_in:
                message = pickle.load(spilled_in)
    except Exception:  # noqa: BLE001 - cut short: the process died while writing it
        message = None
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    if message is not None:
        if message[0] == "ok":
            return message[1]
        if message[0] == "bad":
            raise AuditInputError(message[1])
        error = RuntimeError(f"{message[1]} (in the audit's model process)")
        error.add_note(message[2])
        raise error
    stage = _stage(chunks, func)
    if os.WIFSIGNALED(status):
        raise AuditInputError(f"{path}: the model's process was killed by {_signal_name(os.WTERMSIG(status))} "
                              f"while {stage}")
    code = os.waitstatus_to_exitcode(status)
    raise AuditInputError(f"{path}: the model ended its process while {stage} (exit status {code}, "
                          f"as os._exit({code}) does)")


def _collect(pid: int, fd: int, chunks: list[bytes], deadline: float) -> bool:
    """Read the child's pipe into chunks until the child ends (True; it is left to reap, so that its pid, which names
    the model's process group, cannot be taken by another process meanwhile) or the deadline passes (False)."""
    eof = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready = select.select([fd], [], [], min(left, 0.05 if eof else 1.0))[0] if not eof else []
        if ready:
            chunk = os.read(fd, 1 << 20)
            eof = not chunk
            chunks.append(chunk)
            continue
        if eof:
            time.sleep(min(left, 0.01))
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            while not eof and select.select([fd], [], [], 0)[0]:  # what it wrote just before it ended
                chunk = os.read(fd, 1 << 20)
                eof = not chunk
                chunks.append(chunk)
            return True


def _stage(chunks: list[bytes], func: str) -> str:
    head = b"".join(chunks).partition(b"R")[0].decode(errors="replace")
    key = {"i": "import", "m": "make", "e": "export", "f": "forward"}.get(head[-1:], "import")
    return STAGES[key].format(func=func)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the audit that forked it dies (best effort elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill(pid: int) -> int:
    """End the child's process group (the model's child processes too) and reap the child (not reaped yet, so its
    pid is still its own); its wait status."""
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            continue
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on: bool) -> bool:
    """Linux: make this process the reaper of its descendants' orphans (or stop); True where that worked."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children() -> set[int]:
    """Pids whose parent is this process (from /proc; empty where there is none)."""
    me, out = os.getpid(), set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read().decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
            if len(fields) > 1 and fields[1] == str(me):
                out.add(int(entry))
    return out


def _end_orphans(ours: set[int], rounds: int = 50) -> None:
    """End every process the model left that became our child (with the subreaper on: whatever it started, in any
    session or group), and theirs as they are orphaned in turn; reap them all. `ours`: children not the model's."""
    for _ in range(rounds):
        left = _children() - ours
        if not left:
            return
        for pid in left:
            for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _first(exc: BaseException) -> str:
    try:
        lines = str(exc).strip().splitlines()
    except BaseException:  # noqa: BLE001 - the model's own exception class may fail to print
        return "(its message cannot be printed)"
    return (lines[0] if lines else "")[:200]


def _code(exc: SystemExit) -> str:
    try:
        return repr(exc.code)[:100]
    except BaseException:  # noqa: BLE001
        return "..."
