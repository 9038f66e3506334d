"""What a participant's message must pass before the journey looks at it: a size bound, a
rate bound, and the experimenter's hold (pause or abort).

The transport already drops anything above ``MAX_TRANSPORT_BYTES`` by closing the
connection; below that, a payload above ``MAX_PAYLOAD_BYTES`` or a burst beyond the
participant's rate is refused like any other bad message (logged, nothing changed), so a
stuck or hostile tab cannot flood the database or starve the other participants.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from study.web.holds import check_hold
from study.web.rejections import Rejected

MAX_TRANSPORT_BYTES = 64 * 1024  # Engine.IO packet limit (connection closed above it)
MAX_PAYLOAD_BYTES = 8 * 1024  # a questionnaire with long open answers fits comfortably
BURST = 20  # messages a participant may send at once ...
RATE = 5.0  # ... refilled at this many per second (a cookie takes seconds, a page longer)
# Placed elements (``progress``) have their own bucket: a quick person clicks several boxes
# a second for a whole squares cookie, which must never use up the cookie's own message.
PROGRESS_BURST = 40
PROGRESS_RATE = 12.0


class RateLimiter:
    """A token bucket per participant code (all of a participant's tabs share it)."""

    def __init__(self, burst: int = BURST, rate: float = RATE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.rate = rate
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = self.clock()
        with self.lock:
            tokens, last = self.buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - last) * self.rate)
            allowed = tokens >= 1.0
            self.buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            return allowed


def payload_size(payload: Any) -> int:
    """Bytes of the payload as JSON (what arrived, give or take the framing)."""
    try:
        return len(json.dumps(payload, separators=(",", ":")).encode())
    except (TypeError, ValueError):
        return MAX_PAYLOAD_BYTES + 1


class Admission:
    """The check the journey runs on every participant message before anything else; rates
    are measured on the journey's clock, so tests with a fake clock see what they set."""

    def __init__(self, storage: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.storage = storage
        self.limiter = RateLimiter(clock=clock)
        self.progress_limiter = RateLimiter(PROGRESS_BURST, PROGRESS_RATE, clock=clock)

    def check(self, participant: dict[str, Any], event: str, payload: Any) -> None:
        if payload_size(payload) > MAX_PAYLOAD_BYTES:
            raise Rejected("too-large", f"payloads are limited to {MAX_PAYLOAD_BYTES} bytes")
        limiter = self.progress_limiter if event == "progress" else self.limiter
        if not limiter.allow(participant["code"]):
            raise Rejected("rate-limited", f"more than {limiter.burst} messages at once or "
                                           f"{limiter.rate:g} per second")
        check_hold(self.storage, participant, event)
