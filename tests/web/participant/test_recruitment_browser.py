"""Recruitment in real Chromium against ``study serve``: a second tab of the same browser
takes the study over and the first is told so (and may take it back); another browser with
the same recruitment id is told the study is open elsewhere; declining shows its own code
and return link; the done page shows its code and goes back to the platform's completion
address by itself; a start link with a forged id gets a clear page."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from support.browser import BAR_SETTLED, PHONE, screenshot_directory
from support.recruitment import RETURN, pid
from support.web import CHROMIUM, CHROMIUM_ARGS, DEMO

from study.bots.servers import ServeProcess
from study.web.participant.steps import declined_mark

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WAIT = 30_000


def prolific_protocol(out: Path, completion_url: str) -> Path:
    """The demo on Prolific, a code of its own for who finished and who declined."""
    out.write_text(DEMO.read_text().replace("open_enrolment = true", "\n".join([
        "open_enrolment = false", 'id_parameter = "PROLIFIC_PID"',
        f'completion_url = "{completion_url}"', f'return_url = "{RETURN}"']), 1)
        + "\n[recruitment.outcomes]\n"
        + f'finished = {{ url = "{completion_url}", code = "C1FINISH" }}\n'
        + f'declined = {{ url = "{RETURN}", code = "C6NOCONS" }}\n')
    return out


def test_tabs_browsers_return_and_completion(tmp_path):
    protocol = tmp_path / "prolific.toml"
    server = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log")
    prolific_protocol(protocol, f"{server.url}/healthz?completed=1")
    server.start(timeout=120)
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            mine = chromium.new_context()
            first = mine.new_page()
            first.goto(f"{server.url}/start?PROLIFIC_PID={pid('tab-owner')}&STUDY_ID=s1")
            first.wait_for_selector('[data-step="consent"]', timeout=WAIT)

            second = mine.new_page()  # a reopened tab: /start alone, the cookie resumes
            second.goto(f"{server.url}/start")
            second.wait_for_selector('[data-step="consent"]', timeout=WAIT)
            first.wait_for_selector("text=This study is open in another tab", timeout=WAIT)

            other = chromium.new_context().new_page()
            other.goto(f"{server.url}/start?PROLIFIC_PID={pid('tab-owner')}")
            other.wait_for_selector("text=This study is open in another browser", timeout=WAIT)

            first.click('[data-action="continue-here"]')
            first.wait_for_selector('[data-step="consent"]', timeout=WAIT)
            second.wait_for_selector("text=This study is open in another tab", timeout=WAIT)
            first.click('[data-action="decline"]:not([disabled])')
            link = first.wait_for_selector('[data-action="return"]', timeout=WAIT)
            assert link.get_attribute("href") == RETURN
            code = first.wait_for_selector('.completion-code[data-outcome="declined"]')
            assert code.inner_text() == "Your completion code: C6NOCONS"

            forged = chromium.new_context().new_page()
            forged.goto(f"{server.url}/start?PROLIFIC_PID=%2BSUM(1%2C2)")
            forged.wait_for_selector("text=This link does not carry a valid participant id",
                                     timeout=WAIT)

            finisher = chromium.new_context(viewport=PHONE).new_page()
            finisher.goto(f"{server.url}/start?PROLIFIC_PID={pid('finisher')}")
            finisher.wait_for_selector('[data-step="consent"]', timeout=WAIT)
            with sqlite3.connect(tmp_path / "study.sqlite") as db:  # jump to the end
                db.execute("UPDATE participants SET step = 'done', consent = 'given' "
                           "WHERE recruitment_id = ?", (pid("finisher"),))
            finisher.reload()
            finisher.wait_for_selector('[data-action="complete"]', timeout=WAIT)
            code = finisher.wait_for_selector('.completion-code[data-outcome="finished"]')
            assert code.inner_text() == "Your completion code: C1FINISH"
            finisher.click('[data-action="stay"]')  # the page stays: time to look at it
            finisher.evaluate(BAR_SETTLED)  # the journey is over: its bar full
            assert finisher.eval_on_selector("#progress", "bar => bar.style.width") == "100%"
            finisher.screenshot(path=str(screenshot_directory(tmp_path) / "done-code-phone.png"),
                                full_page=True)
            finisher.reload()  # without "stay", the page goes to the platform by itself
            finisher.wait_for_url("**/healthz?completed=1", timeout=WAIT)
            chromium.close()
    finally:
        server.stop()
    with sqlite3.connect(tmp_path / "study.sqlite") as db:
        rows = db.execute("SELECT step, recruitment_id FROM participants ORDER BY id").fetchall()
    # a declined participant keeps only the hash that finds them again, never the id
    assert rows == [("declined", declined_mark(pid("tab-owner"))), ("done", pid("finisher"))], \
        server.output()
