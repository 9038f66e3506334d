"""A refresh mid-cookie loses nothing, Back keeps the participant in the study, and the page
asks before a running round is left; the theme's words are readable on its colour.

Real Chromium against ``study serve``, at a person's pace: the human decorating model
(``study.people.speed``) times every box clicked and letter dragged, slips included. On a
desktop and on a 390x844 phone a participant decorates part of a squares cookie and of a
letters cookie, reloads the page, finds the same elements drawn and finishes the cookie
with the ones still missing. The practice rounds are long (``PRACTICE_SECONDS``) so that a
slow machine still finishes a cookie around a reload. Set ``STUDY_SCREENSHOTS`` to keep the
screenshots before and after each refresh.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, Page
from support.browser import HumanHands, screenshot_directory
from support.web import DEMO

from study.bots.servers import ServeProcess, quick_protocol
from study.people.speed import Action, Human
from study.protocol.colours import AA_RATIO, contrast
from study.task.cookies import letters_target, squares_target

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PRACTICE_SECONDS = 45
VIEWS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
STORED_WAIT_SECONDS = 30.0  # for the last element's report to reach the database
# The browser's Back, as many times as it takes to reach the page before the study.
BACK_TO_BEFORE_THE_STUDY = """() => {
    const before = navigation.entries().findIndex((entry) => entry.url.endsWith('/healthz'));
    setTimeout(() => history.go(before - navigation.currentEntry.index), 0); }"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """The demo with long practice rounds, a squares round first and a letters round
    second, served by ``study serve``."""
    directory = tmp_path_factory.mktemp("browser-refresh")
    protocol = quick_protocol(DEMO, directory / "refresh.toml", round_seconds=15,
                              practice_seconds=PRACTICE_SECONDS,
                              reference_speed=(0.32, 0.068), min_cookie_seconds=0.5)
    text = protocol.read_text(encoding="utf-8")
    order = 'practice = ["squares", "squares", "letters", "letters"]'
    assert order in text
    protocol.write_text(text.replace(
        order, 'practice = ["squares", "letters", "squares", "letters"]'), encoding="utf-8")
    server = ServeProcess(protocol, directory / "study.sqlite", directory / "pools",
                          directory / "serve.log").start(timeout=180)
    yield server
    server.stop()


class Prompts:
    """The prompts the page raises (Playwright's dialogs), answered as the test says."""

    def __init__(self, page: Page) -> None:
        self.raised: list[str] = []
        self.accept = True
        page.on("dialog", self._answer)

    def _answer(self, dialog: Dialog) -> None:
        self.raised.append(dialog.type)
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


class Refresher(HumanHands):
    """A person at the model's pace who reloads the page half-way through a cookie."""

    def first_cookie(self) -> list[Action]:
        """The person's moves on the first cookie of the round on screen."""
        node = self.page.locator(".bakery .cookie")
        text = node.get_attribute("data-target")
        letters = self.page.locator(".round-cookie").count() > 0
        cookie = letters_target(text) if letters else squares_target(text)
        actions = self.human.round_actions(cookie, 3 * PRACTICE_SECONDS, self.rng)
        return actions[:next(i for i, action in enumerate(actions) if action.finished) + 1]

    def act(self, actions: list[Action], before: Any, since: float) -> Any:
        """Make ``actions`` at their times after ``since`` (the model's clock); returns the
        cookie as then decorated."""
        started = time.time()
        letters = isinstance(before, str)
        for action in actions:
            time.sleep(max(0.0, started + action.at - since - time.time()))
            if letters:
                self.letters_move(before, action.content)
            else:
                self.squares_move(before, action.content)
            before = action.content
        return before

    def round_shown(self) -> tuple[str, str]:
        self.page.wait_for_selector(".bakery .cookie")
        bakery = self.page.locator(".bakery")
        return bakery.get_attribute("data-round"), bakery.get_attribute("data-deadline")


def stored_progress(served: ServeProcess, round_id: str) -> Any:
    with sqlite3.connect(served.db) as db:
        row = db.execute("SELECT content FROM progress WHERE round_id = ? ORDER BY id DESC "
                         "LIMIT 1", (int(round_id),)).fetchone()
    return json.loads(row[0]) if row else None


def wait_stored(served: ServeProcess, round_id: str, content: Any) -> None:
    """Wait until the server stored the cookie as decorated (the last report travels while
    the person reaches for the reload button)."""
    give_up = time.monotonic() + STORED_WAIT_SECONDS
    while stored_progress(served, round_id) != content:
        assert time.monotonic() < give_up, (stored_progress(served, round_id), content)
        time.sleep(0.05)


def stored_cookies(served: ServeProcess, round_id: str) -> tuple[int, list[Any]]:
    with sqlite3.connect(served.db) as db:
        count = db.execute("SELECT participant_cookies FROM rounds WHERE id = ?",
                           (int(round_id),)).fetchone()[0]
        contents = [json.loads(row[0]) for row in db.execute(
            "SELECT content FROM cookies WHERE round_id = ? AND actor = 'participant' "
            "ORDER BY number", (int(round_id),))]
    return count, contents


def rgb(css: str) -> str:
    """``rgb(r, g, b)`` (or an opaque ``rgba``) as ``#rrggbb``."""
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    assert len(parts) == 3 or parts[3] == 1, f"not opaque: {css}"
    return "#" + "".join(f"{int(x):02x}" for x in parts[:3])


def contrasts(page: Page, selector: str) -> list[tuple[str, float]]:
    """Each element's text and the contrast of its colour on its own background."""
    styles = page.locator(selector).evaluate_all("""nodes => nodes.map(node => {
        const style = getComputedStyle(node);
        return [node.textContent, style.color, style.backgroundColor]; })""")
    assert styles, f"nothing matches {selector}"
    return [(text, contrast(rgb(colour), rgb(background)))
            for text, colour, background in styles]


def assert_readable(page: Page, selector: str) -> None:
    for text, ratio in contrasts(page, selector):
        assert ratio >= AA_RATIO, f"{selector} {text!r}: {ratio:.2f}:1"


def reach_practice(you: Refresher, page: Page, shots: bool) -> None:
    """Consent, the themes (their badges read as drawn) and the ratings."""
    you.step("consent")
    you.click("agree")
    you.step("themes")
    assert [text for text, _ in contrasts(page, ".theme-cookie span")] == [
        "GO RAVENS", "GO STEELERS"]
    assert_readable(page, ".theme-cookie span")
    you.shot("themes-badges" if shots else None)
    you.click("continue")
    you.step("preferences")
    you.rate("ravens", 6)
    you.rate("steelers", 2)
    you.click("continue")


def refresh_mid_cookie(you: Refresher, served: ServeProcess, prompts: Prompts, split: int,
                       name: str) -> str:
    """Start the next round, place ``split`` elements at the person's pace, reload: the
    same round with the same elements; then finish the cookie. Returns the round id."""
    you.step("practice")
    you.click("start-round")
    round_id, deadline = you.round_shown()
    actions = you.first_cookie()
    letters = you.page.locator(".round-cookie").count() > 0
    cut = next(i for i, action in enumerate(actions) if len(action.content) == split)
    placed = you.act(actions[:cut + 1], "" if letters else [], 0.0)
    assert you.drawn() == placed
    wait_stored(served, round_id, placed)
    you.shot(f"refresh-{name}-before")
    asked = len(prompts.raised)
    you.page.reload()
    assert prompts.raised[asked:] == ["beforeunload"], "a running round is left: ask first"
    assert you.round_shown() == (round_id, deadline)
    assert you.drawn() == placed, "the elements placed before the refresh are drawn again"
    you.shot(f"refresh-{name}-after")
    if letters:
        assert_readable(you.page, ".slot.filled")
    you.act(actions[cut + 1:], placed, actions[cut].at)
    you.wait_count(1)
    target = actions[-1].content
    assert stored_cookies(served, round_id) == (1, [target]), "the same cookie, counted once"
    return round_id


@pytest.mark.minutes(1)
@pytest.mark.parametrize("view", VIEWS)
def test_a_refresh_mid_cookie_loses_nothing_and_back_stays_in_the_study(
        served: ServeProcess, browser, view: str, tmp_path: Path):
    page = browser.new_page(viewport=VIEWS[view], has_touch=view == "phone")
    prompts = Prompts(page)
    you = Refresher(page, Human(pace=1.0, slip=0.1), seed=7, protocol=Path(served.protocol))
    you.shots = screenshot_directory(tmp_path)
    page.goto(f"{served.url}/healthz")  # where the browser's Back would lead
    study = f"{served.url}/p/refresh-{view}"
    page.goto(study)
    reach_practice(you, page, shots=view == "desktop")

    squares = refresh_mid_cookie(you, served, prompts, 8, f"squares-{view}")
    page.go_back()  # the page's own history entry comes off: still the study, still the round
    assert page.url == study and prompts.raised == ["beforeunload"]
    page.wait_for_function("() => document.getElementById('toast').textContent"
                           ".startsWith('You are still in the study')")
    assert page.locator(f'.bakery[data-round="{squares}"]').count() == 1
    prompts.accept = False  # Back as far as the page before the study: asked, and stays
    with page.expect_event("dialog"):
        page.evaluate(BACK_TO_BEFORE_THE_STUDY)
    assert prompts.raised == ["beforeunload", "beforeunload"]
    page.wait_for_timeout(500)
    assert page.url == study and you.drawn() == []
    assert page.locator("#my-count").text_content() == "Finished: 1"
    prompts.accept = True
    page.wait_for_selector(f'.bakery[data-round="{squares}"]', state="detached",
                           timeout=3 * PRACTICE_SECONDS * 1000)
    page.reload()  # between rounds nothing is lost: no question
    you.step("practice")
    assert prompts.raised == ["beforeunload", "beforeunload"]

    refresh_mid_cookie(you, served, prompts, 5, f"letters-{view}")
    assert prompts.raised == ["beforeunload"] * 3
    page.close()
