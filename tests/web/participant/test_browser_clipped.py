"""The console in real Chromium counts the participants with a clipped capability and what
followed (docs/human-model.md, "Fast people at the top of the scale"): under study2 with
clipped_capability = "unmatched" a brisk simulated person, quicker on letters than the
reference speeds leave room for, met the unmatched page, and the target line says why."""

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
# The calibration panel's rightmost edge, its narrowest line of counts (in pixels) and how
# many lines of counts it has.
PANEL_EXTENT = """() => {
  const edges = (selector) => [...document.querySelectorAll(selector)]
    .map((element) => element.getBoundingClientRect());
  const counts = edges("#calibration-types .calibration-type > span");
  const lines = [...edges("#calibration-types > *"), ...counts];
  return [Math.max(...lines.map((box) => box.right)),
          Math.min(...counts.map((box) => box.width)), counts.length];
}"""
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
        # the panel is redrawn with every snapshot: find and measure its lines in one call
        # in the page (a query and a later measure may meet lines already replaced)
        right, narrowest, types = page.evaluate(PANEL_EXTENT)
        assert types == 2, "a line of counts for each of study2's two capabilities"
        assert right <= SCREENS[screen]["width"], "every line wraps inside the screen"
        assert narrowest >= min(300, SCREENS[screen]["width"] - 60), "counts readable"
        shots = os.environ.get("STUDY_SCREENSHOTS")
        if shots:
            page.locator("#calibration").screenshot(
                path=str(Path(shots) / f"console-clipped-{screen}.png"))
        browser.close()
    app.extensions["console_pusher"].stop()
