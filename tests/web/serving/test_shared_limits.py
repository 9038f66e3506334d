"""A participant's message rate limits hold across server processes: with a Redis message
queue the token buckets live in Redis, so a flood split over two processes is limited as
one; without Redis, or while it is away, each process limits in its own memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests
import socketio
from support.web import DEMO, FakeClock

from study.bots.servers import ServeProcess, free_port, quick_protocol
from study.web.participant.admission import (
    BURST,
    PROGRESS_BURST,
    RATE,
    RESERVE_SHARE,
    Admission,
    SharedRateLimiter,
)


def shared(url: str, clock: FakeClock) -> Admission:
    """One server process's admission, its buckets in the Redis at ``url``."""
    admission = Admission(None, clock)
    admission.share(url, "study-test:rate")
    return admission


def test_two_processes_draw_on_one_bucket_per_participant(redis_url):
    clock = FakeClock()
    first, second = shared(redis_url, clock), shared(redis_url, clock)
    allowed = [(first if n % 2 else second).limiter.allow("code-1") for n in range(2 * BURST)]
    assert sum(allowed) == BURST  # in each process's memory it would be 2 * BURST
    assert not first.limiter.allow("code-1") and not second.limiter.allow("code-1")
    assert first.limiter.allow("code-2")  # another participant has a bucket of their own
    clock.advance(1.0)
    refilled = [(first if n % 2 else second).limiter.allow("code-1") for n in range(20)]
    assert sum(refilled) == RATE
    progress = [second.progress_limiter.allow("code-1") for _ in range(PROGRESS_BURST + 1)]
    assert sum(progress) == PROGRESS_BURST  # placed elements have their own bucket


def count_script_calls(limiter: SharedRateLimiter) -> list[int]:
    """Wrap the limiter's Redis script; the list grows by one per call."""
    calls: list[int] = []
    script = limiter.script

    def counted(**kwargs):
        calls.append(1)
        return script(**kwargs)

    limiter.script = counted  # type: ignore[assignment]
    return calls


def test_one_process_asks_redis_once_for_a_few_messages(redis_url):
    clock = FakeClock()
    admission = shared(redis_url, clock)
    calls = count_script_calls(admission.limiter)
    allowed = [admission.limiter.allow("code-few") for _ in range(BURST + 3)]
    assert sum(allowed) == BURST  # the same bucket as one process's memory ...
    reserve = BURST // RESERVE_SHARE
    assert len(calls) == BURST // reserve + 3  # ... with a call per reserve, and per refusal
    clock.advance(1.0)
    assert sum(admission.limiter.allow("code-few") for _ in range(10)) == RATE


def test_tokens_held_are_spent_after_any_pause_without_asking_again(redis_url):
    clock = FakeClock()
    admission = shared(redis_url, clock)
    calls = count_script_calls(admission.limiter)
    reserve = BURST // RESERVE_SHARE
    assert admission.limiter.allow("code-idle")
    clock.advance(60.0)  # a person reading a page: the bucket refilled long ago
    assert all(admission.limiter.allow("code-idle") for _ in range(reserve - 1))
    assert len(calls) == 1 and "code-idle" not in admission.limiter.held
    assert admission.limiter.allow("code-idle") and len(calls) == 2


def test_with_redis_away_each_process_limits_in_its_memory():
    admission = shared(f"redis://127.0.0.1:{free_port()}/0", FakeClock())
    allowed = [admission.limiter.allow("code-1") for _ in range(BURST + 5)]
    assert sum(allowed) == BURST


def flood(url: str, http: requests.Session, code: str, messages: int) -> list[str]:
    """Join as ``code`` on the process at ``url`` and send ``messages`` cookies for a round
    that does not exist, one after the other: each one's refusal reason."""
    client = socketio.Client(reconnection=False, http_session=http)
    client.connect(url, transports=["websocket"], wait_timeout=30)
    try:
        assert client.call("join", {"code": code}, timeout=30)["ok"]
        return [client.call("cookie", {"msg_id": f"flood-{n:04d}", "content": "x", "round_id": 999},
                            timeout=30)["reason"] for n in range(messages)]
    finally:
        client.disconnect()


@pytest.mark.slow
def test_a_flood_split_over_two_processes_is_limited_as_one(tmp_path: Path, redis_url):
    protocol = quick_protocol(DEMO, tmp_path / "quick.toml")
    db, pools = tmp_path / "study.sqlite", tmp_path / "pools"
    queue = ("--message-queue", redis_url)
    servers = [ServeProcess(protocol, db, pools, tmp_path / f"{name}.log", extra=queue)
               for name in ("a", "b")]
    try:
        for server in servers:
            server.start(120)
        http = requests.Session()  # one browser, its tabs on both processes
        http.get(f"{servers[0].url}/p/split-flood", timeout=30).raise_for_status()
        started = time.monotonic()
        reasons = [reason for server in servers
                   for reason in flood(server.url, http, "split-flood", 2 * BURST)]
        seconds = time.monotonic() - started
    finally:
        for server in servers:
            server.stop()
    passed = sum(reason != "rate-limited" for reason in reasons)
    # One bucket: its burst, what refilled meanwhile, and the tokens each process held
    # while it refilled; a bucket in each process would let 2 * BURST through.
    held = 2 * (BURST // RESERVE_SHARE - 1)
    assert BURST <= passed <= BURST + RATE * seconds + held + 1, (passed, seconds)
