"""What a participant's message must pass before the journey looks at it: a size bound, a
rate bound, and the experimenter's hold (pause or abort).

The transport already drops anything above ``MAX_TRANSPORT_BYTES`` by closing the
connection; below that, a payload above ``MAX_PAYLOAD_BYTES`` or a burst beyond the
participant's rate is refused like any other bad message (logged, nothing changed), so a
stuck or hostile tab cannot flood the database or starve the other participants.

With a Redis message queue (several server processes), a participant's buckets are handed
between the processes through Redis, so a flood split over them is still limited. A
participant's tabs all reach one process (docs/study-day.md#serving-one-process-or-several),
and only their newest tab's messages are taken (``binding``): the process a tab joins takes
the participant's bucket over from Redis, spends it in its memory, and hands it back when
the tab leaves. Redis is asked once a join and once a leave, never for a message. Without
Redis, and in each process while Redis is away, the buckets live in memory alone.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from study.storage.database import to_json
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
# A tab that joins one process while the participant's newer tab was on another takes over
# at most a fifth of a bucket's burst (4 messages, 8 placed elements): the other process
# may still be spending the bucket it has not handed back.
RESERVE_SHARE = 5

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
            tokens = self._level(key, now)
            allowed = tokens >= 1.0
            self.buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            return allowed

    def _level(self, key: str, now: float) -> float:
        tokens, last = self.buckets.get(key, (float(self.burst), now))
        return self.refilled(tokens, last, now)

    def refilled(self, tokens: float, last: float, now: float) -> float:
        """The tokens at ``now`` of a bucket that held ``tokens`` at ``last``."""
        return min(float(self.burst), tokens + max(0.0, now - last) * self.rate)

    def arrive(self, key: str, displaced_elsewhere: bool = False) -> None:
        """A tab of ``key`` joined: one process alone keeps every bucket already."""

    def leave(self, key: str) -> None:
        """The last tab of ``key`` here left: its bucket stays until the process ends."""

    def level(self, key: str) -> float:
        """The bucket's tokens now (a full bucket for a key never seen)."""
        with self.lock:
            return self._level(key, self.clock())

    def fill(self, key: str, tokens: float) -> None:
        with self.lock:
            self.buckets[key] = (min(float(self.burst), tokens), self.clock())

    def remove(self, key: str) -> float:
        """Take the bucket out of this process; returns its tokens now."""
        with self.lock:
            tokens = self._level(key, self.clock())
            self.buckets.pop(key, None)
            return tokens


class SharedRateLimiter:
    """``RateLimiter``'s buckets handed between processes through Redis: a process spends
    the buckets of the participants whose tab it serves in its memory (``local``), taking
    each over from Redis when the tab joins and handing it back when the tab leaves. While
    Redis is away the buckets stay in memory, as Flask-Limiter's limits do."""

    def __init__(self, client: redis.Redis, prefix: str, local: RateLimiter) -> None:
        self.client = client
        self.local = local
        self.prefix = prefix
        # Seconds after which an untouched bucket is full again: its key then expires.
        self.full_after = math.ceil(local.burst / local.rate) + 1
        self.reserve = max(1, local.burst // RESERVE_SHARE)
        self.here: set[str] = set()  # the keys whose bucket this process holds
        self.retry_at = 0.0

    @property
    def burst(self) -> int:
        return self.local.burst

    @property
    def rate(self) -> float:
        return self.local.rate

    def allow(self, key: str) -> bool:
        if key not in self.here:  # a message before any join here (a restarted process)
            self.arrive(key)
        return self.local.allow(key)

    def arrive(self, key: str, displaced_elsewhere: bool = False) -> None:
        """A tab of ``key`` joined here: take its bucket over from Redis, where the last
        process to serve it left it. A tab that displaced one on another process takes at
        most a reserve: that process may still be spending the bucket."""
        if key in self.here and not displaced_elsewhere:
            return
        tokens = min(self._handed_back(key), self.local.level(key))
        if displaced_elsewhere:
            tokens = min(tokens, float(self.reserve))
        self.local.fill(key, tokens)
        self.here.add(key)

    def leave(self, key: str) -> None:
        """The last tab of ``key`` here left: hand its bucket back to Redis."""
        if key not in self.here:
            return
        self.here.discard(key)
        tokens = self.local.remove(key)
        self._redis(lambda: self.client.pipeline(transaction=False).hset(
            self._key(key), mapping={"tokens": repr(tokens), "at": repr(self.local.clock())}
        ).expire(self._key(key), self.full_after).execute(), None)

    def _handed_back(self, key: str) -> float:
        """The bucket's tokens now as the last process left it (full if none did, or while
        Redis is away)."""
        state = self._redis(lambda: self.client.hmget(self._key(key), "tokens", "at"),
                            [None, None])
        if state[0] is None or state[1] is None:
            return float(self.burst)
        return self.local.refilled(float(state[0]), float(state[1]), self.local.clock())

    def _key(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    def _redis(self, call: Callable[[], Any], otherwise: Any) -> Any:
        """``call`` on Redis, or ``otherwise`` while Redis is away (tried again after
        ``REDIS_RETRY_SECONDS``; a join never waits on a Redis that is away)."""
        if time.monotonic() < self.retry_at:
            return otherwise
        try:
            return call()
        except redis.RedisError as error:
            self.retry_at = time.monotonic() + REDIS_RETRY_SECONDS
            log.warning("message rate limits in this process's memory for %g s: "
                        "Redis failed (%s)", REDIS_RETRY_SECONDS, error)
            return otherwise


def payload_size(payload: Any) -> int:
    """Bytes of the payload as JSON (what arrived, give or take the framing)."""
    try:
        return len(to_json(payload).encode())
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

    def arrive(self, code: str, displaced_elsewhere: bool) -> None:
        """A tab of ``code`` joined this process (``displaced_elsewhere``: its newer tab
        until now was on another): its buckets are spent here from now on."""
        for limiter in (self.limiter, self.progress_limiter):
            limiter.arrive(code, displaced_elsewhere)

    def leave(self, code: str) -> None:
        """The last tab of ``code`` on this process left: its buckets go back to Redis."""
        for limiter in (self.limiter, self.progress_limiter):
            limiter.leave(code)

    def admit(self, code: str, event: str, payload: Any) -> None:
        """Size and rate, before the message's write transaction, by the code alone, so
        nothing is read first."""
        if payload_size(payload) > MAX_PAYLOAD_BYTES:
            raise Rejected("too-large", f"payloads are limited to {MAX_PAYLOAD_BYTES} bytes")
        limiter = self.progress_limiter if event == "progress" else self.limiter
        if not limiter.allow(code):
            raise Rejected("rate-limited", f"more than {limiter.burst} messages at once or "
                                           f"{limiter.rate:g} per second")

    def check(self, participant: dict[str, Any], event: str) -> None:
        """Inside the write transaction: the experimenter's holds, as they are now."""
        check_hold(self.storage, participant, event)
