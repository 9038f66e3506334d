"""Backups of a running study's database with SQLite's online backup API.

The copy is taken by a connection of its own in one step: in WAL mode that is one read
transaction, so participants' writes go on meanwhile and the copy is one consistent
snapshot. It is written beside its final name, checked with ``PRAGMA integrity_check``,
synced and then renamed, so a backup file is either whole and checked or absent.

``study serve --backup-every MINUTES`` runs ``study backup --every`` as a child process:
a backup never runs inside a process that serves participants.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)
# How long the copy waits for a writer holding SQLite's lock (rare in WAL mode).
BUSY_SECONDS = 30


class BackupFailed(RuntimeError):
    """The copy could not be made or did not pass its integrity check."""


@dataclass(frozen=True)
class Backup:
    """A finished, checked copy."""

    path: Path
    bytes: int
    seconds: float


def backup(database: Path, out: Path) -> Backup:
    """Copy ``database`` to ``out`` while it is in use; check, sync and rename the copy."""
    database, out = Path(database), Path(out)
    if not database.is_file():
        raise BackupFailed(f"{database}: no such database")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    source = sqlite3.connect(database, timeout=BUSY_SECONDS)
    target = sqlite3.connect(partial)
    try:
        source.backup(target)  # one step: one consistent snapshot
        target.execute("PRAGMA journal_mode=DELETE")  # a single self-contained file
        verdict = target.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.Error as error:
        partial.unlink(missing_ok=True)
        raise BackupFailed(f"{database}: {error}") from error
    finally:
        source.close()
        target.close()
    if verdict != "ok":
        partial.unlink(missing_ok=True)
        raise BackupFailed(f"{out}: the copy failed its integrity check: {verdict}")
    _sync(partial)
    partial.replace(out)
    _sync(out.parent)
    return Backup(out, out.stat().st_size, time.perf_counter() - started)


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
