"""Real teams in the experimenter's console: teams as rows, the lobby, and holds for a
whole team (docs/teams.md, docs/study-day.md)."""

from __future__ import annotations

import pytest
from support.console import PASSWORD, csrf_of
from support.people import Person, practise, to_session
from support.teams import team_protocol
from support.web import FakeClock, moment

from study.web import create_app
from study.web.console import views as console


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(tmp_path, teammates, clock, monkeypatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    app = create_app({"PROTOCOL": team_protocol(tmp_path), "DATABASE": tmp_path / "study.sqlite",
                      "TEAMMATES": teammates, "CLOCK": clock, "SCHEDULER": False,
                      "TESTING": True, "STUDY_CONSOLE_PASSWORD": PASSWORD})
    if "console" not in app.blueprints:
        console.init_app(app)
    app.extensions["console_pusher"].stop()
    return app


def logged_in(app):
    client = app.test_client()
    token = csrf_of(client.get("/console/login").data)
    assert client.post("/console/login", data={"password": PASSWORD,
                                               "csrf_token": token}).status_code == 302
    return client, csrf_of(client.get("/console/").data)


def rows(app, sql, *params):
    return app.extensions["study"].storage.all(sql, params)


@pytest.fixture
def playing(app, clock):
    """Two people playing session 1 as a team, a third waiting in the lobby."""
    ada, bo, cy = (Person(app, code) for code in ("ada-1", "bo-22", "cy-333"))
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    practise(app, clock, cy)
    to_session(app, clock, [ada, bo], 1)
    return ada, bo, cy


def test_the_live_view_shows_teams_as_rows_and_who_waits(app, clock, playing):
    client, _ = logged_in(app)
    live = client.get("/console/live.json").get_json()
    (team,) = live["teams"]
    assert (team["formed_by"], team["session"], live["finished_teams"]) == ("arrival", 1, 0)
    assert [(s["code"], s["state"]) for s in team["seats"]] == [("ada-1", "playing"),
                                                               ("bo-22", "playing")]
    assert team["round"]["running"] is True
    (waiting,) = live["lobby"]["waiting"]
    assert waiting["code"] == "cy-333"
    assert live["lobby"]["shared_deadline"] == moment(waiting["entered_at"] + 300)
    assert live["lobby"]["outcomes"] == {"team": 2}
    assert b'id="team-rows"' in client.get("/console/").data


def test_a_team_that_played_to_its_end_is_counted_not_listed(app, clock, playing):
    storage = app.extensions["study"].storage
    with storage.event():
        storage.write("UPDATE teams SET finished_at = ? WHERE id = 1", (clock.now,))
    client, _ = logged_in(app)
    live = client.get("/console/live.json").get_json()
    assert (live["teams"], live["finished_teams"]) == ([], 1)


def test_a_team_is_paused_and_resumed_as_one(app, clock, playing):
    client, token = logged_in(app)
    reply = client.post("/console/teams/1", data={"action": "pause", "note": "fire drill",
                                                  "csrf_token": token})
    assert reply.status_code == 302
    held = rows(app, "SELECT p.code, c.status FROM console_status c JOIN participants p "
                     "ON p.id = c.participant_id ORDER BY p.code")
    assert [(r["code"], r["status"]) for r in held] == [("ada-1", "paused"), ("bo-22", "paused")]
    notes = [r["note"] for r in rows(app, "SELECT note FROM console_actions WHERE "
                                          "action = 'pause'")]
    assert notes == ["team 1: fire drill"] * 2
    client.post("/console/teams/1", data={"action": "resume", "csrf_token": token})
    assert {r["status"] for r in rows(app, "SELECT status FROM console_status")} == {"active"}
    assert client.post("/console/teams/1", data={"action": "withdraw",
                                                 "csrf_token": token}).status_code == 400
    assert client.post("/console/teams/9", data={"action": "pause",
                                                 "csrf_token": token}).status_code == 404


def test_aborting_a_member_gives_their_seat_to_an_agent(app, clock, playing):
    ada = playing[0]
    client, token = logged_in(app)
    client.post("/console/participants/bo-22", data={"action": "abort", "csrf_token": token})
    (seat,) = rows(app, "SELECT * FROM seats WHERE seat = 1")
    assert (seat["drop_reason"], seat["agent_from_session"], seat["agent_from_round"]) == (
        "aborted", 1, 2)
    (team,) = client.get("/console/live.json").get_json()["teams"]
    assert team["seats"][1]["state"] == "aborted: agent from session 1 round 2"
    assert ada.state()["team"]["seats"][1]["dropped"] is True


def test_an_individual_study_has_no_team_panel(tmp_path, teammates, monkeypatch):
    from support.console import make_app
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    app = make_app(tmp_path, teammates)
    client, _ = logged_in(app)
    assert "teams" not in client.get("/console/live.json").get_json()
    assert b'id="team-rows"' not in client.get("/console/").data
