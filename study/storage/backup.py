"""Backups of a running study's database with SQLite's online backup API.

The copy is taken by a connection of its own in one step: in WAL mode that is one read
transaction, so participants' writes go on meanwhile and the copy is one consistent
snapshot. It is written beside its final name, checked with ``PRAGMA integrity_check``,
synced and then renamed, so a backup file is either whole and checked or absent.

``study serve --backup-every MINUTES`` runs ``study backup --every`` as a child process:
a backup never runs inside a process that serves participants.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)
# How long the copy waits for a writer holding SQLite's lock (rare in WAL mode).
BUSY_SECONDS = 30
# SQLite's errors of writing the copy: the database is only read, so these are the
# destination's (a full disk, a read-only or missing directory, a failed write or sync).
DESTINATION_ERRORS = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM",
                      "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_DIR_FSYNC",
                      "SQLITE_IOERR_TRUNCATE")
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


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
    tried again at the next interval."""
    while parent is None or os.getppid() == parent:
        out = Path(directory) / backup_name(database, datetime.now(UTC))
        try:
            made = backup(database, out)
            rotate(directory, database, keep)
            log.warning("backup %s: %d bytes in %.2f s", made.path, made.bytes, made.seconds)
        except (BackupFailed, OSError) as error:
            log.error("backup failed: %s", error)
        _sleep_while_parent(every_minutes * 60, parent)


def _sleep_while_parent(seconds: float, parent: int | None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (parent is None or os.getppid() == parent):
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
