"""Every step of the demo study on a 390x844 phone in real Chromium: nothing wider than the
screen, the 7-point scales and theme cards inside it, the teammate's strip in view while
the participant decorates, and the pages of the experimenter's holds.

Set ``STUDY_SCREENSHOTS=docs/screenshots`` to refresh the phone screenshots.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page
from support.browser import PHONE, Participant, assert_fits, console_action, screenshot_directory
from support.web import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def assert_in_view(page: Page, selector: str, where: str) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{where}: {selector} is not shown"
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], (
        f"{where}: {selector} is outside the screen at y={box['y']:.0f}")


class PhoneParticipant(Participant):
    """The browser journey's participant, checking the width of every page it reaches."""

    def step(self, name: str, timeout: float = 30_000) -> None:
        super().step(name, timeout)
        assert_fits(self.page, name)

    def play_round(self, step: str, cookies: int, shot: str | None = None) -> int:
        self.step(step)
        self.click("start-round")
        self.page.wait_for_selector(".bakery .cookie")
        assert_fits(self.page, f"{step} round")
        round_id = self.page.locator(".bakery").get_attribute("data-round")
        if self.page.locator("#teammate").count():
            self.page.locator(".tray, .square-cookie").first.scroll_into_view_if_needed()
            assert_in_view(self.page, "#teammate-cookie", f"{step} while decorating")
            if self.shots is not None and shot is not None:  # the screen, as the phone shows it
                self.page.wait_for_timeout(2500)
                self.page.screenshot(path=str(self.shots / f"{shot}.png"))
        for number in range(1, cookies + 1):
            self.decorate()
            self.wait_count(number)
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=30_000)
        return int(round_id)


@pytest.mark.minutes(2)
def test_every_step_fits_a_phone(server: LiveServer, browser, tmp_path: Path):
    page = browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
    you = PhoneParticipant(page, screenshot_directory(tmp_path))
    page.goto(f"{server.url}/p/phone-1")
    you.reach_practice({"ravens": 7, "steelers": 1})
    for _ in range(4):
        you.play_round("practice", 1)
    you.step("teammate")
    you.click("continue")
    for session in (1, 2):
        you.step(f"intro-{session}")
        you.click("continue")
        for number in (1, 2):
            you.play_round(f"session-{session}", 1,
                           "teammate-phone" if (session, number) == (1, 1) else None)
        you.step(f"questionnaire-{session}")
        you.click("submit")
        page.wait_for_selector(".question-item.missing")
        assert_fits(page, f"questionnaire-{session} with missing answers")
        you.questionnaire(f"questionnaire-{session}", None)
    you.questionnaire("post", None)
    you.step("debrief")
    you.click("keep")
    you.step("done")
    assert page.locator("[data-action=withdraw-later]").count() == 1
    page.close()


def test_holds_and_withdrawal_fit_a_phone(server: LiveServer, browser,
                                          tmp_path: Path):
    page = browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
    you = PhoneParticipant(page, screenshot_directory(tmp_path))
    page.goto(f"{server.url}/p/phone-2")
    you.reach_practice({"ravens": 2, "steelers": 6})
    console_action(server, page, "phone-2", "pause", "fire alarm")
    page.wait_for_selector('[data-hold="paused"]')
    assert_fits(page, "paused")
    you.shot("paused")
    console_action(server, page, "phone-2", "resume", "")
    page.wait_for_selector('[data-action="start-round"]')
    page.click('[data-action="leave"]')
    page.wait_for_selector('[data-action="withdraw-confirm"]')
    assert_fits(page, "withdraw confirmation")
    you.shot("withdraw-confirm-phone")
    page.click('[data-action="withdraw-cancel"]')
    assert page.locator("#confirm").is_hidden()
    console_action(server, page, "phone-2", "abort", "participant unwell")
    page.wait_for_selector('[data-hold="aborted"]')
    assert_fits(page, "aborted")
    assert page.locator('[data-action="start-round"]').count() == 0
    you.shot("aborted")
    page.close()
