"""A played round reports the cookie in progress at most once a second
(``round.progress_seconds``, docs/socket-protocol.md#progress), and a reload sends the
report still waiting for its second first: the reopened page draws every element placed.

In real Chromium against ``study serve``, a person goes through short practice rounds,
starts the first played round, places three elements as quickly as a person places
neighbouring boxes, and reloads at once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from support.browser import DESKTOP, PHONE, HumanHands, practise
from support.web import DEMO

from study.bots.human import Human
from study.bots.servers import ServeProcess, quick_protocol
from study.task.cookies import letters_target, squares_target

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLACED = 3  # elements placed before the reload


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """The demo with short practice rounds and long played rounds."""
    directory = tmp_path_factory.mktemp("browser-played-reports")
    protocol = quick_protocol(DEMO, directory / "played.toml", round_seconds=40,
                              practice_seconds=6.0, min_cookie_seconds=0.2)
    server = ServeProcess(protocol, directory / "study.sqlite", directory / "pools",
                          directory / "serve.log").start(timeout=180)
    yield server
    server.stop()


def stored_reports(served: ServeProcess, round_id: int) -> list[Any]:
    with sqlite3.connect(served.db) as db:
        return [json.loads(content) for (content,) in db.execute(
            "SELECT content FROM progress WHERE round_id = ? ORDER BY id", (round_id,))]


@pytest.mark.minutes(1.5)
@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_a_reload_in_a_played_round_draws_every_element_placed(served: ServeProcess, browser,
                                                               view: str):
    page = browser.new_page(viewport=DESKTOP if view == "desktop" else PHONE,
                            has_touch=view == "phone")
    page.on("dialog", lambda dialog: dialog.accept())  # leaving a running round asks first
    you = HumanHands(page, Human(pace=1.0), seed=2)
    practise(you, served.url, f"played-{view}")
    you.step("teammate")
    you.click("continue")
    you.step("intro-1")
    you.click("continue")
    you.step("session-1")
    you.click("start-round")
    page.wait_for_selector(".bakery .cookie")
    round_id = int(page.locator(".bakery").get_attribute("data-round"))
    text = page.locator(".bakery .cookie").get_attribute("data-target")
    letters = page.locator(".round-cookie").count() > 0
    before: Any = "" if letters else []
    for count in range(1, PLACED + 1):
        if letters:
            after = letters_target(text)["letters"][:count]
            you.letters_move(before, after)
        else:
            after = sorted(squares_target(text)["cells"][:count])
            you.squares_move(before, after)
        before = after
    page.reload()
    page.wait_for_selector(f'.bakery[data-round="{round_id}"] .cookie')
    assert you.drawn() == before, "every element placed before the reload is drawn again"
    reports = stored_reports(served, round_id)
    assert reports[-1] == before and len(reports) <= PLACED, reports
    page.close()
