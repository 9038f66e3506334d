"""``sync`` (docs/socket-protocol.md): the state again for a page that may have missed a
push. It answers with the state a push would have carried, changes and stores nothing,
passes the experimenter's hold, and is bounded by the participant's message rate."""

from __future__ import annotations

from typing import Any

from support.web import msg, page_socket

from study.web.console.holds import apply_action
from study.web.participant.admission import BURST


def counts(app: Any) -> tuple[int, int, int]:
    """Messages, rejections and step changes stored so far."""
    storage = app.extensions["study"].storage
    return tuple(storage.one(f"SELECT count(*) AS n FROM {table}")["n"]  # type: ignore[return-value]
                 for table in ("messages", "rejections", "steps"))


def test_sync_answers_the_state_without_storing_anything(app, clock):
    tab, _ = page_socket(app, "sync-1")
    assert tab.emit("join", {"code": "sync-1"}, callback=True)["ok"]
    assert tab.emit("submit", {"msg_id": msg(), "step": "consent", "data": {"agree": True}},
                    callback=True)["ok"]
    before = counts(app)
    clock.advance(5)
    reply = tab.emit("sync", {}, callback=True)
    assert reply["ok"] and reply["state"]["step"] == "themes"
    assert reply["state"]["now"] == clock.now  # rebuilt now, not an old copy
    assert reply["state"] == app.extensions["study"].state("sync-1")
    assert counts(app) == before


def test_sync_passes_a_hold_and_needs_a_join(app):
    stranger = app.extensions["socketio"].test_client(app)
    assert stranger.emit("sync", {}, callback=True)["reason"] == "not-joined"
    tab, _ = page_socket(app, "sync-2")
    assert tab.emit("join", {"code": "sync-2"}, callback=True)["ok"]
    storage = app.extensions["study"].storage
    apply_action(storage, storage.participant("sync-2"), "pause", "", None, 0.0)
    reply = tab.emit("sync", {}, callback=True)
    assert reply["ok"] and reply["state"]["hold"] == "paused"


def test_sync_is_bounded_by_the_message_rate(app):
    tab, _ = page_socket(app, "sync-3")
    assert tab.emit("join", {"code": "sync-3"}, callback=True)["ok"]
    replies = [tab.emit("sync", {}, callback=True) for _ in range(BURST + 1)]
    assert all(reply["ok"] for reply in replies[:BURST])
    assert replies[-1]["reason"] == "rate-limited" and "state" in replies[-1]
