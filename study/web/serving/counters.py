"""Server metrics counted in memory and added to the shared ``counters`` table at most once
a second, so counting a flood costs no write per message; every process adds its own."""

from __future__ import annotations

import threading
import time

from study.storage.database import Storage
from study.storage.health import StorageUnavailable

UNJOINED = "unjoined-messages"
FLUSH_SECONDS = 1.0


class Counter:
    """One named count, shared by the processes through the database."""

    def __init__(self, storage: Storage, name: str) -> None:
        self.storage = storage
        self.name = name
        self.pending = 0
        self.flushed = time.monotonic()
        self.lock = threading.Lock()

    def add(self, count: int = 1) -> None:
        with self.lock:
            self.pending += count
        if time.monotonic() - self.flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, 0
            self.flushed = time.monotonic()
        if not pending:
            return
        try:
            with self.storage.event() as db:
                db.conn.execute(
                    "INSERT INTO counters (name, count, at) VALUES (?, ?, ?) ON CONFLICT "
                    "(name) DO UPDATE SET count = count + excluded.count, at = excluded.at",
                    (self.name, pending, time.time()))
        except StorageUnavailable:  # kept for the next flush, once the disk takes writes
            with self.lock:
                self.pending += pending

    def total(self) -> int:
        """Every process's count as stored, plus this process's pending one."""
        self.flush()
        row = self.storage.one("SELECT count FROM counters WHERE name = ?", (self.name,))
        return int(row["count"]) if row else 0
