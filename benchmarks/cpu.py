"""CPU time a server's processes and the whole machine used in a benchmark's window."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter

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


class CpuWindow:
    """Samples taken by a thread at the window's start and end, so the benchmark's own
    work in between is not in the way."""

    def __init__(self, group: int, start: float, end: float) -> None:
        self.samples: list[tuple[Counter[str], float]] = []
        self._thread = threading.Thread(target=self._sample, args=(group, (start, end)),
                                        daemon=True)
        self._thread.start()

    def _sample(self, group: int, moments: tuple[float, float]) -> None:
        for moment in moments:
            time.sleep(max(0.0, moment - time.time()))
            self.samples.append(used_so_far(group))

    def used(self, timeout: float = 30.0) -> tuple[Counter[str], float]:
        """CPU seconds of the group's programs and of the machine in the window (none and
        NaN if not sampled)."""
        self._thread.join(timeout)
        if len(self.samples) != 2:
            return Counter(), float("nan")
        (server0, busy0), (server1, busy1) = self.samples
        server1.subtract(server0)
        return server1, busy1 - busy0
