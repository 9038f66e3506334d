"""Who is in a real team, told truthfully, in real Chromium at a human pace (docs/teams.md).

Two people practise ``teams2`` at the human model's pace, and both prefer the theme of the
letters cookie, the cookie both are faster at: both are positively correlated, and two
such people make Twins, never the Mixed team the protocol forms. Their lobby pages say so:
one of the two people of their team is here (themselves), one other person waits whose
results do not fit, and the wait is for a person who does. When their timers run out, each
is seated with a computer agent, and the team page says exactly that, listing the seats as
the rounds name them. Every sentence checked is compared with what the database holds.

The people wait ten minutes at most (``individual_seconds``); once both wait, the test
brings their timers forward in the database, where the served study reads them, rather
than sitting through the wait. With ``STUDY_SCREENSHOTS=DIR`` the lobby, the team page and
a round are saved there, on a desktop and a 390x844 phone.
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page
from support.browser import DESKTOP, PHONE, HumanHands, screenshot_directory, stored
from support.web import LiveServer, make_app

from study.people.speed import Human
from study.pool.teamtypes import team_type_codes
from study.protocol.loader import Protocol, load_protocol
from study.protocol.pool_names import TEAM_TYPES
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
# Both rate the letters cookie's theme (steelers) above the squares cookie's (ravens).
RATINGS = {"ravens": 2, "steelers": 6}
# Two browsers and the server share the machine: each person stops this long before a
# round's deadline, so no move of theirs is cut off by the round closing under it.
MARGIN = 1.5


@pytest.fixture(scope="module")
def protocol_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """teams2 with 45 s rounds, open enrolment, and only each person's own timer."""
    text = (ROOT / "protocols" / "teams2.toml").read_text(encoding="utf-8")
    # a round long enough for Sam's one cookie at the human model's pace (at most 21 s)
    # and Pat's cookies after it, on a machine busy with the whole suite
    for pattern, value in ((r"(?m)^round_seconds = \d+", "round_seconds = 45"),
                           (r"(?m)^practice_seconds = \d+", "practice_seconds = 15"),
                           # a break long enough to read the last round's summary
                           (r"(?m)^break_seconds = \d+", "break_seconds = 30"),
                           (r"(?m)^shared_seconds = \d+", "shared_seconds = 0"),
                           (r"(?m)^individual_seconds = \d+", "individual_seconds = 600"),
                           (r"(?m)^open_enrolment = false", "open_enrolment = true")):
        text, count = re.subn(pattern, value, text)
        assert count == 1, pattern
    path = tmp_path_factory.mktemp("teams-honest") / "teams2.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def protocol(protocol_file: Path) -> Protocol:
    return load_protocol(protocol_file)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, protocol_file: Path, protocol: Protocol):
    directory = tmp_path_factory.mktemp("browser-teams-honest")
    teammates = PoolTeammates.for_protocol(protocol, directory / "pools")
    app = make_app(directory, teammates, time.time, protocol=protocol_file, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


def practise(person: HumanHands, url: str, code: str) -> None:
    person.page.goto(f"{url}/p/{code}")
    person.reach_practice(RATINGS)
    for _ in range(4):
        person.play_human_round("practice", margin=MARGIN)
    person.step("lobby")


def text_of(page: Page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


def wait_text(page: Page, selector: str, expected: str) -> None:
    """Until the element shows ``expected`` (pushed pages update by themselves)."""
    page.wait_for_function(
        "([selector, expected]) => { const node = document.querySelector(selector); "
        "return node !== null && node.textContent.trim() === expected; }",
        arg=[selector, expected], timeout=30_000)


def live_type(server: LiveServer, codes: list[str]) -> str:
    """The team type the measured people of ``codes`` make together, in arrival order."""
    c, p = np.zeros((len(codes), 2)), np.zeros((len(codes), 2))
    for k, code in enumerate(codes):
        for row in stored(server, "SELECT m.kind, m.task_type, m.value FROM measurements m "
                                  "JOIN participants p ON p.id = m.participant_id "
                                  "WHERE p.code = ?", code):
            (c if row["kind"] == "capability" else p)[k, row["task_type"]] = row["value"]
    return TEAM_TYPES[int(team_type_codes(c[None], p[None])[0])]


def seat_names(server: LiveServer, protocol: Protocol, code: str) -> list[str]:
    """The seats of the person's team as the page must name them, from the database."""
    texts = protocol.texts
    names = []
    for seat in stored(server, "SELECT s.seat, s.kind, p.code FROM seats s JOIN seats mine "
                               "ON mine.team_id = s.team_id JOIN participants me "
                               "ON me.id = mine.participant_id LEFT JOIN participants p "
                               "ON p.id = s.participant_id WHERE me.code = ? ORDER BY s.seat",
                       code):
        if seat["code"] == code:
            names.append(texts["team_you"])
        else:
            key = "station_agent" if seat["kind"] == "agent" else "station_person"
            names.append(texts[key].replace("{seat}", str(seat["seat"] + 1)))
    return names


def console_lobby(page: Page, url: str, expected: str) -> str:
    """The console's lobby line once it contains ``expected``."""
    page.goto(f"{url}/console/")
    page.wait_for_function("(text) => (document.getElementById('lobby') || {textContent: ''})"
                           ".textContent.includes(text)", arg=expected, timeout=30_000)
    return text_of(page, "#lobby")


@pytest.mark.minutes(3.5)
def test_two_people_who_cannot_be_teamed_are_told_the_truth_and_seated_with_agents(
        server: LiveServer, browser, protocol: Protocol, tmp_path: Path):
    shots = screenshot_directory(tmp_path)
    texts = protocol.texts
    desktop, phone = browser.new_context(viewport=DESKTOP), browser.new_context(viewport=PHONE)
    pat, sam = (HumanHands(context.new_page(), Human(pace=1.0, slip=0.0), seed=seed,
                           protocol=server.app.config["PROTOCOL"])
                for seed, context in enumerate((desktop, phone)))
    pat.shots = sam.shots = shots

    # alone in the lobby: the only person of the team is Pat, one more is needed
    practise(pat, server.url, "pat-1")
    wait_text(pat.page, "#lobby-count", "1 of the 2 people of your team is here: you")
    assert text_of(pat.page, "#lobby-missing") == \
        "Waiting for 1 more person whose practice and ratings fit with yours."
    assert text_of(pat.page, "#lobby-others") == ""

    # Sam waits too, but the two make Twins, not the Mixed team: nobody fits either of them
    practise(sam, server.url, "sam-2")
    others = ("1 other person is waiting, but their practice and ratings do not fit with "
              "yours in the team this study forms.")
    for person in (pat, sam):
        wait_text(person.page, "#lobby-others", others)
        assert text_of(person.page, "#lobby-count") == \
            "1 of the 2 people of your team is here: you"
        assert "people are here" not in person.page.inner_text("body")
    assert live_type(server, ["pat-1", "sam-2"]) not in protocol.team.team_types
    waiting = stored(server, "SELECT p.code FROM lobby l JOIN participants p "
                             "ON p.id = l.participant_id WHERE l.outcome IS NULL")
    assert sorted(row["code"] for row in waiting) == ["pat-1", "sam-2"]
    assert stored(server, "SELECT * FROM teams") == []
    experimenter = desktop.new_page()
    assert "2 people waiting" in console_lobby(experimenter, server.url, "2 people waiting")
    pat.shot("teams-lobby-unfit-desktop")
    sam.shot("teams-lobby-unfit-phone")

    # the timers run out: each is seated with a computer agent, and the team page says so
    bring_timers_forward(server)
    page = protocol.pages["team_only_agents"]
    for person, code in ((pat, "pat-1"), (sam, "sam-2")):
        person.step("teammate")
        assert text_of(person.page, "h2") == page.title
        assert person.page.locator(".team-seat").all_inner_texts() == \
            seat_names(server, protocol, code)
        kinds = stored(server, "SELECT s.kind FROM seats s JOIN seats mine ON mine.team_id = "
                               "s.team_id JOIN participants me ON me.id = mine.participant_id "
                               "WHERE me.code = ? ORDER BY s.kind", code)
        assert [row["kind"] for row in kinds] == ["agent", "person"]
        body = person.page.inner_text("body")
        assert "another participant" not in body and "took part in the same practice" not in body
    teams = stored(server, "SELECT formed_by, live_type, persons FROM teams")
    assert [tuple(team) for team in teams] == [("individual-timeout", "mixed", 1)] * 2
    assert "2 people joined a team" in console_lobby(experimenter, server.url,
                                                      "2 people joined a team")
    pat.shot("teams-agents-only-desktop")
    sam.shot("teams-agents-only-phone")

    # the round names the agent's station as the team page did; Pat decorates at a human pace
    for person in (pat, sam):
        person.click("continue")
        person.step("intro-1")
        person.click("continue")
    for person, code in ((pat, "pat-1"), (sam, "sam-2")):
        person.page.wait_for_selector(".bakery .cookie", timeout=60_000)
        agent_name = next(name for name in seat_names(server, protocol, code)
                          if name != texts["team_you"])
        station = person.page.locator(".station.theirs")
        assert station.get_attribute("data-kind") == "agent"
        assert station.locator("h3").inner_text().strip() == agent_name
        assert station.locator(".teammate-baker use").get_attribute("href") == "#agent"
    sam.shot("teams-agents-only-round-phone")
    sam.decorate_one_cookie()  # exactly one cookie: the summary's singular
    sam.wait_count(1)
    pat.decorate_running_round(margin=MARGIN)

    # between rounds each reads their count with the word in the right number
    for person, code in ((pat, "pat-1"), (sam, "sam-2")):
        [row] = stored(server, "SELECT r.participant_cookies, r.task_name FROM rounds r "
                               "JOIN participants p ON p.id = r.participant_id JOIN sessions s "
                               "ON s.id = r.session_id WHERE p.code = ? AND s.number = 1", code)
        key = "summary_one" if row["participant_cookies"] == 1 else "summary"
        assert code != "sam-2" or key == "summary_one"
        expected = texts[key].format(number=1, cookies=row["participant_cookies"],
                                     cookie=texts[row["task_name"]]) + texts["summary_end"]
        wait_text(person.page, ".summary", expected)
    desktop.close()
    phone.close()


def bring_timers_forward(server: LiveServer) -> None:
    """End the people's wait now, as their timers would: the served study reads them from
    the database at its next look (at least once a second while people wait)."""
    db = sqlite3.connect(server.app.extensions["study"].storage.path, timeout=30)
    with db:
        db.execute("UPDATE lobby SET individual_deadline = ? WHERE outcome IS NULL",
                   (time.time(),))
    db.close()
