"""The whole demo study in real Chromium: consent to debrief, then the database checked.

A participant's hands are simulated with Playwright's mouse: letters are dragged with
pointer events onto the cookie, boxes are clicked. Set ``STUDY_SCREENSHOTS=docs/screenshots``
to refresh the screenshots of ``docs/participant-journey.md``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page
from support.browser import (
    Participant,
    agent_teammate_shown,
    screenshot_directory,
    websocket_handshakes,
)
from support.web import LiveServer
from support.withdrawal import SECRET_ANSWER, assert_nothing_left

from study.protocol.loader import Protocol
from study.protocol.texts import DEFAULT_TEXTS
from study.web.participant.rounds import teammate_times

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def script_errors(page: Page) -> list[str]:
    """What the page reports going wrong as it happens: uncaught errors of its scripts (a
    module that fails to load or to run) and errors written to the console."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text)
            if message.type == "error" else None)
    return errors


@pytest.mark.minutes(2)
def test_a_participant_completes_the_demo_study(server: LiveServer, browser, tmp_path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = script_errors(page)
    sockets = websocket_handshakes(page)
    you = Participant(page, screenshot_directory(tmp_path))
    page.goto(f"{server.url}/p/browser-1?PROLIFIC_PID=pp-77&STUDY_ID=st-3")
    you.reach_practice({"ravens": 6, "steelers": 2}, shots=True)
    you.shot("04-practice-ready")
    practice = [you.play_round("practice", 1, "05-practice-squares" if n == 1 else
                               "06-practice-letters" if n == 3 else None) for n in range(1, 5)]
    you.step("teammate")
    you.shot("07-teammate")
    assert agent_teammate_shown(page) == {"figure": "#agent", "words": DEFAULT_TEXTS[
        "teammate_hello"]}  # the demo says its teammate is the agent it is
    you.click("continue")
    for session in (1, 2):
        you.step(f"intro-{session}")
        you.shot(f"{7 + 4 * session - 3:02d}-robot-intro-{session}")
        you.click("continue")
        for number in (1, 2):
            you.play_round(f"session-{session}", 1,
                           f"{7 + 4 * session - 2:02d}-session-{session}-round"
                           if number == 1 else None)
            if number == 1:
                you.step(f"session-{session}")
                you.shot(f"{7 + 4 * session - 1:02d}-session-{session}-between-rounds")
        you.questionnaire(f"questionnaire-{session}",
                          f"{7 + 4 * session:02d}-questionnaire-{session}")
    you.questionnaire("post", "16-post-study")
    you.step("debrief")
    you.shot("17-debrief")
    you.click("keep")
    you.step("done")
    assert page.eval_on_selector("#progress", "bar => bar.style.width") == "100%"
    you.shot("18-done")
    page.close()
    assert errors == []
    assert_plain_frames(sockets)
    study = server.app.extensions["study"]
    check_database(Path(study.storage.path), practice, study.protocol)


def assert_plain_frames(sockets: dict[str, dict[str, dict[str, str]]]) -> None:
    """Chromium asked the page's websocket for permessage-deflate and the server granted
    none (``study.web.serving.websockets``)."""
    assert sockets and all("route=browser-1" in url for url in sockets), sockets
    for handshake in sockets.values():
        assert "permessage-deflate" in handshake["sent"]["sec-websocket-extensions"]
        assert "sec-websocket-extensions" not in handshake["answered"], handshake


def check_database(path: Path, practice_rounds: list[int], protocol: Protocol) -> None:
    """Every round, allocation, cookie and answer of the browser run is in SQLite."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    participant = db.execute("SELECT * FROM participants WHERE code = 'browser-1'").fetchone()
    assert participant["step"] == "done" and participant["data_consent"] == "given"
    assert json.loads(participant["external_ids"]) == {"PROLIFIC_PID": "pp-77", "STUDY_ID": "st-3"}
    pid = participant["id"]
    rounds = db.execute("SELECT r.*, s.number AS session FROM rounds r JOIN sessions s "
                        "ON s.id = r.session_id WHERE r.participant_id = ? ORDER BY r.id",
                        (pid,)).fetchall()
    assert [(r["session"], r["number"]) for r in rounds] == [
        (0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (2, 1), (2, 2)]
    assert [r["id"] for r in rounds[:4]] == practice_rounds
    assert all(r["closed_at"] is not None and r["close_reason"] == "deadline" for r in rounds)
    assert [r["participant_cookies"] for r in rounds] == [1] * 8
    cookies = db.execute("SELECT round_id, count(*) AS n FROM cookies WHERE actor = "
                         "'participant' GROUP BY round_id").fetchall()
    assert {c["round_id"]: c["n"] for c in cookies} == {r["id"]: r["participant_cookies"]
                                                        for r in rounds}
    teammate = db.execute("SELECT sum(teammate_cookies) AS n FROM rounds "
                          "WHERE participant_id = ?", (pid,)).fetchone()["n"]
    stored = db.execute("SELECT count(*) FROM cookies WHERE actor = 'teammate' "
                        "AND participant_id = ?", (pid,)).fetchone()[0]
    assert stored == teammate
    allocations = db.execute("SELECT * FROM allocations WHERE participant_id = ?",
                             (pid,)).fetchall()
    assert len(allocations) == 8
    for row in rounds[4:]:
        kits = {a["role"]: a["task_type"] for a in allocations if a["round_id"] == row["id"]}
        assert kits == {"participant": row["task_type"], "teammate": row["teammate_task_type"]}
    answers = db.execute("SELECT questionnaire, count(*) AS n FROM answers "
                         "WHERE participant_id = ? GROUP BY questionnaire", (pid,)).fetchall()
    per_session = len(protocol.session_questionnaire.items)
    assert {a["questionnaire"]: a["n"] for a in answers} == {
        "preferences": len(protocol.themes), "session-1": per_session,
        "session-2": per_session, "post": len(protocol.post_questionnaire.items)}
    assert db.execute("SELECT count(*) FROM measurements WHERE participant_id = ?",
                      (pid,)).fetchone()[0] == 4
    assert db.execute("SELECT distance FROM teammates WHERE participant_id = ?",
                      (pid,)).fetchone()[0] >= 0
    steps = [s[0] for s in db.execute("SELECT step FROM steps WHERE participant_id = ? ORDER BY id",
                                      (pid,))]
    assert steps[0] == "consent" and steps[-1] == "done" and len(steps) == 14
    assert db.execute("SELECT count(*) FROM rejections WHERE participant_id = ?",
                      (pid,)).fetchone()[0] == 0


def test_a_refresh_mid_round_resumes_the_same_round(server: LiveServer, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    you = Participant(page, None)
    page.goto(f"{server.url}/p/refresh-1")
    you.reach_practice({"ravens": 3, "steelers": 5})
    you.click("start-round")
    page.wait_for_selector(".bakery .cookie")
    before = page.locator(".bakery")
    round_id, deadline = before.get_attribute("data-round"), before.get_attribute("data-deadline")
    you.decorate()
    you.wait_count(1)
    page.on("dialog", lambda dialog: dialog.accept())  # leaving a running round asks first
    page.reload()
    page.wait_for_selector(".bakery .cookie")
    after = page.locator(".bakery")
    assert after.get_attribute("data-round") == round_id
    assert after.get_attribute("data-deadline") == deadline
    assert page.locator("#my-count").text_content() == "Finished: 1"
    you.decorate()
    you.wait_count(2)
    page.close()
    db = sqlite3.connect(server.app.extensions["study"].storage.path)
    rows = db.execute("SELECT r.id, r.deadline, r.participant_cookies FROM rounds r JOIN "
                      "participants p ON p.id = r.participant_id WHERE p.code = 'refresh-1'"
                      ).fetchall()
    assert len(rows) == 1 and str(rows[0][0]) == round_id and rows[0][2] == 2
    assert float(deadline) == rows[0][1]


def teammate_samples(page: Page) -> list[dict]:
    """What the teammate's station shows, sampled until the running round closes."""
    round_id = page.locator(".bakery").get_attribute("data-round")
    samples = []
    while page.locator(f'.bakery[data-round="{round_id}"]').count():
        shown = page.evaluate("""() => {
            const s = document.getElementById('teammate');
            const c = document.getElementById('teammate-cookie');
            return s && c ? {cookies: Number(s.dataset.cookies),
                             placed: Number(c.dataset.placed || 0),
                             shown: document.getElementById('teammate-count').textContent}
                          : null; }""")
        if shown:
            samples.append({**shown, "at": time.time(), "round": int(round_id)})
        time.sleep(0.2)
    return samples


def watch_toasts(page: Page) -> None:
    """Record every message the page shows in its toast (they vanish after a while)."""
    page.evaluate("""() => { window.toastsShown = [];
        const toast = document.getElementById('toast');
        const seen = () => { if (!toast.hidden) window.toastsShown.push(toast.textContent); };
        new MutationObserver(seen).observe(toast, {attributes: true, childList: true}); }""")


def toasts(page: Page) -> list[str]:
    return page.evaluate("() => window.toastsShown")


def scheduled(server: LiveServer, round_id: int) -> list[float]:
    """The decorator model's finishing times of the teammate's cookies in a round."""
    study = server.app.extensions["study"]
    row = study.storage.one("SELECT r.*, s.number AS session_number FROM rounds r JOIN "
                            "sessions s ON s.id = r.session_id WHERE r.id = ?", (round_id,))
    teammate = study.storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                                 (row["participant_id"],))
    return [row["started_at"] + t
            for t in teammate_times(study.protocol, teammate, row, row["session_number"])]


@pytest.mark.minutes(1.5)
def test_the_teammate_decorates_to_the_model_and_the_page_lets_one_leave(
        server: LiveServer, browser, tmp_path: Path):
    """The teammate's station follows the decorator model's times over a session, animates
    the cookie in between, does not replay the kit hand-out on a refresh; double clicks
    stay quiet; stopping mid-session from the page leaves nothing of the participant."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    you = Participant(page, screenshot_directory(tmp_path))
    page.goto(f"{server.url}/p/mate-1?PROLIFIC_PID=pp-mate-5531")
    you.reach_practice({"ravens": 5, "steelers": 4})
    for _ in range(4):
        you.play_round("practice", 1)
    you.step("teammate")
    watch_toasts(page)
    page.dblclick('[data-action="continue"]')
    you.step("intro-1")
    you.click("continue")
    model_total = 0
    for number in (1, 2):
        you.step("session-1")
        page.dblclick('[data-action="start-round"]')
        page.wait_for_selector(".bakery .cookie")
        assert "delivering" in page.locator("#runner").get_attribute("class")
        page.wait_for_timeout(500)
        assert toasts(page) == []  # the double clicks surfaced nothing
        if number == 1:
            time.sleep(3)
            you.shot("teammate-desktop")
        else:
            page.once("dialog", lambda dialog: dialog.accept())  # leaving a round asks first
            page.reload()
            page.wait_for_selector(".bakery .cookie")
            assert "delivering" not in page.locator("#runner").get_attribute("class")
        assert agent_teammate_shown(page) == {"figure": "#agent",
                                              "words": "Agent teammate's station"}
        round_samples = teammate_samples(page)
        times = scheduled(server, round_samples[0]["round"])
        for sample in round_samples:
            due_now = sum(t <= sample["at"] + 0.3 for t in times)
            due_before = sum(t <= sample["at"] - 2.0 for t in times)
            assert due_before <= sample["cookies"] <= due_now, (sample, times)
            assert sample["shown"] == f"Finished: {sample['cookies']}"
        assert max(s["placed"] for s in round_samples) > 0  # the cookie fills in between
        model_total += len(times)
        if number == 1:
            you.step("session-1")
            summary = page.locator(".summary").text_content()
            assert int(re.search(r"your teammate (\d+)", summary).group(1)) == len(times)
    stored = server.app.extensions["study"].storage.one(
        "SELECT sum(r.teammate_cookies) AS n FROM rounds r JOIN participants p ON "
        "p.id = r.participant_id JOIN sessions s ON s.id = r.session_id "
        "WHERE p.code = 'mate-1' AND s.number = 1")
    assert stored["n"] == model_total
    refused = server.app.extensions["study"].storage.all(
        "SELECT reason FROM rejections j JOIN participants p ON p.id = j.participant_id "
        "WHERE p.code = 'mate-1' AND reason IN ('duplicate', 'out-of-order')")
    assert refused == []
    you.questionnaire("questionnaire-1", None, text=SECRET_ANSWER)
    you.step("intro-2")
    you.click("continue")
    you.step("session-2")
    you.click("start-round")
    page.wait_for_selector(".bakery .cookie")
    page.click('[data-action="leave"]')
    page.wait_for_selector('[data-action="withdraw-confirm"]')
    you.shot("withdraw-confirm")
    page.click('[data-action="withdraw-confirm"]')
    you.step("withdrawn")
    assert page.locator('[data-action="leave"]').is_hidden()
    page.close()
    assert_nothing_left(server.app.extensions["study"].storage.path, "mate-1",
                        ("pp-mate-5531", SECRET_ANSWER))
