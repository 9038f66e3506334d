"""A study of three robots in real Chromium at a person's pace (the human decorating-speed
model times every move), on a desktop and on a 390x844 phone: every page of a session
says which session of three it is and whose robot, the session questionnaire follows
each, and the post questionnaire ranks the robots by taps and compares every two; the
database then holds three sessions, three questionnaires and the answers as given.

Set ``STUDY_SCREENSHOTS=docs/screenshots`` to refresh the screenshots of
``docs/participant-journey.md``.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page
from support.browser import (
    PHONE,
    HumanHands,
    agent_teammate_shown,
    assert_fits,
    assert_only_slow_refusals,
    reach_the_teammate,
    screenshot_directory,
    stored,
)
from support.protocols import THREE
from support.web import LiveServer, make_app

from study.people.speed import Human
from study.protocol.loader import load_protocol
from study.protocol.texts import CONCEALED_AGENT_TEXTS, DEFAULT_TEXTS
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROBOTS = {condition.id: condition.robot for condition in load_protocol(THREE).conditions}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("browser-three")
    teammates = PoolTeammates.for_protocol(load_protocol(THREE), directory / "pools")
    app = make_app(directory, teammates, time.time, THREE, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


class Judge(HumanHands):
    """A person at a human pace who also ranks and compares the robots; on a phone every
    page is checked to fit the screen and taps are touches."""

    def __init__(self, page: Page, seed: int, phone: bool, shots: Path) -> None:
        super().__init__(page, Human(pace=1.0, slip=0.03), seed, THREE)
        self.phone = phone
        self.shots = shots

    def step(self, name: str, timeout: float = 60_000) -> None:
        super().step(name, timeout)
        if self.phone:
            assert_fits(self.page, name)

    def tap(self, selector: str) -> None:
        node = self.page.locator(selector)
        node.scroll_into_view_if_needed()
        if self.phone:
            node.tap()
        else:
            node.click()

    def label(self) -> str:
        return self.page.locator(".session-label").text_content()

    def rank(self, order: list[str]) -> list[str]:
        """Tap the robots first to last, a slip included: the second robot tapped is
        tapped again (taken back) and then again (placed last of the two); the places the
        page shows, by robot id."""
        self.tap(f'.rank-robot[data-robot="{order[0]}"]')
        self.tap(f'.rank-robot[data-robot="{order[1]}"]')
        self.tap(f'.rank-robot[data-robot="{order[1]}"]')  # taken back
        assert self.page.locator('.rank-robot[aria-pressed="true"]').count() == 1
        for robot in order[1:]:
            self.tap(f'.rank-robot[data-robot="{robot}"]')
        return [self.page.locator(f'.rank-robot[data-robot="{robot}"] .rank-place')
                .inner_text() for robot in order]

    def compare(self, chosen: dict[str, str]) -> None:
        for key, value in chosen.items():
            self.tap(f'.pair[data-pair="{key}"] input[value="{value}"] + span')

    def post(self, order: list[str], chosen: dict[str, str], shot: str) -> None:
        self.step("post")
        items = self.page.locator(".question-item")
        for index in range(items.count()):
            item = items.nth(index)
            if item.locator(".choice").count() and not item.locator(".pair").count():
                item.locator(".choice").first.click()
            elif item.locator("input.number").count():
                item.locator("input.number").fill("34")
            elif item.locator("textarea").count():
                item.locator("textarea").fill("Robot Pat shared the cookies best.")
        self.tap(f'.rank-robot[data-robot="{order[0]}"]')
        self.click("submit")  # the rank is not complete: highlighted, nothing sent
        self.page.wait_for_selector('[data-item="next_time_rank"].missing')
        assert self.page.locator('.rank-robot[aria-pressed="true"]').count() == 1
        self.tap(f'.rank-robot[data-robot="{order[0]}"]')  # start again
        assert self.rank(order) == ["1", "2", "3"]
        if self.phone:  # a robot is a thumb-sized target inside the screen
            for box in (node.bounding_box() for node in self.page.locator(".rank-robot").all()):
                assert box is not None and box["height"] >= 44
                assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        self.compare(chosen)
        self.page.wait_for_timeout(2600)  # the toast of the refused submit has gone
        self.page.locator('.question-item[data-item="next_time_rank"]').scroll_into_view_if_needed()
        self.page.screenshot(path=str(self.shots / f"{shot}.png"), full_page=True)
        self.click("submit")


def sessions_of(server: LiveServer, code: str) -> list[str]:
    [participant] = stored(server, "SELECT * FROM participants WHERE code = ?", code)
    return json.loads(participant["condition_order"])


def walk(server: LiveServer, page: Page, code: str, phone: bool, shots: Path) -> dict:
    """The whole study at a person's pace; what the participant chose on the post page."""
    you = Judge(page, seed=7 if phone else 5, phone=phone, shots=shots)
    suffix = "-phone" if phone else ""
    reach_the_teammate(you, page, server.url, code)
    you.step("teammate")
    assert agent_teammate_shown(page) == {  # as the paper's method presents it
        "figure": "#baker", "words": CONCEALED_AGENT_TEXTS["teammate_hello"]}
    you.click("continue")
    order = sessions_of(server, code)
    for number, condition in enumerate(order, 1):
        you.step(f"intro-{number}")
        assert you.label() == f"Session {number} of 3"
        assert page.locator(".robot-intro .nameplate").inner_text() == \
            f"Robot {ROBOTS[condition]}"
        if number == 3:
            page.screenshot(path=str(shots / f"three-robot-intro-3{suffix}.png"),
                            full_page=True)
        you.click("continue")
        you.step(f"session-{number}")
        you.click("start-round")
        page.wait_for_selector(".bakery .cookie")
        assert agent_teammate_shown(page) == {"figure": "#baker", "words": (
            f"{CONCEALED_AGENT_TEXTS['teammate_station']} {DEFAULT_TEXTS['next_room']}")}
        you.decorate_running_round()
        you.step(f"session-{number}")
        assert you.label() == f"Session {number} of 3"
        you.play_human_round(f"session-{number}")
        you.step(f"questionnaire-{number}")
        assert you.label() == f"Session {number} of 3"
        assert page.locator("h2").first.inner_text() == f"About Robot {ROBOTS[condition]}"
        you.questionnaire(f"questionnaire-{number}", None)
    ranked = order[::-1]
    pairs = {f"{a}|{b}": (b if k != 1 else "=")
             for k, (a, b) in enumerate(itertools.combinations(order, 2))}
    you.post(ranked, pairs, f"three-post{suffix}")
    you.step("debrief")
    you.click("keep")
    you.step("done")
    return {"order": order, "ranked": ranked, "pairs": pairs}


def assert_stored(server: LiveServer, code: str, chosen: dict) -> None:
    [participant] = stored(server, "SELECT * FROM participants WHERE code = ?", code)
    assert participant["step"] == "done"
    pid = participant["id"]
    sessions = stored(server, "SELECT number, condition FROM sessions WHERE participant_id = ? "
                              "AND number > 0 ORDER BY number", pid)
    assert [(s["number"], s["condition"]) for s in sessions] == list(
        enumerate(chosen["order"], 1))
    rounds = stored(server, "SELECT s.number, count(*) AS n FROM rounds r JOIN sessions s ON "
                            "s.id = r.session_id WHERE r.participant_id = ? AND s.number > 0 "
                            "AND r.closed_at IS NOT NULL GROUP BY s.number", pid)
    assert [(r["number"], r["n"]) for r in rounds] == [(1, 2), (2, 2), (3, 2)]
    questionnaires = stored(server, "SELECT questionnaire, condition, count(*) AS n FROM "
                                    "answers WHERE participant_id = ? AND questionnaire LIKE "
                                    "'session-%' GROUP BY questionnaire ORDER BY "
                                    "questionnaire", pid)
    assert [(q["questionnaire"], q["condition"], q["n"]) for q in questionnaires] == [
        (f"session-{n}", c, 6) for n, c in enumerate(chosen["order"], 1)]
    post = {row["item"]: row["value_text"] for row in stored(
        server, "SELECT item, value_text FROM answers WHERE participant_id = ? AND "
                "questionnaire = 'post'", pid)}
    assert post["next_time_rank"] == ",".join(chosen["ranked"])
    tokens = []
    for key, value in chosen["pairs"].items():
        a, b = key.split("|")
        tokens.append(f"{a}={b}" if value == "=" else f"{value}>{a if value == b else b}")
    assert post["fairer"] == ";".join(tokens)
    assert_only_slow_refusals(server, pid)


@pytest.mark.minutes(3)
def test_three_robots_on_a_desktop_at_a_persons_pace(server: LiveServer, browser,
                                                     tmp_path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    chosen = walk(server, page, "three-desk", False, screenshot_directory(tmp_path))
    page.close()
    assert_stored(server, "three-desk", chosen)


@pytest.mark.minutes(3)
def test_three_robots_on_a_phone_at_a_persons_pace(server: LiveServer, browser,
                                                   tmp_path: Path):
    page = browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
    chosen = walk(server, page, "three-phone", True, screenshot_directory(tmp_path))
    page.close()
    assert_stored(server, "three-phone", chosen)
