"""Backups of a running study's database with SQLite's online backup API.

The copy is taken by a connection of its own in one step: in WAL mode that is one read
transaction, so participants' writes go on meanwhile and the copy is one consistent
snapshot. It is written beside its final name, checked with ``PRAGMA integrity_check``,
synced and then renamed, so a backup file is either whole and checked or absent.

``study serve --backup-every MINUTES`` runs ``study backup --every`` as a child process:
a backup never runs inside a process that serves participants.

A withdrawal (or a declined consent) erases the person from the kept backups as well
(``Erasures``): each backup that still holds them is rewritten without their rows, as the
study's own database erased them, compacted, checked, synced and renamed over the old one.
Backups are rewritten rather than encrypted per participant: a backup is there for the day
the study's disk is lost, and one that needed keys kept beside the database would be lost
with it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from study.storage.database import erase_rows

log = logging.getLogger(__name__)
# How long the copy waits for a writer holding SQLite's lock (rare in WAL mode).
BUSY_SECONDS = 30
# SQLite's errors of writing the copy: the database is only read, so these are the
# destination's (a full disk, a read-only or missing directory, a failed write or sync).
DESTINATION_ERRORS = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM",
                      "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_DIR_FSYNC",
                      "SQLITE_IOERR_TRUNCATE")
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# The steps at which a person's own choice erased their data (``Storage.erase_participant``).
ERASED_STEPS = ("withdrawn", "declined")
# A participant in a backup, by id and code: the same person in the database.
Person = tuple[int, str]


class BackupFailed(RuntimeError):
    """The copy could not be made or did not pass its integrity check. ``side`` says
    where the fault is, so nobody is sent to repair a database that is fine: the
    ``source`` database, or the ``destination`` the copy is written to."""

    def __init__(self, message: str, side: str = "source") -> None:
        super().__init__(message)
        self.side = side


@dataclass(frozen=True)
class Backup:
    """A finished, checked copy."""

    path: Path
    bytes: int
    seconds: float


def backup(database: Path, out: Path) -> Backup:
    """Copy ``database`` to ``out`` while it is in use; check, sync and rename the copy.
    Whatever fails, no partial copy is left behind."""
    database, out = Path(database), Path(out)
    if not database.is_file():
        raise BackupFailed(f"{database}: no such database")
    partial = out.with_name(out.name + ".partial")
    started = time.perf_counter()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial.unlink(missing_ok=True)
        verdict = _copy(database, partial)
        if verdict != "ok":
            raise BackupFailed(f"{out}: the copy failed its integrity check: {verdict}",
                               "destination")
        _sync(partial)
        partial.replace(out)
        _sync(out.parent)
    except sqlite3.Error as error:
        name = getattr(error, "sqlite_errorname", "")
        if name not in DESTINATION_ERRORS:
            raise BackupFailed(f"{database}: {error}") from error
        full = errno.ENOSPC if name == "SQLITE_FULL" else None
        raise _destination_failed(database, out, full, str(error)) from error
    except OSError as error:
        raise _destination_failed(database, out, error.errno, error.strerror) from error
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return Backup(out, out.stat().st_size, time.perf_counter() - started)


def _copy(database: Path, partial: Path) -> str:
    """The online backup into ``partial`` in one step (one consistent snapshot), as a
    single self-contained file; returns its ``PRAGMA integrity_check`` verdict."""
    with contextlib.closing(_open_source(database)) as source, \
            contextlib.closing(sqlite3.connect(partial)) as target:
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")
        return str(target.execute("PRAGMA integrity_check").fetchone()[0])


def _open_source(database: Path) -> sqlite3.Connection:
    """The database, opened and read once before the copy is begun: what fails here is
    the database's fault, what fails later is the copy's."""
    source = None
    try:
        source = sqlite3.connect(database, timeout=BUSY_SECONDS)
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        if source is not None:
            source.close()
        raise BackupFailed(f"{database}: {error}") from error
    return source


def _destination_failed(database: Path, out: Path, number: int | None,
                        reason: str | None) -> BackupFailed:
    """What to say when the copy could not be written: a full destination with the
    space it has and the space the copy needs, or the destination's own error."""
    if number not in FULL_ERRNOS:
        return BackupFailed(f"{out}: the copy cannot be written there: {reason}",
                            "destination")
    untouched = "no copy was left there; the database was only read and is untouched"
    with contextlib.suppress(OSError):
        free, needed = shutil.disk_usage(out.parent).free, _size(database)
        return BackupFailed(f"{out.parent}: the destination is full ({free:,} bytes free, "
                            f"the copy of {database.name} needs about {needed:,}); "
                            f"{untouched}", "destination")
    return BackupFailed(f"{out.parent}: the destination is full; {untouched}", "destination")


def _size(database: Path) -> int:
    """The bytes of a database with its write-ahead log: about what a copy takes."""
    wal = database.with_name(database.name + "-wal")
    return database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _sync(path: Path) -> None:
    """Flush a file or a directory entry to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def backup_name(database: Path, at: datetime) -> str:
    """``<database stem>-<UTC time>.sqlite``: names sort by time."""
    return f"{Path(database).stem}-{at.strftime('%Y%m%dT%H%M%SZ')}.sqlite"


def rotate(directory: Path, database: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` backups of ``database`` in ``directory``;
    returns what was deleted."""
    mine = sorted(Path(directory).glob(f"{Path(database).stem}-*.sqlite"))
    old = mine[:-keep] if keep > 0 else mine
    for path in old:
        path.unlink()
    return old


def keep_backing_up(database: Path, directory: Path, every_minutes: float, keep: int,
                    parent: int | None = None) -> None:
    """Back up every ``every_minutes`` into ``directory``, keeping the newest ``keep``;
    stops when the process ``parent`` (the server) is gone. A failed backup is logged and
    tried again at the next interval. Withdrawals are carried into the kept backups after
    every copy (it may have begun before one) and within a second of each."""
    erasures = Erasures(Path(database), Path(directory))
    while parent is None or os.getppid() == parent:
        out = Path(directory) / backup_name(database, datetime.now(UTC))
        try:
            made = backup(database, out)
            rotate(directory, database, keep)
            log.warning("backup %s: %d bytes in %.2f s", made.path, made.bytes, made.seconds)
        except (BackupFailed, OSError) as error:
            log.error("backup failed: %s", error)
        erasures.apply()
        _sleep_while_parent(every_minutes * 60, parent, erasures.poll)


def _sleep_while_parent(seconds: float, parent: int | None,
                        each_second: Callable[[], None]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (parent is None or os.getppid() == parent):
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        each_second()


@dataclass
class Erasures:
    """The study's withdrawals and declined consents, carried into the backups kept in
    ``directory``: looked for once a second, applied when their number changed."""

    database: Path
    directory: Path
    seen: int = -1  # erased participants when the backups were last made to match

    def poll(self) -> None:
        try:
            with contextlib.closing(_read_only(self.database)) as connection:
                count = connection.execute(
                    f"SELECT count(*) FROM participants WHERE step IN {ERASED_STEPS}"
                ).fetchone()[0]
        except sqlite3.Error as error:
            log.error("withdrawals could not be read from %s: %s", self.database, error)
            return
        if count != self.seen:
            self.apply()

    def apply(self) -> None:
        """Rewrite every backup that still holds an erased participant."""
        try:
            people = erased_people(self.database)
        except sqlite3.Error as error:
            log.error("withdrawals could not be read from %s: %s", self.database, error)
            return
        for path in erase_from_backups(self.directory, self.database, people):
            log.warning("backup %s: rewritten without the participants withdrawn since it "
                        "was taken", path)
        self.seen = len(people)


def _read_only(database: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True,
                                 timeout=BUSY_SECONDS)
    connection.row_factory = sqlite3.Row
    return connection


def erased_people(database: Path) -> dict[Person, dict[str, Any]]:
    """The participants whose data a withdrawal or a declined consent erased, with the row
    the database keeps of each."""
    with contextlib.closing(_read_only(database)) as connection:
        rows = connection.execute(
            f"SELECT * FROM participants WHERE step IN {ERASED_STEPS}").fetchall()
    return {(row["id"], row["code"]): dict(row) for row in rows}


def erase_from_backups(directory: Path, database: Path,
                       people: dict[Person, dict[str, Any]]) -> list[Path]:
    """Rewrite every backup (``*.sqlite``) in ``directory`` that still holds one of
    ``people``; returns those rewritten. One that cannot be is logged and left as it is."""
    rewritten = []
    for path in sorted(Path(directory).glob("*.sqlite")):
        if path.resolve() == Path(database).resolve():
            continue
        try:
            if erase_from(path, people):
                rewritten.append(path)
        except (BackupFailed, sqlite3.Error, OSError) as error:
            log.error("backup %s: withdrawn participants could not be erased from it: %s",
                      path, error)
    return rewritten


def erase_from(path: Path, people: dict[Person, dict[str, Any]]) -> bool:
    """Rewrite the backup ``path`` without the rows of ``people`` it still holds, as the
    study's database erased them: a copy beside it is erased, compacted (no free page
    keeps a deleted byte), checked, synced and renamed over it, so the backup is whole
    whatever fails. False when it holds none of them (it is not touched)."""
    with contextlib.closing(_read_only(path)) as connection:
        held = _still_held(connection, people)
    if not held:
        return False
    partial = path.with_name(path.name + ".partial")
    try:
        shutil.copyfile(path, partial)
        _erase(partial, held)
        _sync(partial)
        partial.replace(path)
        _sync(path.parent)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return True


def _still_held(connection: sqlite3.Connection,
                people: dict[Person, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Of ``people``, those this backup holds (the same id and code) with more than the
    row the database keeps of them: taken before their data was erased."""
    if not people or not connection.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'participants'").fetchone():
        return {}
    ids = json.dumps([person_id for person_id, _ in people])
    rows = connection.execute("SELECT * FROM participants WHERE id IN "
                              "(SELECT value FROM json_each(?))", (ids,)).fetchall()
    held = {}
    for row in rows:
        kept = people.get((row["id"], row["code"]))
        if kept is not None and any(kept.get(column) != row[column] for column in row.keys()):  # noqa: SIM118
            held[row["id"]] = kept
    return held


def _erase(copy: Path, held: dict[int, dict[str, Any]]) -> None:
    """Erase ``held`` in the database file ``copy``: their rows deleted as a withdrawal
    deletes them (zeroed, ``secure_delete``), their participants row set to the one the
    study keeps; then compacted and checked. No journal file is written: the copy is
    thrown away if anything fails."""
    with contextlib.closing(sqlite3.connect(copy)) as connection:
        connection.execute("PRAGMA journal_mode=MEMORY")
        connection.execute("PRAGMA secure_delete=ON")
        columns = {row[1] for row in connection.execute("PRAGMA table_info(participants)")}
        with connection:
            for person_id, kept in held.items():
                erase_rows(connection, person_id)
                shared = [column for column in kept if column in columns and column != "id"]
                assignments = ", ".join(f'"{column}" = ?' for column in shared)  # the schema's
                connection.execute(f"UPDATE participants SET {assignments} WHERE id = ?",
                                   [*(kept[column] for column in shared), person_id])
        connection.execute("VACUUM")
        verdict = str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    if verdict != "ok":
        raise BackupFailed(f"{copy}: the copy failed its integrity check: {verdict}",
                           "destination")
