"""The `precfuzz` command line: one module per subcommand under fuzzer/commands, listed explicitly.

Exit status: 0 clean, 1 finding (or a case that did not reproduce), 2 bad input (one line on stderr:
`precfuzz: error: ...`), 3 an internal error (one line; the traceback goes to a file it names), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import traceback
from typing import NoReturn

from .commands.common import EXIT_INTERNAL, UsageError, fail, one_line
from .terminating import ended_soon_after_interrupt

# subcommand -> module in fuzzer.commands exposing add_arguments(parser) and run(args) -> exit status
COMMANDS: dict[str, str] = {
    "check": "check",
    "export": "export",
    "executors": "executors",
    "generate": "generate",
    "run": "run",
    "smoke": "smoke",
    "report": "report",
    "minimize": "minimize",
    "audit": "audit",
    "zoo": "zoo",
}

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2
# Ctrl-C ends these within seconds even inside one long numpy call (terminating.ended_soon_after_interrupt); `run`
# has two steps of its own (the first finishes the cases in flight, the second saves and ends at once)
PROMPT_ON_INTERRUPT = frozenset({"check", "export", "minimize"})
DEBUG_ENV = "PRECFUZZ_DEBUG"  # set to 1 to let internal errors raise with their traceback


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are UsageError (one line, exit 2) instead of usage text and sys.exit."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing usage and exiting."""
        prog = self.prog.removeprefix("precfuzz").strip()
        raise UsageError(f"{prog + ': ' if prog else ''}{message} (see precfuzz {prog + ' ' if prog else ''}--help)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = ArgumentParser(prog="precfuzz", description="Differential numerical fuzzer across precision backends.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(f"fuzzer.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"fuzzer.commands.{module}":
                raise
            continue
        p = sub.add_parser(name, help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None,
                           description=mod.__doc__)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def internal_error(exc: BaseException) -> int:
    """One line naming the error and a file holding its traceback; the internal-error status."""
    try:
        fd, path = tempfile.mkstemp(prefix="precfuzz-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(traceback.format_exception(exc)))
        where = f"traceback in {path}"
    except OSError:
        where = f"set {DEBUG_ENV}=1 to see the traceback"
    print(f"precfuzz: internal error: {type(exc).__name__}: {one_line(str(exc))[:300]} ({where})", file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `precfuzz` console script."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command in PROMPT_ON_INTERRUPT:
            with ended_soon_after_interrupt():  # disarmed once the block is left: then only the line below is left
                return int(args._run(args))
        return int(args._run(args))
    except UsageError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help, or a second SIGINT/SIGTERM during a campaign
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # `precfuzz ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # the file system said no: a full disk, a path that vanished, permissions
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(f"{where}{exc.strerror or exc}")
    except MemoryError:
        return fail("out of memory (a case too large for this machine? see PRECFUZZ_MAX_CASE_BYTES)")
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback kept in a file
        if os.environ.get(DEBUG_ENV):
            raise
        return internal_error(exc)


if __name__ == "__main__":
    sys.exit(main())
