"""The write-ahead log's checkpoints on a thread of their own (``study.storage.checkpointer``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from study.storage import checkpointer as checkpointer_module
from study.storage.checkpointer import FALLBACK_PAGES, Checkpointer
from study.storage.database import Storage

PAGES_WRITTEN = 1_500  # more than SQLite's own checkpoint after 1,000 pages


def fill_log(storage: Storage, pages: int = PAGES_WRITTEN) -> None:
    """Commit about ``pages`` pages of rows, one commit a page."""
    storage.write("CREATE TABLE IF NOT EXISTS filler (id INTEGER PRIMARY KEY, data BLOB)")
    for _ in range(pages):
        storage.write("INSERT INTO filler (data) VALUES (randomblob(3000))")


def log_pages(path: Path) -> tuple[int, int]:
    """(pages in the log, pages of it already copied into the database), as a passive
    checkpoint finds them after copying what it can."""
    with sqlite3.connect(path) as connection:
        _, pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return pages, copied


def test_commits_leave_the_log_to_the_checkpointer(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    storage.checkpoint_in_background(interval=3600)  # started, but not due in this test
    fill_log(storage)
    assert storage.one("PRAGMA wal_autocheckpoint") == {"wal_autocheckpoint": FALLBACK_PAGES}
    assert storage.checkpointer is not None and storage.checkpointer.runs == 0
    pages, _ = log_pages(storage.path)
    assert pages >= PAGES_WRITTEN  # no commit copied the log into the database and restarted it
    storage.close()


def test_a_commit_checkpoints_by_itself_without_the_checkpointer(tmp_path: Path) -> None:
    """What the checkpointer takes over: SQLite's own checkpoint in the committing call."""
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    fill_log(storage)
    pages, _ = log_pages(storage.path)
    assert pages < PAGES_WRITTEN
    storage.close()


def test_the_thread_copies_the_whole_log_into_the_database(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    checkpointer = storage.checkpoint_in_background(interval=0.05)
    fill_log(storage)
    runs = checkpointer.runs
    while checkpointer.runs < runs + 2:  # one that may have begun during the writes, one after
        time.sleep(0.05)
    busy, pages, copied = checkpointer.last
    assert busy == 0 and pages > 0 and copied == pages
    assert storage.one("SELECT count(*) AS n FROM filler") == {"n": PAGES_WRITTEN}
    storage.close()
    while checkpointer.running:  # stopped with its storage
        time.sleep(0.05)



def test_of_two_processes_sharing_the_file_the_one_whose_turn_it_is_checkpoints(
        tmp_path: Path) -> None:
    """As the round scheduler's lease passes from one process to another, so do the
    checkpoints: a page rewritten in the second is copied once, not by each."""
    holder = {"first": True}
    first = Storage(tmp_path / "study.sqlite", durability="normal")
    second = Storage(tmp_path / "study.sqlite", durability="normal")
    checkpointers = {
        "first": first.checkpoint_in_background(0.02, lambda: holder["first"]),
        "second": second.checkpoint_in_background(0.02, lambda: not holder["first"]),
    }
    for turn in ("first", "second"):
        holder["first"] = turn == "first"
        other = checkpointers["second" if turn == "first" else "first"]
        others_runs = other.runs
        fill_log(first, 50)
        runs = checkpointers[turn].runs
        while checkpointers[turn].runs < runs + 2:  # one that may have begun during the writes
            time.sleep(0.02)
        assert other.runs <= others_runs + 1  # one that may have begun as the turn passed
        assert checkpointers[turn].last[2] == checkpointers[turn].last[1] > 0  # all copied
    first.close()
    second.close()

@pytest.fixture
def short_restart(monkeypatch: pytest.MonkeyPatch) -> int:
    """A log past 100 pages is started over (``RESTART_PAGES``, 4,000 in a server)."""
    monkeypatch.setattr(checkpointer_module, "RESTART_PAGES", 100)
    return 100


def test_a_long_log_is_started_over_by_the_thread(tmp_path: Path, short_restart: int) -> None:
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    fill_log(storage, short_restart * 3)
    checkpointer = Checkpointer(storage.path)
    with sqlite3.connect(storage.path, isolation_level=None) as connection:
        busy, pages, copied = checkpointer.checkpoint(connection)
    assert (busy, checkpointer.restarts) == (0, 1) and copied == pages >= short_restart * 3
    storage.write("INSERT INTO filler (data) VALUES (randomblob(3000))")
    pages, _ = log_pages(storage.path)
    assert pages < 10  # the commit after it wrote the log from its beginning
    storage.close()


def test_a_log_a_reader_still_needs_is_not_started_over(tmp_path: Path,
                                                        short_restart: int) -> None:
    """A reader of an older snapshot (a backup, an export) would hold the commits back while
    the restart waited for it: the passive checkpoint alone runs."""
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    fill_log(storage, short_restart * 2)
    reader = sqlite3.connect(storage.path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM filler").fetchone()  # its snapshot from here on
    fill_log(storage, short_restart * 2)
    checkpointer = Checkpointer(storage.path)
    with sqlite3.connect(storage.path, isolation_level=None) as connection:
        busy, pages, copied = checkpointer.checkpoint(connection)
    assert (busy, checkpointer.restarts) == (0, 0) and copied < pages
    reader.execute("COMMIT")
    reader.close()
    with sqlite3.connect(storage.path, isolation_level=None) as connection:
        checkpointer.checkpoint(connection)
    assert checkpointer.restarts == 1  # once it is gone
    storage.close()


class HeldLock:
    """The connection the checkpointer uses, while another holds the write lock (a batch
    of the server's) until the checkpointer's ``release_after``-th restart was refused."""

    def __init__(self, path: Path, release_after: int | None) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, timeout=0)
        self.writer = sqlite3.connect(path, isolation_level=None)
        self.writer.execute("BEGIN IMMEDIATE")
        self.writer.execute("INSERT INTO filler (data) VALUES (randomblob(3000))")
        self.release_after = release_after
        self.refused = 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        cursor = self.connection.execute(sql)
        if "RESTART" in sql:
            row = cursor.fetchone()
            self.refused += row[0] == 1
            if row[0] == 1 and self.refused == self.release_after:
                self.writer.execute("COMMIT")  # the batch commits between two attempts
            cursor = self.connection.execute("SELECT ?, ?, ?", row)
        return cursor


def test_a_restart_asks_again_while_a_batch_holds_the_lock(tmp_path: Path,
                                                           short_restart: int) -> None:
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    fill_log(storage, short_restart * 3)
    held = HeldLock(storage.path, release_after=1)
    checkpointer = Checkpointer(storage.path)
    busy, pages, copied = checkpointer.checkpoint(held)  # type: ignore[arg-type]
    assert (held.refused, busy, checkpointer.restarts) == (1, 0, 1) and copied == pages
    storage.close()


def test_a_restart_gives_up_without_holding_the_batch_back(tmp_path: Path,
                                                           short_restart: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer_module, "RESTART_WAIT_SECONDS", 0.0)
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    fill_log(storage, short_restart * 3)
    held = HeldLock(storage.path, release_after=None)
    checkpointer = Checkpointer(storage.path)
    busy, _, _ = checkpointer.checkpoint(held)  # type: ignore[arg-type]
    assert (held.refused, busy, checkpointer.restarts) == (1, 1, 0)
    held.writer.execute("COMMIT")  # the batch was never made to wait
    assert storage.one("SELECT count(*) AS n FROM filler") == {"n": short_restart * 3 + 1}
    storage.close()


def test_a_failed_checkpoint_is_logged_once_and_tried_again(tmp_path: Path, caplog) -> None:
    path = tmp_path / "study.sqlite"
    Storage(path, durability="normal").close()
    checkpointer = Checkpointer(path)

    class Refusing:
        def execute(self, sql: str) -> None:
            raise sqlite3.OperationalError("database or disk is full")

    for _ in range(3):
        checkpointer.checkpoint_or_log(Refusing())  # type: ignore[arg-type]
    assert [record.getMessage().count("disk is full") for record in caplog.records] == [1]
    with sqlite3.connect(path) as connection:
        checkpointer.checkpoint_or_log(connection)
    assert checkpointer.runs == 1


def test_in_a_gevent_process_the_checkpoints_run_off_the_loop(tmp_path: Path) -> None:
    """The loop keeps turning while a checkpoint is under way: the thread is a native one.
    Were it a greenlet, its native wait below would hold the loop, and nothing would
    release it."""
    script = f"""
from gevent import monkey; monkey.patch_all()
import gevent
from study.storage.checkpointer import Checkpointer
checkpointer = Checkpointer({str(tmp_path / 'study.sqlite')!r}, interval=0.01)
held, release = [], monkey.get_original("_thread", "allocate_lock")()
release.acquire()
def held_checkpoint(connection):
    held.append(True)
    release.acquire()  # a native wait
    release.release()
    return 0, 0, 0
checkpointer.checkpoint = held_checkpoint
checkpointer.start()
while not held:
    gevent.sleep(0.001)
turns = 0
while turns < 50 and len(held) == 1:
    gevent.sleep(0.001)
    turns += 1
release.release()
print(turns, len(held))
"""
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=60, cwd=Path(__file__).parents[2])
    except subprocess.TimeoutExpired as stuck:
        raise AssertionError("the loop stopped while a checkpoint was under way") from stuck
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["50", "1"]  # 50 turns, all during the one checkpoint
