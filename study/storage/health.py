"""When the database cannot be written: a full disk or a failing one.

A full disk must not turn into errors for participants or a flood in the log. A write that
fails for lack of space (``SQLITE_FULL``) or an I/O error (``SQLITE_IOERR``) raises
``StorageUnavailable``: nothing of that event was stored, and the sender is asked to try
again later. ``StorageHealth`` remembers since when writes fail, logs the condition at most
once a minute, and logs once when writes succeed again. ``disk_space`` is what the console
shows of the database's filesystem, with a warning before it fills.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# SQLite's primary result codes for a write the disk refused.
SQLITE_IOERR, SQLITE_FULL = 10, 13
FAULT_CODES = {SQLITE_IOERR, SQLITE_FULL}
FAULT_MESSAGES = ("database or disk is full", "disk i/o error")
LOG_EVERY_SECONDS = 60.0
# Seconds a participant's page waits before it sends a message again.
RETRY_AFTER_SECONDS = 5
# The console warns when the database's filesystem has less free space than either.
MIB = 1024 * 1024
LOW_DISK_BYTES = 500 * MIB
LOW_DISK_FRACTION = 0.05


class StorageUnavailable(Exception):
    """The database cannot be written right now (full disk, I/O error); nothing of the
    event was stored. Try again later."""


def is_storage_fault(error: BaseException) -> bool:
    """Whether an error says the disk refused a write (not a bug, not a busy database)."""
    if isinstance(error, StorageUnavailable):
        return True
    if not isinstance(error, sqlite3.Error):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in FAULT_CODES:
        return True
    return any(message in str(error).lower() for message in FAULT_MESSAGES)


class StorageHealth:
    """Whether this process can write the database, and a log that says so once a minute.

    Thread-safe: every event that fails reports here; the first commit that succeeds
    afterwards ends the episode."""

    def __init__(self, every: float = LOG_EVERY_SECONDS) -> None:
        self.every = every
        self.since: float | None = None  # epoch seconds of the episode's first failure
        self.failures = 0  # failed events in the episode
        self.error = ""
        self.episodes = 0  # episodes so far, so others can tell one happened meanwhile
        self._logged_at = -every  # the first failure is logged at once
        self._unlogged = 0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.since is None

    def failed(self, error: BaseException) -> None:
        """One event could not be written."""
        with self._lock:
            if self.since is None:
                self.since, self.failures = time.time(), 0
                self.episodes += 1
            self.failures += 1
            self._unlogged += 1
            self.error = str(error)
            if time.monotonic() - self._logged_at < self.every:
                return
            self._logged_at, count, self._unlogged = time.monotonic(), self._unlogged, 0
        log.error("the database cannot be written (%s): %d write(s) failed since the last "
                  "report, unavailable since %s; participants are asked to retry",
                  self.error, count, time.strftime("%H:%M:%S", time.localtime(self.since)))

    def succeeded(self) -> bool:
        """A commit went through; True when it ends an episode of failures."""
        if self.since is None:
            return False
        with self._lock:
            if self.since is None:
                return False
            seconds, failures = time.time() - self.since, self.failures
            self.since = None
        log.warning("the database is written again after %.0f s unavailable (%d write(s) "
                    "failed and were retried)", seconds, failures)
        return True

    def status(self) -> dict[str, Any]:
        """What the console shows: available, or since when not, how often and why."""
        return {"available": self.available, "since": self.since,
                "failures": self.failures if self.since is not None else 0,
                "error": self.error if self.since is not None else None}


def disk_space(path: Path, low_bytes: int = LOW_DISK_BYTES,
               low_fraction: float = LOW_DISK_FRACTION) -> dict[str, Any]:
    """Free space of the filesystem holding ``path`` (the database), and whether it is low:
    under ``low_bytes`` or under ``low_fraction`` of the filesystem. Bytes are whole MiB, so
    the console's snapshot changes with the disk only when a MiB changes."""
    usage = shutil.disk_usage(path if os.path.exists(path) else Path(path).parent)
    fraction = usage.free / usage.total if usage.total else 0.0
    return {"free_bytes": usage.free // MIB * MIB, "total_bytes": usage.total // MIB * MIB,
            "free_fraction": round(fraction, 4),
            "low": usage.free < low_bytes or fraction < low_fraction,
            "threshold_bytes": low_bytes, "threshold_fraction": low_fraction}
