"""Group commit: events queued for the lock behind an open transaction share its commit,
each returns only once committed, one failing event leaves the others of its batch intact,
and an event with nobody queued behind it commits at once. Under gevent, where nothing
queues, the greenlets ready to run share a commit, up to ``BATCH_LIMIT`` events.

Here the first event starts the others in threads while it holds the lock and waits until
they are queued; its wait before committing (``Storage.commit_window``) is replaced by one
that waits until each has joined the batch or failed, so which events share a commit is
decided, not left to timing.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.storage import HANG, wait_for

import study.storage.database as storage_module
from study.storage.database import BATCH_LIMIT, COMMIT_WINDOWS, CONTENDED_WINDOW, Storage


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "study.sqlite")


def commits_of(storage: Storage) -> list[str]:
    """Every COMMIT the storage's connection runs, recorded as it runs."""
    statements: list[str] = []
    storage.db.conn.set_trace_callback(
        lambda sql: statements.append(sql) if sql.strip().upper() == "COMMIT" else None)
    return statements


def insert_step(storage: Storage, code: str) -> None:
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (code,))


def failing_event(storage: Storage, code: str) -> None:
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (code,))
        raise RuntimeError("the handler failed")


class Joiners:
    """Runs events in threads while the leader yields, and records how each ended."""

    def __init__(self, storage: Storage, events: dict[str, Callable[[], None]]) -> None:
        self.storage = storage
        self.events = events
        self.outcome: dict[str, str] = {}
        self.visible_on_return: dict[str, bool] = {}
        self.threads: list[threading.Thread] = []
        self.settled = threading.Semaphore(0)

    def run(self, name: str) -> None:
        try:
            self.events[name]()
        except Exception as error:  # the outcome is what the test checks
            self.outcome[name] = f"raised {type(error).__name__}: {error}"
            self.settled.release()
            return
        self.outcome[name] = "returned"
        reader = sqlite3.connect(self.storage.path)
        self.visible_on_return[name] = reader.execute(
            "SELECT 1 FROM participants WHERE code = ?", (name,)).fetchone() is not None
        reader.close()

    def start_and_queue(self) -> None:
        """Inside the first event: start every other event and wait until each waits for
        the lock."""
        for name in self.events:
            thread = threading.Thread(target=self.run, args=(name,))
            self.threads.append(thread)
            thread.start()
        wait_for(lambda: self.storage.queued == len(self.events))

    def wait_until_joined(self) -> None:
        """The first event's yield before committing: until each other one joined or failed."""
        failures = sum(1 for name in self.events if name.startswith("fail"))
        for _ in range(failures):
            assert self.settled.acquire(timeout=HANG)
        joined = len(self.events) - failures
        wait_for(lambda: self.storage._batch is not None
                 and self.storage._batch.members == 1 + joined)

    def finish(self) -> None:
        for thread in self.threads:
            thread.join(HANG)
            assert not thread.is_alive()


def leader_yield(monkeypatch: pytest.MonkeyPatch, joiners: Joiners) -> list[float]:
    """Replace the first event's wait before committing (the first sleep: nothing else
    sleeps here) by waiting for the others; returns the seconds it asked to wait."""
    real_sleep = storage_module.time.sleep
    asked: list[float] = []

    class Time:
        monotonic = staticmethod(storage_module.time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            if not asked:
                asked.append(seconds)
                joiners.wait_until_joined()
                return
            real_sleep(seconds)

    monkeypatch.setattr(storage_module, "time", Time)
    return asked


def leading_event(storage: Storage, joiners: Joiners) -> None:
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES ('leader', 'demo', 1.0, 'consent')")
        joiners.start_and_queue()


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_events_queued_behind_one_share_its_commit_and_return_once_committed(
        tmp_path, monkeypatch, durability):
    """The first event waits ``COMMIT_WINDOWS[durability]`` before committing: under
    ``normal``, which waits for no disk, it only yields. Either way the events queued
    meanwhile share its commit."""
    storage = Storage(tmp_path / "study.sqlite", durability=durability)
    joiners = Joiners(storage, {f"joiner{i}": (lambda i=i: insert_step(storage, f"joiner{i}"))
                                for i in range(5)})
    asked = leader_yield(monkeypatch, joiners)
    commits = commits_of(storage)
    leading_event(storage, joiners)
    joiners.finish()
    assert commits == ["COMMIT"]
    assert asked == [COMMIT_WINDOWS[durability]]
    assert durability == "full" or asked == [0]  # normal waits for no disk: nor a window
    assert joiners.outcome == {f"joiner{i}": "returned" for i in range(5)}
    assert joiners.visible_on_return == {f"joiner{i}": True for i in range(5)}
    rows = sqlite3.connect(storage.path).execute("SELECT count(*) FROM participants").fetchone()
    assert rows == (6,)


def test_a_failing_event_leaves_the_rest_of_its_batch_committed(storage, monkeypatch):
    joiners = Joiners(storage, {"joiner": lambda: insert_step(storage, "joiner"),
                                "fail": lambda: failing_event(storage, "fail")})
    leader_yield(monkeypatch, joiners)
    commits = commits_of(storage)
    leading_event(storage, joiners)
    joiners.finish()
    assert commits == ["COMMIT"]
    assert joiners.outcome["fail"] == "raised RuntimeError: the handler failed"
    assert joiners.outcome["joiner"] == "returned"
    codes = {code for (code,) in sqlite3.connect(storage.path).execute(
        "SELECT code FROM participants")}
    assert codes == {"leader", "joiner"}


def test_a_failed_commit_fails_every_event_of_its_batch(storage, monkeypatch):
    joiners = Joiners(storage, {"joiner": lambda: insert_step(storage, "joiner")})
    leader_yield(monkeypatch, joiners)
    with pytest.raises(sqlite3.IntegrityError), storage.event() as db:
        # A deferred foreign key the batch violates: SQLite refuses its COMMIT.
        db.execute("PRAGMA defer_foreign_keys = ON")
        db.execute("INSERT INTO steps (participant_id, step, at) VALUES (999, 'consent', 1.0)")
        joiners.start_and_queue()
    joiners.finish()
    assert joiners.outcome["joiner"].startswith("raised IntegrityError")
    rows = sqlite3.connect(storage.path).execute("SELECT count(*) FROM participants").fetchone()
    assert rows == (0,)
    insert_step(storage, "after")  # the next batch starts afresh
    assert storage.participant("after") is not None


def test_an_event_with_nobody_queued_commits_at_once_without_yielding(storage, monkeypatch):
    def no_yield(seconds: float) -> None:
        raise AssertionError(f"yielded {seconds} s with nobody queued")

    monkeypatch.setattr(storage_module.time, "sleep", no_yield)
    commits = commits_of(storage)
    insert_step(storage, "one")
    insert_step(storage, "two")
    assert commits == ["COMMIT", "COMMIT"]
    assert storage._batch is None


# A gevent-patched process (as under ``study serve``) with a database whose commits are
# counted; the scripts below run after it.
GEVENT_STORAGE = """
import json, sqlite3, sys
from gevent import monkey
monkey.patch_all()
import gevent
from study.storage.database import COMMIT_WINDOWS, Storage

storage = Storage(sys.argv[1], durability="normal")
commits = []
storage.db.conn.set_trace_callback(
    lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
"""

GEVENT_BATCHES = GEVENT_STORAGE + """
# A window no busy machine outruns: gevent lets its loop look at the timers every few
# milliseconds even with greenlets ready, so at the study's 2 ms the ready greenlets of a
# slow machine could find the last batch committed before they joined it.
storage.commit_window = 1.0
def event(i):
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (f"g{i}",))
        if i == 3:
            raise RuntimeError("the handler failed")
    reader = sqlite3.connect(sys.argv[1])
    seen = reader.execute("SELECT 1 FROM participants WHERE code = ?", (f"g{i}",)).fetchone()
    reader.close()
    return seen is not None
def outcome(i):
    try:
        return "visible" if event(i) else "invisible"
    except RuntimeError as error:
        return str(error)
greenlets = [gevent.spawn(outcome, i) for i in range(int(sys.argv[2]))]
gevent.joinall(greenlets)
lone = len(commits)
event(1000)  # nobody else ready: it commits alone
print(json.dumps({"commits": lone, "alone": len(commits) - lone,
                  "outcomes": [g.value for g in greenlets]}))
"""


def test_under_gevent_ready_greenlets_share_commits_of_at_most_the_batch_limit(tmp_path):
    """As under ``study serve``: a greenlet runs until it waits, so nothing ever queues for
    the lock. The first event waits before committing, and the events of the
    greenlets ready to run join it, up to ``BATCH_LIMIT``; each returns committed, and a
    failing one leaves the others of its batch stored."""
    greenlets = 3 * BATCH_LIMIT + 5
    run = subprocess.run([sys.executable, "-c", GEVENT_BATCHES, str(tmp_path / "g.sqlite"),
                          str(greenlets)], capture_output=True, text=True, timeout=HANG,
                         check=True)
    result = json.loads(run.stdout)
    assert result["commits"] == 4  # three full batches and the rest
    assert result["alone"] == 1
    assert result["outcomes"] == ["visible"] * 3 + ["the handler failed"] + [
        "visible"] * (greenlets - 4)


# A message arriving ``after`` seconds, stored by its own event.
GEVENT_MESSAGE = GEVENT_STORAGE + """
def event(code, after):
    gevent.sleep(after)
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (code,))
    return storage.participant(code) is not None
"""

GEVENT_WINDOW = GEVENT_MESSAGE + """
storage.commit_window = COMMIT_WINDOWS["full"]  # its commit waits for a sync of the log
# the second message arrives while the first waits: its timer is due before the first's
events = [gevent.spawn(event, "first", 0),
          gevent.spawn(event, "later", storage.commit_window / 4)]
gevent.joinall(events)
print(json.dumps({"commits": len(commits), "stored": [g.value for g in events]}))
"""


def test_under_gevent_a_message_arriving_while_the_first_waits_shares_its_commit(tmp_path):
    """Under full durability, a message that was not ready when the first event began
    waiting, but came within the window, joins its commit and its sync of the log: at a
    person's pace few messages are ready at the same instant."""
    run = subprocess.run([sys.executable, "-c", GEVENT_WINDOW, str(tmp_path / "w.sqlite")],
                         capture_output=True, text=True, timeout=HANG, check=True)
    assert json.loads(run.stdout) == {"commits": 1, "stored": [True, True]}


GEVENT_SHARED = GEVENT_MESSAGE + """
storage.commit_window = COMMIT_WINDOWS["full"]
storage.shared_file = True
another_process = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
def another_writes():
    gevent.sleep(storage.commit_window / 2)
    try:
        another_process.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return False
    another_process.execute("COMMIT")
    return True
events = [gevent.spawn(event, "first", 0),
          gevent.spawn(event, "later", storage.commit_window / 4)]
other = gevent.spawn(another_writes)
gevent.joinall(events + [other])
print(json.dumps({"commits": len(commits), "stored": [g.value for g in events],
                  "lock free meanwhile": other.value}))
"""


def test_where_processes_share_the_file_events_gather_before_the_write_lock(tmp_path):
    """Where processes share the file, a message arriving while the first waits still
    shares its commit, and another process can write meanwhile: the wait comes before
    the write lock is taken, so nobody waits for a lock held idle."""
    run = subprocess.run([sys.executable, "-c", GEVENT_SHARED, str(tmp_path / "s.sqlite")],
                         capture_output=True, text=True, timeout=HANG, check=True)
    assert json.loads(run.stdout) == {"commits": 1, "stored": [True, True],
                                      "lock free meanwhile": True}


def test_after_waiting_for_another_process_a_commit_gathers_longer_before_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where processes share the file under normal durability, the first event of a commit
    yields once before it asks for the write lock; after a turn at the lock that had to
    wait for another process, it gathers for ``CONTENDED_WINDOW``, and once a turn comes
    at once, it yields once again."""
    storage = Storage(tmp_path / "shared.sqlite", durability="normal")
    storage.shared_file = True
    other = sqlite3.connect(tmp_path / "shared.sqlite", timeout=0, isolation_level=None)
    asked: list[float] = []

    class Time:
        monotonic = staticmethod(storage_module.time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            asked.append(seconds)
            if other.in_transaction and len(asked) > 2:  # after the two gathers, a retry
                other.execute("COMMIT")  # of the write lock: the other process is done

    monkeypatch.setattr(storage_module, "time", Time)

    def insert(code: str) -> None:
        with storage.event() as db:
            db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                       "VALUES (?, 'demo', 1.0, 'consent')", (code,))

    insert("alone")
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    insert("kept-waiting")
    gathered_after_waiting = len(asked)
    insert("after-a-wait")
    insert("at-once-again")
    assert asked[:2] == [COMMIT_WINDOWS["normal"]] * 2  # alone, then the one kept waiting
    assert len(asked) == gathered_after_waiting + 2 and gathered_after_waiting > 2
    assert asked[gathered_after_waiting:] == [CONTENDED_WINDOW, COMMIT_WINDOWS["normal"]]
    assert [row["code"] for row in storage.all("SELECT code FROM participants ORDER BY id")] == [
        "alone", "kept-waiting", "after-a-wait", "at-once-again"]
    storage.close()
    other.close()
