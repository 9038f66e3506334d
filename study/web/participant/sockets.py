"""Socket.IO events (``docs/socket-protocol.md``): thin handlers around the journey.

A connection is bound to a participant code by ``join`` and the sid only maps to that code;
the state always comes from the database, so a reconnect (new sid) is just another join.
Each process also records its connections in the database (``study.web.serving.processes``) so the
console counts those of every process.

A join must come from the browser the code is bound to (``study.web.participant.binding``: the
page's browser cookie reaches the Socket.IO handshake), and the newest tab of that browser
wins. Connections that never joined cost nothing but a counter: their messages are answered
without touching the database, and a connection that sends ``PRE_JOIN_LIMIT`` messages without
joining, or ``REFUSAL_LIMIT`` refused messages in a row, is disconnected. Every event name
counts: one the protocol does not name (and a ``connect`` or ``disconnect`` the client sends
itself) is refused as ``unknown-event`` and stored nowhere, and a join refused for another
browser is a message of a connection that never joined. A message the database cannot take (a
full disk) is answered ``storage-unavailable``: no refusal, it counts towards no limit, and the
page sends it again later.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from flask import request
from flask_socketio import SocketIO, join_room
from socketio.packet import Packet

from study.storage.health import StorageUnavailable
from study.web.participant import binding
from study.web.participant.inputs import TOO_DEEP
from study.web.participant.journey import Journey, unavailable
from study.web.participant.outbox import Push
from study.web.participant.rejections import Rejected
from study.web.participant.station_pushes import INTERVAL_SECONDS, StationPushes
from study.web.serving.counters import UNJOINED, Counter
from study.web.serving.processes import Processes

EVENTS = ("submit", "start_round", "cookie", "progress", "probe", "withdraw", "sync")
PRE_JOIN_LIMIT = 10  # messages (joins included) a connection may send before joining
REFUSAL_LIMIT = 100  # refused messages in a row before a joined connection is dropped
DROP_DELAY = 0.05  # seconds between the last answer and the disconnect
NOT_JOINED = "send join with a participant code first"
ELSEWHERE = {
    "other-tab": "this study is open in another tab",
    "other-browser": "this study is open in another browser",
}


class Connections:
    """Which participant code each live connection joined as, and what each one sent
    without success (the per-connection limits)."""

    def __init__(self, unjoined: Counter) -> None:
        self.unjoined_count = unjoined  # the console's metric, over every process
        self.codes: dict[str, str] = {}
        self.sids: dict[str, set[str]] = {}  # code -> the connections joined as it here
        self.unjoined: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        self.lock = threading.Lock()

    def bind(self, sid: str, code: str) -> None:
        with self.lock:
            self._unbind(sid)
            self.codes[sid] = code
            self.sids.setdefault(code, set()).add(sid)
            self.unjoined.pop(sid, None)
            self.refused.pop(sid, None)

    def code(self, sid: str) -> str | None:
        with self.lock:
            return self.codes.get(sid)

    def drop(self, sid: str) -> None:
        with self.lock:
            self._unbind(sid)
            self.unjoined.pop(sid, None)
            self.refused.pop(sid, None)

    def another_tab(self, sid: str, code: str) -> bool:
        """Whether a connection other than ``sid`` joined here as ``code`` (asked at every
        disconnect: a look-up, not a scan of every connection)."""
        with self.lock:
            return bool(self.sids.get(code, set()) - {sid})

    def _unbind(self, sid: str) -> None:
        """Forget the code ``sid`` joined as (under the lock)."""
        code = self.codes.pop(sid, None)
        if code is not None:
            sids = self.sids[code]
            sids.discard(sid)
            if not sids:
                del self.sids[code]

    def unjoined_message(self, sid: str) -> bool:
        """Count a message of a connection that has not joined; False past the limit."""
        with self.lock:
            self.unjoined[sid] = self.unjoined.get(sid, 0) + 1
            return self.unjoined[sid] <= PRE_JOIN_LIMIT

    def answered(self, sid: str, reply: dict[str, Any]) -> bool:
        """Count refusals in a row; False once a connection passes ``REFUSAL_LIMIT``. A
        message the database could not take is no refusal and counts for nothing."""
        if reply.get("reason") == "storage-unavailable":
            return True
        with self.lock:
            self.refused[sid] = 0 if reply.get("ok") else self.refused.get(sid, 0) + 1
            return self.refused[sid] <= REFUSAL_LIMIT


def refusal(reason: str, detail: str) -> dict[str, Any]:
    return {"ok": False, "error": "rejected", "reason": reason, "detail": detail}


class TextPacket(Packet):
    """The server's Socket.IO packets, always text: the study sends no binary data, and
    python-socketio's check for it walked every value of a payload before sending it,
    twice the cost of encoding a page state as JSON (issue #29). A client's binary packet
    is decoded as before."""

    uses_binary_events = False


class Notifier:
    """How the journey's pushes go out: to the participant's room, through the message queue
    when several processes share the study. A participant whose every connection is on
    this process is told here directly: a teammate's placed element is most pushes, and the
    queue would send each one to every process to be decoded and mostly dropped. Which
    participants are also connected elsewhere is asked once for a message's pushes, inside
    its transaction (``Outbox.locate``), else once for a flush's. Teammates' stations go
    out at most once a second to each page (``station_pushes``)."""

    def __init__(self, socketio: SocketIO, processes: Processes, shared: bool,
                 station_seconds: float = INTERVAL_SECONDS) -> None:
        self.socketio = socketio
        self.processes = processes
        self.shared = shared
        self.stations = StationPushes(self.send, station_seconds)

    def alone_here(self, codes: set[str]) -> set[str] | None:
        if not self.shared:
            return None
        rooms = self.socketio.server.manager.rooms.get("/", {})
        here = {code for code in codes if code in rooms}
        return here - self.processes.connected_elsewhere(here)

    def __call__(self, pushes: list[Push], alone_here: set[str] | None = None) -> None:
        if self.shared and alone_here is None:
            alone_here = self.alone_here({code for code, _, _ in pushes}) or set()
        self.send(self.stations.admit(pushes, alone_here), alone_here)

    def send(self, pushes: list[Push], alone_here: set[str] | None) -> None:
        """Emit them, to the pages found alone here directly, else through the queue."""
        if not self.shared:
            for event, payload, codes in together(pushes):
                self.socketio.emit(event, payload, to=codes)
            return
        alone_here = alone_here or set()
        for event, payload, codes in together(pushes):
            for ignore_queue in (True, False):
                if to := [code for code in codes if (code in alone_here) == ignore_queue]:
                    self.socketio.emit(event, payload, to=to, ignore_queue=ignore_queue)


def together(pushes: list[Push]) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The pushes as emits, in order: one payload queued for several participants in a row
    (a teammate's station, told to each of the others) is encoded once, for all their
    rooms."""
    emits: list[tuple[str, dict[str, Any], list[str]]] = []
    for code, event, payload in pushes:
        if emits and emits[-1][0] == event and emits[-1][1] is payload:
            emits[-1][2].append(code)
        else:
            emits.append((event, payload, [code]))
    return emits


def register(socketio: SocketIO, journey: Journey, processes: Processes) -> Connections:
    connections = Connections(Counter(journey.storage, UNJOINED))

    def drop(sid: str) -> None:
        """Disconnect a connection past its limit once its last answer is sent, so the
        client learns why (``DROP_DELAY`` later, off the handler)."""
        def later() -> None:
            socketio.sleep(DROP_DELAY)
            socketio.server.disconnect(sid)
        socketio.start_background_task(later)

    def not_joined(sid: str, reply: dict[str, Any]) -> dict[str, Any]:
        """Answer a connection that has not joined: counted, never stored."""
        connections.unjoined_count.add()
        if not connections.unjoined_message(sid):
            drop(sid)
        return reply

    def unknown(event: str, sid: str, *_: Any) -> dict[str, Any]:
        """An event name the socket protocol does not have: refused and counted towards
        the connection's limits like any message, never stored."""
        if connections.code(sid) is None:
            return not_joined(sid, refusal("not-joined", NOT_JOINED))
        reply = refusal("unknown-event", "the socket protocol has no event of that name")
        if not connections.answered(sid, reply):
            drop(sid)
        return reply

    def sent_by_client(sid: str) -> bool:
        """Socket.IO hands a client's own ``connect`` or ``disconnect`` event to the same
        handler as the transport's; only the client's arrives on an established
        connection (the transport's comes while connecting or disconnecting)."""
        return bool(socketio.server.manager.is_connected(sid, "/"))

    def on_connect(sid: str, *_: Any) -> dict[str, Any] | None:
        return unknown("connect", sid) if sent_by_client(sid) else None

    @socketio.on("join")
    def on_join(payload: Any = None) -> dict[str, Any]:
        sid = request.sid  # type: ignore[attr-defined]
        code = payload.get("code") if isinstance(payload, dict) else None
        reply = journey.join(code)
        if not reply["ok"]:
            return not_joined(sid, reply)
        if connections.code(sid) == code and binding.current(journey.storage, sid, code):
            # Joined already: nothing to bind or record again; a page joins once per
            # connection, so repeats count towards the connection's refusal limit.
            if not connections.answered(sid, {"ok": False}):
                drop(sid)
            return reply
        browser = binding.browser_of(request.cookies.get(binding.BROWSER_COOKIE))
        if browser is None:
            return not_joined(sid, refusal("no-cookie", "load the participant page first: "
                                                        "it gives this browser its cookie"))
        try:
            displaced = journey.claim(code, browser, sid, processes)
        except StorageUnavailable:  # the page joins again later
            return unavailable()
        if displaced is None:  # stored nowhere: the code's participant did nothing
            return not_joined(sid, refusal("other-browser", ELSEWHERE["other-browser"]))
        # The code's message rates are spent here from now on; a tab displaced on another
        # process is one this process never bound.
        journey.admission.arrive(code, any(connections.code(other) is None
                                           for other in displaced))
        connections.bind(sid, code)
        join_room(code)
        # Read again once in the room: a round that closed since the first read is either
        # in this state or pushed to this connection, never lost in between.
        reply = {**reply, "state": journey.state(code)}
        for other in displaced:
            socketio.emit("elsewhere", {"reason": "other-tab",
                                        "detail": ELSEWHERE["other-tab"]}, to=other)
        return reply

    @socketio.on("disconnect")
    def on_disconnect(*_: Any) -> dict[str, Any] | None:
        sid = request.sid  # type: ignore[attr-defined]
        if sent_by_client(sid):
            return unknown("disconnect", sid)
        code = connections.code(sid)
        if code is not None:
            if not connections.another_tab(sid, code):
                # Handed back before the connection's row goes: a join elsewhere then
                # finds either the row (and takes a reserve) or the bucket as it was left.
                journey.admission.leave(code)
            with contextlib.suppress(StorageUnavailable):  # a live row outlives a full disk
                processes.disconnected(sid)
        connections.drop(sid)
        return None

    def answer(event: str, sid: str, code: str, payload: Any) -> dict[str, Any]:
        """The message's reply; ``binding.Displaced`` if a newer tab took the code over (a
        message that writes is checked inside its own transaction)."""
        if payload is not TOO_DEEP and event != "sync":
            return journey.handle(event, code, payload, tab=sid)
        binding.ensure_current(journey.storage, sid, code)
        if event == "sync":  # read only: the state again, for a page that missed a push
            return journey.sync(code)
        return journey.refuse(event, code, Rejected("malformed", "the payload nests too deep"),
                              None)

    def handler(event: str) -> Any:
        def handle(sid: str, payload: Any = None) -> dict[str, Any]:
            code = connections.code(sid)
            if code is None:
                return not_joined(sid, refusal("not-joined", NOT_JOINED))
            try:
                reply = answer(event, sid, code, payload)
            except binding.Displaced:
                connections.drop(sid)
                return refusal("elsewhere", ELSEWHERE["other-tab"])
            if not connections.answered(sid, reply):
                drop(sid)
            return reply
        handle.__name__ = f"on_{event}"
        return handle

    # Participant messages go to Socket.IO's own server: they need the sid and nothing of
    # Flask, whose request context per message cost a tenth of a server's time.
    for event in EVENTS:
        socketio.server.on(event, handler(event))
    socketio.server.on("*", unknown)
    socketio.server.on("connect", on_connect)
    return connections
