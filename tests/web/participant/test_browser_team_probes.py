"""Round probes in a real team of three in real Chromium: the probe is asked in the break
between team rounds and never moves the team's clock.

Two desktops and a phone play two rounds of teams3 (short, with teams3's own break, which
is shorter than the probe's seconds). In the break after round 1 one person answers at
once, one late in the break, one not at all; the team's countdown stays on every page,
round 2 starts on the server's clock while the unanswered probe is still open, and the
database holds the answers inside the break, the missed flag, each probe's deadline, and
round 2 starting when the team clock set it at round 1's close. With
``STUDY_SCREENSHOTS=DIR`` the probe in the break is saved there (docs/teams.md).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page
from support.browser import (
    one_initial_teams3,
    play_team_round,
    practise,
    running_round,
    screenshot_directory,
    stored,
    three_people,
)
from support.web import ROOT, LiveServer, make_app

from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TEAMS3 = load_protocol(ROOT / "protocols" / "teams3.toml")
BREAK = TEAMS3.team.break_seconds  # type: ignore[union-attr]
(FAIR_ROUND,) = TEAMS3.probes
LATE = BREAK - 1.5  # the late person taps this long after round 1 closed


@pytest.fixture(scope="module")
def protocol_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """teams3's own break between rounds, which the probe outlasts, as in the study."""
    assert FAIR_ROUND.seconds > BREAK
    return one_initial_teams3(tmp_path_factory.mktemp("team-probes"), BREAK)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, protocol_file: Path):
    directory = tmp_path_factory.mktemp("browser-team-probes")
    teammates = PoolTeammates.for_protocol(load_protocol(protocol_file), directory / "pools")
    app = make_app(directory, teammates, time.time, protocol=protocol_file, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


def countdown_beside_probe(page: Page) -> str:
    """The probe after round 1 is on the page, and so is the team's countdown, inside the
    screen: its words."""
    page.wait_for_selector('.probe[data-round="1"]', timeout=30_000)
    waiting = page.locator("#team-waiting")
    assert waiting.is_visible()
    box, height = waiting.bounding_box(), page.viewport_size["height"]
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, box
    return waiting.inner_text()


def tap(page: Page, value: int) -> None:
    page.click(f'.probe[data-round="1"] .probe-point[data-value="{value}"]')
    page.wait_for_selector(".probe", state="detached", timeout=30_000)


@pytest.mark.minutes(3.5)
def test_a_team_of_three_answers_probes_in_the_break_on_the_team_clock(
        server: LiveServer, browser, tmp_path: Path):
    shots = screenshot_directory(tmp_path)
    ada, cy, bo = three_people(browser, shots)
    for person, code in ((ada, "ada-1"), (cy, "cy-3"), (bo, "bo-2")):
        practise(person, server.url, code)
        assert person.page.locator(".probe").count() == 0  # practice asks nothing
    for person in (ada, cy, bo):
        person.step("teammate")
        person.click("continue")
        person.step("intro-1")
        person.click("continue")

    play_team_round([ada, cy, bo])
    [first] = stored(server, "SELECT * FROM team_rounds WHERE number = 1")
    [team] = stored(server, "SELECT * FROM teams")
    planned = team["next_round_at"]  # set by round 1's close, before any probe
    for person in (ada, cy, bo):
        assert re.search(r"\d", countdown_beside_probe(person.page))
    ada.shot("probe-team-desktop")
    tap(ada.page, 4)
    cy.shot("probe-team-phone")
    time.sleep(max(0.0, first["closed_at"] + LATE - time.time()))
    tap(cy.page, 2)
    for person in (ada, cy):
        assert person.page.locator("#team-waiting").is_visible()
    [team] = stored(server, "SELECT * FROM teams")
    assert team["next_round_at"] in (planned, None)  # None: round 2 began
    # bo never taps: round 2 starts on the clock and the open probe gives way to it
    running_round(bo)
    assert bo.page.locator(".probe").count() == 0
    play_team_round([ada, cy, bo])
    for person in (ada, cy, bo):  # the probe after round 2 stands above the questionnaire
        person.step("questionnaire-1")
        person.page.wait_for_selector('.probe[data-round="2"]')
    for person in (ada, cy, bo):
        person.page.context.close()

    second = stored(server, "SELECT * FROM team_rounds WHERE number = 2")[0]
    # the team clock: a break after round 1's deadline (or half a break after a late close)
    assert planned == max(first["deadline"], first["closed_at"] - BREAK / 2) + BREAK
    assert planned <= second["started_at"]
    rows = {(row["code"], row["round_number"]): row for row in stored(
        server, "SELECT p.*, q.code, r.closed_at, r.started_at, r.team_round_id FROM probes p "
                "JOIN participants q ON q.id = p.participant_id JOIN rounds r "
                "ON r.id = p.round_id ORDER BY p.id")}
    assert sorted(rows) == sorted((code, number) for code in ("ada-1", "bo-2", "cy-3")
                                  for number in (1, 2))
    for row in rows.values():
        assert row["probe"] == FAIR_ROUND.id
        assert row["deadline"] == pytest.approx(row["closed_at"] + FAIR_ROUND.seconds,
                                                abs=1e-6)
        assert row["team_round_id"] in (first["id"], second["id"])
    for code in ("ada-1", "bo-2", "cy-3"):  # every person's round 2 is the team's
        assert rows[code, 2]["started_at"] == second["started_at"]
    ada_1, cy_1, bo_1 = rows["ada-1", 1], rows["cy-3", 1], rows["bo-2", 1]
    assert (ada_1["value"], ada_1["missed"], cy_1["value"], cy_1["missed"]) == (4, 0, 2, 0)
    for row in (ada_1, cy_1):  # answered in the break
        assert row["closed_at"] <= row["shown_at"] <= row["answered_at"] < second["started_at"]
    assert cy_1["answered_at"] >= cy_1["closed_at"] + LATE
    assert (bo_1["value"], bo_1["answered_at"], bo_1["missed"]) == (None, None, 1)
    assert bo_1["shown_at"] is not None
    # round 2 did not wait for the probe still open: it began before its deadline
    assert second["started_at"] < bo_1["deadline"]
