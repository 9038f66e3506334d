"""The ``study`` command: one entry point, one subcommand module per concern."""

from __future__ import annotations

import argparse
import importlib
import sys

from study.model import InvalidInput
from study.tomlsource import ProtocolError

COMMAND_MODULES = (
    "study.commands.solve",
    "study.commands.serve",
    "study.commands.pool",
    "study.commands.bot",
    "study.commands.export",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="study",
        description="Fair human-agent teaming studies: solve allocations, build team pools, "
                    "run the browser study and export its data.",
    )
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subcommands)
    return parser


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse, run the chosen handler, and turn refused input into one line and exit code 2
    (shared by the ``study`` and ``analysis`` commands)."""
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (InvalidInput, ProtocolError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
