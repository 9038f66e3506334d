"""The console in real Chromium counts the participants with a clipped capability and what
followed (docs/human-model.md, "Headroom"): under study2's clipped_capability =
"unmatched" a brisk simulated person, quicker than the reference speeds leave room for,
met the unmatched page, and the target line says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from support.clipped import BRISK, TYPICAL, practise_at, study2_with
from support.people import Person
from support.web import CHROMIUM, CHROMIUM_ARGS, FakeClock, LiveServer, make_app

from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import PoolTeammates

pytestmark = pytest.mark.browser
PASSWORD = "lab-password"
SCREENS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_console_counts_the_clipped_and_what_followed(tmp_path: Path, screen: str):
    protocol = study2_with(tmp_path, "unmatched")
    clock = FakeClock()
    app = make_app(tmp_path, PoolTeammates.for_protocol(load_protocol(protocol),
                                                        tmp_path / "pools"),
                   clock, protocol=protocol, STUDY_CONSOLE_PASSWORD=PASSWORD)
    for code, pace, seed in (("brisk-1", BRISK, 1), ("typical-1", TYPICAL, 2)):
        practise_at(app, clock, Person(app, code), pace, seed)
    with LiveServer(app, env={"STUDY_CONSOLE_PASSWORD": PASSWORD}) as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=SCREENS[screen])
        page.goto(f"{server.url}/console/")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("#live-status:text('live')")
        clipped = page.locator("#clipped-people")
        assert clipped.inner_text() == (
            "Participants with a clipped capability: 1 (clipped_capability = unmatched) · "
            "continued, left out of the analysis (clipped-capability): 0 · met the unmatched "
            "page: 1")
        assert "warning" in (clipped.get_attribute("class") or "")
        assert page.locator("#target-team").inner_text().endswith(
            "could not be placed (unmatched): 1 (1 of them for a clipped capability)")
        # the panel is redrawn with every snapshot: measure its lines in one go, in the page
        right = page.eval_on_selector_all(
            "#calibration-types > *, #calibration-types .calibration-type > span",
            "lines => Math.max(...lines.map(line => line.getBoundingClientRect().right))")
        assert right <= SCREENS[screen]["width"], "every line wraps inside the screen"
        narrowest = page.eval_on_selector_all(
            ".calibration-type > span", "counts => Math.min(...counts.map("
                                        "count => count.getBoundingClientRect().width))")
        assert narrowest >= min(300, SCREENS[screen]["width"] - 60), "counts readable"
        shots = os.environ.get("STUDY_SCREENSHOTS")
        if shots:
            page.locator("#calibration").screenshot(
                path=str(Path(shots) / f"console-clipped-{screen}.png"))
        browser.close()
    app.extensions["console_pusher"].stop()
