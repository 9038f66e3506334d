"""What the lobby and the team page tell a person about who is in their team (docs/teams.md):
the lobby counts only the people who can be in one team with them and says what the wait
is for; the team page is the protocol's version for a team of people only, of people and
agents, or of the person alone with agents; ``study check`` refuses a ``[team]`` that can
seat an agent without the page that says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.people import Person, practise, tick_until
from support.teams import team_protocol
from support.web import FakeClock, make_app, rows

from study.protocol.loader import ProtocolError, load_protocol


def lobby(person: Person) -> dict:
    return person.state()["lobby"]


def title(person: Person) -> str:
    return person.state()["page"]["title"]


def test_by_traits_the_lobby_counts_only_who_fits_and_tells_the_others_apart(
        tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock,
                   team_protocol(tmp_path, formation="traits", timers="shared_seconds = 900"))
    first, second = Person(app, "pos-1"), Person(app, "pos-2")
    practise(app, clock, first, squares=2, letters=2, ratings=(1, 7))
    assert {key: lobby(first)[key] for key in ("waiting", "needed", "missing", "others")} == \
        {"waiting": 1, "needed": 2, "missing": 1, "others": 0}
    first.client.get_received()
    practise(app, clock, second, squares=2, letters=3, ratings=(2, 6))  # Twins, not Mixed
    assert rows(app, "SELECT * FROM teams") == []
    for person in (first, second):
        assert {key: lobby(person)[key] for key in ("waiting", "missing", "others",
                                                    "formation")} == \
            {"waiting": 1, "missing": 1, "others": 1, "formation": "traits"}
    # the first person's page learnt of the second without asking
    [pushed] = [state for state in first.pushed("state") if state["step"] == "lobby"][-1:]
    assert pushed["lobby"]["others"] == 1


def test_by_arrival_everyone_waiting_counts_and_nobody_is_apart(
        tmp_path, teammates3):
    clock = FakeClock()
    app = make_app(tmp_path, teammates3, clock, team_protocol(tmp_path, seats=3))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-2")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    for person in (ada, bo):
        assert {key: lobby(person)[key] for key in ("waiting", "needed", "missing",
                                                    "others")} == \
            {"waiting": 2, "needed": 3, "missing": 1, "others": 0}


def test_a_person_who_leaves_the_lobby_changes_what_the_others_read(
        tmp_path, teammates3):
    clock = FakeClock()
    app = make_app(tmp_path, teammates3, clock, team_protocol(tmp_path, seats=3))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-2")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    clock.advance(41)
    ada.client.get_received()
    assert bo.submit("lobby", {"leave": True})["step"] == "unmatched"
    [pushed] = ada.pushed("state")
    assert pushed["lobby"]["waiting"] == 1


def test_the_team_page_says_whether_the_seats_are_people_or_agents(tmp_path, teammates):
    clock = FakeClock()
    protocol_file = team_protocol(tmp_path, timers="shared_seconds = 30")
    app = make_app(tmp_path, teammates, clock, protocol_file)
    pages = load_protocol(protocol_file).pages
    ada = Person(app, "ada-1")
    practise(app, clock, ada)
    tick_until(app, clock, lambda: ada.state()["step"] != "lobby")  # alone past the timer
    assert title(ada) == pages["team_only_agents"].title
    assert sorted(seat["kind"] for seat in ada.state()["team"]["seats"]) == ["agent", "person"]

    directory = tmp_path / "people"
    directory.mkdir()
    app = make_app(directory, teammates, clock, team_protocol(directory))
    bo, cy = Person(app, "bo-2"), Person(app, "cy-3")
    practise(app, clock, bo)
    practise(app, clock, cy, squares=2, letters=2, ratings=(2, 6))
    assert title(bo) == title(cy) == pages["team"].title


def test_two_people_with_a_declared_agent_read_the_page_of_people_and_agents(
        tmp_path, teammates3):
    clock = FakeClock()
    protocol_file = team_protocol(tmp_path, seats=3, agents=1)
    app = make_app(tmp_path, teammates3, clock, protocol_file)
    ada, bo = Person(app, "ada-1"), Person(app, "bo-2")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    assert title(ada) == title(bo) == load_protocol(protocol_file).pages[
        "team_with_agents"].title


def without_page(path: Path, name: str) -> Path:
    text = path.read_text(encoding="utf-8")
    text, count = re.subn(rf"(?ms)^\[pages\.{name}\]\n.*?(?=^\[|\Z)", "", text)
    assert count == 1
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("kwargs", "page", "field"), [
    ({}, "team_only_agents", "team.lobby.on_timeout"),
    ({"seats": 3}, "team_with_agents", "team.lobby.on_timeout"),
    ({"seats": 3}, "team_only_agents", "team.lobby.on_timeout"),
    ({"seats": 3, "agents": 1, "on_timeout": "unmatched"}, "team_with_agents", "team.seats"),
    ({}, "team", "team"),
])
def test_a_team_that_can_seat_an_agent_needs_the_page_that_says_so(tmp_path, kwargs, page,
                                                                   field):
    path = without_page(team_protocol(tmp_path, **kwargs), page)
    with pytest.raises(ProtocolError) as refused:
        load_protocol(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    key = field.rsplit(".", 1)[-1]
    line = next(number for number, text in enumerate(lines, 1)
                if text.startswith((f"{key} =", f"[{field}]")))
    assert f"{path.name}:{line}: {field}:" in str(refused.value)
    assert f"[pages.{page}]" in str(refused.value)


@pytest.mark.parametrize(("kwargs", "page"), [
    ({"on_timeout": "unmatched"}, "team_only_agents"),
    ({"on_timeout": "unmatched"}, "team_with_agents"),
    ({}, "team_with_agents"),  # two seats: never two people with an agent
    ({"seats": 3, "agents": 1, "on_timeout": "unmatched"}, "team"),  # never all people
])
def test_a_page_no_team_of_the_design_can_have_may_be_left_out(tmp_path, kwargs, page):
    path = without_page(team_protocol(tmp_path, **kwargs), page)
    assert load_protocol(path).team is not None
