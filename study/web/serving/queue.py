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
"""

from __future__ import annotations

import logging

import socketio

QUEUE_LOGGER = "socketio.server"
CHANNEL = "flask-socketio"  # Flask-SocketIO's own, so every process listens on one
# Connections one process may hold to Redis, for pushes and for the shared message rates:
# as many as greenlets can wait on it at once (Redis itself takes 10,000 clients).
POOL_CONNECTIONS = 4096


def manager(url: str) -> socketio.RedisManager:
    """Flask-SocketIO's Redis manager, with a pool as large as bursts need."""
    return socketio.RedisManager(url, channel=CHANNEL,
                                 redis_options={"max_connections": POOL_CONNECTIONS})


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
