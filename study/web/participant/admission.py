"""What a participant's message must pass before the journey looks at it: a size bound, a
rate bound, and the experimenter's hold (pause or abort).

The transport already drops anything above ``MAX_TRANSPORT_BYTES`` by closing the
connection; below that, a payload above ``MAX_PAYLOAD_BYTES`` or a burst beyond the
participant's rate is refused like any other bad message (logged, nothing changed), so a
stuck or hostile tab cannot flood the database or starve the other participants.

With a Redis message queue (several server processes), a participant's buckets live in
Redis, so a flood split over the processes is limited as one. A process takes a few tokens
at a time from a bucket (one atomic script call) and spends them in memory: a participant's
connections all reach one process (docs/study-day.md#serving-one-process-or-several), so
Redis is asked once every few messages, not for each. Without Redis, and in each process
while Redis is away, the buckets live in memory.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from study.web.console.holds import check_hold
from study.web.participant.rejections import Rejected
from study.web.serving.queue import POOL_CONNECTIONS

MAX_TRANSPORT_BYTES = 64 * 1024  # Engine.IO packet limit (connection closed above it)
MAX_PAYLOAD_BYTES = 8 * 1024  # a questionnaire with long open answers fits comfortably
BURST = 20  # messages a participant may send at once ...
RATE = 5.0  # ... refilled at this many per second (a cookie takes seconds, a page longer)
# Placed elements (``progress``) have their own bucket: a quick person clicks several boxes
# a second for a whole squares cookie, which must never use up the cookie's own message.
PROGRESS_BURST = 40
PROGRESS_RATE = 12.0
# After Redis failed, the buckets stay in this process's memory this long before it is
# tried again (a message never waits on a Redis that is away).
REDIS_RETRY_SECONDS = 5.0
REDIS_TIMEOUT_SECONDS = 1.0
# A process takes up to a fifth of a bucket's burst at once (4 messages, 8 placed
# elements). Tokens it holds are not in the bucket, which meanwhile refills to its burst:
# a flood split over N processes passes at most N * (reserve - 1) more than one bucket's.
RESERVE_SHARE = 5
# A bucket's tokens taken at once, as one atomic script: KEYS[1] the bucket; ARGV burst,
# rate, now, the seconds after which an untouched bucket is full again (then it is
# dropped), and how many tokens are wanted. Returns how many were taken (0 if none is left).
TOKEN_BUCKET = """
local burst, rate, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, last = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
local taken = math.min(tonumber(ARGV[5]), math.floor(tokens))
tokens = tokens - taken
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.17g', math.max(now, last)))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return taken
"""

log = logging.getLogger(__name__)


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


class SharedRateLimiter:
    """``RateLimiter``'s buckets in Redis, shared by every server process, drawn on a few
    tokens at a time (``held``); ``local`` (this process's own buckets) stands in while
    Redis is away, as Flask-Limiter's limits do."""

    def __init__(self, client: redis.Redis, prefix: str, local: RateLimiter) -> None:
        self.local = local
        self.prefix = prefix
        self.script = client.register_script(TOKEN_BUCKET)
        # Seconds after which an untouched bucket is full again: its key then expires.
        self.full_after = math.ceil(local.burst / local.rate) + 1
        self.reserve = max(1, local.burst // RESERVE_SHARE)
        self.held: dict[str, int] = {}  # key: tokens taken and not yet spent
        self.retry_at = 0.0

    @property
    def burst(self) -> int:
        return self.local.burst

    @property
    def rate(self) -> float:
        return self.local.rate

    def allow(self, key: str) -> bool:
        if time.monotonic() >= self.retry_at:
            try:
                return self._spend_held(key)
            except redis.RedisError as error:
                self.retry_at = time.monotonic() + REDIS_RETRY_SECONDS
                log.warning("message rate limits in this process's memory for %g s: "
                            "Redis failed (%s)", REDIS_RETRY_SECONDS, error)
        return self.local.allow(key)

    def _spend_held(self, key: str) -> bool:
        """Spend a token this process holds, taking more from the bucket when none is
        left. Held tokens are kept however long ago they were taken: a person sends less
        than a reserve in the seconds a bucket takes to refill, so dropping them then
        made nearly every message ask Redis, and the most a process holds stays
        ``reserve - 1``."""
        tokens = self.held.pop(key, 0)
        if tokens == 0:
            tokens = int(self.script(keys=[f"{self.prefix}:{key}"], args=[
                self.burst, self.rate, repr(self.local.clock()), self.full_after,
                self.reserve]))
        if tokens == 0:
            return False
        if tokens > 1:
            self.held[key] = tokens - 1
        return True


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
        self.limiter: RateLimiter | SharedRateLimiter = RateLimiter(clock=clock)
        self.progress_limiter: RateLimiter | SharedRateLimiter = RateLimiter(
            PROGRESS_BURST, PROGRESS_RATE, clock=clock)

    def share(self, url: str, prefix: str) -> None:
        """Keep the participants' buckets in the Redis at ``url`` (the processes' message
        queue), under keys starting with ``prefix``."""
        client = redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_SECONDS,
                                      socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                                      max_connections=POOL_CONNECTIONS)
        self.limiter = SharedRateLimiter(client, f"{prefix}:messages", self.limiter)
        self.progress_limiter = SharedRateLimiter(client, f"{prefix}:progress",
                                                  self.progress_limiter)

    def admit(self, code: str, event: str, payload: Any) -> None:
        """Size and rate, before the message's write transaction: with several processes
        the rate asks Redis, and no process should wait on that while holding the
        database's one write lock. Only the code is needed, so nothing is read first."""
        if payload_size(payload) > MAX_PAYLOAD_BYTES:
            raise Rejected("too-large", f"payloads are limited to {MAX_PAYLOAD_BYTES} bytes")
        limiter = self.progress_limiter if event == "progress" else self.limiter
        if not limiter.allow(code):
            raise Rejected("rate-limited", f"more than {limiter.burst} messages at once or "
                                           f"{limiter.rate:g} per second")

    def check(self, participant: dict[str, Any], event: str) -> None:
        """Inside the write transaction: the experimenter's holds, as they are now."""
        check_hold(self.storage, participant, event)
