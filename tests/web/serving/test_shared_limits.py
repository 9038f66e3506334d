"""A participant's message rate limits hold across server processes: with a Redis message
queue a process takes a participant's bucket over from Redis when their tab joins and hands
it back when the tab leaves, so a flood split over two processes is limited as one; without
Redis, or while it is away, each process limits in its own memory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
import socketio
from support.web import DEMO, FakeClock, make_app

from study.bots.servers import ServeProcess, free_port, quick_protocol
from study.web.participant.admission import (
    BURST,
    PROGRESS_BURST,
    RATE,
    RESERVE_SHARE,
    Admission,
)
from study.web.serving import security


def shared(url: str, clock: FakeClock) -> Admission:
    """One server process's admission, its buckets in the Redis at ``url``."""
    admission = Admission(None, clock)
    admission.share(url, "study-test:rate")
    return admission


def spend(admission: Admission, code: str, messages: int) -> int:
    """How many of ``messages`` at once the admission's message bucket lets through."""
    return sum(admission.limiter.allow(code) for _ in range(messages))


def test_a_bucket_handed_back_by_one_process_is_taken_over_by_the_next(redis_url):
    clock = FakeClock()
    first, second = shared(redis_url, clock), shared(redis_url, clock)
    first.arrive("code-1", displaced_elsewhere=False)
    assert spend(first, "code-1", BURST + 5) == BURST
    first.leave("code-1")  # the tab moved: the next process finds the bucket empty ...
    second.arrive("code-1", displaced_elsewhere=False)
    assert spend(second, "code-1", 5) == 0  # ... where in its memory it would be full
    assert spend(second, "code-2", 1) == 1  # another participant has a bucket of their own
    clock.advance(1.0)
    assert spend(second, "code-1", 20) == RATE
    progress = [second.progress_limiter.allow("code-1") for _ in range(PROGRESS_BURST + 1)]
    assert sum(progress) == PROGRESS_BURST  # placed elements have their own bucket


def test_a_tab_that_displaced_one_on_another_process_starts_with_a_reserve(redis_url):
    clock = FakeClock()
    first, second = shared(redis_url, clock), shared(redis_url, clock)
    first.arrive("code-1", displaced_elsewhere=False)
    assert spend(first, "code-1", 2) == 2  # the older tab, still open, never handed back
    second.arrive("code-1", displaced_elsewhere=True)
    assert spend(second, "code-1", BURST) == BURST // RESERVE_SHARE
    first.arrive("code-1", displaced_elsewhere=True)  # and back: what is left here, at most
    assert spend(first, "code-1", BURST) == BURST // RESERVE_SHARE


class CountingRedis:
    """A Redis client that counts the commands sent through it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        self.calls += 1
        return getattr(self.client, name)


def test_messages_on_the_process_holding_the_bucket_never_ask_redis(redis_url):
    clock = FakeClock()
    admission = shared(redis_url, clock)
    counting = CountingRedis(admission.limiter.client)
    admission.limiter.client = counting  # type: ignore[assignment]
    admission.arrive("code-busy", displaced_elsewhere=False)
    assert counting.calls == 1
    allowed = 0
    for _ in range(200):  # a person's minute and more at twice the rate the bucket refills
        allowed += admission.limiter.allow("code-busy")
        clock.advance(2 / RATE)
    assert allowed == 200 and counting.calls == 1
    admission.leave("code-busy")
    assert counting.calls == 2


def test_with_redis_away_each_process_limits_in_its_memory():
    admission = shared(f"redis://127.0.0.1:{free_port()}/0", FakeClock())
    admission.arrive("code-1", displaced_elsewhere=False)
    assert spend(admission, "code-1", BURST + 5) == BURST
    admission.leave("code-1")  # nowhere to hand it back: forgotten, and the study goes on
    assert spend(admission, "code-2", BURST + 5) == BURST


def joined(url: str, http: requests.Session, code: str) -> socketio.Client:
    """A tab of the browser ``http`` on the process at ``url``, joined as ``code``."""
    client = socketio.Client(reconnection=False, http_session=http)
    client.connect(url, transports=["websocket"], wait_timeout=30)
    assert client.call("join", {"code": code}, timeout=30)["ok"]
    return client


def flood(client: socketio.Client, messages: int) -> int:
    """Send ``messages`` cookies for a round that does not exist, one after the other; how
    many passed the rate limit (to be refused for the round)."""
    return sum(client.call("cookie", {"msg_id": f"flood-{time.monotonic_ns()}", "content": "x",
                                      "round_id": 999}, timeout=30)["reason"] != "rate-limited"
               for _ in range(messages))


@pytest.mark.slow
def test_a_flood_split_over_two_processes_is_limited_as_one(tmp_path: Path, redis_url):
    protocol = quick_protocol(DEMO, tmp_path / "quick.toml")
    db, pools = tmp_path / "study.sqlite", tmp_path / "pools"
    queue = ("--message-queue", redis_url)
    servers = [ServeProcess(protocol, db, pools, tmp_path / f"{name}.log", extra=queue)
               for name in ("a", "b")]
    reserve = BURST // RESERVE_SHARE
    try:
        for server in servers:
            server.start(120)
        http = requests.Session()  # one browser, its tabs on both processes
        for code in ("split-flood", "kept-open"):
            http.get(f"{servers[0].url}/p/{code}", timeout=30).raise_for_status()
        started, passed = time.monotonic(), 0
        for server in servers:  # a tab floods one process, closes, and floods the other
            tab = joined(server.url, http, "split-flood")
            passed += flood(tab, 2 * BURST)
            tab.disconnect()
        seconds = time.monotonic() - started
        first = joined(servers[0].url, http, "kept-open")
        assert flood(first, 2 * BURST) >= BURST
        started = time.monotonic()
        second = joined(servers[1].url, http, "kept-open")  # the first tab stays open
        passed_second = flood(second, 2 * BURST)
        seconds_second = time.monotonic() - started
        first.disconnect()
        second.disconnect()
    finally:
        for server in servers:
            server.stop()
    # One bucket, handed from one process to the other: its burst and what refilled
    # meanwhile (a reserve more if the second join came before the first tab's leave);
    # a bucket in each process would let 2 * BURST through.
    assert BURST <= passed <= BURST + RATE * seconds + reserve + 1, (passed, seconds)
    # A tab that displaced one still open elsewhere starts with a reserve, not a bucket.
    assert passed_second <= reserve + RATE * seconds_second + 1, (passed_second,
                                                                   seconds_second)


def test_a_page_loads_while_the_rate_limit_store_fails_under_a_request(
        tmp_path: Path, teammates, clock, monkeypatch: pytest.MonkeyPatch):
    """Redis going away under requests in flight (gevent runs others while one waits for
    Redis): another request finds it gone and turns the page limits over to memory while
    this one is still asking Redis, then this one fails on Redis too. It still gets its
    page, as it would from memory."""
    expected = make_app(tmp_path / "memory", teammates, clock).test_client().get("/p/unknown")
    app = make_app(tmp_path, teammates, clock,  # the limiter is the module's: this app's now
                   RATELIMIT_STORAGE_URI=f"redis://127.0.0.1:{free_port()}/0")
    limiter = security.limiter
    monkeypatch.setattr(limiter, "_storage_dead", False)  # the module's: restored after

    def gone_meanwhile(*args: Any, **kwargs: Any) -> Any:
        limiter._storage_dead = True  # another request's doing, while this one waited
        raise redis.ConnectionError("Connection refused")

    for call in ("get", "incr", "get_expiry"):
        setattr(limiter._storage, call, gone_meanwhile)
    response = app.test_client().get("/p/unknown")
    assert response.status_code == expected.status_code != 500
