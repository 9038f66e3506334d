"""Hostile socket traffic costs nothing and breaks nothing (docs/socket-protocol.md).

Connections that never joined are answered and counted, never stored, and dropped after a
few messages; a joined participant's refusals keep a few capped rows and are counted
beyond; numbers too large for SQLite and JSON nested too deep are refused with an ack.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest
from support.web import DEMO, msg, page_socket

from study.storage.database import REJECTION_PAYLOAD_BYTES, REJECTIONS_KEPT
from study.web.participant.sockets import PRE_JOIN_LIMIT, REFUSAL_LIMIT


def storage(app: Any) -> Any:
    return app.extensions["study"].storage


def count(app: Any, table: str) -> int:
    return storage(app).one(f"SELECT count(*) AS n FROM {table}")["n"]


def joined(app: Any, code: str) -> Any:
    tab, _ = page_socket(app, code)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    return tab


def at_practice(app: Any, code: str) -> Any:
    tab = joined(app, code)
    for step, data in (("consent", {"agree": True}), ("themes", {}),
                       ("preferences", {"ratings": {"ravens": 6, "steelers": 2}})):
        reply = tab.emit("submit", {"msg_id": msg(), "step": step, "data": data}, callback=True)
        assert reply["ok"], reply
    return tab


def test_connections_that_never_join_store_nothing_and_are_counted(app):
    before = {table: count(app, table) for table in ("participants", "rejections", "messages")}
    stranger = app.extensions["socketio"].test_client(app)
    replies = [stranger.emit("submit", {"msg_id": msg(), "step": "consent"}, callback=True)
               for _ in range(4)]
    replies += [stranger.emit("join", {"code": f"nobody-{n}"}, callback=True) for n in range(3)]
    replies += [stranger.emit("join", {"code": "a b"}, callback=True)]
    assert [r["reason"] for r in replies] == ["not-joined"] * 4 + ["unknown-participant"] * 3 \
        + ["bad-code"]
    assert {table: count(app, table) for table in before} == before
    snapshot = console_snapshot(app)
    assert snapshot["unjoined_messages"] == 8


def console_snapshot(app: Any) -> dict[str, Any]:
    from study.web.console.views import current_snapshot
    return current_snapshot(app)


def test_a_connection_that_does_not_join_is_dropped_after_a_few_messages(app):
    stranger = app.extensions["socketio"].test_client(app)
    for _ in range(PRE_JOIN_LIMIT):
        assert stranger.emit("cookie", {"round_id": 1}, callback=True)["reason"] == "not-joined"
    assert stranger.is_connected()
    last = stranger.emit("cookie", {"round_id": 1}, callback=True)
    assert last["reason"] == "not-joined"  # answered, then dropped
    assert dropped(stranger)


def dropped(client: Any, patience: float = 30.0) -> bool:
    """Whether the server disconnects the client (waits; the timeout only catches a hang)."""
    give_up = time.monotonic() + patience
    while client.is_connected() and time.monotonic() < give_up:
        time.sleep(0.01)
    return not client.is_connected()


def test_repeated_refusals_keep_a_few_capped_rows_and_a_count(app, clock):
    tab = joined(app, "noisy-1")
    filler = "x" * 4000
    for _ in range(REJECTIONS_KEPT + 30):
        clock.advance(0.5)  # within the participant's rate
        reply = tab.emit("submit", {"msg_id": msg(), "step": "themes", "note": filler},
                         callback=True)
        assert reply["reason"] == "out-of-order"
    storage(app).rejection_counts.flush()
    rows = storage(app).all("SELECT * FROM rejections WHERE reason = 'out-of-order'")
    assert len(rows) == REJECTIONS_KEPT
    assert all(len(row["payload"]) <= REJECTION_PAYLOAD_BYTES for row in rows)
    counted = storage(app).one("SELECT * FROM rejection_counts WHERE reason = 'out-of-order'")
    assert counted["count"] == 30


@pytest.mark.parametrize("event, payload", [
    ("cookie", {"round_id": 2**63, "content": [0]}),
    ("cookie", {"round_id": -(2**63) - 1, "content": [0]}),
    ("progress", {"round_id": 2**63, "content": [0]}),
    ("start_round", {"round": 2**63}),
    ("start_round", {"round": 10**400}),
])
def test_numbers_too_large_for_sqlite_are_refused_with_an_ack(app, event, payload):
    tab = at_practice(app, "big-numbers")
    reply = tab.emit(event, {"msg_id": msg(), **payload}, callback=True)
    assert reply["ok"] is False and reply["reason"] == "malformed", reply
    assert "whole number" in reply["detail"]
    logged = storage(app).one("SELECT * FROM rejections ORDER BY id DESC LIMIT 1")
    assert (logged["event"], logged["reason"]) == (event, "malformed")


def test_json_nested_too_deep_is_refused_with_an_ack(app):
    tab = joined(app, "deep-json")
    tab.callback_counter += 1
    deep = "[" * 5000 + "]" * 5000
    packet = f'2{tab.callback_counter}["cookie",{{"msg_id":"deep-0001","content":{deep}}}]'
    app.extensions["socketio"].server._handle_eio_message(tab.eio_sid, packet)
    reply = tab.acks["args"][0]
    assert reply["ok"] is False and reply["reason"] == "malformed"
    assert "deep" in reply["detail"]
    logged = storage(app).one("SELECT * FROM rejections ORDER BY id DESC LIMIT 1")
    assert (logged["event"], logged["reason"]) == ("cookie", "malformed")
    assert tab.emit("join", {"code": "deep-json"}, callback=True)["ok"]  # still connected


def raw_packet(app: Any, tab: Any, event: str, payload_json: str) -> dict[str, Any]:
    """Send ``payload_json`` as the text a browser would, past the test client's encoder."""
    tab.callback_counter += 1
    packet = f'2{tab.callback_counter}["{event}",{payload_json}]'
    app.extensions["socketio"].server._handle_eio_message(tab.eio_sid, packet)
    return tab.acks["args"][0]


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e400", "123456789012345678901234"])
def test_numbers_outside_json_or_64_bits_are_refused_with_an_ack(app, number):
    tab = at_practice(app, "odd-numbers")
    reply = raw_packet(app, tab, "start_round", f'{{"msg_id":"odd-00001","round":{number}}}')
    assert reply["ok"] is False and reply["reason"] == "malformed", reply
    logged = storage(app).one("SELECT * FROM rejections ORDER BY id DESC LIMIT 1")
    assert (logged["event"], logged["reason"]) == ("start_round", "malformed")


def test_a_lone_surrogate_is_refused_and_its_payload_kept(app):
    tab = at_practice(app, "surrogates")
    reply = raw_packet(app, tab, "start_round", r'{"msg_id":"\ud800-bad-id","round":1}')
    assert reply["ok"] is False and reply["reason"] == "missing-msg-id", reply
    logged = storage(app).one("SELECT * FROM rejections ORDER BY id DESC LIMIT 1")
    assert r"\ud800" in logged["payload"]


def test_a_flood_from_a_joined_tab_is_cut_off(app):
    tab = at_practice(app, "flooder-1")
    replies = [tab.emit("start_round", {"msg_id": msg(), "round": 99}, callback=True)
               for _ in range(REFUSAL_LIMIT + 1)]
    assert all(reply["ok"] is False for reply in replies)
    assert dropped(tab)
    assert count(app, "rejections") <= 2 * REJECTIONS_KEPT


@pytest.mark.slow
@pytest.mark.minutes(0.75)
def test_a_flood_against_study_serve_stores_almost_nothing(tmp_path):
    """Two connections, one never joining and one joined, flood a real ``study serve``
    (``study.bots.flood``, a tenth of the issue's flood): the database grows by far less
    than 1 MB, nothing is stored for the connection that never joined, and nobody is
    enrolled by its joins."""
    from study.bots.flood import flood, stored_bytes
    from study.bots.servers import ServeProcess, quick_protocol

    protocol = quick_protocol(DEMO, tmp_path / "quick.toml")
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log").start(120)
    try:
        flood(server.url, "flood-victim", 10, 1)  # enrols the joined flooder
        before = stored_bytes(db)
        stranger = flood(server.url, None, 1_000, 100)
        joined = flood(server.url, "flood-victim", 1_000, 100)
        growth = stored_bytes(db) - before
    finally:
        server.stop()
    assert stranger.reconnects > 1 and joined.reconnects > 1  # both were dropped on the way
    assert growth < 1024 * 1024, growth
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM rejections WHERE participant_id IS "
                                  "NULL").fetchone() == (0,)
        assert connection.execute("SELECT code FROM participants").fetchall() == [
            ("flood-victim",)]
        kept = connection.execute("SELECT count(*) FROM rejections").fetchone()[0]
    assert kept <= 3 * REJECTIONS_KEPT
