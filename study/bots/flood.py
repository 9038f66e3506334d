"""A hostile client: one connection flooding the server with forged messages and joins.

Used by ``benchmarks/flood.py`` and the flood test: messages are sent without waiting for
their answers, up to ``WINDOW`` unanswered at a time (so the server handles every one
rather than a socket buffer dropping them), and the connection is reopened whenever the
server drops it for passing its limits (``study.web.participant.sockets``), until
everything is sent.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests
import socketio

PAYLOAD = "x" * 200
WINDOW = 32  # unanswered messages at a time
ANSWER_SECONDS = 2.0  # an answer not back by then: the connection was dropped


@dataclass
class Flooded:
    """What one flooding connection sent and how often the server dropped it."""

    messages: int = 0
    joins: int = 0
    answered: int = 0
    reconnects: int = 0


def flood(base_url: str, code: str | None, messages: int, joins: int,
          seconds: float = 0.0) -> Flooded:
    """Send ``messages`` forged cookies and ``joins`` joins over one connection, ``WINDOW``
    at a time, reconnecting whenever the server drops it; spread evenly over ``seconds``
    (0: as fast as the server answers). With ``code`` the connection joins as that
    participant first (its page loaded, so its cookie is set)."""
    http = requests.Session()
    if code is not None:
        http.get(f"{base_url}/p/{code}", timeout=30).raise_for_status()
    sent = Flooded()
    every = max(1, messages // max(1, joins))
    client: socketio.Client | None = None
    window = threading.Semaphore(WINDOW)
    total = messages + joins

    def answered(*_: object) -> None:
        sent.answered += 1
        window.release()

    started = time.monotonic()
    while sent.messages + sent.joins < total:
        due = started + seconds * (sent.messages + sent.joins) / total
        time.sleep(max(0.0, due - time.monotonic()))
        if client is None or not client.connected:
            client = _connect(base_url, http, code, client)
            window = threading.Semaphore(WINDOW)  # what was in flight is lost with the socket
            sent.reconnects += 1
        if not window.acquire(timeout=ANSWER_SECONDS):
            client = None
            continue
        position = sent.messages + sent.joins
        join = sent.messages >= messages or (sent.joins < joins
                                             and position % (every + 1) == every)
        if join:
            event, payload = "join", {"code": code or f"nobody-{secrets.token_hex(4)}"}
            sent.joins += 1
        else:
            event, payload = "cookie", {"msg_id": secrets.token_hex(6), "content": PAYLOAD,
                                        "round_id": sent.messages + 1}
            sent.messages += 1
        try:
            client.emit(event, payload, callback=answered)
        except socketio.exceptions.SocketIOError:  # dropped by the server
            client = None
    if client is not None:
        client.disconnect()
    return sent


def _connect(base_url: str, http: requests.Session, code: str | None,
             old: socketio.Client | None) -> socketio.Client:
    if old is not None:
        old.disconnect()
    client = socketio.Client(reconnection=False, http_session=http)
    client.connect(base_url, transports=["websocket"], wait_timeout=30)
    if code is not None:
        client.call("join", {"code": code}, timeout=30)
    return client


def stored_bytes(db: Path) -> int:
    """The database's size once its WAL is checkpointed into it: what is stored."""
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.stat().st_size
