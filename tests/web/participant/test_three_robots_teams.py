"""Real teams of a three-robot study (docs/teams.md): a team plays one session per robot
on one clock, its order counterbalanced over teams, and a person away during a later
session is dropped as in the first two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.people import Person, play_round, practise, running, to_session
from support.protocols import THREE
from support.teams import TEAM
from support.web import FakeClock, journey, make_app, rows, small_pool

from study.protocol.orders import counterbalanced

SESSION_ANSWERS = {"cap_agree": 6, "cap_rating": 5, "pref_agree": 4, "pref_rating": 3,
                   "fair_overall": 2, "fair_overall_why": "Fine."}


def three_robot_teams(directory: Path) -> Path:
    """The three-robot study with a [team] of two people formed by arrival (whose pages say
    which seats are agents, so it conceals none)."""
    text = THREE.read_text(encoding="utf-8").replace('name = "three"', 'name = "three-team"')
    text = text.replace('agent_teammate = "concealed"\n', "")
    path = directory / "three-team.toml"
    path.write_text(text + TEAM.format(
        seats=json.dumps(["person", "person"]), formation="arrival", team_types="",
        timers="shared_seconds = 300\nindividual_seconds = 600", on_timeout="agents",
        grace=5), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def teammates(tmp_path_factory: pytest.TempPathFactory):
    return small_pool(tmp_path_factory.mktemp("pools"), teammate={"unplaced": "continue"})


def team_of_two(app: Any, clock: FakeClock, codes: tuple[str, str]) -> list[Person]:
    people = [Person(app, code) for code in codes]
    for person in people:
        practise(app, clock, person)
    assert [person.state()["step"] for person in people] == ["teammate", "teammate"]
    return people


def play_session(app: Any, clock: FakeClock, people: list[Person], number: int) -> None:
    to_session(app, clock, people, number)
    for _ in range(journey(app).protocol.rounds):
        play_round(app, clock, people)
        for _ in range(20):  # the break before the team's next round
            if all(running(p) for p in people) or all(
                    p.state()["step"] != f"session-{number}" for p in people):
                break
            clock.advance(1.0)
            journey(app).tick(clock.now)


def test_a_team_plays_one_session_per_robot_and_ranks_them(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, three_robot_teams(tmp_path))
    people = team_of_two(app, clock, ("ada-1", "bo-22"))
    (team,) = rows(app, "SELECT * FROM teams")
    order = json.loads(team["condition_order"])
    assert order == ["efficient", "fair", "fea"]  # the first team: the listed order
    for number in (1, 2, 3):
        play_session(app, clock, people, number)
        assert [p.state()["step"] for p in people] == [f"questionnaire-{number}"] * 2
        finished = rows(app, "SELECT finished_at FROM teams")[0]["finished_at"]
        assert (finished is not None) == (number == 3)
        for person in people:
            person.submit(f"questionnaire-{number}", {"answers": SESSION_ANSWERS})
    played = rows(app, "SELECT session, condition, count(*) AS n FROM team_rounds "
                       "GROUP BY session ORDER BY session")
    assert [(r["session"], r["condition"], r["n"]) for r in played] == [
        (n, c, 2) for n, c in enumerate(order, 1)]
    for person in people:
        sessions = rows(app, "SELECT s.number, s.condition, s.team_id FROM sessions s JOIN "
                             "participants p ON p.id = s.participant_id WHERE p.code = ? "
                             "AND s.number > 0 ORDER BY s.number", person.code)
        assert [(s["number"], s["condition"]) for s in sessions] == list(
            enumerate(order, 1))
        post = person.state()
        assert post["step"] == "post"
        rank = next(item for item in post["page"]["items"] if item["kind"] == "rank")
        assert [robot["id"] for robot in rank["robots"]] == order


def test_the_next_team_takes_the_next_order_and_an_absence_in_session_3_drops(
        tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, three_robot_teams(tmp_path))
    team_of_two(app, clock, ("ada-1", "bo-22"))
    ci, di = team_of_two(app, clock, ("ci-333", "di-4444"))
    orders = [json.loads(t["condition_order"]) for t in rows(
        app, "SELECT condition_order FROM teams ORDER BY id")]
    assert orders == counterbalanced(["efficient", "fair", "fea"], "alternate")[:2]
    for number in (1, 2):
        play_session(app, clock, [ci, di], number)
        for person in (ci, di):
            person.submit(f"questionnaire-{number}", {"answers": SESSION_ANSWERS})
    di.leave()  # away on the third robot's introduction, past the grace
    ci.submit("intro-3")
    for _ in range(30):
        clock.advance(1.0)
        journey(app).tick(clock.now)
    (seat,) = rows(app, "SELECT s.drop_reason, s.agent_from_session FROM seats s JOIN "
                        "participants p ON p.id = s.participant_id WHERE p.code = 'di-4444'")
    assert (seat["drop_reason"], seat["agent_from_session"]) == ("away", 3)
    assert rows(app, "SELECT step FROM participants WHERE code = 'di-4444'")[0]["step"] == \
        "dropped"
    assert running(ci) is not None and ci.state()["step"] == "session-3"
