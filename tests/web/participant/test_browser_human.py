"""The demo in real Chromium at a person's pace: the human decorating-speed model
(``study.people.speed``) decides when every letter is dragged and every box clicked, slips and
corrections included, and Playwright's mouse does it. The measured capabilities must come
out inside (0.01, 0.99), not clipped, and the two robots' plans must differ.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from support.browser import (
    PHONE,
    HumanHands,
    assert_only_slow_refusals,
    reach_the_teammate,
    stored,
)
from support.reports import REPORTS_SQL, held_back, played_report_gaps
from support.web import DEMO, LiveServer, make_app

from study.people.speed import Human
from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import PoolTeammates

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("browser-human")
    teammates = PoolTeammates.for_protocol(load_protocol(DEMO), directory / "pools")
    app = make_app(directory, teammates, time.time, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


def assert_measured_not_clipped(server: LiveServer, code: str) -> None:
    [participant] = stored(server, "SELECT * FROM participants WHERE code = ?", code)
    measured = stored(server, "SELECT * FROM measurements WHERE participant_id = ? AND "
                              "kind = 'capability' ORDER BY task_type", participant["id"])
    assert [m["task_name"] for m in measured] == ["squares", "letters"]
    for row in measured:
        assert 0.01 < row["value"] < 0.99, f"{row['task_name']} clipped: {row['value']}"
        assert row["speed"] == pytest.approx((row["cookies"] + row["fraction"]) / row["seconds"])
    placed = stored(server, "SELECT count(*) AS n, max(fraction) AS most FROM progress "
                            "WHERE participant_id = ?", participant["id"])[0]
    assert placed["n"] > 20 and 0 < placed["most"] < 1


@pytest.mark.minutes(2)
def test_a_person_at_an_ordinary_pace_completes_the_demo(server: LiveServer,
                                                          browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    you = HumanHands(page, Human(pace=1.0, slip=0.05), seed=3)
    reach_the_teammate(you, page, server.url, "human-1")
    you.step("teammate")
    you.click("continue")
    for session in (1, 2):
        you.step(f"intro-{session}")
        you.click("continue")
        for _ in (1, 2):
            you.play_human_round(f"session-{session}")
        you.questionnaire(f"questionnaire-{session}", None)
    you.questionnaire("post", None)
    you.step("debrief")
    you.click("keep")
    you.step("done")
    page.close()
    assert_measured_not_clipped(server, "human-1")
    [participant] = stored(server, "SELECT * FROM participants WHERE code = 'human-1'")
    assert participant["step"] == "done" and participant["robots_identical"] == 0
    plans = [row["plan"] for row in stored(
        server, "SELECT plan FROM sessions WHERE participant_id = ? AND number > 0 "
                "ORDER BY number", participant["id"])]
    assert len(plans) == 2 and plans[0] != plans[1], "the two robots must differ"
    assert_only_slow_refusals(server, participant["id"])
    assert_reported_as_the_page_should(server, participant["id"], you)


def assert_reported_as_the_page_should(server: LiveServer, participant_id: int,
                                       you: HumanHands) -> None:
    """Practice reports every element at once (it measures the person); a played round at
    most once ``progress_seconds``, but at once in its last such interval. A move begun
    just before the deadline may reach a busy server after it and be refused as late
    (``assert_only_slow_refusals``): it was reported all the same."""
    rows = stored(server, REPORTS_SQL, participant_id)
    reports = Counter(row["round_id"] for row in rows) + late_reports(server, participant_id)
    practice = {row["id"] for row in stored(
        server, "SELECT r.id FROM rounds r JOIN sessions s ON s.id = r.session_id WHERE "
                "r.participant_id = ? AND s.number = 0", participant_id)}
    moves, unseen = you.moves, you.unseen  # unseen: a move the closing round took along
    played = set(moves) - practice
    assert practice and played
    assert all(moves[r] <= reports[r] <= moves[r] + unseen[r] for r in practice), (
        reports, moves, unseen)
    assert 0 < sum(reports[r] for r in played) < sum(moves[r] for r in played), (reports, moves)
    gaps = played_report_gaps(rows)
    assert gaps and held_back(gaps), gaps


def late_reports(server: LiveServer, participant_id: int) -> Counter[int]:
    """The reports of each round that reached the server after its deadline."""
    return Counter(row["round_id"] for row in stored(
        server, "SELECT json_extract(payload, '$.round_id') AS round_id FROM rejections "
                "WHERE participant_id = ? AND event = 'progress' AND reason = 'round-closed'",
        participant_id))


@pytest.mark.minutes(1)
def test_on_a_phone_the_practice_measures_a_person_too(server: LiveServer,
                                                       browser):
    page = browser.new_page(viewport=PHONE, has_touch=True)
    you = HumanHands(page, Human(pace=1.0, slip=0.0), seed=4)
    reach_the_teammate(you, page, server.url, "human-phone-1")
    you.step("teammate")
    page.close()
    assert_measured_not_clipped(server, "human-phone-1")
