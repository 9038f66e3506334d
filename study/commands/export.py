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
    parser.add_argument("--bonus", action="store_true",
                        help="write only the bonuses of the participants who finished, by "
                             "the protocol's [bonus] formula: bonus.csv (the platform's bulk "
                             "bonus lines, id,amount) and bonus-details.csv")
    parser.add_argument("--protocol", type=Path,
                        help="with --bonus: take the formula from this protocol file rather "
                             "than the database's snapshot of the protocol it ran")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.bonus:
        return write_bonuses(args.db, args.out, args.protocol)
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


def write_bonuses(db: Path, out: Path, protocol: Path | None) -> int:
    from study.bonus import bonuses

    if not db.is_file():
        raise InvalidInput("DB", str(db), "no such database")
    result = bonuses(db, protocol)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bonus.csv").write_bytes(result.platform_csv())
    (out / "bonus-details.csv").write_bytes(result.details_csv())
    table = result.table
    payable = table[table["recruitment_id"].notna() & (table["amount"] > 0)]
    rule = result.rule
    print(f"bonus from {result.source}: {rule.per_cookie:g} per cookie, "
          f"{rule.per_team_cookie:g} per team cookie"
          + (f", at most {rule.cap:g}" if rule.cap is not None else "") + f" {rule.currency}")
    print(f"{len(table)} finished, {len(payable)} paid, total "
          f"{payable['amount'].sum():.2f} {rule.currency} -> {out / 'bonus.csv'}")
    missing = int(table["recruitment_id"].isna().sum())
    if missing:
        print(f"warning: {missing} finished participants have no recruitment id and are "
              "only in bonus-details.csv", file=sys.stderr)
    return 0
