"""Round probes in real Chromium at a person's pace (the human decorating-speed model times
every move), on a 1280x720 desktop and a 390x844 phone, three robots with a probe after
every round: the first probe is answered a few seconds late and the next round's start
button waits for it; the second, above the session's questionnaire, is missed; the third
is missed between rounds and the start button waits for its deadline. The database then
holds the answer, the missed flags and the rounds' closing times they follow.

Set ``STUDY_SCREENSHOTS=docs/screenshots`` to refresh the probe's screenshots of
``docs/participant-journey.md`` (English here, German in ``test_the_probe_in_german``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import Page
from support.browser import (
    PHONE,
    HumanHands,
    assert_fits,
    reach_the_teammate,
    screenshot_directory,
    stored,
)
from support.protocols import three_with_probes
from support.web import ROOT, LiveServer, make_app

from study.people.speed import Human
from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DESKTOP = {"width": 1280, "height": 720}
SECONDS = 8.0  # the probe's, in support.protocols.PROBES
LATE = 3.0  # the person thinks this long before tapping
DEMO_DE = ROOT / "protocols" / "demo-de.toml"


def serve(directory: Path, protocol: Path):
    teammates = PoolTeammates.for_protocol(load_protocol(protocol), directory / "pools")
    return LiveServer(make_app(directory, teammates, time.time, protocol, SCHEDULER=True))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("browser-probes")
    with serve(directory, three_with_probes(directory)) as live:
        yield live


def start_button(page: Page) -> bool:
    return page.locator('[data-action="start-round"]').is_visible()


def probe_shown(page: Page, phone: bool, round_number: int) -> None:
    """The probe after round ``round_number``: its seven points and the scale's labels,
    each button a thumb's size and inside the screen on a phone."""
    page.wait_for_selector(f'.probe[data-round="{round_number}"]')
    assert page.locator(".probe .probe-point").count() == 7
    assert page.locator(".probe .probe-anchors span").all_inner_texts() == [
        "Strongly disagree", "Neither agree nor disagree", "Strongly agree"]
    if phone:
        assert_fits(page, f"probe after round {round_number}")
        card = page.locator(".probe").bounding_box()
        for box in (node.bounding_box() for node in page.locator(".probe-point").all()):
            assert box is not None and box["height"] >= 44 and box["width"] >= 36
            assert card["x"] <= box["x"] and box["x"] + box["width"] <= card["x"] + card["width"]


def tap(page: Page, selector: str, phone: bool) -> None:
    node = page.locator(selector)
    node.scroll_into_view_if_needed()
    node.tap() if phone else node.click()


def walk(server: LiveServer, page: Page, code: str, phone: bool, shots: Path) -> None:
    you = HumanHands(page, Human(pace=1.0, slip=0.03), 11 if phone else 3,
                     server.app.extensions["study"].protocol.path)
    suffix = "-phone" if phone else ""
    reach_the_teammate(you, page, server.url, code)
    assert page.locator(".probe").count() == 0  # practice asks nothing
    you.step("teammate")
    you.click("continue")
    you.step("intro-1")
    you.click("continue")
    # round 1: answered a few seconds late; the start button waits for the answer
    you.play_human_round("session-1")
    probe_shown(page, phone, 1)
    assert not start_button(page)
    page.screenshot(path=str(shots / f"probe{suffix}.png"), full_page=True)
    page.wait_for_timeout(LATE * 1000)
    assert not start_button(page)
    tap(page, '.probe-point[data-value="5"]', phone)
    page.wait_for_selector(".probe", state="detached")
    assert start_button(page)
    # round 2: its probe stands above the questionnaire and is missed
    you.play_human_round("session-1")
    you.step("questionnaire-1")
    probe_shown(page, phone, 2)
    page.wait_for_selector(".probe", state="detached", timeout=(SECONDS + 5) * 1000)
    you.questionnaire("questionnaire-1", None)
    you.step("intro-2")
    you.click("continue")
    # session 2, round 1: missed between rounds; the start button waits for its deadline
    you.play_human_round("session-2")
    probe_shown(page, phone, 1)
    assert not start_button(page)
    page.wait_for_selector('[data-action="start-round"]', state="visible",
                           timeout=(SECONDS + 5) * 1000)
    assert page.locator(".probe").count() == 0
    you.play_human_round("session-2")
    you.step("questionnaire-2")
    page.reload()  # a refresh shows the open probe again, never an answered or missed one
    you.step("questionnaire-2")
    probe_shown(page, phone, 2)


def assert_stored(server: LiveServer, code: str) -> None:
    [participant] = stored(server, "SELECT id FROM participants WHERE code = ?", code)
    rows = stored(server, "SELECT p.*, r.closed_at, r.started_at FROM probes p JOIN rounds r "
                          "ON r.id = p.round_id WHERE p.participant_id = ? ORDER BY p.id",
                  participant["id"])
    assert [(r["session_number"], r["round_number"]) for r in rows] == [
        (1, 1), (1, 2), (2, 1), (2, 2)]
    answered, on_questionnaire, between, last = rows
    for row in rows:
        assert row["probe"] == "fair_round"
        assert row["deadline"] == pytest.approx(row["closed_at"] + SECONDS, abs=1e-6)
        assert row["shown_at"] is not None and row["closed_at"] <= row["shown_at"]
    assert answered["value"] == 5 and answered["missed"] == 0
    assert answered["shown_at"] + LATE <= answered["answered_at"] <= answered["deadline"]
    for row in (on_questionnaire, between):
        assert (row["value"], row["answered_at"], row["missed"]) == (None, None, 1)
    assert last["value"] is None and last["answered_at"] is None
    second = stored(server, "SELECT r.started_at FROM rounds r JOIN sessions s ON s.id = "
                            "r.session_id WHERE r.participant_id = ? AND r.number = 2 AND "
                            "s.number > 0 ORDER BY s.number", participant["id"])
    # the answer released the start button before the deadline; the missed probe at it
    assert answered["answered_at"] <= second[0]["started_at"] < answered["deadline"]
    assert second[1]["started_at"] >= between["deadline"]


@pytest.mark.minutes(3.5)
def test_probes_on_a_desktop_at_a_persons_pace(server: LiveServer, browser, tmp_path: Path):
    page = browser.new_page(viewport=DESKTOP)
    walk(server, page, "probe-desk", False, screenshot_directory(tmp_path))
    page.close()
    assert_stored(server, "probe-desk")


@pytest.mark.minutes(3.5)
def test_probes_on_a_phone_at_a_persons_pace(server: LiveServer, browser, tmp_path: Path):
    page = browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
    walk(server, page, "probe-phone", True, screenshot_directory(tmp_path))
    page.close()
    assert_stored(server, "probe-phone")


@pytest.fixture(scope="module")
def german(tmp_path_factory: pytest.TempPathFactory):
    with serve(tmp_path_factory.mktemp("browser-probes-de"), DEMO_DE) as live:
        yield live


@pytest.mark.minutes(3)
def test_the_probe_in_german_on_a_desktop_and_a_phone(german: LiveServer, browser,
                                                      tmp_path: Path):
    """demo-de asks after every second round: the probe stands above the first session's
    questionnaire in the protocol's words, and fits the phone."""
    shots = screenshot_directory(tmp_path)
    protocol = german.app.extensions["study"].protocol
    (declared,) = protocol.probes
    for name, phone in (("desk", False), ("phone", True)):
        page = (browser.new_page(viewport=PHONE, device_scale_factor=2, has_touch=True)
                if phone else browser.new_page(viewport=DESKTOP))
        you = HumanHands(page, Human(pace=1.0, slip=0.03), 5, DEMO_DE)
        reach_the_teammate(you, page, german.url, f"probe-de-{name}")
        for step in ("teammate", "intro-1"):
            you.step(step)
            you.click("continue")
        you.play_human_round("session-1")
        assert page.locator(".probe").count() == 0  # after every second round only
        you.play_human_round("session-1")
        you.step("questionnaire-1")
        page.wait_for_selector('.probe[data-round="2"]')
        assert page.locator(".probe-text").inner_text() == declared.text
        assert page.locator(".probe-anchors span").all_inner_texts() == list(
            declared.scale.anchors)
        if phone:
            assert_fits(page, "the German probe")
        page.screenshot(path=str(shots / f"probe-de{'-phone' if phone else ''}.png"),
                        full_page=False)
        tap(page, '.probe-point[data-value="6"]', phone)
        page.wait_for_selector(".probe", state="detached")
        page.close()
        [row] = stored(german, "SELECT p.value, p.missed FROM probes p JOIN participants q "
                               "ON q.id = p.participant_id WHERE q.code = ?",
                       f"probe-de-{name}")
        assert (row["value"], row["missed"]) == (6, 0)
