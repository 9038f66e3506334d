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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (InvalidInput, ProtocolError) as error:
        print(f"study: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
