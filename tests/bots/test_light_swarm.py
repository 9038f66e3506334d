"""Light bots (``study.bots.light``, the load benchmark's participants) take the whole demo
study against a real ``study serve``, and everything the server acknowledged is stored."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from support.reports import REPORTS_SQL, held_back, played_report_gaps

from study.bots.audit import missing_acknowledged
from study.bots.light import FAST, Pace, SwarmPlan, cancel_all, run_light_swarm
from study.bots.participant import StudyFacts
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[2]
ROUNDS_PER_PARTICIPANT = 4 + 2 + 2  # practice, session 1, session 2 of the demo protocol
HANG = 240.0  # seconds: only a hang takes this long


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``study serve`` in its own process on the demo protocol with short rounds."""
    tmp = tmp_path_factory.mktemp("light")
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0,
                              reference_speed=(1.5, 1.0), min_cookie_seconds=0.3)
    served = ServeProcess(protocol, tmp / "study.sqlite", tmp / "pools", tmp / "serve.log")
    served.start(timeout=120)
    yield served, StudyFacts.from_protocol(load_protocol(protocol))
    served.stop()


def plan_for(url: str, participants: int, pace: Pace, facts: StudyFacts,
             prefix: str) -> SwarmPlan:
    """Every bot arrives at once and takes part once; the end only catches a hang."""
    now = time.time()
    return SwarmPlan(url, participants, now, 0.5, now, now + HANG, pace=pace, facts=facts,
                     patience=30.0, prefix=prefix, recycle=False)


def rows(db: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, params).fetchall()


def reports_of(db: Path, participant_id: int) -> list[dict]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute(REPORTS_SQL, (participant_id,))]


@pytest.mark.minutes(0.4)
def test_fast_bots_finish_the_study_and_nothing_acknowledged_is_missing(server):
    served, facts = server
    report = run_light_swarm(plan_for(served.url, 4, FAST, facts, "lightfast"))
    assert report.tally.errors == {}
    assert (report.tally.participants, report.tally.finished) == (4, 4)
    assert missing_acknowledged(served.db, report.log) == []
    cookies = [a for a in report.acked if a.event == "cookie" and not a.duplicate]
    assert cookies, "the fast bots had their cookies acknowledged"
    stored = rows(served.db, "SELECT count(*) FROM cookies c JOIN participants p ON "
                             "p.id = c.participant_id WHERE p.code LIKE 'lightfast%' "
                             "AND c.actor = 'participant'")
    assert stored == [(len(cookies),)]
    rounds = rows(served.db, "SELECT p.code, count(*) FROM rounds r JOIN participants p ON "
                             "p.id = r.participant_id WHERE p.code LIKE 'lightfast%' "
                             "GROUP BY p.code")
    assert sorted(n for _, n in rounds) == [ROUNDS_PER_PARTICIPANT] * 4
    steps = rows(served.db, "SELECT DISTINCT step FROM participants WHERE code LIKE "
                            "'lightfast%'")
    assert steps == [("done",)]


@pytest.mark.minutes(0.4)
def test_human_paced_bots_report_as_the_page_does_and_finish(server):
    served, facts = server
    quick_pages = Pace(human=True, page_scale=0.02)
    report = run_light_swarm(plan_for(served.url, 3, quick_pages, facts, "lighthuman"))
    assert report.tally.errors == {}
    assert (report.tally.participants, report.tally.finished) == (3, 3)
    assert report.tally.progress_sent > 0
    assert missing_acknowledged(served.db, report.log) == []
    progress = rows(served.db, "SELECT count(*) FROM progress g JOIN participants p ON "
                               "p.id = g.participant_id WHERE p.code LIKE 'lighthuman%'")
    assert 0 < progress[0][0] <= report.tally.progress_sent
    for (participant_id,) in rows(served.db, "SELECT id FROM participants WHERE code LIKE "
                                             "'lighthuman%'"):
        reports = reports_of(served.db, participant_id)
        assert {row["session"] for row in reports} == {0, 1, 2}
        assert held_back(played_report_gaps(reports)), reports
    steps = rows(served.db, "SELECT DISTINCT step FROM participants WHERE code LIKE "
                            "'lighthuman%'")
    assert steps == [("done",)]


@pytest.mark.minutes(0.4)
def test_a_study_served_with_normal_durability_says_so_and_loses_nothing(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0,
                              reference_speed=(1.5, 1.0), min_cookie_seconds=0.3)
    served = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log", extra=("--durability", "normal"))
    served.start(timeout=120)
    try:
        report = run_light_swarm(plan_for(served.url, 2, FAST, StudyFacts.from_protocol(
            load_protocol(protocol)), "lightnormal"))
    finally:
        served.stop()
    assert "acknowledged messages survive a server crash, not a power cut" in served.output()
    assert report.tally.errors == {}
    assert (report.tally.participants, report.tally.finished) == (2, 2)
    assert missing_acknowledged(served.db, report.log) == []


def test_the_swarm_ends_even_when_a_bot_swallows_its_first_cancellation():
    """A cancellation that lands inside the Socket.IO client can be lost there: the bot
    then played on past the run's end and the swarm never returned."""
    async def stubborn() -> None:
        swallowed = 0
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 1:
                    raise

    async def run() -> asyncio.Task:
        bot = asyncio.create_task(stubborn())
        await asyncio.sleep(0.05)
        await asyncio.wait_for(cancel_all([bot]), timeout=60)  # a guard against a hang
        return bot

    assert asyncio.run(run()).cancelled()
