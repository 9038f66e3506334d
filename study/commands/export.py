"""``study export``: tidy CSV and Parquet per table, a codebook, and collection metadata."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.allocation.model import InvalidInput
from study.exports.tables import build_export, write_export


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "export", help="export a study database for analysis",
        description="Write one CSV and one Parquet file per table of a study database, a "
                    "codebook documenting every column (codebook.csv, codebook.md) and the "
                    "protocol and pool metadata the data were collected under (metadata/). "
                    "The database is only read, so this is safe while the server runs.")
    parser.add_argument("db", type=Path, help="the study database (.sqlite)")
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--bonus", action="store_true",
                        help="write only the bonuses by the protocol's [bonus]: bonus.csv "
                             "(the platform's bulk bonus lines, id,amount, one per person) "
                             "and bonus-details.csv (each line with its reason); the lines "
                             "are recorded in the database, and a later --bonus writes only "
                             "lines not exported before")
    parser.add_argument("--again", action="store_true",
                        help="with --bonus: write every line, those exported before too "
                             "(a lost file; whoever was paid already would be paid twice)")
    parser.add_argument("--protocol", type=Path,
                        help="with --bonus: take the formula from this protocol file rather "
                             "than the database's snapshot of the protocol it ran")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.bonus:
        return write_bonuses(args.db, args.out, args.protocol, args.again)
    if args.again:
        raise InvalidInput("--again", True, "belongs to --bonus")
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


def write_bonuses(db: Path, out: Path, protocol: Path | None, again: bool) -> int:
    from study.exports.bonus import REASONS, export_bonuses
    from study.protocol.recruitment import bonus_summary

    result, written = export_bonuses(db, out, protocol, again)
    table, payable, money = result.table, result.payable(), result.rule.currency
    print(f"bonus from {result.source}: {bonus_summary(result.rule)}")
    if result.earlier:
        print(f"{result.earlier} lines were exported before and are left out (--again "
              "writes them too)")
    if not written:
        print("nothing new to pay: no file written")
        return 0
    counts = table["reason"].value_counts()
    print(", ".join(f"{counts[reason]} {reason}" for reason in REASONS if reason in counts)
          + f" lines; {len(payable)} people paid, total {payable['amount'].sum():.2f} "
            f"{money} -> {written[0]}")
    missing = table.loc[table["recruitment_id"].isna(), "code"].nunique()
    if missing:
        print(f"warning: {missing} participants have no recruitment id and are only in "
              f"{written[1].name}", file=sys.stderr)
    return 0
