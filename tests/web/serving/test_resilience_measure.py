"""A crash during a measured practice round does not spoil the capability measure.

``study serve`` (gunicorn) is SIGKILLed while a bot is in one of the practice rounds that
measure its capability, stays down past that round's deadline and is started again. The
round is closed as recovered with the study's last sign of life (``alive_until``), and the
capability comes from the time the server was up: cookies finished before the crash over
the seconds from the round's start to the crash (pooled with the type's first practice
round when the crash left less than half of the round).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.servers import query

from study.bots import BEHAVIOURS, Profile, StudyFacts, SwarmResult, bot_codes, run_swarm
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol
from study.web.participant.agent_team import MIN_MEASURED_SHARE

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def wait_in_measured_round(db: Path, code: str, measured: set[int], timeout: float) -> dict:
    """The measured practice round the bot is in, once a second of it has passed."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if db.exists():
            for row in query(db, "SELECT r.* FROM rounds r JOIN participants p ON p.id = "
                                 "r.participant_id JOIN sessions s ON s.id = r.session_id "
                                 "WHERE p.code = ? AND s.number = 0 AND r.closed_at IS NULL",
                             code):
                if row["number"] in measured and time.time() > row["started_at"] + 1.0:
                    return dict(row)
        time.sleep(0.05)
    raise TimeoutError("the bot never reached a measured practice round")


@pytest.mark.minutes(0.6)
def test_a_crash_in_a_measured_round_measures_only_the_time_the_server_was_up(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=4.0)
    loaded = load_protocol(protocol)
    measured = set(loaded.measured_practice_rounds().values())
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log").start(
        timeout=120)
    [code] = bot_codes(1, "measure")
    results: list[SwarmResult] = []
    swarm = threading.Thread(target=lambda: results.append(run_swarm(
        server.url, [code], [Profile((0.8, 0.6), (0.6, 0.4), BEHAVIOURS["fast"], seed=3)],
        facts=StudyFacts.from_protocol(loaded), max_seconds=150, patience=60)))
    try:
        swarm.start()
        cut = wait_in_measured_round(db, code, measured, timeout=90)
        server.kill()
        time.sleep(max(0.0, cut["deadline"] - time.time() + 0.5))
        server.start(timeout=120)
        swarm.join(timeout=200)
    finally:
        server.stop()
    assert results and [o.final_step for o in results[0].outcomes] == ["done"], (
        results[0].summary() if results else server.output())

    [row] = query(db, "SELECT * FROM rounds WHERE id = ?", cut["id"])
    assert row["close_reason"] == "recovery"
    alive = row["alive_until"]
    assert row["started_at"] < alive < row["deadline"]
    [measurement] = query(db, "SELECT * FROM measurements WHERE round_id = ? AND kind = "
                              "'capability'", cut["id"])
    assert measurement["cut_by_downtime"] == 1
    up = alive - row["started_at"]
    before_crash = query(db, "SELECT count(*) AS n FROM cookies WHERE round_id = ? AND actor = "
                             "'participant' AND finished_at <= ?", row["id"], alive)[0]["n"]
    if up >= MIN_MEASURED_SHARE * row["seconds"]:
        assert measurement["seconds"] == pytest.approx(up)
        assert measurement["cookies"] == before_crash
    else:  # pooled with the first practice round of the type, played in full
        first = query(db, "SELECT * FROM rounds WHERE session_id = ? AND number = ?",
                      row["session_id"], loaded.practice.index(row["task_type"]) + 1)[0]
        assert measurement["seconds"] == pytest.approx(up + first["seconds"])
