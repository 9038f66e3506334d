"""The ``study`` command: one entry point, one subcommand module per concern.

Only the module of the command being run is imported, so ``study --help`` and a light
command do not pay for the web server's, Parquet's or pandas' imports. A command module
``study.commands.<name>`` provides ``register(subcommands)``; its one-line summary here is
what ``study --help`` lists (a test keeps the two equal).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence

COMMANDS: dict[str, str] = {
    "solve": "optimal allocation plan for one team or a CSV of teams",
    "serve": "serve the browser study of a protocol",
    "check": "validate a protocol and summarise its study",
    "pool": "build team pools, summarise them, derive FEA bounds, match teammates",
    "bot": "run simulated participants against a running server",
    "export": "export a study database for analysis",
    "backup": "copy a study database while it runs, checked",
    "calibrate": "calibrate a protocol's reference speeds (and ranges, FEA bounds) from a "
                 "pilot database",
    "contrast": "how much the protocol's robots differ in its target teams",
}


def chosen_command(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first argument that is not an option (the top
    level has no options but ``--help``)."""
    for token in argv:
        if not token.startswith("-"):
            return token if token in names else None
    return None


def add_commands(subcommands: argparse._SubParsersAction, summaries: Mapping[str, str],
                 chosen: str | None, register: Callable[[str], None]) -> None:
    """Register the chosen command in full and every other one by its summary alone, in
    the order of ``summaries`` (so ``--help`` lists them all without importing them)."""
    for name, summary in summaries.items():
        if name == chosen:
            register(name)
        else:
            subcommands.add_parser(name, help=summary, add_help=False)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the command it names is registered in full."""
    parser = argparse.ArgumentParser(
        prog="study",
        description="Fair human-agent teaming studies: solve allocations, build team pools, "
                    "run the browser study and export its data.",
    )
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = chosen_command(sys.argv[1:] if argv is None else argv, list(COMMANDS))
    add_commands(subcommands, COMMANDS, chosen,
                 lambda name: register_module(f"study.commands.{name}", subcommands))
    return parser


def register_module(module: str, subcommands: argparse._SubParsersAction) -> None:
    importlib.import_module(module).register(subcommands)


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse, run the chosen handler, and turn refused input into one line and exit code 2
    (shared by the ``study`` and ``analysis`` commands)."""
    args = parser.parse_args(argv)
    from study.allocation.terms import InvalidInput
    from study.protocol.toml_source import ProtocolError

    try:
        return int(args.handler(args) or 0)
    except (InvalidInput, ProtocolError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(argv), argv)


if __name__ == "__main__":
    sys.exit(main())
