"""The message queue that carries pushes between server processes (Redis).

Every push is a publish from the greenlet that made it, and a gevent worker has hundreds
of them waiting on Redis at once when a burst comes (a team's round starting, a slow
commit): each holds a connection of the client's pool until Redis answers. The pool's
default of 100 connections refused the rest ("Too many connections"), and python-socketio's
retry then reconnected and closed the subscription under its listener, which waited ever
longer before listening again: pushes were lost for seconds. Here the pool may grow as far
as a worker's connections can.

python-socketio logs a failed publish or a lost subscription with the Redis error in an
extra field that a plain log line drops, leaving "Cannot publish to redis... retrying"
with no cause. The cause is put back into the line.

Each process counts the pushes it publishes, by event (``queued:<event>`` in the shared
``counters`` table): teammates routed to one process (``deploy.haproxy_config``) push to
each other in memory, and these counts show how rarely the queue is still needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import socketio

from study.storage.database import Storage
from study.web.serving.counters import FLUSH_SECONDS, Counter
from study.web.serving.rooms import RoomsBySid

QUEUE_LOGGER = "socketio.server"
CHANNEL = "flask-socketio"  # Flask-SocketIO's own, so every process listens on one
# Connections one process may hold to Redis, for pushes and for the shared message rates:
# as many as greenlets can wait on it at once (Redis itself takes 10,000 clients).
POOL_CONNECTIONS = 4096
PUBLISHED = "queued:"  # the counters' prefix: ``queued:station`` counts published stations


class CountedRedisManager(RoomsBySid, socketio.RedisManager):
    """Flask-SocketIO's Redis manager, counting the events it publishes into ``storage``
    once ``count_publishes`` gave it the study's database (and each connection's rooms
    kept by connection, ``rooms``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage: Storage | None = None
        self.counters: dict[str, Counter] = {}

    def _publish(self, data: dict[str, Any]) -> Any:
        if self.storage is not None and data.get("method") == "emit":
            name = f"{PUBLISHED}{data.get('event')}"
            if name not in self.counters:
                self.counters[name] = Counter(self.storage, name)
            self.counters[name].add()
        return super()._publish(data)

    def flush_counts(self, sleep: Callable[[float], None]) -> None:
        """Forever, in a worker's background task: store the counts every second, so the
        last ones are stored too when no push follows them."""
        while True:
            sleep(FLUSH_SECONDS)
            for counter in list(self.counters.values()):
                counter.flush()


def manager(url: str) -> CountedRedisManager:
    """Flask-SocketIO's Redis manager, with a pool as large as bursts need."""
    return CountedRedisManager(url, channel=CHANNEL,
                               redis_options={"max_connections": POOL_CONNECTIONS})


def count_publishes(socketio_: Any, storage: Storage) -> None:
    """Count the pushes this process publishes (with a message queue; else none are)."""
    queue = socketio_.server.manager
    if isinstance(queue, CountedRedisManager):
        queue.storage = storage
        socketio_.start_background_task(queue.flush_counts, socketio_.sleep)


class QueueErrorCause(logging.Filter):
    """Appends the Redis error python-socketio passes as ``redis_exception``."""

    def filter(self, record: logging.LogRecord) -> bool:
        cause = getattr(record, "redis_exception", None)
        if cause and not getattr(record, "cause_shown", False):
            record.msg = f"{record.msg} ({cause})"
            record.cause_shown = True
        return True


def show_queue_errors() -> None:
    """Once per process: the queue's error lines say why."""
    logger = logging.getLogger(QUEUE_LOGGER)
    if not any(isinstance(f, QueueErrorCause) for f in logger.filters):
        logger.addFilter(QueueErrorCause())
