"""The load benchmark's window on the server's write lock and syncs (``benchmarks.cpu``)."""

from __future__ import annotations

import math
import os
import time
from collections import Counter

import psutil
import pytest

from benchmarks import cpu
from study.storage.database import Storage


def test_the_heartbeats_are_the_live_processes_totals_summed(tmp_path):
    database = tmp_path / "study.sqlite"
    storage = Storage(database)
    with storage.event() as db:
        for number, (waited, held, syncs, seconds) in enumerate([(1.5, 2.0, 3, 0.25),
                                                                 (0.5, 4.25, 5, 0.5)]):
            db["processes"].insert({"id": f"p{number}", "pid": number, "last_seen": 0.0,
                                    "lock_wait": waited, "lock_held": held,
                                    "syncs": syncs, "sync_seconds": seconds})
    assert cpu.heartbeats_so_far(database) == (2.0, 6.25, 8.0, 0.75)
    assert all(math.isnan(t) for t in cpu.heartbeats_so_far(tmp_path / "none.sqlite"))


def test_the_window_gives_what_the_heartbeats_added_between_its_two_samples(tmp_path,
                                                                            monkeypatch):
    samples = iter([cpu.Heartbeats(2.0, 6.25, 10, 0.5), cpu.Heartbeats(2.5, 7.0, 30, 0.75)])
    monkeypatch.setattr(cpu, "heartbeats_so_far", lambda _database: next(samples))
    now = time.time()
    window = cpu.CpuWindow(os.getpgid(0), now, now, tmp_path / "study.sqlite")
    server, _ = window.used()
    assert server  # this test's own process group used some CPU
    assert window.heartbeats() == (0.5, 0.75, 20, 0.25)


def test_the_largest_process_of_each_program_gives_its_resident_memory():
    memory = cpu.largest_resident_mb(os.getpgid(0))  # this test's own process group
    assert memory and all(mb > 1 for mb in memory.values())
    assert max(memory.values()) >= psutil.Process().memory_info().rss / 1e6
    assert cpu.largest_resident_mb(-1) == {}  # no such group


def test_the_busiest_worker_is_over_the_mean_of_the_busiest_processes_of_its_program():
    window = cpu.CpuWindow(-1, 0.0, 0.0)  # no such group: the samples are set here
    window.used()
    assert math.isnan(window.busiest_over_mean(2))  # nothing sampled
    first = cpu.Usage(Counter(), Counter({("python", 1): 1.0, ("python", 2): 5.0,
                                          ("python", 3): 0.1, ("haproxy", 4): 0.0}), 0.0)
    last = cpu.Usage(Counter(), Counter({("python", 1): 1.2, ("python", 2): 11.0,
                                         ("python", 3): 4.1, ("haproxy", 4): 9.0}), 0.0)
    window.samples = [first, last]
    # the workers used 6 and 4 s, the master 0.2 and HAProxy (another program) 9
    assert window.busiest_over_mean(2) == pytest.approx(6 / 5)
    assert window.busiest_over_mean(1) == pytest.approx(1.0)
    assert math.isnan(window.busiest_over_mean(4))  # fewer processes than workers
