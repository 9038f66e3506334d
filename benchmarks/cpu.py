"""CPU time a server's processes and the whole machine used in a benchmark's window, the
time the server's processes waited for one another's write lock in it, and held it, their
syncs of the log and the time those took, and the memory they held at its end."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import psutil

CORES = psutil.cpu_count() or 1


def used_so_far(group: int) -> tuple[Counter[str], float]:
    """CPU seconds used so far by the processes of ``group``, by program (``python`` for
    the server's own, ``haproxy``, ``redis-server``), and by the whole machine."""
    server: Counter[str] = Counter()
    for process in psutil.process_iter(["name"]):
        try:
            if os.getpgid(process.pid) == group:
                times = process.cpu_times()
                server[process.info["name"] or "?"] += times.user + times.system
        except (psutil.Error, ProcessLookupError):
            continue
    machine = psutil.cpu_times()
    return server, sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)


def largest_resident_mb(group: int) -> dict[str, float]:
    """The resident memory of the largest process of each program of ``group``, in MB (a
    worker: what a server needs a worker, beside the master that forked it)."""
    largest: dict[str, float] = {}
    for process in psutil.process_iter(["name"]):
        try:
            if os.getpgid(process.pid) == group:
                name = process.info["name"] or "?"
                largest[name] = max(largest.get(name, 0.0), process.memory_info().rss / 1e6)
        except (psutil.Error, ProcessLookupError):
            continue
    return largest


class Heartbeats(NamedTuple):
    """What the server's processes' heartbeats record (``processes``), summed over them:
    seconds waited for another's write lock and held it, syncs of the log run under full
    durability and the seconds they took."""

    lock_wait: float
    lock_held: float
    syncs: float
    sync_seconds: float


UNKNOWN = Heartbeats(*[float("nan")] * len(Heartbeats._fields))


def heartbeats_so_far(database: Path) -> Heartbeats:
    """The live server processes of ``database``'s totals, as their last heartbeats
    recorded them."""
    columns = ", ".join(f"coalesce(sum({name}), 0)" for name in Heartbeats._fields)
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as connection:
            row = connection.execute(f"SELECT {columns} FROM processes").fetchone()
    except sqlite3.Error:
        return UNKNOWN
    return Heartbeats(*map(float, row))


class CpuWindow:
    """Samples taken by a thread at the window's start and end, so the benchmark's own
    work in between is not in the way."""

    def __init__(self, group: int, start: float, end: float,
                 database: Path | None = None) -> None:
        self.samples: list[tuple[Counter[str], float]] = []
        self.heartbeat_samples: list[Heartbeats] = []
        self.memory_mb: dict[str, float] = {}  # at the window's end, by program
        self._thread = threading.Thread(target=self._sample,
                                        args=(group, database, (start, end)), daemon=True)
        self._thread.start()

    def _sample(self, group: int, database: Path | None,
                moments: tuple[float, float]) -> None:
        for moment in moments:
            time.sleep(max(0.0, moment - time.time()))
            self.samples.append(used_so_far(group))
            if database is not None:
                self.heartbeat_samples.append(heartbeats_so_far(database))
        self.memory_mb = largest_resident_mb(group)

    def heartbeats(self) -> Heartbeats:
        """What the server's processes' heartbeats added in the window (NaN if not
        sampled); call after ``used``."""
        if len(self.heartbeat_samples) != 2:
            return UNKNOWN
        first, last = self.heartbeat_samples
        return Heartbeats(*(end - start for start, end in zip(first, last, strict=True)))

    def used(self, timeout: float = 30.0) -> tuple[Counter[str], float]:
        """CPU seconds of the group's programs and of the machine in the window (none and
        NaN if not sampled)."""
        self._thread.join(timeout)
        if len(self.samples) != 2:
            return Counter(), float("nan")
        (server0, busy0), (server1, busy1) = self.samples
        server1.subtract(server0)
        return server1, busy1 - busy0
