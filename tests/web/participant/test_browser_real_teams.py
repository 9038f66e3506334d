"""Real teams in real Chromium: three browser contexts are three people of teams3.

Each practises alone and waits in the lobby; the third arrival completes the team. In
the first session one person closes their tab: past the grace period an agent with their
measured coefficients takes the seat from the next round, the other two see that
station continue and finish the study, and the one who left finds the ``dropped`` page
when they come back. Two people are on a desktop, one on a 390x844 phone; with
``STUDY_SCREENSHOTS=DIR`` every screen is saved there to be looked at (docs/teams.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.browser import (
    Participant,
    one_initial_teams3,
    play_team_round,
    practise,
    running_round,
    screenshot_directory,
    stored,
    three_people,
)
from support.web import LiveServer, make_app

from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def protocol_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_initial_teams3(tmp_path_factory.mktemp("real-teams"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, protocol_file: Path):
    directory = tmp_path_factory.mktemp("browser-real-teams")
    teammates = PoolTeammates.for_protocol(load_protocol(protocol_file), directory / "pools")
    app = make_app(directory, teammates, time.time, protocol=protocol_file, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


@pytest.mark.minutes(3.5)
def test_three_people_play_one_robot_and_an_agent_takes_a_closed_tab(
        server: LiveServer, browser, tmp_path: Path):
    shots = screenshot_directory(tmp_path)
    ada, cy, bo = three_people(browser, shots)
    practise(ada, server.url, "ada-1")
    ada.step("lobby")
    ada.page.wait_for_function(
        "() => /1 of the 3 people of your team/.test(document.body.innerText)")
    ada.shot("teams-lobby-desktop")
    practise(cy, server.url, "cy-3")
    cy.step("lobby")
    cy.page.wait_for_function(
        "() => /2 of the 3 people of your team/.test(document.body.innerText)")
    cy.shot("teams-lobby-phone")
    practise(bo, server.url, "bo-2")
    for person in (ada, cy, bo):
        person.step("teammate")
    ada.shot("teams-ready-desktop")
    for person in (ada, cy, bo):
        person.click("continue")
        person.step("intro-1")
        person.click("continue")
    ada.page.wait_for_selector('.team-waiting', timeout=30_000)

    # round 1 with everyone: the others' stations are people, pushed live
    play_team_round([ada, cy, bo], shot="teams-round-three")
    # bo closes the tab: the others play on; past the grace period an agent takes the seat
    bo.page.close()
    play_team_round([ada, cy], persons=2)  # bo's seat is still a person's this round
    for person in (ada, cy):
        person.questionnaire("questionnaire-1", None)
        person.step("intro-2")
        person.click("continue")
    [seat] = wait_for(server, "SELECT * FROM seats s JOIN participants p ON "
                              "p.id = s.participant_id WHERE p.code = 'bo-2' AND "
                              "s.dropped_at IS NOT NULL", timeout=90)
    assert seat["drop_reason"] == "away"
    running_round(ada)
    running_round(cy)
    agent = ada.page.locator(".station.theirs[data-kind=agent]")
    assert agent.count() == 1 and "played by an agent" in agent.inner_text()
    assert cy.page.locator(".station.theirs[data-kind=agent]").count() == 1
    ada.shot("teams-round-agent-desktop")
    cy.shot("teams-round-agent-phone")
    assert ada.robot_lane_unclear() == [] and cy.robot_lane_unclear() == []
    play_team_round([ada, cy])
    play_team_round([ada, cy])
    for person in (ada, cy):
        person.questionnaire("questionnaire-2", None)
        person.questionnaire("post", None)
        person.step("debrief")
        person.click("keep")
        person.step("done")
    comeback = bo.page.context.new_page()  # the same browser, a new tab
    comeback.goto(f"{server.url}/p/bo-2")
    comeback.wait_for_selector('[data-step="dropped"]')
    Participant(comeback, shots).shot("teams-dropped-phone")

    [team] = stored(server, "SELECT * FROM teams")
    assert (team["humans"], team["persons"], team["formed_by"]) == (3, 3, "arrival")
    assert team["finished_at"] is not None
    steps = {row["code"]: row["step"] for row in stored(
        server, "SELECT code, step FROM participants")}
    assert steps == {"ada-1": "done", "cy-3": "done", "bo-2": "dropped"}
    agent_rounds = stored(server, "SELECT DISTINCT r.session, r.number FROM seat_cookies c "
                                  "JOIN team_rounds r ON r.id = c.team_round_id WHERE c.seat = ?",
                          seat["seat"])
    taken = (seat["agent_from_session"], seat["agent_from_round"])
    assert agent_rounds and all((r["session"], r["number"]) >= taken for r in agent_rounds)
    assert len(stored(server, "SELECT * FROM team_rounds")) == 4
    for person in (ada, cy, bo):
        person.page.context.close()


def wait_for(server: LiveServer, sql: str, timeout: float) -> list:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        rows = stored(server, sql)
        if rows:
            return rows
        time.sleep(0.25)
    raise AssertionError(f"never true: {sql}")
