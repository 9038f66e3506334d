"""Bad and hostile messages over the real Socket.IO handlers: another participant's data,
answers off their scale, unknown items, wrong cookies, closed rounds, oversized payloads and
floods are refused with a logged reason, and nothing else in the database changes."""

from __future__ import annotations

import sqlite3

import pytest
from support.web import DEMO, FakeClock, LiveServer, page_socket

from study.bots.client import AckLog, Connection, _Lost
from study.protocol.loader import load_protocol
from study.storage.database import SCHEMA
from study.task.cookies import letters_target
from study.web import create_app
from study.web.participant.admission import (
    BURST,
    MAX_PAYLOAD_BYTES,
    MAX_TRANSPORT_BYTES,
    PROGRESS_BURST,
)
from study.web.participant.agent_pool import PoolTeammates


@pytest.fixture(scope="module")
def teammates(tmp_path_factory):
    return PoolTeammates.for_protocol(load_protocol(DEMO), tmp_path_factory.mktemp("pools"))


@pytest.fixture
def app(tmp_path, teammates):
    return create_app({"PROTOCOL": DEMO, "DATABASE": tmp_path / "study.sqlite",
                       "TEAMMATES": teammates, "CLOCK": FakeClock(), "SCHEDULER": False})


class Tab:
    """One participant's browser tab on the real socket handlers."""

    count = 0

    def __init__(self, app, code: str) -> None:
        self.client, self.browser = page_socket(app, code)
        self.code = code
        assert self.send("join", {"code": code})["ok"]

    def send(self, event: str, payload) -> dict:
        return self.client.emit(event, payload, callback=True)

    def message(self, event: str, **payload) -> dict:
        Tab.count += 1
        return self.send(event, {"msg_id": f"{self.code}-{Tab.count:06d}", **payload})

    def submit(self, step: str, data: dict) -> dict:
        return self.message("submit", step=step, data=data)


def to_practice(tab: Tab) -> None:
    for step, data in (("consent", {"agree": True}), ("themes", {}),
                       ("preferences", {"ratings": {"ravens": 6, "steelers": 2}})):
        assert tab.submit(step, data)["ok"]


def snapshot(app) -> dict[str, list[tuple]]:
    """Every table but the rejection log, row by row."""
    path = app.extensions["study"].storage.path
    with sqlite3.connect(path) as connection:
        return {table: connection.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                for table in SCHEMA if table != "rejections"}


def rejections(app) -> list[str]:
    return [r["reason"] for r in app.extensions["study"].storage.all(
        "SELECT reason FROM rejections ORDER BY id")]


def assert_refused(app, reply: dict, reason: str) -> None:
    assert not reply["ok"] and reply["reason"] == reason, reply
    assert rejections(app)[-1] == reason


def test_a_code_only_ever_reaches_its_own_data(app):
    alice, bob = Tab(app, "alice1"), Tab(app, "bob001")
    to_practice(alice)
    to_practice(bob)
    assert bob.message("start_round", round=1)["ok"]
    bob_round = app.extensions["study"].state("bob001")["round"]
    before = snapshot(app)
    reply = alice.message("cookie", round_id=bob_round["id"], content=[0])
    assert_refused(app, reply, "out-of-order")
    assert reply["state"]["code"] == "alice1" and reply["state"]["round"]["running"] is False
    assert snapshot(app) == before
    taken = alice.send("join", {"code": "bob001"})  # a code is not a key: bob's browser has it
    assert taken["reason"] == "other-browser" and "state" not in taken
    assert alice.send("join", {"code": "no such one"})["reason"] == "bad-code"


@pytest.mark.parametrize("ratings", [
    {"ravens": 8, "steelers": 2}, {"ravens": 0, "steelers": 2}, {"ravens": 3.5, "steelers": 2},
    {"ravens": "7", "steelers": 2}, {"ravens": True, "steelers": 2}, {"ravens": 4},
    {"ravens": 4, "steelers": 2, "eagles": 5},
])
def test_ratings_off_their_scale_missing_or_unknown_are_refused(app, ratings):
    tab = Tab(app, "rater1")
    assert tab.submit("consent", {"agree": True})["ok"]
    assert tab.submit("themes", {})["ok"]
    before = snapshot(app)
    assert_refused(app, tab.submit("preferences", {"ratings": ratings}), "invalid-answer")
    assert snapshot(app) == before


@pytest.mark.parametrize("change", [
    {"age": 5}, {"age": 111}, {"age": "thirty"}, {"gender": "Robot"},
    {"next_time_why": "x" * 2001}, {"made_up_item": 4}, {"gender": None},
])
def test_survey_answers_off_their_scale_or_unknown_are_refused(app, change):
    tab = Tab(app, "asker1")
    to_practice(tab)
    study = app.extensions["study"]
    study.storage.update("participants", study.storage.participant("asker1")["id"],
                         {"step": "post"})  # skip the rounds: only the survey is under test
    valid = {"better_consideration": "No difference", "next_time": "No preference",
             "teammate_understood": "I was not sure", "age": 30, "gender": "Prefer not to say"}
    before = snapshot(app)
    assert_refused(app, tab.submit("post", {"answers": {**valid, **change}}), "invalid-answer")
    assert snapshot(app) == before
    assert tab.submit("post", {"answers": valid})["ok"]


def test_wrong_cookies_and_closed_rounds_are_refused(app):
    tab = Tab(app, "baker1")
    to_practice(tab)
    assert tab.message("start_round", round=1)["ok"]
    current = app.extensions["study"].state("baker1")["round"]
    study = app.extensions["study"]
    study.clock.now += 1.0
    before = snapshot(app)
    wrong = [0] if current["target"]["kind"] == "squares" else "WRONG"
    assert_refused(app, tab.message("cookie", round_id=current["id"], content=wrong),
                   "wrong-cookie")
    assert_refused(app, tab.message("cookie", round_id=current["id"],
                                    content=letters_target("X" * 40)["letters"] * 3),
                   "wrong-cookie")
    assert snapshot(app) == before
    study.clock.now = current["deadline"] + 0.01
    right = (current["target"]["cells"] if current["target"]["kind"] == "squares"
             else current["target"]["letters"])
    assert_refused(app, tab.message("cookie", round_id=current["id"], content=right),
                   "round-closed")
    assert snapshot(app) == before


def test_oversized_payloads_are_refused(app):
    tab = Tab(app, "bulky1")
    to_practice(tab)
    before = snapshot(app)
    big = "x" * (MAX_PAYLOAD_BYTES + 10)
    assert_refused(app, tab.submit("practice", {"padding": big}), "too-large")
    assert snapshot(app) == before


def test_a_packet_above_the_transport_limit_cuts_the_connection(app):
    """Over a real websocket: the server drops the connection and applies nothing."""
    with LiveServer(app) as server:
        connection = Connection(server.url, "hugeone", AckLog(), ack_timeout=3)
        connection.open(patience=10)
        before = snapshot(app)
        with pytest.raises(_Lost):
            connection._send("submit", {"msg_id": "huge-000001", "step": "consent",
                                        "data": {"agree": True,
                                                 "pad": "x" * MAX_TRANSPORT_BYTES}})
        assert not connection.connected
        connection.close()
    assert snapshot(app) == before


def test_a_flood_is_cut_down_to_the_allowed_burst(app):
    tab = Tab(app, "flood1")
    to_practice(tab)
    replies = [tab.message("start_round", round=99) for _ in range(BURST + 10)]
    reasons = [r["reason"] for r in replies]
    assert reasons.count("rate-limited") >= 10
    assert set(reasons) <= {"out-of-order", "rate-limited"}
    storage = app.extensions["study"].storage
    assert storage.all("SELECT * FROM rounds") == []
    # Refused before the participant's row is read, each refusal is still theirs.
    logged = storage.all("SELECT r.participant_id, p.code FROM rejections r LEFT JOIN "
                         "participants p ON p.id = r.participant_id "
                         "WHERE r.reason = 'rate-limited'")
    assert logged and {row["code"] for row in logged} == {"flood1"}


def test_placing_elements_never_uses_up_the_cookies_own_budget(app):
    """A quick person's clicks on a squares cookie come as many ``progress`` messages; the
    cookie that finishes it must still be taken."""
    tab = Tab(app, "quickhands")
    to_practice(tab)
    started = tab.message("start_round", round=1)
    current = started["state"]["round"]
    nothing = "" if current["target"]["kind"] == "letters" else []
    for _ in range(PROGRESS_BURST):
        assert tab.message("progress", round_id=current["id"], content=nothing)["ok"]
    assert tab.message("progress", round_id=current["id"],
                       content=nothing)["reason"] == "rate-limited"
    app.extensions["study"].clock.advance(2.0)
    content = current["target"].get("letters") or current["target"].get("cells")
    assert tab.message("cookie", round_id=current["id"], content=content)["ok"]
