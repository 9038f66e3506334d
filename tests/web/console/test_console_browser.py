"""The console in real Chromium: log in, see the server's processes, create links, watch a
participant move live, pause them with the button, hide the tab and come back, find one
whose study ended in the list read on request, read a participant as a card on a phone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS, DEMO, LiveServer

from study.protocol.loader import load_protocol
from study.web import create_app
from study.web.participant.agent_pool import PoolTeammates

PASSWORD = "lab-password"

pytestmark = pytest.mark.browser


@pytest.fixture
def served(tmp_path):
    """The console served by ``study serve``; the in-process app reads and writes the same
    database as a participant's messages would."""
    app = create_app({"PROTOCOL": DEMO, "DATABASE": tmp_path / "study.sqlite",
                      "TEAMMATES": PoolTeammates.for_protocol(load_protocol(DEMO),
                                                              tmp_path / "pools"),
                      "SCHEDULER": False, "STUDY_CONSOLE_PASSWORD": PASSWORD})
    with LiveServer(app, env={"STUDY_CONSOLE_PASSWORD": PASSWORD}) as server:
        yield app, server.url
    app.extensions["console_pusher"].stop()


def test_the_console_creates_links_shows_live_changes_and_pauses(served):
    app, url = served
    study = app.extensions["study"]
    assert Path(CHROMIUM).exists(), "Chromium is missing: make test installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{url}/console/")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.fill("input[name=count]", "2")
        page.click("text=Create links")
        links = page.input_value(".created textarea").split("\n")
        codes = [link.rsplit("/", 1)[1] for link in links]
        assert len(codes) == 2 and all(study.storage.participant(c) for c in codes)
        page.wait_for_selector("#live-status:text('live')")
        # The served study's one worker, beating: the line an operator reads for workers
        expect(page.locator("#processes")).to_have_text(re.compile(
            r"^Server: 1 process answering: pid \d+ \(serving this page\) up \d+ min, "
            r"held the write lock \d+\.\d % of that\.$"))
        row = f"#participants tr:has(td.code:text('{codes[0]}'))"
        assert "consent" in page.inner_text(row)

        study.handle("submit", codes[0], {"msg_id": "browser-consent", "step": "consent",
                                          "data": {"agree": True}})
        page.wait_for_selector(f"{row} td:nth-child(2):text-matches('^themes')", timeout=5000)

        page.once("dialog", lambda dialog: dialog.accept("coffee break"))
        page.click(f"{row} button:text('Pause')")
        page.wait_for_selector(f"{row}.paused", timeout=5000)

        # A hidden tab asks for nothing; shown again, it is live at once (the pushes below).
        hide = """(hidden) => { Object.defineProperty(document, 'hidden',
            {value: hidden, configurable: true});
            document.dispatchEvent(new Event('visibilitychange')); }"""
        page.evaluate(hide, True)
        expect(page.locator("#live-status")).to_have_text("paused while hidden")
        page.evaluate(hide, False)
        expect(page.locator("#live-status")).to_have_text("live")

        # A participant whose study ended leaves the live rows for the list read on request.
        study.handle("submit", codes[1], {"msg_id": "browser-decline", "step": "consent",
                                          "data": {"agree": False}})
        expect(page.locator("#finished-count")).to_have_text("1 (declined 1)", timeout=5000)
        expect(page.locator(f"#participants td.code:text('{codes[1]}')")).to_have_count(0)
        page.click("#finished summary")
        ended = f"#finished-rows tr:has(td.code:text('{codes[1]}'))"
        expect(page.locator(f"{ended} td:nth-child(2)")).to_have_text(re.compile("^declined"))
        buttons = page.locator(f"{ended} button")
        expect(buttons).to_have_text(["Flag", "Note"])  # nothing left to hold or free

        page.set_viewport_size({"width": 390, "height": 844})  # on the experimenter's phone
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        overlaps = page.evaluate("""() => {
            const boxes = [...document.querySelectorAll('nav a, nav button')]
                .map((node) => node.getBoundingClientRect());
            return boxes.some((a, i) => boxes.slice(i + 1).some((b) => a.left < b.right
                && b.left < a.right && a.top < b.bottom && b.top < a.bottom)); }""")
        assert not overlaps, "the console's links overlap on a phone"
        # Found and measured in one turn of the page's script: a live update may redraw
        # the rows between a locator's finding a row and its evaluating it.
        card = page.evaluate("""(code) => {
            const row = [...document.querySelectorAll('#participants td.code')]
                .find((td) => td.textContent === code).closest('tr');
            const label = (td) => getComputedStyle(td, '::before').content;
            return {right: row.getBoundingClientRect().right,
                    labels: [...row.cells].map(label),
                    heading: getComputedStyle(row.closest('table').tHead).display}; }""",
                             codes[0])
        assert card["right"] <= 390, "a participant's row is wider than the phone"
        assert card["heading"] == "none"  # each cell says its column instead
        assert card["labels"][:3] == ['"code"', '"step (condition order)"', '"status"']
        browser.close()
    status = study.storage.one("SELECT * FROM console_status")
    assert status["status"] == "paused" and status["note"] == "coffee break"
