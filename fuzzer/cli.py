"""The `precfuzz` command line: one module per subcommand under fuzzer/commands, listed explicitly."""

from __future__ import annotations

import argparse
import importlib
import sys

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
}

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(prog="precfuzz", description="Differential numerical fuzzer across precision backends.")
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `precfuzz` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
