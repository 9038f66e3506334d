"""The console's live fairness (docs/study-day.md): each participant's and real team's kits
so far, running F and FE against the stored plan, following the plan, the last probe
answers, the means per condition; never a recruitment id."""

from __future__ import annotations

import pytest
from support.console import PASSWORD, logged_in
from support.live_fairness import agent_participant, answer, expected, off_plan, session_of
from support.people import Person, play_round, practise, running, tick_until, to_session
from support.recruitment import pid, recruitment_protocol
from support.teams import team_protocol
from support.web import FakeClock, make_app, rows

from study.web.console import views as console


def console_app(tmp_path, teammates, clock, protocol):
    app = make_app(tmp_path, teammates, clock, protocol=protocol,
                   STUDY_CONSOLE_PASSWORD=PASSWORD, TESTING=True)
    if "console" not in app.blueprints:
        console.init_app(app)
    app.extensions["console_pusher"].stop()
    return app


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(tmp_path, teammates, clock, monkeypatch):
    """The demo as a Prolific study: people come with recruitment ids."""
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    protocol = recruitment_protocol(tmp_path / "prolific.toml", open_enrolment=True)
    return console_app(tmp_path, teammates, clock, protocol)


@pytest.fixture
def three(app, clock):
    """Ana and Cy in session 1 under efficient, Bo under fair, each with two rounds'
    kits handed out."""
    return [agent_participant(app, clock, name, rounds=2) for name in ("ana", "bo", "cy")]


def live_row(app, code):
    client, _ = logged_in(app)
    snapshot = client.get("/console/live.json").get_json()
    (row,) = [row for row in snapshot["participants"] if row["code"] == code]
    return row, snapshot


def kits_of(app, session_id):
    return [(r["round"], r["human"], r["task_type"]) for r in rows(
        app, "SELECT round, human, task_type FROM allocations WHERE session_id = ? "
             "ORDER BY round, human", session_id)]


def test_a_participants_fairness_is_the_models_of_the_stored_allocations(app, three):
    row, _ = live_row(app, three[0])
    session = session_of(app, three[0])
    fair = row["fairness"]
    want = expected(session, kits_of(app, session["id"]), session["participant_human"])
    assert (fair["condition"], fair["rounds"], fair["of"]) == (session["condition"], 2, 2)
    for name in ("F", "FE", "planned_F", "planned_FE"):
        assert fair[name] == pytest.approx(want[name], abs=1e-3), name
    mine = [0, 0]
    for _, human, task in kits_of(app, session["id"]):
        mine[task] += human == session["participant_human"]
    assert fair["people"] == ["participant", "teammate"]
    assert fair["kits"][0] == mine and sum(map(sum, fair["kits"])) == 4
    assert fair["follows"] is True and fair["off_plan_from"] is None


def test_a_session_off_its_plan_says_so_from_the_round_it_left(app, three):
    off_plan(app, session_of(app, three[1]))
    row, _ = live_row(app, three[1])
    assert row["fairness"]["follows"] is False and row["fairness"]["off_plan_from"] == 1
    other, _ = live_row(app, three[0])
    assert other["fairness"]["follows"] is True


def test_per_condition_the_means_over_the_people_taking_part(app, three):
    ana, bo, cy = three
    off_plan(app, session_of(app, cy))
    _, snapshot = live_row(app, ana)
    by_condition = {entry["condition"]: entry for entry in snapshot["fairness"]}
    assert {c: e["people"] for c, e in by_condition.items()} == {"efficient": 2, "fair": 1}
    views = [live_row(app, code)[0]["fairness"] for code in (ana, cy)]
    efficient = by_condition["efficient"]
    for name in ("F", "FE", "planned_F", "planned_FE"):
        mean = sum(abs(view[name][1]) for view in views) / 2
        assert efficient[name] == pytest.approx(mean, abs=1e-3), name
    assert efficient["following"] == 0.5 and by_condition["fair"]["following"] == 1.0
    assert by_condition["fair"]["F"] == pytest.approx(
        abs(live_row(app, bo)[0]["fairness"]["F"][1]), abs=1e-3)


def test_the_last_probe_answers_are_the_latest_answered_or_missed(app, three):
    session = session_of(app, three[0])
    me = session["participant_id"]
    answer(app, me, session, 1, "fair_round", 5, False)
    answer(app, me, session, 2, "fair_round", None, True)
    answer(app, me, session, 1, "enjoy", 3, False)
    answer(app, me, session, 2, "enjoy", None, False)  # shown, not yet answered
    row, _ = live_row(app, three[0])
    assert row["fairness"]["probes"] == {"participant": {
        "fair_round": {"value": "missed", "session": 1, "round": 2},
        "enjoy": {"value": 3, "session": 1, "round": 1}}}


def test_no_recruitment_id_reaches_the_console(app, three):
    ids = [pid(name) for name in ("ana", "bo", "cy")]
    assert all(rows(app, "SELECT 1 FROM participants WHERE recruitment_id = ?", i) for i in ids)
    client, _ = logged_in(app)
    shown = [client.get("/console/live.json").get_data(as_text=True),
             client.get("/console/").get_data(as_text=True),
             client.get("/console/finished.json").get_data(as_text=True)]
    assert '"fairness"' in shown[0] and '"planned_F"' in shown[1]
    for recruitment_id in ids:
        assert not any(recruitment_id in text for text in shown)


def test_a_real_teams_fairness_is_the_models_of_its_kits(tmp_path, teammates, clock,
                                                         monkeypatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    app = console_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    to_session(app, clock, [ada, bo], 1)
    play_round(app, clock, [ada, bo])
    tick_until(app, clock, lambda: all(running(person) for person in (ada, bo)))
    session = rows(app, "SELECT s.* FROM sessions s JOIN participants p ON "
                        "p.id = s.participant_id WHERE p.code = 'ada-1' AND number = 1")[0]
    answer(app, session["participant_id"], session, 1, "fair_round", 6, False)
    kits = [(r["round"], r["seat"], r["task_type"]) for r in rows(
        app, "SELECT round, seat, task_type FROM team_allocations WHERE session = 1")]
    client, _ = logged_in(app)
    snapshot = client.get("/console/live.json").get_json()
    (team,) = snapshot["teams"]
    fair = team["fairness"]
    want = expected(session, kits, 0)
    assert (fair["rounds"], fair["people"], fair["people_playing"]) == (
        2, ["seat 1", "seat 2"], 2)
    for name in ("F", "FE", "planned_F", "planned_FE"):
        assert fair[name] == pytest.approx(want[name], abs=1e-3), name
    assert fair["follows"] is True
    assert fair["probes"] == {"seat 1": {"fair_round": {"value": 6, "session": 1, "round": 1}},
                              "seat 2": {}}
    assert all(row["fairness"] is None for row in snapshot["participants"])  # the team's
    (condition,) = snapshot["fairness"]
    assert condition["people"] == 2 and condition["F"] == pytest.approx(abs(fair["F"][-1]))
