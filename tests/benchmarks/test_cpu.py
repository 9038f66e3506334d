"""The load benchmark's window on the server's write lock (``benchmarks.cpu``)."""

from __future__ import annotations

import math
import os
import time

import psutil

from benchmarks import cpu
from study.storage.database import Storage


def test_the_lock_times_are_the_live_processes_heartbeats_summed(tmp_path):
    database = tmp_path / "study.sqlite"
    storage = Storage(database)
    with storage.event() as db:
        for number, (waited, held) in enumerate([(1.5, 2.0), (0.5, 4.25)]):
            db["processes"].insert({"id": f"p{number}", "pid": number, "last_seen": 0.0,
                                    "lock_wait": waited, "lock_held": held})
    assert cpu.lock_times_so_far(database) == (2.0, 6.25)
    assert all(math.isnan(t) for t in cpu.lock_times_so_far(tmp_path / "none.sqlite"))


def test_the_window_gives_what_was_waited_and_held_between_its_two_samples(tmp_path,
                                                                            monkeypatch):
    samples = iter([(2.0, 6.25), (2.5, 7.0)])
    monkeypatch.setattr(cpu, "lock_times_so_far", lambda _database: next(samples))
    now = time.time()
    window = cpu.CpuWindow(os.getpgid(0), now, now, tmp_path / "study.sqlite")
    server, _ = window.used()
    assert server  # this test's own process group used some CPU
    assert window.lock_times() == (0.5, 0.75)


def test_the_largest_process_of_each_program_gives_its_resident_memory():
    memory = cpu.largest_resident_mb(os.getpgid(0))  # this test's own process group
    assert memory and all(mb > 1 for mb in memory.values())
    assert max(memory.values()) >= psutil.Process().memory_info().rss / 1e6
    assert cpu.largest_resident_mb(-1) == {}  # no such group
