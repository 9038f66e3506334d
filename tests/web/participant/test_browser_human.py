"""The demo in real Chromium at a person's pace: the human decorating-speed model
(``study.bots.human``) decides when every letter is dragged and every box clicked, slips and
corrections included, and Playwright's mouse does it. The measured capabilities must come
out inside (0.01, 0.99), not clipped, and the two robots' plans must differ.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright.sync_api import Page
from test_browser_journey import Participant, browser  # noqa: F401
from web_support import DEMO, LiveServer, make_app

from study.bots.human import Human
from study.protocol.loader import load_protocol
from study.task.cookies import target
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DEADLINE_MARGIN = 0.3  # seconds before the deadline a person's last move would arrive late
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("browser-human")
    teammates = PoolTeammates.for_protocol(load_protocol(DEMO), directory / "pools")
    app = make_app(directory, teammates, time.time, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


class HumanHands(Participant):
    """A participant whose every move is timed by the human model."""

    def __init__(self, page: Page, human: Human, seed: int, protocol: Path = DEMO) -> None:
        super().__init__(page, None)
        self.human = human
        self.rng = np.random.default_rng(seed)
        self.protocol = load_protocol(protocol)
        self.themes: tuple[str, ...] | None = None  # as assigned after the ratings

    def play_human_round(self, step: str, margin: float = DEADLINE_MARGIN) -> int:
        """Start the next round, decorate at the model's pace until just before the
        deadline, wait for the server to close the round."""
        self.step(step)
        self.click("start-round")
        return self.decorate_running_round(margin)

    def decorate_running_round(self, margin: float = DEADLINE_MARGIN) -> int:
        """Decorate the round on the station at the model's pace until ``margin`` s before
        its deadline (a real team's rounds are started by the server), wait for it to
        close."""
        self.page.wait_for_selector(".bakery .cookie", timeout=60_000)
        started = time.time()
        bakery = self.page.locator(".bakery")
        round_id, deadline = bakery.get_attribute("data-round"), float(
            bakery.get_attribute("data-deadline"))
        letters = self.page.locator(".round-cookie").count() > 0
        task_type = 1 if letters else 0
        cookie = target(self.protocol, task_type,
                        self.themes[task_type] if self.themes else None)
        previous: Any = "" if letters else []
        for action in self.human.round_actions(cookie, deadline - started, self.rng):
            time.sleep(max(0.0, started + action.at - time.time()))
            if time.time() >= deadline - margin:
                break
            if letters:
                self.letters_move(previous, action.content)
            else:
                self.squares_move(previous, action.content)
            previous = ("" if letters else []) if action.finished else action.content
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=30_000)
        return int(round_id)

    def letters_move(self, before: str, after: str) -> None:
        if not before:
            self.page.wait_for_selector(".slot.filled", state="detached")
        if len(after) > len(before):
            self.drag_letter(after[-1])
        else:
            self.page.locator(".slot").nth(len(after)).click()

    def squares_move(self, before: list[int], after: list[int]) -> None:
        if not before:
            self.page.wait_for_selector(".box.iced", state="detached")
        [cell] = set(after) ^ set(before)
        self.page.click(f'.box[data-cell="{cell}"]')


def reach_the_teammate(you: HumanHands, page: Page, url: str, code: str) -> list[int]:
    page.goto(f"{url}/p/{code}")
    you.reach_practice({"ravens": 6, "steelers": 2})
    return [you.play_human_round("practice") for _ in range(4)]


def stored(server: LiveServer, sql: str, *params: Any) -> list[sqlite3.Row]:
    db = sqlite3.connect(server.app.extensions["study"].storage.path)
    db.row_factory = sqlite3.Row
    return db.execute(sql, params).fetchall()


def assert_measured_not_clipped(server: LiveServer, code: str) -> None:
    [participant] = stored(server, "SELECT * FROM participants WHERE code = ?", code)
    measured = stored(server, "SELECT * FROM measurements WHERE participant_id = ? AND "
                              "kind = 'capability' ORDER BY task_type", participant["id"])
    assert [m["task_name"] for m in measured] == ["squares", "letters"]
    for row in measured:
        assert 0.01 < row["value"] < 0.99, f"{row['task_name']} clipped: {row['value']}"
        assert row["speed"] == pytest.approx((row["cookies"] + row["fraction"]) / row["seconds"])
    placed = stored(server, "SELECT count(*) AS n, max(fraction) AS most FROM progress "
                            "WHERE participant_id = ?", participant["id"])[0]
    assert placed["n"] > 20 and 0 < placed["most"] < 1


def test_a_person_at_an_ordinary_pace_completes_the_demo(server: LiveServer,
                                                          browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    you = HumanHands(page, Human(pace=1.0, slip=0.05), seed=3)
    reach_the_teammate(you, page, server.url, "human-1")
    you.step("teammate")
    you.click("continue")
    for session in (1, 2):
        you.step(f"intro-{session}")
        you.click("continue")
        for _ in (1, 2):
            you.play_human_round(f"session-{session}")
        you.questionnaire(f"questionnaire-{session}", None)
    you.questionnaire("post", None)
    you.step("debrief")
    you.click("keep")
    you.step("done")
    page.close()
    assert_measured_not_clipped(server, "human-1")
    [participant] = stored(server, "SELECT * FROM participants WHERE code = 'human-1'")
    assert participant["step"] == "done" and participant["robots_identical"] == 0
    plans = [row["plan"] for row in stored(
        server, "SELECT plan FROM sessions WHERE participant_id = ? AND number > 0 "
                "ORDER BY number", participant["id"])]
    assert len(plans) == 2 and plans[0] != plans[1], "the two robots must differ"
    assert stored(server, "SELECT count(*) AS n FROM rejections WHERE participant_id = ?",
                  participant["id"])[0]["n"] == 0


def test_on_a_phone_the_practice_measures_a_person_too(server: LiveServer,
                                                       browser):  # noqa: F811
    page = browser.new_page(viewport=PHONE, has_touch=True)
    you = HumanHands(page, Human(pace=1.0, slip=0.0), seed=4)
    reach_the_teammate(you, page, server.url, "human-phone-1")
    you.step("teammate")
    page.close()
    assert_measured_not_clipped(server, "human-phone-1")
