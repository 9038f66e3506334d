"""A round fits the screen. At 1280x720, 1366x768, 1280x800 and on a 390x844 phone the
participant's whole station, its cookie and its tray, and every teammate's station are in
view without scrolling: with one station (practice), two (beside the agent teammate and
the robot) and three (a team of three), and with either kit (letters: a tray of tiles to
drag; squares: a grid to click). At each size a letter dragged from the tray lands on the
cookie with the page unscrolled, and the server stores it. And the note the browser's Back
leaves on a phone is a readable box.

Real Chromium against ``study serve``: the demo with the robots in a fixed order, and the
teams of three, both with short rounds. Lee practises only letters cookies and Sam only
squares cookies, so the first robot, Efficient, hands Lee the letters kit and Sam the
squares kit; each round is looked at, at every size, while it runs. Set
``STUDY_SCREENSHOTS`` to keep a screenshot of each size of each round looked at.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser
from support.browser import (
    COOKIE_DRAWN,
    DESKTOP,
    PHONE,
    Participant,
    screenshot_directory,
    short_teams3,
)

from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.texts import DEFAULT_TEXTS

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.slow]
SIZES = ({"width": 1280, "height": 720}, {"width": 1366, "height": 768}, DESKTOP, PHONE)
# What of a running round lies (partly) off the screen: a station, the participant's
# cookie or tray; or the page scrolled.
OFF_SCREEN = """() => {
  const off = scrollX || scrollY ? [`scrolled to ${scrollX},${scrollY}`] : [];
  const nodes = document.querySelectorAll(".bakery .station, .bakery .cookie, .bakery .tray");
  for (const node of nodes) {
    const box = node.getBoundingClientRect();
    if (box.top < 0 || box.left < 0 || box.bottom > innerHeight || box.right > innerWidth)
      off.push(`${node.className} at ${Math.round(box.left)},${Math.round(box.top)}-` +
               `${Math.round(box.right)},${Math.round(box.bottom)} of ` +
               `${innerWidth}x${innerHeight}`);
  }
  return off;
}"""
LAID_OUT = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
# The centres of a letter's tile and of the cookie where they are now, nothing scrolled.
SPOTS = """(letter) => {
  const centre = (node) => {
    const box = node.getBoundingClientRect();
    return [box.x + box.width / 2, box.y + box.height / 2];
  };
  return [centre(document.querySelector(`.tray .tile[data-letter="${letter}"]`)),
          centre(document.querySelector(".round-cookie"))];
}"""
TOAST = """() => {
  const toast = document.getElementById("toast");
  const box = toast.getBoundingClientRect();
  return {text: toast.textContent, left: box.left, top: box.top, right: box.right,
          bottom: box.bottom, width: box.width, height: box.height,
          overflow: toast.scrollWidth > toast.clientWidth ||
                    toast.scrollHeight > toast.clientHeight,
          screen: [innerWidth, innerHeight]};
}"""


class Looker(Participant):
    """A participant who looks at a running round at every size before decorating it."""

    def __init__(self, page: Any, shots: Path | None, db: Path) -> None:
        super().__init__(page, shots)
        self.db = db

    def start(self, step: str) -> str:
        self.step(step, timeout=60_000)
        self.click("start-round")
        return self.running_round()

    def running_round(self) -> str:
        self.page.wait_for_selector(".bakery .cookie", timeout=60_000)
        return self.page.locator(".bakery").get_attribute("data-round") or ""

    def look(self, round_id: str) -> tuple[int, str]:
        """At each size everything in view; on a letters cookie one more letter dragged
        onto it at each, taken by the page and then stored. How many stations the round
        shows, and the kit."""
        stations = self.page.locator(".bakery .station").count()
        letters = self.page.locator(".round-cookie").get_attribute("data-target") \
            if self.page.locator(".round-cookie").count() else None
        kind = "squares" if letters is None else "letters"
        for number, size in enumerate(SIZES):
            self.page.set_viewport_size(size)
            self.page.evaluate(LAID_OUT)
            where = f"{stations} stations, {kind}, {size['width']}x{size['height']}"
            assert self.page.evaluate(OFF_SCREEN) == [], where
            if self.shots is not None:
                self.page.screenshot(path=str(
                    self.shots / f"fits-{stations}-{kind}-{size['width']}x{size['height']}.png"))
            if letters is not None:
                word = letters.replace(" ", "")
                assert len(word) > len(SIZES)  # each letter a report, none the cookie's last
                self.drag_in_view(word[number])
                assert self.page.evaluate(COOKIE_DRAWN, round_id) == word[:number + 1], where
                assert self.page.evaluate("scrollY") == 0, where
        self.page.set_viewport_size(DESKTOP)
        if letters is not None:
            placed = letters.replace(" ", "")[:len(SIZES)]
            assert self.stored_cookie(round_id, placed) == placed
        return stations, kind

    def drag_in_view(self, letter: str) -> None:
        """Drag the tile onto the cookie where both are on the screen, scrolling nothing."""
        (tile_x, tile_y), (cookie_x, cookie_y) = self.page.evaluate(SPOTS, letter)
        self.page.mouse.move(tile_x, tile_y)
        self.page.mouse.down()
        self.page.mouse.move(cookie_x, cookie_y, steps=4)
        self.page.mouse.up()

    def stored_cookie(self, round_id: str, expected: str, timeout: float = 15.0) -> Any:
        """The participant's cookie as the server last stored it in the round, once it is
        ``expected`` (a played round reports at most once a second) or time is up."""
        give_up = time.monotonic() + timeout
        while True:
            with closing(sqlite3.connect(self.db)) as db:
                row = db.execute("SELECT content FROM progress WHERE round_id = ? "
                                 "ORDER BY id DESC LIMIT 1", (int(round_id),)).fetchone()
            content = json.loads(row[0]) if row else None
            if content == expected or time.monotonic() > give_up:
                return content
            time.sleep(0.2)

    def finish_letters(self, placed: int = 0) -> None:
        """Drag the rest of the letters cookie's letters, after the first ``placed``."""
        word = self.page.locator(".round-cookie").get_attribute("data-target").replace(" ", "")
        for letter in word[placed:]:
            self.drag_letter(letter)

    def closed(self, round_id: str) -> None:
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=60_000)


def shots(tmp_path: Path) -> Path | None:
    return screenshot_directory(tmp_path) if os.environ.get("STUDY_SCREENSHOTS") else None


def serve(protocol: Path, directory: Path):
    server = ServeProcess(protocol, directory / "study.sqlite", directory / "pools",
                          directory / "serve.log").start(timeout=300)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """The demo with 15 s rounds, Efficient first for everyone, and reference speeds one
    cookie a round clips at 0.99: a person who practises one cookie only is as fast as can
    be at it and as slow as can be at the other."""
    directory = tmp_path_factory.mktemp("fits-demo")
    path = quick_protocol(ROOT / "protocols" / "demo.toml", directory / "demo.toml",
                          round_seconds=15.0, practice_seconds=15.0,
                          reference_speed=(0.05, 0.04), min_cookie_seconds=0.5)
    text = path.read_text(encoding="utf-8")
    assert 'condition_order = "alternate"' in text
    path.write_text(text.replace('condition_order = "alternate"', 'condition_order = "fixed"'),
                    encoding="utf-8")
    yield from serve(path, directory)


@pytest.fixture(scope="module")
def teams3(tmp_path_factory: pytest.TempPathFactory):
    """teams3 made short, Efficient first for every team, a team formed 3 s after its
    first person arrives, its empty seats given to agents, and a letters cookie of a
    letter more than the sizes looked at."""
    directory = tmp_path_factory.mktemp("fits-teams3")
    path = short_teams3(directory)
    text = path.read_text(encoding="utf-8")
    for old, new in (('condition_order = "alternate"', 'condition_order = "fixed"'),
                     ("shared_seconds = 240", "shared_seconds = 3"),
                     ('text = "GO PA"', 'text = "GO PAS"')):
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    yield from serve(path, directory)


def practise_apart(lee: Looker, sam: Looker, look: bool) -> list[tuple[int, str]]:
    """Practice side by side: Sam finishes the measured squares cookie, Lee the measured
    letters cookie, and neither touches the other kind. With ``look`` Lee looks at the
    first round of each kind (one station) first."""
    seen = []
    for number in range(1, 5):
        rounds = [person.start("practice") for person in (lee, sam)]
        if look and number in (1, 3):
            seen.append(lee.look(rounds[0]))
        if number == 2:
            sam.decorate()
            sam.wait_count(1)
        if number == 4 or (look and number == 3):
            lee.finish_letters(placed=len(SIZES) if number == 3 else 0)
            lee.wait_count(1)
        for person, round_id in zip((lee, sam), rounds, strict=True):
            person.closed(round_id)
    return seen


@pytest.mark.minutes(2)
def test_one_and_two_stations_fit_every_screen_with_either_kit(
        demo: ServeProcess, browser: Browser, tmp_path: Path):
    lee, sam = (Looker(browser.new_context(viewport=DESKTOP).new_page(), shots(tmp_path), demo.db)
                for _ in range(2))
    for person, code in ((lee, "lee-1"), (sam, "sam-2")):
        person.page.goto(f"{demo.url}/p/{code}")
        person.reach_practice({"ravens": 4, "steelers": 4})
    seen = practise_apart(lee, sam, look=True)
    for person in (lee, sam):
        person.step("teammate", timeout=60_000)
        person.click("continue")
        person.step("intro-1")
        person.click("continue")
    rounds = [person.start("session-1") for person in (lee, sam)]
    seen += [person.look(round_id) for person, round_id in zip((lee, sam), rounds, strict=True)]
    assert seen == [(1, "squares"), (1, "letters"), (2, "letters"), (2, "squares")]


@pytest.mark.minutes(2)
def test_three_stations_fit_every_screen_with_either_kit(
        teams3: ServeProcess, browser: Browser, tmp_path: Path):
    lee, sam = (Looker(browser.new_context(viewport=DESKTOP).new_page(), shots(tmp_path),
                       teams3.db) for _ in range(2))
    for person, code in ((lee, "lee-3"), (sam, "sam-4")):
        person.page.goto(f"{teams3.url}/p/{code}")
        person.reach_practice({"ravens": 4, "steelers": 4})
    practise_apart(lee, sam, look=False)
    for person in (lee, sam):
        person.step("teammate", timeout=60_000)
        person.click("continue")
        person.step("intro-1")
        person.click("continue")
    rounds = [person.running_round() for person in (lee, sam)]
    seen = [person.look(round_id) for person, round_id in zip((lee, sam), rounds, strict=True)]
    assert seen == [(3, "letters"), (3, "squares")]


def test_the_note_back_leaves_is_a_readable_box_on_a_phone(demo: ServeProcess,
                                                            browser: Browser):
    page = browser.new_context(viewport=PHONE).new_page()
    you = Participant(page, None)
    page.goto(f"{demo.url}/p/back-1")
    you.step("consent")
    you.click("agree")
    you.step("themes")
    you.click("continue")
    you.step("preferences")
    page.go_back()  # the study's own history entry comes off: a note says how to stop
    page.wait_for_selector("#toast:not([hidden])")
    toast = page.evaluate(TOAST)
    width, height = toast["screen"]
    assert toast["text"] == DEFAULT_TEXTS["back_stays"].replace(
        "{leave}", DEFAULT_TEXTS["leave"])
    assert toast["width"] > toast["height"], toast
    assert toast["left"] >= 0 and toast["right"] <= width, toast
    assert toast["top"] >= 0 and toast["bottom"] <= height, toast
    assert not toast["overflow"], toast
