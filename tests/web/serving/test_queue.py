"""The message queue between server processes: a burst of pushes waits on Redis, each with a
connection of its own, instead of failing ("Too many connections") and losing them.

Redis is paused (``CLIENT PAUSE``) while 300 pushes are made at once, so every one of them
waits on Redis together, as a worker's greenlets do after a slow commit; once it resumes,
a subscriber must receive all 300 and nothing may be logged as failed. Needs Debian's
``redis-server`` (the ``redis_url`` fixture starts a private one).
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from support.web import FakeClock, make_app

from study.web.serving import queue

BURST = 300  # more than redis-py's default pool of 100 connections
HANG = 60.0  # seconds: only catches a hang


def received(listener: redis.client.PubSub, count: int) -> int:
    got, give_up = 0, time.monotonic() + HANG
    while got < count and time.monotonic() < give_up:
        if listener.get_message(timeout=1.0):
            got += 1
    return got


def test_a_burst_of_pushes_waits_for_redis_instead_of_failing(redis_url, caplog):
    manager = queue.manager(redis_url)
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(queue.CHANNEL)
    redis.Redis.from_url(redis_url).client_pause(1500)  # every push waits at once
    pushes = [threading.Thread(target=manager.emit, args=("station", {"n": n}),
                               kwargs={"room": f"code-{n}", "namespace": "/"})
              for n in range(BURST)]
    with caplog.at_level(logging.ERROR, logger=queue.QUEUE_LOGGER):
        for push in pushes:
            push.start()
        for push in pushes:
            push.join(HANG)
    assert not any(push.is_alive() for push in pushes)
    assert [r.getMessage() for r in caplog.records] == []
    assert received(listener, BURST) == BURST


def test_only_a_process_alone_holds_its_commit_open_for_more_events(tmp_path, redis_url,
                                                                    teammates):
    """A process that is the database's only writer waits a moment before it commits, so
    messages arriving meanwhile share the commit; processes that share the database (the
    message queue between them) wait before they take the write lock instead, not
    holding it while the others wait for it."""
    alone = make_app(tmp_path / "alone", teammates, FakeClock())
    shared = make_app(tmp_path / "shared", teammates, FakeClock(), MESSAGE_QUEUE=redis_url)
    assert not alone.extensions["study"].storage.shared_file
    assert shared.extensions["study"].storage.shared_file
