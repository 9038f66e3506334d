"""Full durability by group commit: one fsync of the write-ahead log makes every commit made
before it durable, however many there were (docs/database.md#durability).

SQLite commits with ``synchronous=NORMAL`` (the log written, not synced); an event under
``full`` durability is acknowledged only once a sync that began after its commit has ended.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from study.storage.checkpointer import native
from study.storage.health import StorageUnavailable


def cooperative() -> bool:
    """Whether gevent patched threading: greenlets on one thread, each running until it
    waits, so no event ever queues for the lock while another writes."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def fsync_file(path: Path) -> None:
    """Flush a file's written data to the disk. A log that is gone was checkpointed into
    the database (which a checkpoint syncs) and removed: nothing is left to sync."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WalSync:
    """Commits are numbered as they are made (``committed``); ``wait`` returns once a sync
    that began after a commit has ended (``synced``), and raises ``StorageUnavailable`` if
    the sync that was to cover it failed. ``syncs`` counts the fsyncs run.

    Where threads wait (the command line, the tests), the first waiter with no sync under
    way runs one for every commit so far, and those that commit meanwhile wait for the
    next. In a gevent worker the syncs run on a native thread of their own (``SyncThread``):
    on the event loop each fsync stopped every participant of the process for as long as
    the disk took, a tenth of a loaded worker's time (issue #29)."""

    def __init__(self, wal: Path, sync: Callable[[Path], None] | None = None) -> None:
        self.wal = wal
        self.sync = sync or fsync_file
        self.committed = 0
        self.synced = 0
        self.syncs = 0
        self.failed: tuple[int, BaseException] | None = None  # up to which commit, why
        self._syncing = False
        self._condition = threading.Condition()
        self._thread: SyncThread | None = None

    def commit_made(self) -> int:
        """Number the commit just made (called under the storage's lock, in commit order)."""
        with self._condition:
            self.committed += 1
            return self.committed

    def wait(self, commit: int) -> None:
        """Return once ``commit`` (and every commit before it) is on the disk."""
        if cooperative():
            if self._thread is None:
                self._thread = SyncThread(self)
            self._thread.wait(commit)
        else:
            self._wait_or_sync(commit)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.stop()

    def durable(self, commit: int) -> bool:
        """Whether ``commit`` is on the disk; raises if the sync that covered it failed."""
        if self.synced >= commit:
            return True
        if self.failed is not None and commit <= self.failed[0]:
            raise StorageUnavailable(f"the write-ahead log could not be synced: "
                                     f"{self.failed[1]}")
        return False

    def sync_up_to(self, target: int) -> None:
        """One sync for every commit up to ``target``, its outcome recorded either way (a
        failure fails every commit it was to cover)."""
        try:
            self.sync(self.wal)
        except BaseException as error:
            self.failed = (target, error)
            raise
        else:
            self.synced = max(self.synced, target)
        finally:
            self.syncs += 1

    def _wait_or_sync(self, commit: int) -> None:
        while True:
            with self._condition:
                while self._syncing and self.synced < commit:
                    self._condition.wait()
                if self.durable(commit):
                    return
                self._syncing, target = True, self.committed
            try:
                self.sync_up_to(target)
            except OSError as error:
                raise StorageUnavailable(f"the write-ahead log could not be synced: "
                                         f"{error}") from error
            finally:
                with self._condition:
                    self._syncing = False
                    self._condition.notify_all()


class SyncThread:
    """The syncs of a gevent worker's ``WalSync``, on a native thread: asked by a waiting
    greenlet, it syncs every commit made so far (again at once if more are waited for by
    then) while the loop goes on, and wakes the loop when a sync ends. The fsync lets go of
    the interpreter's lock, which the loop gives up at every SQLite statement and socket
    call, so the thread takes it back within one of those."""

    def __init__(self, wal_sync: WalSync) -> None:
        import gevent  # only in a gevent worker: the command line starts without it
        from gevent.event import Event

        self.wal_sync = wal_sync
        self._event_class = Event
        self._ended = Event()  # set, and replaced, when a sync ends
        self._asked = False  # True from a request until the thread takes it
        self._stopping = False
        self._wake = native("_thread", "allocate_lock")()
        self._wake.acquire()
        self._alive = native("_thread", "allocate_lock")()
        self._alive.acquire()
        self._watcher: Any = gevent.get_hub().loop.async_()
        self._watcher.start(self._sync_ended)
        native("_thread", "start_new_thread")(self._run, ())

    def wait(self, commit: int) -> None:
        while not self.wal_sync.durable(commit):
            ended = self._ended
            self._ask()
            ended.wait()

    def stop(self) -> None:
        self._stopping = True
        self._ask()
        self._alive.acquire()
        self._watcher.close()

    def _ask(self) -> None:
        if not self._asked:
            self._asked = True
            self._wake.release()

    def _run(self) -> None:
        try:
            while True:
                self._wake.acquire()
                self._asked = False
                if self._stopping:
                    return
                # a failure is recorded in ``failed``: its waiters raise
                with contextlib.suppress(BaseException):
                    self.wal_sync.sync_up_to(self.wal_sync.committed)
                self._watcher.send()
        finally:
            self._alive.release()

    def _sync_ended(self) -> None:
        """On the loop: wake the greenlets waiting for the sync that ended."""
        ended, self._ended = self._ended, self._event_class()
        ended.set()
