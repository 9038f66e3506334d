"""Socket hygiene (docs/socket-protocol.md): every event name counts towards a connection's
limits, a join refused for another browser stores nothing under the code's participant,
and a console socket gets no push once its session has logged out."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from socketio.packet import Packet
from support.web import FakeClock, make_app, msg, page_socket

from study.web.participant.sockets import PRE_JOIN_LIMIT, REFUSAL_LIMIT

PASSWORD = "correct horse"


def storage(app: Any) -> Any:
    return app.extensions["study"].storage


def stored_refusals(app: Any) -> tuple[int, int]:
    """Rejection rows and counted refusals beyond them, of every participant."""
    storage(app).rejection_counts.flush()
    rows = storage(app).one("SELECT count(*) AS n FROM rejections")["n"]
    counted = storage(app).one("SELECT coalesce(sum(count), 0) AS n FROM rejection_counts")
    return rows, counted["n"]


def unjoined_messages(app: Any) -> int:
    from study.web.console.views import current_snapshot
    return current_snapshot(app)["unjoined_messages"]


def dropped(client: Any, namespace: str | None = None, patience: float = 30.0) -> bool:
    """Whether the server disconnects the client (the timeout only catches a hang)."""
    give_up = time.monotonic() + patience
    while client.is_connected(namespace) and time.monotonic() < give_up:
        time.sleep(0.01)
    return not client.is_connected(namespace)


def joined(app: Any, code: str) -> Any:
    tab, _ = page_socket(app, code)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    return tab


@pytest.mark.parametrize("event", ["nonsense", "x" * 500, "disconnect", "connect"])
def test_any_event_name_counts_towards_the_pre_join_limit(app, event):
    stranger = app.extensions["socketio"].test_client(app)
    before = unjoined_messages(app)
    for _ in range(PRE_JOIN_LIMIT):
        reply = stranger.emit(event, {"msg_id": msg()}, callback=True)
        assert reply["reason"] == "not-joined"
    assert stranger.is_connected()
    assert stranger.emit(event, callback=True)["reason"] == "not-joined"
    assert dropped(stranger)
    assert unjoined_messages(app) - before == PRE_JOIN_LIMIT + 1


@pytest.mark.parametrize("event", ["nonsense", "disconnect", "connect"])
def test_any_event_name_counts_towards_the_refusal_limit_and_stores_nothing(app, event):
    tab = joined(app, "unknown-events")
    before = stored_refusals(app)
    replies = [tab.emit(event, {"msg_id": msg()}, callback=True)
               for _ in range(REFUSAL_LIMIT + 1)]
    assert {reply["reason"] for reply in replies} == {"unknown-event"}
    assert dropped(tab)
    assert stored_refusals(app) == before


def test_a_disconnect_event_sent_by_the_client_leaves_the_connection_joined(app):
    tab = joined(app, "fake-disconnect")
    assert tab.emit("disconnect", callback=True)["reason"] == "unknown-event"
    reply = tab.emit("submit", {"msg_id": msg(), "step": "consent", "data": {"agree": True}},
                     callback=True)
    assert reply["ok"], reply
    live = storage(app).one("SELECT count(*) AS n FROM connections WHERE code = ?",
                            ("fake-disconnect",))
    assert live["n"] == 1


def test_a_join_refused_for_another_browser_is_counted_and_stores_nothing(app):
    code = app.extensions["study"].enrol()["code"]
    assert joined(app, code).is_connected()
    before = stored_refusals(app), unjoined_messages(app)
    thief, _ = page_socket(app, code)
    for _ in range(PRE_JOIN_LIMIT):
        refused = thief.emit("join", {"code": code}, callback=True)
        assert refused["reason"] == "other-browser" and "state" not in refused
    assert thief.is_connected()
    assert thief.emit("join", {"code": code}, callback=True)["reason"] == "other-browser"
    assert dropped(thief)
    assert stored_refusals(app) == before[0]
    assert unjoined_messages(app) == before[1] + PRE_JOIN_LIMIT + 1


# --- the console ---------------------------------------------------------------------------


@pytest.fixture
def guarded(tmp_path, teammates, monkeypatch):
    """The demo study with a console password."""
    monkeypatch.setenv("STUDY_CONSOLE_PASSWORD", PASSWORD)
    return make_app(tmp_path, teammates, FakeClock())


def csrf_of(client: Any, path: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"',
                     client.get(path).data.decode()).group(1)


def console_viewer(app: Any) -> tuple[Any, Any]:
    client = app.test_client()
    assert client.post("/console/login", data={
        "password": PASSWORD, "csrf_token": csrf_of(client, "/console/login")}).status_code == 302
    viewer = app.extensions["socketio"].test_client(app, namespace="/console",
                                                    flask_test_client=client)
    assert viewer.is_connected("/console")
    return client, viewer


def live_pushes(viewer: Any) -> list[Any]:
    if not viewer.is_connected("/console"):
        return []
    return [p for p in viewer.get_received("/console") if p["name"] == "live"]


def test_a_console_socket_gets_no_push_once_its_session_logs_out(guarded):
    pusher = guarded.extensions["console_pusher"]
    client, viewer = console_viewer(guarded)
    _, other = console_viewer(guarded)
    guarded.extensions["study"].enrol()
    pusher.push()
    assert live_pushes(viewer) and live_pushes(other)
    assert client.post("/console/logout", data={
        "csrf_token": csrf_of(client, "/console/")}).status_code == 302
    guarded.extensions["study"].enrol()  # a change every remaining viewer is pushed
    pusher.push()
    assert live_pushes(viewer) == []
    assert dropped(viewer, "/console")
    assert live_pushes(other)  # another experimenter's session is untouched


class _NoCounter:
    def add(self) -> None:
        pass


def test_a_connection_knows_another_tab_of_its_code_until_that_tab_goes_or_rejoins():
    from study.web.participant.sockets import Connections

    connections = Connections(_NoCounter())  # type: ignore[arg-type]
    connections.bind("tab-1", "baker")
    connections.bind("tab-2", "baker")
    connections.bind("tab-3", "other")
    assert connections.another_tab("tab-1", "baker")
    assert not connections.another_tab("tab-3", "other")
    connections.bind("tab-2", "other")  # the same connection joined as another code
    assert not connections.another_tab("tab-1", "baker")
    assert connections.another_tab("tab-3", "other")
    connections.drop("tab-2")
    connections.drop("tab-2")  # a second drop changes nothing
    assert not connections.another_tab("tab-3", "other")
    assert connections.code("tab-2") is None
    connections.drop("tab-1")
    connections.drop("tab-3")
    assert connections.sids == {} and connections.codes == {}


def test_the_server_sends_a_page_state_without_walking_it_for_binary(
        app, monkeypatch):
    """python-socketio's check for binary data walked every value of a payload before
    sending it; the study's packets are text, so a page state goes out unwalked."""
    walked: list[Any] = []
    check = Packet.data_is_binary.__func__  # type: ignore[attr-defined]

    def recorded(cls: type, data: Any) -> bool:
        walked.append(data)
        return check(cls, data)

    monkeypatch.setattr(Packet, "data_is_binary", classmethod(recorded))
    tab = joined(app, "walk-1")
    reply = tab.emit("submit", {"msg_id": msg(), "step": "consent",
                                "data": {"agree": True}}, callback=True)
    assert reply["ok"] and reply["state"]["step"] != "consent", reply
    assert walked, "the client's own packets are still checked: the count proves the patch"
    assert not [data for data in walked if isinstance(data, dict) and "state" in data]


def test_a_binary_message_gets_a_text_refusal_and_leaves_the_page_joined(app):
    tab = joined(app, "binary-1")
    reply = tab.emit("progress", {"msg_id": msg(), "round_id": 1, "content": b"\x00\xff"},
                     callback=True)
    assert reply["ok"] is False and reply["reason"], reply
    assert tab.is_connected()
    assert tab.emit("sync", {}, callback=True)["ok"]
