"""A played round reports the cookie in progress at most once a second
(``round.progress_seconds``, docs/socket-protocol.md#progress), and a reload, or hiding the
page (a phone may end a hidden tab without a word), sends the report still waiting for its
second first: the reopened page draws every element placed.

In real Chromium against ``study serve``, a person goes through short practice rounds,
starts the first played round, places three elements as quickly as a person places
neighbouring boxes, and reloads at once, or changes the cookie twice and hides the page.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page
from support.browser import DESKTOP, PHONE, HumanHands, practise
from support.storage import wait_for
from support.web import DEMO

from study.bots.servers import ServeProcess, quick_protocol
from study.people.speed import Human
from study.task.cookies import letters_target, squares_target

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLACED = 3  # elements placed before the reload
# Two changes to the cookie in one task of the page (the second waits for its second to end
# whatever the first did), then the tab hidden and, in the same task, every timer of the
# page cleared: the report of the cookie as changed reaches the server only if hiding the
# page sent it. A letter comes off by its slot, a box is iced by a click.
CHANGE_TWICE_AND_HIDE = """() => {
  const work = document.getElementById("work");
  const change = () => {
    const letters = work.querySelector(".round-cookie");
    if (letters) Array.from(work.querySelectorAll(".slot.filled")).pop().click();
    else work.querySelector(".box.guide:not(.iced)").click();
  };
  change();
  change();
  Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
  document.dispatchEvent(new Event("visibilitychange"));
  const latest = setTimeout(() => {}, 0);
  for (let id = 0; id <= latest; id += 1) clearTimeout(id);
}"""
REPORT_WAIT_SECONDS = 30  # how long a report sent may take to be stored on a busy machine


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


def placed_in_a_played_round(you: HumanHands, page: Page, url: str, code: str
                             ) -> tuple[int, Any]:
    """Practise, start the first played round and place ``PLACED`` elements quickly: the
    round's id and the cookie as then decorated."""
    practise(you, url, code)
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
    return round_id, before


@pytest.mark.minutes(1.5)
@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_a_reload_in_a_played_round_draws_every_element_placed(served: ServeProcess, browser,
                                                               view: str):
    page = browser.new_page(viewport=DESKTOP if view == "desktop" else PHONE,
                            has_touch=view == "phone")
    page.on("dialog", lambda dialog: dialog.accept())  # leaving a running round asks first
    you = HumanHands(page, Human(pace=1.0), seed=2)
    round_id, before = placed_in_a_played_round(you, page, served.url, f"played-{view}")
    page.reload()
    page.wait_for_selector(f'.bakery[data-round="{round_id}"] .cookie')
    assert you.drawn() == before, "every element placed before the reload is drawn again"
    reports = stored_reports(served, round_id)
    assert reports[-1] == before and len(reports) <= PLACED, reports
    page.close()


def wait_reported(served: ServeProcess, round_id: int, content: Any, what: str) -> None:
    """Wait until the round's latest stored report is ``content``."""
    wait_for(lambda: stored_reports(served, round_id)[-1:] == [content],
             REPORT_WAIT_SECONDS, what)


@pytest.mark.minutes(1)
def test_hiding_the_page_sends_the_report_waiting_for_its_second(served: ServeProcess,
                                                                 browser):
    page = browser.new_page(viewport=PHONE, has_touch=True)
    you = HumanHands(page, Human(pace=1.0), seed=5)
    round_id, before = placed_in_a_played_round(you, page, served.url, "hidden-phone")
    wait_reported(served, round_id, before, "the three elements sent at their second's end")
    page.evaluate(CHANGE_TWICE_AND_HIDE)
    changed = you.drawn(str(round_id))
    assert changed not in (None, before)
    wait_reported(served, round_id, changed, "the waiting report sent as the page was hidden")
    page.close()
