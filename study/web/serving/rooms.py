"""Socket.IO's rooms with each connection's own list, so a disconnect costs its own rooms.

python-socketio finds the rooms a closing connection is in by copying the process's whole
table of rooms and looking for the connection in every one: every connection has a room
of its own and every participant one by code, so at a thousand people a disconnect looked
in two thousand rooms, a few milliseconds in which the process served nobody, and the cost
grew with the people it serves (issue #29). ``RoomsBySid`` keeps, beside the library's
table, the rooms of each connection, and leaves just those. It goes before the library's
manager in a class's bases (one manager a process: ``LocalManager`` alone,
``queue.CountedRedisManager`` with Redis), because python-socketio calls these methods on
its manager and on nothing else.
"""

from __future__ import annotations

from typing import Any

import socketio

Room = str | None  # None: the room of every connection of a namespace
Key = tuple[str, str]  # (namespace, sid)


class RoomsBySid:
    """The manager methods that enter, leave and list rooms, with a per-connection index."""

    rooms: dict[str, dict[Room, Any]]
    callbacks: dict[str, Any]
    pending_connect: dict[str, list[str]]
    pending_disconnect: dict[str, list[str]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rooms_of: dict[Key, set[Room]] = {}

    def basic_enter_room(self, sid: str, namespace: str, room: Room,
                         eio_sid: str | None = None) -> None:
        super().basic_enter_room(sid, namespace, room, eio_sid=eio_sid)  # type: ignore[misc]
        self.rooms_of.setdefault((namespace, sid), set()).add(room)

    def basic_leave_room(self, sid: str, namespace: str, room: Room) -> None:
        super().basic_leave_room(sid, namespace, room)  # type: ignore[misc]
        rooms = self.rooms_of.get((namespace, sid))
        if rooms is not None:
            rooms.discard(room)
            if not rooms:
                del self.rooms_of[(namespace, sid)]

    def get_rooms(self, sid: str, namespace: str) -> list[Room]:
        return [room for room in self.rooms_of.get((namespace, sid), ()) if room is not None]

    def basic_disconnect(self, sid: str, namespace: str, **_: Any) -> None:
        """What python-socketio's does, leaving only the connection's own rooms."""
        if namespace not in self.rooms:
            return
        for room in list(self.rooms_of.get((namespace, sid), ())):
            self.basic_leave_room(sid, namespace, room)
        self.callbacks.pop(sid, None)
        for pending in (self.pending_connect, self.pending_disconnect):
            sids = pending.get(namespace)
            if sids is not None and sid in sids:
                sids.remove(sid)
                if not sids:
                    del pending[namespace]


class LocalManager(RoomsBySid, socketio.Manager):
    """The manager of a process that serves the study alone."""
