"""Full durability by group commit: one fsync of the write-ahead log makes every commit made
before it durable, however many there were (docs/database.md#durability).

SQLite commits with ``synchronous=NORMAL`` (the log written, not synced); an event under
``full`` durability is acknowledged only once a sync that began after its commit has ended.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

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
    the sync that was to cover it failed. ``syncs`` counts the fsyncs run and ``seconds``
    the time they took, from asking to the answer: what the commits they covered waited
    for the disk (the heartbeat records both, so a slow disk shows beside the lock's
    waits).

    The first waiter with no sync under way runs one for every commit so far, and those
    that commit meanwhile wait for the next. In a gevent worker the fsync itself is a
    helper process's (``SyncProcess``): the waiter asks and yields, and the loop serves
    the others while the disk works (on the loop each fsync stopped every participant of
    the process for as long as the disk took, a tenth of a loaded worker's time, issue #29;
    on a thread of the worker it waited for the interpreter's lock both ways)."""

    def __init__(self, wal: Path, sync: Callable[[Path], None] | None = None) -> None:
        self.wal = wal
        self.sync = sync or (SyncProcess() if cooperative() else fsync_file)
        self.committed = 0
        self.synced = 0
        self.syncs = 0
        self.seconds = 0.0
        self.failed: tuple[int, BaseException] | None = None  # up to which commit, why
        self._syncing = False
        self._condition = threading.Condition()

    def commit_made(self) -> int:
        """Number the commit just made (called under the storage's lock, in commit order)."""
        with self._condition:
            self.committed += 1
            return self.committed

    def wait(self, commit: int) -> None:
        """Return once ``commit`` (and every commit before it) is on the disk."""
        while True:
            with self._condition:
                while self._syncing and self.synced < commit:
                    self._condition.wait()
                if self._durable(commit):
                    return
                self._syncing, target = True, self.committed
            try:
                self._sync_up_to(target)
            except OSError as error:
                raise StorageUnavailable(f"the write-ahead log could not be synced: "
                                         f"{error}") from error

    def close(self) -> None:
        if isinstance(self.sync, SyncProcess):
            self.sync.close()

    def _durable(self, commit: int) -> bool:
        """Whether ``commit`` is on the disk; raises if the sync that covered it failed."""
        if self.synced >= commit:
            return True
        if self.failed is not None and commit <= self.failed[0]:
            raise StorageUnavailable(f"the write-ahead log could not be synced: "
                                     f"{self.failed[1]}")
        return False

    def _sync_up_to(self, target: int) -> None:
        """One sync for every commit up to ``target``; whatever ends it, the waiters learn
        how (a failure fails every commit it was to cover)."""
        error: BaseException | None = None
        asked = time.monotonic()
        try:
            self.sync(self.wal)
        except BaseException as failure:
            error = failure
            raise
        finally:
            with self._condition:
                self._syncing = False
                self.syncs += 1
                self.seconds += time.monotonic() - asked
                if error is None:
                    self.synced = max(self.synced, target)
                else:
                    self.failed = (target, error)
                self._condition.notify_all()


class SyncProcess:
    """An fsync run by a helper process (``python -m study.storage.syncer``): called with
    the log's path, it asks the helper and waits for its answer, which under gevent lets
    the loop run meanwhile. The helper is started at the first sync and again after it
    died (a sync under way then fails: its events are refused, not acknowledged)."""

    def __init__(self) -> None:
        self._helper: subprocess.Popen[bytes] | None = None

    def __call__(self, wal: Path) -> None:
        helper = self._running()
        try:
            helper.stdin.write(f"{wal}\n".encode())  # type: ignore[union-attr]
            helper.stdin.flush()  # type: ignore[union-attr]
            answer = helper.stdout.readline().decode().strip()  # type: ignore[union-attr]
        except BaseException as error:
            # An answer left unread would be taken for the next sync's: this helper goes.
            self._discard(helper)
            if isinstance(error, OSError | ValueError):
                raise OSError(f"the sync helper failed: {error}") from error
            raise
        if answer != "ok":
            self._discard(helper)
            raise OSError(answer or f"the sync helper ended ({helper.poll()})")

    @property
    def pid(self) -> int | None:
        return None if self._helper is None else self._helper.pid

    def close(self) -> None:
        if self._helper is not None and self._helper.poll() is None:
            self._helper.stdin.close()  # type: ignore[union-attr]
            self._helper.wait()

    def _discard(self, helper: subprocess.Popen[bytes]) -> None:
        self._helper = None
        with contextlib.suppress(OSError):
            helper.kill()
        for pipe in (helper.stdin, helper.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        helper.wait()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._helper is None or self._helper.poll() is not None:
            self._helper = subprocess.Popen(
                [sys.executable, "-m", "study.storage.syncer"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, close_fds=True)
        return self._helper
