"""The garbage collector's schedule in a server worker.

With a thousand participants connected, a worker holds about a million objects of theirs
(sockets, greenlets, sessions), and Python's full collection walks all of them: it stopped
the worker for 100-180 ms every few seconds, every participant's ack waiting meanwhile.
Objects that have lived ``freeze_seconds`` are moved out of the collector's sight
(``gc.freeze``), so a full collection walks only the young ones; every
``full_collection_seconds`` they come back for one full collection, so cyclic garbage among
them is still freed.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass


@dataclass
class ShortCollections:
    freeze_seconds: float = 10.0
    full_collection_seconds: float = 600.0
    since_full: float = 0.0

    def run(self) -> None:
        """Forever, in a worker's background task."""
        gc.freeze()
        while True:
            time.sleep(self.freeze_seconds)
            self.step()

    def step(self) -> None:
        """What happens every ``freeze_seconds``."""
        self.since_full += self.freeze_seconds
        if self.since_full >= self.full_collection_seconds:
            self.since_full = 0.0
            gc.unfreeze()
            gc.collect()
        gc.freeze()
