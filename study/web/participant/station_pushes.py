"""Teammates' stations, pushed to each person at most once a second.

Every element a person places changes their station on their teammates' pages. Pushed one
by one, that was two pushes a message in teams of three, each encoded, queued and written
to a socket by the worker: at 1,000 people a quarter of a worker's time, and half the
pushes took a sixth off its CPU a message and half off its ack p95
(``docs/measurements/capacity-log.md``). So a page that has heard of no station for
``interval`` seconds is told at once, as before; what changes in the second after that
waits for the second to pass and goes in one ``stations`` push, each station at its
latest. A teammate's station is then at most a second behind; every change still reaches
the page, merged into the next push, and a page that opens again reads every station
from the state it is sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from study.web.participant.outbox import Push

log = logging.getLogger(__name__)

EVENT = "stations"  # the push's event: {"stations": [station, ...]}
STATION = "station"  # a station as the journey queues it, one per teammate told
INTERVAL_SECONDS = 1.0

Send = Callable[[list[Push], "set[str] | None"], None]


class StationPushes:
    """Which pages heard of a station within the interval, and what they wait for.

    ``admit`` turns a flush's pushes into those to send now; ``send_due`` sends what
    waited, once its page's interval has passed (``run`` calls it when due, in a
    worker's background task; tests call it with a clock of their own)."""

    def __init__(self, send: Send, interval: float = INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.send = send
        self.interval = interval
        self.clock = clock
        self._quiet_at: deque[tuple[float, str]] = deque()  # each page's interval's end
        self._within: set[str] = set()  # the pages in ``_quiet_at``
        self._waiting: dict[str, dict[tuple[Any, Any], dict[str, Any]]] = {}
        # where a waiting page was as of its last station (None: one process serves all)
        self._alone: dict[str, bool | None] = {}
        self._lock = threading.Lock()
        self._started = threading.Event()

    def admit(self, pushes: list[Push], alone_here: set[str] | None) -> list[Push]:
        """The pushes to send now: stations as ``stations`` pushes to the pages that heard
        of none within the interval; the other pages' stations wait."""
        now_pushes: list[Push] = []
        wrapped: dict[int, dict[str, Any]] = {}  # one payload for a station told to several
        with self._lock:
            for code, event, payload in pushes:
                if event != STATION:
                    now_pushes.append((code, event, payload))
                elif not self._held(code, payload, alone_here):
                    push = wrapped.setdefault(id(payload), {EVENT: [payload]})
                    now_pushes.append((code, EVENT, push))
        return now_pushes

    def send_due(self) -> float | None:
        """Send what waited for pages whose interval has passed; returns when the next
        interval ends (None: no page is within one)."""
        now = self.clock()
        due: list[Push] = []
        alone: dict[str, bool | None] = {}
        with self._lock:
            while self._quiet_at and self._quiet_at[0][0] <= now:
                _, code = self._quiet_at.popleft()
                stations = self._waiting.pop(code, None)
                if stations is None:
                    self._within.discard(code)
                    continue
                self._quiet_at.append((now + self.interval, code))
                due.append((code, EVENT, {EVENT: list(stations.values())}))
                alone[code] = self._alone.pop(code)
            following = self._quiet_at[0][0] if self._quiet_at else None
        if due:
            known = any(flag is not None for flag in alone.values())
            self.send(due, {code for code, flag in alone.items() if flag} if known else None)
        return following

    def run(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Forever: send what waited as each page's interval ends. A send that fails (the
        message queue away) loses those pushes, not the ones after: the pages' next state
        carries every station."""
        while True:
            try:
                following = self.send_due()
            except Exception:
                log.exception("teammates' stations could not be pushed")
                following = self.clock() + self.interval
            if following is None:
                self._started.wait()
                self._started.clear()
            else:
                sleep(max(0.0, following - self.clock()))

    def _held(self, code: str, station: dict[str, Any], alone_here: set[str] | None) -> bool:
        """Under the lock: keep the station if its page heard of one within the interval
        (the latest of each seat's), else start the page's interval."""
        if self.interval <= 0:
            return False
        if code in self._within:
            self._waiting.setdefault(code, {})[station.get("team_round"),
                                               station.get("seat")] = station
            self._alone[code] = None if alone_here is None else code in alone_here
            return True
        self._within.add(code)
        self._quiet_at.append((self.clock() + self.interval, code))
        if len(self._quiet_at) == 1:
            self._started.set()  # ``run`` waits for a first interval
        return False
