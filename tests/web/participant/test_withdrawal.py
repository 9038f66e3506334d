"""Leaving the study at any time: from the page mid-session, from the experimenter's console
(with a reason, in the action log), and after the end with the final page's private link.

Each way must leave nothing of the participant in any table: no row with their
``participant_id``, none of their answer text or recruitment ids anywhere, and a
``participants`` row that says only that a withdrawal happened.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.journey import (
    SESSION_ANSWERS,
    Browser,
    play_practice,
    through_preferences,
)
from support.web import FakeClock, journey, make_app
from support.withdrawal import EXTERNAL_ID, SECRET_ANSWER, assert_nothing_left, mid_second_session

from analysis import flow
from study.storage.database import Storage


@pytest.fixture
def app(tmp_path: Path, teammates, clock: FakeClock, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)  # the console in demo mode
    return make_app(tmp_path, teammates, clock)


def answers_to(items: list[dict[str, Any]]) -> dict[str, Any]:
    """An answer to every item of a questionnaire page, whatever the protocol asks."""
    first = {"likert": lambda item: 4, "choice": lambda item: item["options"][0],
             "number": lambda item: item["min"], "text": lambda item: "fine"}
    return {item["id"]: first[item["kind"]](item) for item in items}


def console_post(app: Any, code: str, **form: str) -> Any:
    client = app.test_client()
    csrf = re.search(rb'name="csrf_token" value="([^"]+)"', client.get("/console/").data)
    return client.post(f"/console/participants/{code}", data={
        **form, "csrf_token": csrf.group(1).decode()}, headers={"Accept": "application/json"})


def pushed_steps(you: Browser) -> list[str]:
    return [message["args"][0]["step"] for message in you.client.get_received()
            if message["name"] == "state"]


def test_the_page_withdraws_mid_session(app, clock):
    you = mid_second_session(app, clock, "page-leaver")
    reply = you.send("withdraw", {})
    assert reply["ok"] and reply["state"]["step"] == "withdrawn"
    assert journey(app).tick(clock.advance(30.0)) == 0  # its running round went with it
    assert_nothing_left(journey(app).storage.path, "page-leaver", (SECRET_ANSWER, EXTERNAL_ID))


def test_the_console_withdraws_with_a_reason_in_its_log(app, clock):
    you = mid_second_session(app, clock, "console-leaver")
    live = app.test_client().get("/console/live.json").get_json()["participants"]
    assert [p["can_withdraw"] for p in live if p["code"] == "console-leaver"] == [True]
    assert console_post(app, "console-leaver", action="note",
                        note="said her cousin bakes").status_code == 200
    refused = console_post(app, "console-leaver", action="withdraw", note="  ")
    assert refused.status_code == 400
    assert journey(app).storage.participant("console-leaver")["step"] == "session-2"
    you.client.get_received()
    reply = console_post(app, "console-leaver", action="withdraw",
                         note="asked by email to delete her data")
    assert reply.status_code == 200
    assert pushed_steps(you)[-1] == "withdrawn"  # the open page shows the end at once
    assert_nothing_left(journey(app).storage.path, "console-leaver",
                        (SECRET_ANSWER, EXTERNAL_ID, "her cousin bakes"))
    logged = journey(app).storage.all("SELECT * FROM console_actions WHERE action = 'withdraw'")
    assert [(r["code"], r["note"], r["participant_id"]) for r in logged] == [
        ("console-leaver", "asked by email to delete her data", None)]
    again = console_post(app, "console-leaver", action="withdraw", note="twice")
    assert again.status_code == 400
    ended = app.test_client().get("/console/finished.json").get_json()["participants"]
    assert [p["can_withdraw"] for p in ended if p["code"] == "console-leaver"] == [False]


def test_the_final_page_gives_a_link_to_withdraw_later(app, clock):
    you = mid_second_session(app, clock, "late-leaver")
    assert you.join()["state"]["withdraw_token"] is None
    clock.advance(journey(app).protocol.round_seconds)
    journey(app).tick(clock.now)
    you.start(2)
    clock.advance(journey(app).protocol.round_seconds)
    journey(app).tick(clock.now)
    post = you.submit("questionnaire-2", {"answers": SESSION_ANSWERS})
    you.submit("post", {"answers": answers_to(post["page"]["items"])})
    done = you.submit("debrief", {"consent": True})
    token = done["withdraw_token"]
    assert done["step"] == "done" and len(token) >= 20
    assert you.join()["state"]["withdraw_token"] == token  # the same link after a refresh
    web = app.test_client()
    assert web.get("/withdraw/not-a-token").status_code == 404
    confirm = web.get(f"/withdraw/{token}")
    assert confirm.status_code == 200 and b'data-withdraw="confirm"' in confirm.data
    assert journey(app).storage.participant("late-leaver")["step"] == "done"  # only asked
    withdrawn = web.post(f"/withdraw/{token}")
    assert withdrawn.status_code == 200 and b'data-withdraw="withdrawn"' in withdrawn.data
    assert_nothing_left(journey(app).storage.path, "late-leaver",
                        (SECRET_ANSWER, EXTERNAL_ID, token))
    assert web.post(f"/withdraw/{token}").status_code == 404  # a used link is unknown


def test_pause_and_resume_reach_the_open_page(app, clock):
    you = Browser(app, "held-1")
    through_preferences(you)
    you.client.get_received()
    assert console_post(app, "held-1", action="pause", note="fire drill").status_code == 200
    assert you.client.get_received()[-1]["args"][0]["hold"] == "paused"
    refused = you.send("start_round", {"round": 1})
    assert refused["reason"] == "paused" and refused["state"]["hold_page"]["title"]
    assert console_post(app, "held-1", action="resume", note="").status_code == 200
    assert you.client.get_received()[-1]["args"][0]["hold"] is None
    assert you.send("start_round", {"round": 1})["ok"]
    assert console_post(app, "held-1", action="abort", note="unwell").status_code == 200
    assert you.client.get_received()[-1]["args"][0]["hold"] == "aborted"
    assert you.send("withdraw", {})["ok"]  # withdrawing stays possible after an abort
    assert_nothing_left(journey(app).storage.path, "held-1", ())


def test_the_report_flow_places_each_withdrawal_where_it_happened(app, clock):
    in_practice = Browser(app, "left-in-practice")
    through_preferences(in_practice)
    in_practice.start(1)
    assert in_practice.send("withdraw", {})["ok"]
    in_session_1 = Browser(app, "left-in-session-1")
    through_preferences(in_session_1)
    play_practice(in_session_1, clock, app, cookies=1)
    in_session_1.submit("teammate")
    in_session_1.submit("intro-1")
    in_session_1.start(1)
    assert in_session_1.send("withdraw", {})["ok"]
    in_session_2 = mid_second_session(app, clock, "left-in-session-2")
    assert in_session_2.send("withdraw", {})["ok"]
    stages = flow.participant_stages(journey(app).storage.path).set_index("code")
    assert set(stages["outcome"]) == {"withdrawn"}
    assert stages["stage"].to_dict() == {"left-in-practice": "consented",
                                         "left-in-session-1": "session 1",
                                         "left-in-session-2": "session 2"}
    table = flow.flow_table(stages.reset_index()).set_index("stage")
    assert table["withdrawn"].to_dict() == {
        "links created": 0, "opened": 0, "consented": 1, "practised": 0, "session 1": 1,
        "session 2": 1, "done": 0}
    assert table.loc["session 2", "reached"] == 1  # not all three


def test_a_withdrawal_from_a_database_before_the_record_counts_as_consented(tmp_path):
    storage = Storage(tmp_path / "old.sqlite")
    storage.db.execute("ALTER TABLE participants DROP COLUMN withdrawn_from")
    storage.insert("participants", {"code": "old-leaver", "protocol": "study1",
                                    "created_at": 1.0, "step": "withdrawn",
                                    "data_consent": "withdrawn", "withdrawn_at": 2.0})
    storage.close()
    stages = flow.participant_stages(tmp_path / "old.sqlite").set_index("code")
    assert (stages.loc["old-leaver", "stage"], stages.loc["old-leaver", "outcome"]) == (
        "consented", "withdrawn")
