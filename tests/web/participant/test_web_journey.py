"""Every step of the journey through the real Socket.IO server and a real SQLite file.

The clock is injected: deadlines are crossed by moving a fake clock and calling
``tick(now)``, never by sleeping.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from support.journey import (
    SESSION_ANSWERS,
    Browser,
    play_practice,
    play_session,
    through_preferences,
)
from support.web import STUDY2, journey, make_app, moment, msg, rows, small_pool

from study.storage.database import SERVER_SCHEMA
from study.task.cookies import letters_of
from study.web.participant.pages import ROUND_STEPS


def db(app: Any) -> Any:
    return app.extensions["study"].storage


def test_the_whole_journey_is_stored_event_by_event(app, clock):
    you = Browser(app, "walker-1")
    through_preferences(you)
    assert rows(app, "SELECT step FROM participants")[0]["step"] == "practice"
    play_practice(you, clock, app)
    teammate = rows(app, "SELECT * FROM teammates")[0]
    assert teammate["distance"] >= 0 and teammate["participant_human"] in (0, 1)
    capabilities = rows(app, "SELECT * FROM measurements WHERE kind = 'capability' "
                             "ORDER BY task_type")
    assert [m["cookies"] for m in capabilities] == [2, 2]
    protocol = journey(app).protocol
    assert capabilities[0]["value"] == pytest.approx(
        min(0.99, 2 / protocol.practice_seconds / protocol.cookies[0].reference_speed))
    sessions = rows(app, "SELECT * FROM sessions WHERE number > 0 ORDER BY number")
    assert [s["condition"] for s in sessions] == ["efficient", "fair"]
    assert all(s["plan"] and s["goal"] and s["reward"] is not None for s in sessions)
    you.submit("teammate")
    play_session(you, clock, app, 1)
    you.submit("questionnaire-1", {"answers": SESSION_ANSWERS})
    play_session(you, clock, app, 2)
    you.submit("questionnaire-2", {"answers": SESSION_ANSWERS})
    you.submit("post", {"answers": {"better_consideration": "Robot Pat",
                                    "next_time": "Robot Chris", "age": 31,
                                    "teammate_understood": "I was not sure",
                                    "gender": "Prefer not to say"}})
    state = you.submit("debrief", {"consent": True})
    assert state["step"] == "done"
    for session in sessions:
        plan = json.loads(session["plan"])
        given = rows(app, "SELECT round, human, task_type FROM allocations WHERE session_id = ? "
                          "ORDER BY round, human", session["id"])
        assert [[a["task_type"] for a in given if a["round"] == r] for r in (1, 2)] == plan
    answers = rows(app, "SELECT questionnaire, item, value_number, value_text FROM answers")
    assert len(answers) == 2 + 6 + 6 + 6
    assert {a["item"]: a["value_text"] for a in answers if a["questionnaire"] == "post"}[
        "next_time_why"] is None
    assert [s["step"] for s in rows(app, "SELECT step FROM steps ORDER BY id")][-1] == "done"
    assert rows(app, "SELECT count(*) AS n FROM rejections")[0]["n"] == 0


def test_the_robot_reads_the_allocation_state_from_the_database(app, clock):
    you = Browser(app, "state-1")
    through_preferences(you)
    play_practice(you, clock, app)
    you.submit("teammate")
    you.submit("intro-1")
    session = rows(app, "SELECT * FROM sessions WHERE number = 1")[0]
    first = you.start(1)
    clock.advance(20)
    journey(app).tick(clock.now)
    allocation = rows(app, "SELECT * FROM allocations WHERE round = 1")
    policy = journey(app).rounds.policies.of(session)
    held = np.zeros((2, 2), dtype=int)
    for row in allocation:
        held[row["human"], row["task_type"]] += 1
    second = you.start(2)
    expected = policy.action(held)
    assert second["task_type"] == expected[session["participant_human"]]
    assert json.loads(rows(app, "SELECT held_before FROM allocations WHERE round = 2")[0][
        "held_before"]) == held.tolist()
    assert sum(first["station"]) == sum((2, 2)) - 2  # two of the four kits handed out


def test_a_round_closes_at_its_deadline_without_a_browser(app, clock):
    you = Browser(app, "deadline-1")
    through_preferences(you)
    round_state = you.start(1)
    seconds = journey(app).protocol.practice_seconds
    assert round_state["deadline"] == moment(clock.now + seconds)
    you.client.disconnect()
    assert journey(app).tick(clock.advance(seconds - 0.1)) == 0
    assert journey(app).tick(clock.advance(0.1)) == 1
    closed = rows(app, "SELECT * FROM rounds")[0]
    assert closed["closed_at"] == clock.now and closed["close_reason"] == "deadline"
    again = Browser(app, "deadline-1")
    state = again.join()["state"]
    assert state["round"] == {"session": 0, "of": 4, "running": False, "next": 2,
                              "station": None}


def test_a_cookie_after_the_deadline_is_refused(app, clock):
    you = Browser(app, "late-1")
    through_preferences(you)
    round_state = you.start(1)
    clock.advance(journey(app).protocol.practice_seconds + 0.5)
    reply = you.cookie(round_state)
    assert reply["reason"] == "round-closed"
    assert reply["state"]["round"]["id"] == round_state["id"]  # for the page to redraw
    assert rows(app, "SELECT count(*) AS n FROM cookies")[0]["n"] == 0


def test_a_cookie_for_the_last_practice_round_arriving_after_it_closed_is_late(app, clock):
    """Its round's close moved the participant on: the cookie is still late for its round
    (what the page explains), not out of order (a message the page should not have sent)."""
    you = Browser(app, "late-3")
    through_preferences(you)
    play_practice(you, clock, app, cookies=0)
    last = rows(app, "SELECT * FROM rounds ORDER BY id DESC LIMIT 1")[0]
    (moved_on,) = {row["step"] for row in rows(app, "SELECT step FROM participants")}
    assert last["closed_at"] is not None and moved_on not in ROUND_STEPS
    reply = you.send("cookie", {"round_id": last["id"], "content": "LATE"})
    assert reply["reason"] == "round-closed"
    assert reply["state"]["step"] == moved_on
    assert [row["reason"] for row in rows(app, "SELECT reason FROM rejections")] == [
        "round-closed"]
    stranger = you.send("cookie", {"round_id": last["id"] + 1, "content": "LATE"})
    assert stranger["reason"] == "out-of-order"


def test_a_placed_element_after_the_deadline_is_refused_with_the_state(app, clock):
    """A client that asks for a placed element's answer follows the state it carries (the
    load bots; one still on a closed round would go on sending for it)."""
    you = Browser(app, "late-2")
    through_preferences(you)
    round_state = you.start(1)
    clock.advance(journey(app).protocol.practice_seconds + 0.5)
    reply = you.send("progress", {"round_id": round_state["id"], "content": []})
    assert reply["reason"] == "round-closed"
    assert reply["state"]["round"]["id"] == round_state["id"]
    assert [row["reason"] for row in rows(app, "SELECT reason FROM rejections WHERE "
                                          "event = 'progress'")] == ["round-closed"]
    assert rows(app, "SELECT count(*) AS n FROM progress")[0]["n"] == 0


def test_a_restarted_server_closes_overdue_rounds(tmp_path, teammates, clock):
    first = make_app(tmp_path, teammates, clock)
    you = Browser(first, "restart-1")
    through_preferences(you)
    round_state = you.start(1)
    clock.advance(1)
    assert you.cookie(round_state)["ok"]
    db(first).close()
    clock.advance(60)
    second = make_app(tmp_path, teammates, clock)
    row = rows(second, "SELECT * FROM rounds")[0]
    assert row["close_reason"] == "recovery" and row["participant_cookies"] == 1


def test_a_reconnect_resumes_the_same_round(app, clock):
    you = Browser(app, "again-1")
    through_preferences(you)
    round_state = you.start(1)
    clock.advance(1)
    you.cookie(round_state)
    you.client.disconnect()
    clock.advance(2)
    state = Browser(app, "again-1").join()["state"]["round"]
    assert (state["id"], state["deadline"], state["cookies"]) == (
        round_state["id"], round_state["deadline"], 1)


def test_a_second_tab_takes_over_and_the_first_is_told(app, clock):
    one, two = Browser(app, "tabs-1"), Browser(app, "tabs-1")
    assert one.join()["ok"] and two.join()["ok"]
    told = [m for m in one.client.get_received() if m["name"] == "elsewhere"]
    assert told and told[-1]["args"][0]["reason"] == "other-tab"
    reply = one.send("submit", {"step": "consent", "data": {"agree": True}})
    assert reply["reason"] == "elsewhere" and "another tab" in reply["detail"]
    assert two.submit("consent", {"agree": True})["step"] == "themes"
    assert one.join()["ok"]  # the first tab may take the study back
    assert two.send("submit", {"step": "themes", "data": {}})["reason"] == "elsewhere"


def test_a_tab_is_checked_inside_its_message_s_write_transaction(app, clock):
    """The check and the message are one step against a newer tab's join, and with
    several workers on one file the message reads no page outside its transaction (each
    read there after another process's commit reads SQLite's pages again)."""
    you = Browser(app, "one-step-1")
    assert you.join()["ok"]
    statements: list[str] = []
    db(app).db.conn.set_trace_callback(statements.append)
    assert you.submit("consent", {"agree": True})["step"] == "themes"
    db(app).db.conn.set_trace_callback(None)
    check = next(i for i, sql in enumerate(statements) if "FROM connections" in sql)
    begin = max((i for i, sql in enumerate(statements[:check]) if sql.startswith("BEGIN")),
                default=None)
    assert begin is not None, "the tab was checked before the message's transaction"
    assert not any(sql.startswith("COMMIT") for sql in statements[begin:check])
    assert any(sql.startswith('INSERT INTO "messages"') for sql in statements[check:])


def test_the_teammate_works_to_its_schedule_and_is_stored_at_the_close(app, clock):
    you = Browser(app, "live-1")
    through_preferences(you)
    play_practice(you, clock, app)
    you.submit("teammate")
    you.submit("intro-1")
    person = rows(app, "SELECT id FROM participants")[0]["id"]
    db(app).update("teammates", person, {"c_squares": 0.99, "c_letters": 0.99})  # a quick one
    round_state = you.start(1)
    times = round_state["teammate"]["times"]
    assert times, "the agent teammate finishes cookies in a round"
    assert times == sorted(times) and times[-1] <= round_state["deadline"]
    assert round_state["teammate"]["cookies"] == 0
    assert round_state["teammate"]["next_at"] == moment(times[0])
    clock.now = times[0]
    teammate = journey(app).state("live-1")["round"]["teammate"]
    assert teammate["cookies"] == 1 and teammate["times"] == times
    clock.now = round_state["deadline"]
    journey(app).tick(clock.now)
    stored = rows(app, "SELECT * FROM cookies WHERE actor = 'teammate' ORDER BY number")
    assert [c["finished_at"] for c in stored] == moment(times)
    assert rows(app, "SELECT teammate_cookies FROM rounds WHERE id = ?",
                round_state["id"])[0]["teammate_cookies"] == len(times)


def refusal(app: Any, browser: Browser, event: str, payload: Any, reason: str) -> None:
    """The message is refused with ``reason``, logged, and no other table changes."""
    tables = [t for t in db(app).db.table_names() if t != "rejections"]
    before = {t: db(app).db[t].count for t in tables}
    reply = browser.client.emit(event, payload, callback=True)
    assert reply["ok"] is False and reply["reason"] == reason, reply
    assert {t: db(app).db[t].count for t in tables} == before
    assert rows(app, "SELECT reason FROM rejections ORDER BY id DESC LIMIT 1")[0][
        "reason"] == reason


def test_forged_malformed_out_of_order_and_duplicate_messages_change_nothing(app, clock):
    you = Browser(app, "forger-1")
    reply = you.send("submit", {"step": "consent", "data": {}})
    assert reply["reason"] == "not-joined" and db(app).db["rejections"].count == 0
    assert you.join()["ok"]
    refusal(app, you, "submit", "nonsense", "malformed")
    refusal(app, you, "submit", {"step": "consent", "data": {"agree": True}}, "missing-msg-id")
    refusal(app, you, "submit", {"msg_id": msg(), "step": "themes", "data": {}}, "out-of-order")
    refusal(app, you, "submit", {"msg_id": msg(), "step": "consent", "data": {"agree": 1}},
            "malformed")
    same = msg()
    assert you.send("submit", {"step": "consent", "data": {"agree": True}}, same)["ok"]
    refusal(app, you, "submit", {"msg_id": same, "step": "themes", "data": {}}, "duplicate")
    you.submit("themes")
    refusal(app, you, "submit", {"msg_id": msg(), "step": "preferences",
                                 "data": {"ratings": {"ravens": 9, "steelers": 1}}},
            "invalid-answer")
    refusal(app, you, "submit", {"msg_id": msg(), "step": "preferences",
                                 "data": {"ratings": {"ravens": 2}}}, "invalid-answer")
    refusal(app, you, "start_round", {"msg_id": msg(), "round": 1}, "out-of-order")
    you.submit("preferences", {"ratings": {"ravens": 2, "steelers": 5}})
    refusal(app, you, "start_round", {"msg_id": msg(), "round": 2}, "out-of-order")
    round_state = you.start(1)
    refusal(app, you, "start_round", {"msg_id": msg(), "round": 2}, "out-of-order")
    clock.advance(0.2)
    refusal(app, you, "cookie", {"msg_id": msg(), "round_id": round_state["id"],
                                 "content": round_state["target"]["cells"]}, "too-fast")
    clock.advance(1)
    refusal(app, you, "cookie", {"msg_id": msg(), "round_id": round_state["id"],
                                 "content": round_state["target"]["cells"][1:]}, "wrong-cookie")
    refusal(app, you, "cookie", {"msg_id": msg(), "round_id": round_state["id"] + 99,
                                 "content": []}, "out-of-order")
    refusal(app, you, "cookie", {"msg_id": msg(), "round_id": True, "content": []}, "malformed")
    assert you.cookie(round_state)["ok"]
    reasons = [r["reason"] for r in rows(app, "SELECT reason FROM rejections ORDER BY id")]
    assert len(reasons) == 14


def test_an_unknown_code_is_refused(app):
    stranger = app.extensions["socketio"].test_client(app)
    reply = stranger.emit("join", {"code": "nobody-here"}, callback=True)
    assert reply["reason"] == "unknown-participant"
    assert stranger.emit("join", {"code": "a b"}, callback=True)["reason"] == "bad-code"


def test_declining_consent_keeps_only_the_refusal(app, clock):
    you = Browser(app, "decliner-1")
    app.test_client().get("/p/decliner-1?PROLIFIC_PID=abc")
    assert you.join()["ok"]
    state = you.submit("consent", {"agree": False})
    assert state["step"] == "declined"
    person = rows(app, "SELECT * FROM participants")[0]
    assert (person["consent"], person["external_ids"], person["condition_order"]) == (
        "declined", None, None)
    for table in ("steps", "messages", "answers", "sessions"):
        assert db(app).db[table].count == 0
    refusal(app, you, "submit", {"msg_id": msg(), "step": "declined", "data": {}}, "finished")


def test_withdrawing_at_debrief_deletes_everything_but_the_withdrawal(app, clock):
    you = Browser(app, "leaver-1")
    through_preferences(you)
    play_practice(you, clock, app, cookies=1)
    assert db(app).db["cookies"].count > 0
    reply = you.send("withdraw", {})
    assert reply["ok"] and reply["state"]["step"] == "withdrawn"
    person = rows(app, "SELECT * FROM participants")[0]
    assert person["data_consent"] == "withdrawn" and person["withdrawn_at"] == clock.now
    for table in db(app).db.table_names():
        # server_runs: the protocol served; SERVER_SCHEMA: the server processes' own tables
        if table not in ("participants", "server_runs", *SERVER_SCHEMA):
            assert db(app).db[table].count == 0, table


def test_conditions_alternate_between_participants(app):
    orders = []
    for code in ("order-1", "order-2", "order-3"):
        you = Browser(app, code)
        assert you.join()["ok"]
        you.submit("consent", {"agree": True})  # the order is assigned at consent
        orders.append(json.loads(rows(app, "SELECT condition_order FROM participants "
                                           "WHERE code = ?", code)[0]["condition_order"]))
    assert orders == [["efficient", "fair"], ["fair", "efficient"], ["efficient", "fair"]]


def test_study2_solves_fea_with_the_pool_bounds_and_shows_transparency(tmp_path, clock,
                                                                      tmp_path_factory):
    teammates = small_pool(tmp_path_factory.mktemp("pool8"), kits=(8, 8))
    app = make_app(tmp_path, teammates, clock, protocol=STUDY2)
    for code in ("first-one", "fea-1"):  # study2's links come from the console
        journey(app).enrol(code)
    first = Browser(app, "first-one")
    assert first.join()["ok"]
    first.submit("consent", {"agree": True})
    you = Browser(app, "fea-1")
    assert you.join()["ok"]
    you.submit("consent", {"agree": True})
    you.submit("themes")
    you.submit("preferences", {"ratings": {"ravens": 2, "steelers": 6}})
    for number in range(1, 5):
        round_state = you.start(number)
        clock.advance(8)
        assert you.cookie(round_state)["ok"]
        clock.advance(30)
        journey(app).tick(clock.now)
    state = you.submit("teammate")
    assert state["step"] == "intro-1" and state["page"]["robot"] == "Pat"
    assert state["page"]["transparency"].startswith("Robot Pat considers both")
    fea = rows(app, "SELECT * FROM sessions WHERE algorithm = 'fea'")[0]
    assert (fea["fea_lo"], fea["fea_hi"], fea["w"]) == (0.0, 1.5, 0.7)
    assert fea["number"] == 1 and len(json.loads(fea["plan"])) == 8


def test_pages_record_recruitment_ids(app):
    web = app.test_client()
    assert web.get("/p/prolific-1?PROLIFIC_PID=p1&STUDY_ID=s1").status_code == 200
    assert json.loads(rows(app, "SELECT external_ids FROM participants")[0]["external_ids"]) == {
        "PROLIFIC_PID": "p1", "STUDY_ID": "s1"}
    started = app.test_client().get("/start?PROLIFIC_PID=p2")  # another browser
    assert started.status_code == 302 and "/p/" in started.headers["Location"]
    assert db(app).db["participants"].count == 2
    assert web.get("/p/bad code!").status_code == 404


def test_letters_ignore_spaces_and_case():
    assert letters_of("Go Ravens!") == "GORAVENS"
