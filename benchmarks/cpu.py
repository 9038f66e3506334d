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


class Usage(NamedTuple):
    """CPU seconds used so far: by the server's programs, by each of its processes, and by
    the whole machine."""

    programs: Counter[str]
    processes: Counter[tuple[str, int]]
    machine: float


def used_so_far(group: int) -> Usage:
    """CPU seconds used so far by the processes of ``group``, by program (``python`` for
    the server's own, ``haproxy``, ``redis-server``) and by process, and by the whole
    machine."""
    programs: Counter[str] = Counter()
    processes: Counter[tuple[str, int]] = Counter()
    for process in psutil.process_iter(["name"]):
        try:
            if os.getpgid(process.pid) == group:
                times = process.cpu_times()
                name = process.info["name"] or "?"
                programs[name] += times.user + times.system
                processes[name, process.pid] += times.user + times.system
        except (psutil.Error, ProcessLookupError):
            continue
    machine = psutil.cpu_times()
    return Usage(programs, processes,
                 sum(machine) - machine.idle - getattr(machine, "iowait", 0.0))


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
        self.samples: list[Usage] = []
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
        first, last = self.samples
        programs = last.programs.copy()
        programs.subtract(first.programs)
        return programs, last.machine - first.machine

    def busiest_over_mean(self, workers: int, program: str = "python") -> float:
        """The busiest of the ``workers`` busiest processes of ``program`` in the window
        over their mean CPU: 1 when the balancer shares the work evenly (each gunicorn's
        master, nearly idle, is left out); NaN if not sampled. Call after ``used``."""
        if len(self.samples) != 2:
            return float("nan")
        first, last = self.samples
        busiest = sorted((seconds - first.processes.get(key, 0.0)
                          for key, seconds in last.processes.items() if key[0] == program),
                         reverse=True)[:workers]
        if len(busiest) < workers or not sum(busiest):
            return float("nan")
        return busiest[0] / (sum(busiest) / workers)
