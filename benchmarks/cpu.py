"""CPU time a server's processes and the whole machine used in a benchmark's window, the
time the server's processes waited for one another's write lock in it, and held it, and
the memory they held at its end."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

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


def lock_times_so_far(database: Path) -> tuple[float, float]:
    """Seconds the live server processes of ``database`` waited for another's write lock,
    and held it, as their last heartbeats recorded (``processes.lock_wait``,
    ``lock_held``)."""
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as connection:
            row = connection.execute("SELECT coalesce(sum(lock_wait), 0), "
                                     "coalesce(sum(lock_held), 0) FROM processes").fetchone()
    except sqlite3.Error:
        return float("nan"), float("nan")
    return float(row[0]), float(row[1])


class CpuWindow:
    """Samples taken by a thread at the window's start and end, so the benchmark's own
    work in between is not in the way."""

    def __init__(self, group: int, start: float, end: float,
                 database: Path | None = None) -> None:
        self.samples: list[tuple[Counter[str], float]] = []
        self.lock_samples: list[tuple[float, float]] = []
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
                self.lock_samples.append(lock_times_so_far(database))
        self.memory_mb = largest_resident_mb(group)

    def lock_times(self) -> tuple[float, float]:
        """Seconds the server's processes waited for one another's write lock, and held
        it, in the window (NaN if not sampled); call after ``used``."""
        if len(self.lock_samples) != 2:
            return float("nan"), float("nan")
        (waited0, held0), (waited1, held1) = self.lock_samples
        return waited1 - waited0, held1 - held0

    def used(self, timeout: float = 30.0) -> tuple[Counter[str], float]:
        """CPU seconds of the group's programs and of the machine in the window (none and
        NaN if not sampled)."""
        self._thread.join(timeout)
        if len(self.samples) != 2:
            return Counter(), float("nan")
        (server0, busy0), (server1, busy1) = self.samples
        server1.subtract(server0)
        return server1, busy1 - busy0
