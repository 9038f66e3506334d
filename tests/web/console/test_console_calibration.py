"""The console's calibration panel: each cookie type's measured capabilities so far against
the range the protocol's pool samples it from, with the clipped and outside values counted,
amber when more than 10 % of a type's capabilities are clipped or outside."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.console import logged_in, make_app
from support.web import ROOT

from study.protocol.loader import load_protocol
from study.web.console import live
from study.web.console import views as console

STUDY2 = ROOT / "protocols" / "study2-paper.toml"  # squares [0.20, 0.32], letters [0.63, 1.00]
SQUARES = [0.21, 0.22, 0.24, 0.25, 0.26, 0.27, 0.28, 0.30, 0.45, 0.01]  # 0.45 out, 0.01 clipped
LETTERS = [0.64, 0.66, 0.70, 0.72, 0.75, 0.80, 0.85, 0.90, 0.95, 0.99]  # 0.99 clipped, inside


@pytest.fixture
def app(tmp_path: Path, monkeypatch):
    from study.web.participant.agent_pool import PoolTeammates

    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    demo = ROOT / "protocols" / "demo.toml"
    return make_app(tmp_path, PoolTeammates.for_protocol(load_protocol(demo),
                                                         tmp_path / "pools"))


def measure(app, squares: list[float], letters: list[float],
            stored_flag: bool = True) -> None:
    """One participant per pair of values, their capabilities stored as the server does
    (``clipped`` flagged) or, with ``stored_flag`` off, as a database before the flag."""
    journey = app.extensions["study"]
    for k, values in enumerate(zip(squares, letters, strict=True)):
        participant = journey.enrol(origin="console")
        for task_type, value in enumerate(values):
            clipped = int(value <= 0.01 or value >= 0.99) if stored_flag else None
            journey.storage.insert("measurements", {
                "participant_id": participant["id"], "kind": "capability",
                "task_type": task_type, "task_name": ("squares", "letters")[task_type],
                "value": value, "clipped": clipped, "at": 1000.0 + k})


def panel(app) -> dict:
    journey = app.extensions["study"]
    ranges = console.target_ranges(load_protocol(STUDY2))
    return live.snapshot(journey.storage, 0.0, lambda code: 0, ranges)["calibration"]


def by_name(calibration: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in calibration["types"]}


def test_the_target_ranges_are_those_the_pool_samples_from():
    assert console.target_ranges(load_protocol(STUDY2)) == {0: (0.20, 0.32), 1: (0.63, 1.0)}


@pytest.mark.parametrize("stored_flag", [True, False], ids=["flag stored", "flag derived"])
def test_clipped_and_outside_values_are_counted_and_turn_the_panel_amber(app, stored_flag):
    measure(app, SQUARES, LETTERS, stored_flag)
    calibration = panel(app)
    squares, letters = by_name(calibration)["squares"], by_name(calibration)["letters"]
    assert squares["target"] == [0.20, 0.32]
    assert (squares["measured"], squares["clipped"], squares["outside"], squares["off"]) == (
        10, 1, 2, 2)
    assert squares["amber"]  # 2 of 10 clipped or outside: more than 10 %
    assert (letters["measured"], letters["clipped"], letters["outside"], letters["off"]) == (
        10, 1, 0, 1)
    assert not letters["amber"]  # 1 of 10: not more than 10 %
    assert calibration["amber"]
    assert [point["off"] for point in squares["values"]] == [True] + [False] * 8 + [True]


def test_capabilities_inside_their_ranges_leave_the_panel_calm(app):
    measure(app, SQUARES[:8], LETTERS[:8])
    calibration = panel(app)
    assert [entry["off"] for entry in calibration["types"]] == [0, 0]
    assert not calibration["amber"]


def test_the_strip_has_a_dot_per_value_not_per_participant(app):
    """A study of thousands sends the panel at the size of a hundred: participants at one
    value share its dot, which says how many they are."""
    measure(app, [0.25] * 6 + [0.2501, 0.30], [0.7] * 8)
    squares = by_name(panel(app))["squares"]
    assert squares["measured"] == 8
    assert squares["values"] == [{"value": 0.25, "off": False, "n": 7},
                                 {"value": 0.3, "off": False, "n": 1}]


def test_the_console_serves_the_panel_against_its_protocols_ranges(app):
    measure(app, SQUARES, LETTERS)
    client, _ = logged_in(app)
    calibration = client.get("/console/live.json").get_json()["calibration"]
    squares = by_name(calibration)["squares"]
    # the demo's pool samples the whole scale: the target is the paper's range
    assert squares["target"] == [0.20, 0.32]
    assert (squares["clipped"], squares["outside"]) == (1, 2)  # 0.45, and 0.01 clipped
    assert calibration["amber"], "2 of 10 squares off the range: over 10 %"
    page = client.get("/console/").data
    assert b'id="calibration"' in page and b"more than\n    10 %" in page


@pytest.mark.browser
def test_the_panel_turns_amber_live_in_chromium(tmp_path):
    from playwright.sync_api import expect, sync_playwright
    from support.web import CHROMIUM, CHROMIUM_ARGS, DEMO, LiveServer

    from study.web import create_app
    from study.web.participant.agent_pool import PoolTeammates

    app = create_app({"PROTOCOL": DEMO, "DATABASE": tmp_path / "study.sqlite",
                      "TEAMMATES": PoolTeammates.for_protocol(load_protocol(DEMO),
                                                              tmp_path / "pools"),
                      "SCHEDULER": False, "STUDY_CONSOLE_PASSWORD": "lab-password"})
    measure(app, SQUARES[:8], LETTERS[:8])
    with LiveServer(app, env={"STUDY_CONSOLE_PASSWORD": "lab-password"}) as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{server.url}/console/")
        page.fill("input[name=password]", "lab-password")
        page.click("button[type=submit]")
        page.wait_for_selector("#live-status:text('live')")
        assert "amber" not in page.get_attribute("#calibration", "class")
        measure(app, [0.25, 0.30], [0.99, 0.99])  # letters: 2 of 10 clipped
        page.wait_for_selector("#calibration.amber", timeout=30_000)
        # The first of the two turns it amber already (1 of 9); a push may come between.
        amber = page.locator(".calibration-type.amber")
        expect(amber).to_contain_text("clipped 2", timeout=30_000)
        assert amber.inner_text().startswith("letters")
        # The dots sit at their values (CSP allows the positions set from script).
        clipped = page.eval_on_selector(".calibration-type.amber .dot.off", "d => d.style.left")
        assert clipped == "99%"
        page.screenshot(path=str(tmp_path / "console-calibration.png"), full_page=True)
        browser.close()
    app.extensions["console_pusher"].stop()
