"""Checkpoints of the write-ahead log, off the server's event loop.

SQLite copies the log into the database (a checkpoint: the log's pages written again, the
log and the database each synced) in the commit that takes the log past 1,000 pages. In a
gevent server that commit runs on the one thread every participant shares, so each
checkpoint stalls them all; a study of teams at 1,000 people made about eight a second
(issue #29). A ``Checkpointer`` copies the log instead on a native thread of its own, with
its own connection, once a second: the loop goes on meanwhile (SQLite lets go of the
interpreter while it writes), and a page rewritten by many commits in that second is
copied once.

A checkpoint of this kind (``PASSIVE``) waits for nobody: it copies what no reader still
needs and leaves the rest for the next one. The log starts over from its beginning only
when a commit finds all of it copied, which under a steady stream of commits rarely
happens between two such checkpoints: the log grew to ``FALLBACK_PAGES`` (80 MB), where a
commit on the loop checkpointed it by itself and cut it back, about every two seconds with
teams of three at 1,000 people. So a log longer than ``RESTART_PAGES`` is started over by
the thread too (``RESTART``): it holds new commits back for the moment it takes to copy
what the passive checkpoint left, and the next commit writes the log from its beginning.
It is not tried while a reader of an older snapshot (a backup, an export) keeps pages of
the log from being copied, which it would wait for with commits held back.

A restart needs the write lock and then that no reader is in the log, and SQLite's busy
handler waits for each in sleeps of 1, 2, 5, 10 ms and more: a server's batches hold the
lock most of the time, so the restart waited 11-20 ms for a gap, once a second with teams
of three at 1,000 people, holding every commit back once it had the lock and slept on the
readers (a quarter of the slowest acknowledgements fell in one, issue #29). So the
connection has no busy handler: a restart that finds the lock or a reader taken returns at
once, and is asked again every ``RESTART_RETRY_SECONDS`` for up to
``RESTART_WAIT_SECONDS``; commits wait only while one copies and syncs.

Where several processes share the file, one of them checkpoints (``turn``: the round
scheduler's lease holder): each copy of a page rewritten within the second is work done
again, and two processes' checkpoints a second copied the busy pages twice."""

from __future__ import annotations

import atexit
import importlib
import logging
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# How often the log is copied into the database.
INTERVAL_SECONDS = 1.0
# The log's length at which a commit checkpoints by itself, as SQLite's default does at
# 1,000 pages: 80 MB, cut back to ``journal_size_limit`` when the log starts over.
FALLBACK_PAGES = 20_000
# The log's length past which the thread starts it over (16 MB).
RESTART_PAGES = 4_000
# How long starting it over is asked again while a commit or a reader is under way, and
# how often.
RESTART_WAIT_SECONDS = 0.05
RESTART_RETRY_SECONDS = 0.0005
# How long stopping waits for a checkpoint under way.
STOP_WAIT_SECONDS = 10.0


def native(module: str, name: str) -> Callable[..., Any]:
    """``module.name`` as it was before gevent patched it, if it did: the thread must be a
    native one, or the checkpoint would run on the loop after all."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched(module):
        return getattr(importlib.import_module(module), name)
    return monkey.get_original(module, name)


class Checkpointer:
    """Checkpoints the log of the database at ``path`` every ``interval`` seconds on a
    native thread, until stopped (at the latest when the interpreter exits: a native
    thread still using SQLite as the interpreter is taken down crashes it). ``runs`` counts
    the checkpoints made, ``restarts`` the logs started over, ``last`` is the latest
    checkpoint's outcome (``checkpoint``). ``turn``, if given, says at each interval whether
    this process is the one to checkpoint (read on the thread: it must not block)."""

    def __init__(self, path: Path, interval: float = INTERVAL_SECONDS,
                 turn: Callable[[], bool] | None = None) -> None:
        self.path = path
        self.interval = interval
        self.turn = turn
        self.runs = 0
        self.restarts = 0  # logs started over
        self.last: tuple[int, int, int] | None = None
        self.stopped = False
        self._last_error = ""
        # Native locks: one the thread waits on between checkpoints (released to stop it
        # at once), one it holds while it runs.
        self._wake = native("_thread", "allocate_lock")()
        self._alive = native("_thread", "allocate_lock")()

    @property
    def running(self) -> bool:
        return self._alive.locked()

    def start(self) -> None:
        self._wake.acquire()
        self._alive.acquire()
        native("_thread", "start_new_thread")(self._run, ())
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stop the thread and wait for its checkpoint under way, if any, to end."""
        if self.stopped:
            return
        self.stopped = True
        if self._wake.locked():
            self._wake.release()
        if self._alive.acquire(timeout=STOP_WAIT_SECONDS):
            self._alive.release()
        atexit.unregister(self.stop)

    def checkpoint(self, connection: sqlite3.Connection) -> tuple[int, int, int]:
        """One checkpoint: (1 if a reader or writer kept some pages back, pages in the
        log, pages copied); a log past ``RESTART_PAGES`` is then started over."""
        outcome = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if outcome[1] > RESTART_PAGES and outcome[2] == outcome[1]:  # no old snapshot read
            outcome = self.restart(connection)
            self.restarts += outcome[0] == 0
        self.last = tuple(outcome)
        self.runs += 1
        return self.last

    def restart(self, connection: sqlite3.Connection) -> tuple[int, int, int]:
        """Start the log over, asking again while the write lock or a reader is taken
        (each attempt returns at once: the connection waits for nobody)."""
        sleep, clock = native("time", "sleep"), native("time", "monotonic")
        give_up = clock() + RESTART_WAIT_SECONDS
        while True:
            outcome = connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            if outcome[0] == 0 or clock() > give_up:
                return tuple(outcome)
            sleep(RESTART_RETRY_SECONDS)

    def _run(self) -> None:
        connection = sqlite3.connect(str(self.path), isolation_level=None, timeout=0)
        try:
            while not self._wake.acquire(timeout=self.interval):
                if self.turn is None or self.turn():
                    self.checkpoint_or_log(connection)
        finally:
            connection.close()
            self._alive.release()

    def checkpoint_or_log(self, connection: sqlite3.Connection) -> None:
        """A failed checkpoint (a full disk) is tried again next time; the commits go on
        into the log meanwhile. Each new reason is logged once."""
        try:
            self.checkpoint(connection)
            self._last_error = ""
        except sqlite3.Error as error:
            if str(error) != self._last_error:
                log.warning("checkpoint of %s failed (tried again every %s s): %s",
                            self.path, self.interval, error)
            self._last_error = str(error)
