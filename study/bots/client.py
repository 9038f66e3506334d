"""A browser's view of the server: one participant page over HTTP, one Socket.IO connection,
every message acknowledged or retried, and a log of what the server acknowledged.

The log is what makes the resilience and load checks honest: whatever the server said it
accepted must be in the database afterwards, whatever happened to the server in between.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import requests
import socketio

Ack = dict[str, Any]
State = dict[str, Any]
# The answer to a message the server could not store (a full disk): send it again later.
STORAGE_UNAVAILABLE = "storage-unavailable"
# The URL parameter that names the worker process a connection asks for (the balancer's,
# ``study.web.serving.websockets.ROUTE_PARAMETER``).
ROUTE_PARAMETER = "route"


class ServerGone(RuntimeError):
    """The server could not be reached again within the bot's patience."""


@dataclass(frozen=True)
class Acked:
    """One message the server acknowledged (accepted, or already had as a duplicate)."""

    code: str
    event: str
    msg_id: str
    payload: dict[str, Any]
    sent_at: float
    acked_at: float
    duplicate: bool

    @property
    def latency(self) -> float:
        """Seconds from the last send of this message to its acknowledgement."""
        return self.acked_at - self.sent_at


@dataclass
class AckLog:
    """Acknowledged messages and refusals of every bot in a run (thread-safe)."""

    acked: list[Acked] = field(default_factory=list)
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def accept(self, entry: Acked) -> None:
        with self._lock:
            self.acked.append(entry)

    def refuse(self, code: str, event: str, reason: str) -> None:
        with self._lock:
            self.refused.append((code, event, reason))


def routed_url(base_url: str, code: str, state: State | None) -> str:
    """The Socket.IO address that asks for the connection's worker process as the page
    does (``static/js/connection.js``): its team's route once the state names one, else
    its own code's."""
    route = state.get("route") if state else None
    return f"{base_url}?{urlencode({ROUTE_PARAMETER: route or code})}"


def new_msg_id() -> str:
    """A message id in the protocol's alphabet (8-64 of [A-Za-z0-9_-])."""
    return secrets.token_urlsafe(12)


class Connection:
    """One participant's tab: page load, socket, ``join``, and acknowledged requests.

    Socket.IO handlers run on the client's reader thread, so they only record pushes; the
    bot's own thread sends and waits. A lost connection wakes every waiter at once instead
    of letting it sit out its timeout.
    """

    def __init__(self, base_url: str, code: str, log: AckLog, *,
                 clock: Callable[[], float] = time.time, ack_timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.code = code
        self.log = log
        self.clock = clock
        self.ack_timeout = ack_timeout
        self.http = requests.Session()
        self.sio: socketio.Client | None = None
        self.url = ""  # the Socket.IO address of the connection, route included
        self.state: State | None = None
        self.offset = 0.0  # server clock minus ours, from the latest state
        self._changed = threading.Condition()
        self._lost = threading.Event()

    # --- connecting ---------------------------------------------------------------------

    def open(self, patience: float = 30.0) -> State:
        """Load the page, connect and join, retrying until ``patience`` runs out."""
        give_up = time.monotonic() + patience
        delay = 0.05
        while True:
            try:
                return self._open_once()
            except (requests.RequestException, socketio.exceptions.ConnectionError,
                    _Lost) as error:
                self.close()
                if time.monotonic() + delay > give_up:
                    raise ServerGone(f"{self.code}: server unreachable ({error})") from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _open_once(self) -> State:
        page = self.http.get(f"{self.base_url}/p/{self.code}", timeout=self.ack_timeout)
        page.raise_for_status()
        self._lost.clear()
        sio = socketio.Client(reconnection=False, handle_sigint=False, http_session=self.http,
                              request_timeout=self.ack_timeout)
        sio.on("state", self._on_state)
        sio.on("disconnect", self._on_disconnect)
        self.url = routed_url(self.base_url, self.code, self.state)
        sio.connect(self.url, transports=["websocket"], wait_timeout=self.ack_timeout)
        self.sio = sio
        ack = self._send("join", {"code": self.code})
        if ack.get("reason") == STORAGE_UNAVAILABLE:  # as the page: join again later
            time.sleep(ack.get("retry_after", 1))
            raise _Lost("join")
        if not ack.get("ok"):
            raise JoinRefused(ack.get("reason", "?"))
        return self.state or ack["state"]

    def close(self) -> None:
        """Drop the socket as a closed tab would (no goodbye to the server needed)."""
        sio, self.sio = self.sio, None
        if sio is not None:
            # A closed tab does not wait for the server's goodbye: cut the socket first,
            # then let the client tidy up (a dead transport may fail to; it is gone anyway).
            websocket = getattr(sio.eio, "ws", None)
            with contextlib.suppress(Exception):
                if websocket is not None:
                    websocket.abort()
                sio.disconnect()
        self._lost.set()
        with self._changed:
            self._changed.notify_all()

    def follow_route(self, patience: float = 30.0) -> None:
        """Connect again when the state names another route than the connection's (the
        person joined a team), as the page does."""
        if self.sio is not None and routed_url(self.base_url, self.code,
                                               self.state) != self.url:
            self.close()
            self.open(patience)

    @property
    def connected(self) -> bool:
        return self.sio is not None and self.sio.connected and not self._lost.is_set()

    # --- pushes -------------------------------------------------------------------------

    def _on_state(self, state: State) -> None:
        self._remember(state)

    def _on_disconnect(self, *_reason: Any) -> None:
        self._lost.set()
        with self._changed:
            self._changed.notify_all()

    def _remember(self, state: State | None) -> None:
        if not state:
            return
        with self._changed:
            if _older(state, self.state):
                return  # an ack or push overtaken by a newer state on the way
            self.state = state
            if isinstance(state.get("now"), int | float):
                self.offset = state["now"] - self.clock()
            self._changed.notify_all()

    def server_now(self) -> float:
        return self.clock() + self.offset

    def wait_for(self, ready: Callable[[State], bool], timeout: float) -> bool:
        """Block until the latest state satisfies ``ready``; False on timeout or lost socket."""
        give_up = time.monotonic() + timeout
        while True:
            self.follow_route()  # outside the lock: the reader thread takes it to answer
            with self._changed:
                if self.state is not None and ready(self.state):
                    return True
                left = give_up - time.monotonic()
                if left <= 0 or self._lost.is_set():
                    return False
                self._changed.wait(left)

    # --- requests -----------------------------------------------------------------------

    def _send(self, event: str, payload: dict[str, Any]) -> Ack:
        """Emit and wait for the ack; raises ``_Lost`` if the socket dies or stays silent."""
        sio = self.sio
        if sio is None or self._lost.is_set():
            raise _Lost(event)
        answered = threading.Event()
        box: list[Ack] = []

        def callback(*args: Any) -> None:
            box.append(args[0] if args else {})
            answered.set()

        try:
            sio.emit(event, payload, callback=callback)
        except socketio.exceptions.BadNamespaceError:
            raise _Lost(event) from None
        give_up = time.monotonic() + self.ack_timeout
        while not answered.wait(0.05):
            if self._lost.is_set() or time.monotonic() > give_up:
                raise _Lost(event)
        ack = box[0] if isinstance(box[0], dict) else {"ok": False, "reason": "malformed-ack"}
        self._remember(ack.get("state"))
        return ack

    def sync(self) -> None:
        """Ask for the state again (``sync``), as the page does while it waits on a push
        that may have been lost; a socket gone or silent is left to the caller."""
        with contextlib.suppress(_Lost):
            self._send("sync", {})

    def request(self, event: str, payload: dict[str, Any], patience: float = 30.0) -> Ack:
        """Send a mutating message until the server answers it, reconnecting as a browser
        would; the same ``msg_id`` is reused so the server applies it at most once."""
        message = {"msg_id": new_msg_id(), **payload}
        self.follow_route(patience)
        while True:
            sent_at = self.clock()
            try:
                ack = self._send(event, message)
            except _Lost:
                self.close()
                self.open(patience)
                continue
            self._record(event, message, ack, sent_at)
            if ack.get("reason") == STORAGE_UNAVAILABLE:  # as the page: the same message later
                time.sleep(ack.get("retry_after", 1))
                continue
            return ack

    def _record(self, event: str, message: dict[str, Any], ack: Ack, sent_at: float) -> None:
        duplicate = ack.get("reason") == "duplicate"
        if ack.get("ok") or duplicate:
            self.log.accept(Acked(self.code, event, message["msg_id"], message, sent_at,
                                  self.clock(), duplicate))
        else:
            self.log.refuse(self.code, event, str(ack.get("reason")))


def _older(state: State, than: State | None) -> bool:
    """Whether ``state`` was built before ``than`` (states carry the server clock)."""
    now, latest = state.get("now"), than.get("now") if than else None
    return isinstance(now, int | float) and isinstance(latest, int | float) and now < latest


class JoinRefused(RuntimeError):
    """The server refused ``join`` (unknown code, closed enrolment)."""


class _Lost(Exception):
    """The socket went away (or stayed silent) before the server answered."""
