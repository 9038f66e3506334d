"""A small disk (a tmpfs) and a file that fills it; an event to store and what another
connection sees stored; a wait for a condition."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from study.storage.database import Storage

HANG = 60.0  # seconds: a wait this long only catches a hang


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory``, unmounted afterwards."""
    directory.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk with one file, to the last byte."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
        try:
            while True:
                out.write(b"\0")
        except OSError:
            pass
    return filler


def pin_the_log(db: Path, timeout: float = HANG) -> sqlite3.Connection:
    """An empty write-ahead log that cannot start over, so that every write needs new
    space until the returned connection is closed: the log is emptied to no bytes (tried
    again while a commit under way holds it), and a reader holds a snapshot with a frame not
    yet in the database. (A log copied whole into the database is reused from its start,
    and a full disk takes writes until the room it holds is used up; a test that fills the
    disk wants it full at once.)"""
    connection = sqlite3.connect(db, isolation_level=None)
    wait_for(lambda: connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0,
             timeout, "an emptied write-ahead log")
    connection.execute("PRAGMA user_version = 0")  # a frame in the log
    connection.execute("BEGIN")
    connection.execute("SELECT count(*) FROM participants").fetchone()
    return connection


def insert_participant(storage: Storage, code: str) -> None:
    """One event: a participant with ``code``."""
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (code,))


def stored_codes(path: Path) -> set[str]:
    """The participant codes another connection sees committed."""
    reader = sqlite3.connect(path)
    try:
        return {code for (code,) in reader.execute("SELECT code FROM participants")}
    finally:
        reader.close()


def wait_for(condition: Callable[[], bool], timeout: float = HANG,
             what: str = "condition") -> None:
    """Poll ``condition`` until it holds. The pause is an ``Event`` wait, not
    ``time.sleep``, which some storage tests replace."""
    pause = threading.Event()
    give_up = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} not reached within {timeout} s")
        pause.wait(0.01)
