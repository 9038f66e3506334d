"""Socket.IO events (``docs/socket-protocol.md``): thin handlers around the journey.

A connection is bound to a participant code by ``join`` and the sid only maps to that code;
the state always comes from the database, so a reconnect (new sid) is just another join.
Each process also records its connections in the database (``study.web.processes``) so the
console counts those of every process.
"""

from __future__ import annotations

import threading
from typing import Any

from flask import request
from flask_socketio import SocketIO, join_room

from study.web.journey import Journey
from study.web.processes import Processes

EVENTS = ("submit", "start_round", "cookie", "progress", "withdraw")


class Connections:
    """Which participant code each live connection joined as."""

    def __init__(self) -> None:
        self.codes: dict[str, str] = {}
        self.lock = threading.Lock()

    def bind(self, sid: str, code: str) -> None:
        with self.lock:
            self.codes[sid] = code

    def code(self, sid: str) -> str | None:
        with self.lock:
            return self.codes.get(sid)

    def drop(self, sid: str) -> None:
        with self.lock:
            self.codes.pop(sid, None)


def register(socketio: SocketIO, journey: Journey, processes: Processes) -> Connections:
    connections = Connections()

    @socketio.on("join")
    def on_join(payload: Any) -> dict[str, Any]:
        code = payload.get("code") if isinstance(payload, dict) else None
        reply = journey.join(code)
        if reply["ok"]:
            connections.bind(request.sid, code)  # type: ignore[attr-defined]
            processes.connected(request.sid, code)  # type: ignore[attr-defined]
            join_room(code)
        return reply

    @socketio.on("disconnect")
    def on_disconnect(*_: Any) -> None:
        if connections.code(request.sid) is not None:  # type: ignore[attr-defined]
            processes.disconnected(request.sid)  # type: ignore[attr-defined]
        connections.drop(request.sid)  # type: ignore[attr-defined]

    def handler(event: str) -> Any:
        def handle(payload: Any = None) -> dict[str, Any]:
            return journey.handle(event, connections.code(request.sid), payload)  # type: ignore[attr-defined]
        handle.__name__ = f"on_{event}"
        return handle

    for event in EVENTS:
        socketio.on_event(event, handler(event))
    return connections
