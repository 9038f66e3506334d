"""The round scheduler: a thread that calls ``Journey.tick(now)`` a few times a second.

Rounds close at their stored deadline whether or not a browser is connected, and the
agent teammate's cookies appear as they fall due. The work lives in ``tick(now)`` so tests
drive it with an injected clock instead of this thread.
"""

from __future__ import annotations

import logging
import threading

from study.web.journey import Journey

log = logging.getLogger(__name__)
# A round closes at most this long after its deadline (plus the tick's own work): the load
# benchmark's target is 100 ms with a hundred participants, and a tick with nothing due is
# one small query.
TICK_SECONDS = 0.02


class Scheduler:
    """Ticks a journey every ``interval`` seconds until stopped."""

    def __init__(self, journey: Journey, interval: float = TICK_SECONDS) -> None:
        self.journey = journey
        self.interval = interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, name="round-scheduler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.journey.tick()
            except Exception:  # a bad tick must not stop every later deadline
                log.exception("round scheduler tick failed")
