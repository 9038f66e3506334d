"""On a 390x844 phone the participant's cookie and its letter tiles are on screen without
scrolling in collaborative rounds, as in practice: the robot's lane and the teammate's
strip must not push the work below the fold, or phone participants would be measured
under easier conditions than they then play.

Real Chromium against ``study serve``. The participant decorates only letters cookies in
practice, so the robots give them the letters kit; every round's cookie, tiles and (in a
session) the teammate's cookie are checked where the page put them, before any scrolling.
Set ``STUDY_SCREENSHOTS`` to keep a screenshot of each checked round.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright
from support.browser import PHONE, Participant, screenshot_directory
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess, quick_protocol

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def outside_the_screen(page: Page) -> list[str]:
    """The cookie, the tiles and the teammate's cookie that lie (partly) off the screen as
    the round is first drawn; the page must not have scrolled."""
    return page.evaluate("""() => {
        const off = [];
        if (scrollX !== 0 || scrollY !== 0) off.push('scrolled to ' + scrollX + ',' + scrollY);
        const nodes = [...document.querySelectorAll(
            '.bakery .cookie, .tray .tile, #teammate-cookie')];
        for (const node of nodes) {
            const box = node.getBoundingClientRect();
            if (box.top < 0 || box.left < 0 || box.bottom > innerHeight || box.right > innerWidth)
                off.push((node.dataset.letter || node.className) + ' at ' + JSON.stringify(box));
        }
        return nodes.length ? off : ['nothing drawn'];
    }""")


class PhonePlayer(Participant):
    """Checks each round on the phone's screen, then decorates letters cookies only."""

    finished = 0  # letters cookies finished by the hand

    def round_on_screen(self, step: str, shot: str) -> str:
        self.step(step)
        self.click("start-round")
        self.page.wait_for_selector(".bakery .cookie")
        self.page.wait_for_timeout(300)  # the tiles and the teammate's strip laid out
        kind = "letters" if self.page.locator(".round-cookie").count() else "squares"
        assert outside_the_screen(self.page) == [], f"{step} ({kind})"
        if self.page.locator(".robot-lane").count():
            assert self.robot_lane_unclear() == [], step
        if self.shots is not None:
            self.page.screenshot(path=str(self.shots / f"{shot}-{kind}.png"))
        round_id = self.page.locator(".bakery").get_attribute("data-round")
        if kind == "letters":
            try:
                self.decorate()
                self.wait_count(1)
                self.finished += 1
            except PlaywrightError:  # on a busy machine the clock may close it under the hand
                if self.running(round_id):
                    raise
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=60_000)
        return kind


@pytest.mark.minutes(1.5)
def test_the_cookie_and_its_tiles_fit_a_phone_in_every_round(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "phone.toml",
                              round_seconds=10.0, practice_seconds=8.0,
                              reference_speed=(0.32, 0.068), min_cookie_seconds=0.5)
    server = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log").start(timeout=180)
    kinds: dict[str, list[str]] = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
            you = PhonePlayer(page, screenshot_directory(tmp_path))
            page.goto(f"{server.url}/p/phone-round-1")
            you.reach_practice({"ravens": 1, "steelers": 7})
            kinds["practice"] = [you.round_on_screen("practice", f"phone-practice-{n}")
                                 for n in range(1, 5)]
            you.step("teammate", timeout=60_000)
            you.click("continue")
            for session in (1, 2):
                you.step(f"intro-{session}")
                you.click("continue")
                kinds[f"session-{session}"] = [
                    you.round_on_screen(f"session-{session}", f"phone-session-{session}-{n}")
                    for n in (1, 2)]
                you.questionnaire(f"questionnaire-{session}", None)
            browser.close()
    finally:
        server.stop()
    assert kinds["practice"] == ["squares", "squares", "letters", "letters"]
    assert "letters" in kinds["session-1"] + kinds["session-2"], kinds
    assert you.finished, "the tiles were dragged onto a cookie on the phone"
