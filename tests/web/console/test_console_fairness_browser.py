"""The console's live fairness in real Chromium, on a desktop and a phone: participants with
an agent teammate (one off its plan, one with probe answers) and a real team, each with
its kits, running F and FE against the plan, and the means per condition; no recruitment
id anywhere on the page. With STUDY_SCREENSHOTS set, the views go to docs/screenshots/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright
from support.live_fairness import agent_participant, answer, off_plan, session_of
from support.people import Person, play_round, practise, running, tick_until, to_session
from support.recruitment import pid, recruitment_protocol
from support.teams import team_protocol
from support.web import CHROMIUM, CHROMIUM_ARGS, FakeClock, LiveServer, make_app

pytestmark = pytest.mark.browser
PASSWORD = "lab-password"
SCREENS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
NAMES = ("ana", "bo", "cy")
# The widest right edge of the page's content and of the fairness cells.
EXTENT = """() => [document.documentElement.scrollWidth,
  Math.max(0, ...[...document.querySelectorAll('td.fairness, #fairness-rows td')]
    .map((td) => td.getBoundingClientRect().right))]"""
# On a phone: from the means per condition down to the first row showing a session's.
PHONE_CLIP = """() => {
  const top = document.getElementById('fairness').getBoundingClientRect().top;
  const row = document.querySelector('td.fairness:not(:empty)').closest('tr');
  return {x: 0, y: top + scrollY, width: innerWidth,
          height: row.getBoundingClientRect().bottom - top + 8}; }"""


def agents_study(tmp_path: Path, teammates, clock: FakeClock):
    """The demo as a Prolific study: three people with an agent teammate two rounds into
    session 1, the third's plan turned from its first round, the first's probes answered."""
    app = make_app(tmp_path, teammates, clock,
                   protocol=recruitment_protocol(tmp_path / "prolific.toml", True),
                   STUDY_CONSOLE_PASSWORD=PASSWORD)
    ana, _, cy = (agent_participant(app, clock, name, rounds=2) for name in NAMES)
    first = session_of(app, ana)
    answer(app, first["participant_id"], first, 1, "fair_round", 6, False)
    answer(app, first["participant_id"], first, 2, "fair_round", None, True)
    off_plan(app, session_of(app, cy))
    return app, (ana, cy)


def team_study(tmp_path: Path, teammates, clock: FakeClock):
    """Two people as a real team through session 1's two rounds (waiting for their
    questionnaires, their seats theirs for an hour: the served study moves nothing on),
    the first's last probe answered."""
    app = make_app(tmp_path, teammates, clock, protocol=team_protocol(tmp_path, grace=3600),
                   STUDY_CONSOLE_PASSWORD=PASSWORD)
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    to_session(app, clock, [ada, bo], 1)
    play_round(app, clock, [ada, bo])
    tick_until(app, clock, lambda: all(running(person) for person in (ada, bo)))
    play_round(app, clock, [ada, bo])
    session = app.extensions["study"].storage.one(
        "SELECT s.* FROM sessions s JOIN participants p ON p.id = s.participant_id "
        "WHERE p.code = 'ada-1' AND s.number = 1")
    answer(app, session["participant_id"], session, 2, "fair_round", 5, False)
    return app


def looked_at(app, name: str, check) -> None:
    """The console served, looked at on each screen: ``check(page)`` on each, the page
    no wider than the screen, and a screenshot of each where asked."""
    with LiveServer(app, env={"STUDY_CONSOLE_PASSWORD": PASSWORD}) as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=SCREENS["desktop"])
        page.goto(f"{server.url}/console/")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("#live-status:text('live')")
        for screen, size in SCREENS.items():
            page.set_viewport_size(size)
            check(page)
            width, right = page.evaluate(EXTENT)
            assert width <= size["width"] and right <= size["width"], (screen, width, right)
            shots = os.environ.get("STUDY_SCREENSHOTS")
            if shots:
                clip = page.evaluate(PHONE_CLIP) if screen == "phone" else None
                page.screenshot(path=str(Path(shots) / f"console-{name}-{screen}.png"),
                                full_page=True, clip=clip)
        browser.close()
    app.extensions["console_pusher"].stop()


def test_the_console_shows_each_participants_fairness_and_the_means(tmp_path, teammates):
    clock = FakeClock()
    app, (ana, cy) = agents_study(tmp_path, teammates, clock)

    def check(page) -> None:
        rows = page.locator("#fairness-rows tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.first).to_contain_text("efficient")
        expect(rows.first).to_contain_text("50 %")  # cy is off the plan
        mine = page.locator(f"#participants tr:has(td.code:text('{ana}')) td.fairness")
        expect(mine).to_contain_text("follows the plan")
        expect(mine).to_contain_text("last probes participant: fair_round missed (S1 R2)")
        expect(mine).to_contain_text("kits participant:")
        turned = page.locator(f"#participants tr:has(td.code:text('{cy}')) td.fairness")
        expect(turned).to_contain_text("off the plan from round 1")
        content = page.content()
        assert not any(pid(name) in content for name in NAMES)

    looked_at(app, "fairness", check)


def test_the_console_shows_a_real_teams_fairness(tmp_path, teammates):
    clock = FakeClock()
    app = team_study(tmp_path, teammates, clock)

    def check(page) -> None:
        team = page.locator("#team-rows tbody tr td.fairness")
        expect(team).to_contain_text("seat 1:")
        expect(team).to_contain_text("F ")
        expect(team).to_contain_text("last probes seat 1: fair_round 5 (S1 R2)")
        expect(page.locator("#fairness-rows tbody tr").first).to_contain_text("2")

    looked_at(app, "fairness-team", check)
