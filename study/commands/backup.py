"""``study backup``: a checked copy of a study database, taken while the study runs."""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime
from pathlib import Path

from study.allocation.terms import InvalidInput


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "backup", help="copy a study database while it runs, checked",
        description="Copy a study database with SQLite's online backup API while the study "
                    "runs (participants are not held up), check the copy's integrity and "
                    "write it atomically. With --every, keep doing so into --dir, keeping "
                    "the newest --keep copies (what `study serve --backup-every` runs), and "
                    "rewrite the copies there without each participant who withdraws. With "
                    "--erase-withdrawn, rewrite the copies in a directory without the "
                    "participants DB records as withdrawn (copies kept elsewhere).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("db", type=Path, help="the study database (.sqlite)")
    parser.add_argument("--out", type=Path, help="the copy to write (one backup)")
    parser.add_argument("--every", type=float, metavar="MINUTES",
                        help="back up every MINUTES into --dir until stopped")
    parser.add_argument("--dir", type=Path, default=Path("var/backups"),
                        help="with --every: where the copies go")
    parser.add_argument("--keep", type=int, default=48, help="with --every: copies kept")
    parser.add_argument("--erase-withdrawn", type=Path, metavar="DIR",
                        help="rewrite every copy (*.sqlite) in DIR that still holds a "
                             "participant DB records as withdrawn or declined, without them")
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # stop with the server
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from study.storage.backup import BackupFailed, backup, backup_name, keep_backing_up

    if args.erase_withdrawn is not None:
        return erase_withdrawn(args.db, args.erase_withdrawn)
    if (args.out is None) == (args.every is None):
        raise InvalidInput("--out/--every", None, "give --out FILE for one backup, "
                                                  "--every MINUTES for backups into --dir, "
                                                  "or --erase-withdrawn DIR")
    if args.every is not None:
        if not args.every > 0 or args.keep < 1:
            raise InvalidInput("--every/--keep", (args.every, args.keep),
                               "need a positive interval and at least one copy kept")
        logging.basicConfig(format="%(asctime)s %(message)s")
        keep_backing_up(args.db, args.dir, args.every, args.keep, args.parent)
        return 0
    out = args.out / backup_name(args.db, datetime.now(UTC)) if args.out.is_dir() else args.out
    try:
        made = backup(args.db, out)
    except BackupFailed as error:  # named by the side at fault: the database or the copy
        field, value = ("DB", args.db) if error.side == "source" else ("--out", out)
        raise InvalidInput(field, str(value), str(error)) from None
    print(f"{made.path}: {made.bytes:,} bytes, integrity ok, {made.seconds:.2f} s")
    return 0


def erase_withdrawn(db: Path, directory: Path) -> int:
    """The copies in ``directory`` rewritten without the participants ``db`` (the study's
    database, or a newer copy of it) records as withdrawn or declined."""
    import sqlite3

    from study.storage.backup import erase_from_backups, erased_people

    if not directory.is_dir():
        raise InvalidInput("--erase-withdrawn", str(directory), "no such directory")
    try:
        people = erased_people(db)
    except sqlite3.Error as error:
        raise InvalidInput("DB", str(db), f"cannot be read: {error}") from None
    rewritten = erase_from_backups(directory, db, people)
    print(f"{len(rewritten)} of the copies in {directory} rewritten without the "
          f"{len(people)} participants {db.name} records as withdrawn or declined")
    return 0
