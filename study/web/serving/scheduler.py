"""The round scheduler: closes and starts rounds at their stored deadlines.

Every server process runs this loop with a heartbeat. Where several share the study, each
keeps the rounds of the people connected to it, and the holder of the scheduler's lease
(``study.web.serving.processes``) also those of people connected nowhere else, the lobby's
timers and presence (``study.web.serving.shares``); another takes the lease over within two
seconds of the holder's death, and with it the dead process's people who have not
reconnected elsewhere. A process alone keeps every round while it holds the lease. Each
sleeps until the earliest open deadline of its share (an index lookup) or its next
heartbeat, whichever comes first, so a round closes as its deadline passes and a quiet study
costs nothing. The work lives in
``Journey.tick(now)`` so tests drive it with an injected clock instead of this thread.
While the database cannot be written (a full disk) the loop retries at every heartbeat
without logging each failure (the storage logs the condition once a minute); once writes
succeed again, the rounds that fell due meanwhile close (as ``late``) and the teams that
could not be formed are formed.
"""

from __future__ import annotations

import logging
import threading
import time

from study.storage.health import StorageUnavailable
from study.web.participant.journey import Journey
from study.web.serving.processes import HEARTBEAT_SECONDS, Processes
from study.web.serving.shares import Share

log = logging.getLogger(__name__)


class Scheduler:
    """Heartbeat, lease and deadlines of one server process, until stopped."""

    def __init__(self, journey: Journey, processes: Processes) -> None:
        self.journey = journey
        self.processes = processes
        self.holding = False
        self.episodes = journey.storage.health.episodes  # storage faults already handled
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, name="round-scheduler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
        self.processes.leave()

    def run(self) -> None:
        next_beat = 0.0
        while not self.stopped.is_set():
            if time.time() >= next_beat:
                next_beat = time.time() + HEARTBEAT_SECONDS
                self._beat()
            wake = next_beat
            share = self.processes.share(self.holding)
            if share is not None:
                wake = min(wake, self._tick(share))
            self.stopped.wait(max(0.0, wake - time.time()))

    def _beat(self) -> None:
        try:
            was_holding, self.holding = self.holding, self.processes.beat()
            if self.holding and not was_holding:
                log.info("process %s runs the round scheduler", self.processes.id)
                self.journey.form_pending_teams()
        except StorageUnavailable:  # retried at the next heartbeat; logged by the storage
            pass
        except Exception:  # a failed heartbeat is retried at the next one
            log.exception("round scheduler heartbeat failed")

    def _tick(self, share: Share) -> float:
        """Close what of ``share`` is due; returns when its next round falls due (or a beat
        from now)."""
        try:
            self.journey.tick(share=share)
            if share.lease:
                self._after_storage_fault()
            upcoming = self.journey.next_deadline(share)
        except StorageUnavailable:  # retried at the next heartbeat; logged by the storage
            upcoming = None
        except Exception:  # a bad tick must not stop every later deadline
            log.exception("round scheduler tick failed")
            upcoming = None
        return upcoming if upcoming is not None else time.time() + HEARTBEAT_SECONDS

    def _after_storage_fault(self) -> None:
        """Once the database takes writes after a fault, form the teams that waited on it
        (their formation runs off the clock and is dropped while the disk is full)."""
        health = self.journey.storage.health
        if health.available and health.episodes != self.episodes:
            self.episodes = health.episodes
            self.journey.form_pending_teams()
