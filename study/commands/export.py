"""``study export``: tidy CSV and Parquet per table, a codebook, and collection metadata."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.export import build_export, write_export
from study.model import InvalidInput


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "export", help="export a study database for analysis",
        description="Write one CSV and one Parquet file per table of a study database, a "
                    "codebook documenting every column (codebook.csv, codebook.md) and the "
                    "protocol and pool metadata the data were collected under (metadata/). "
                    "The database is only read, so this is safe while the server runs.")
    parser.add_argument("db", type=Path, help="the study database (.sqlite)")
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        export = build_export(args.db)
    except FileNotFoundError as error:
        raise InvalidInput("DB", str(args.db), str(error)) from None
    written = write_export(export, args.out)
    for table, rows in export.rows.items():
        print(f"{table:<14}{rows:>8} rows")
    print(f"{len(written)} files -> {args.out}")
    for column in export.undocumented:
        print(f"warning: {column} is not in the codebook", file=sys.stderr)
    return 0
