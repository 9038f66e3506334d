"""Kill ``study serve`` with SIGKILL in the middle of rounds, start it again on the same
database: every participant resumes where they were, overdue rounds are closed correctly,
and nothing the server acknowledged is missing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.servers import BEHAVIOUR_MIX, open_rounds, query, wait_for_open_rounds

from study.bots import (
    Profile,
    StudyFacts,
    SwarmResult,
    bot_codes,
    run_swarm,
)
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol
from study.web.participant.rounds import teammate_times

ROOT = Path(__file__).resolve().parents[3]
ROUNDS_PER_BOT = 4 + 2 + 2

pytestmark = pytest.mark.slow


@pytest.fixture
def crashed_and_restarted(tmp_path):
    """Bots take part; the server is SIGKILLed mid-round, stays down past the earliest open
    deadline, and is started again on the same database and port."""
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0)
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log").start()
    codes = bot_codes(len(BEHAVIOUR_MIX))
    profiles = [Profile((0.8, 0.6), (0.6, 0.4), behaviour, seed=i)
                for i, behaviour in enumerate(BEHAVIOUR_MIX)]
    results: list[SwarmResult] = []
    swarm = threading.Thread(target=lambda: results.append(run_swarm(
        server.url, codes, profiles, facts=StudyFacts.from_protocol(load_protocol(protocol)),
        max_seconds=120)))
    try:
        swarm.start()
        wait_for_open_rounds(db, codes, at_least=3, timeout=60)
        server.kill()
        at_kill = {r["id"]: dict(r) for r in open_rounds(db, codes)}
        time.sleep(max(0.0, min(r["deadline"] for r in at_kill.values()) - time.time() + 0.3))
        restarting = time.time()
        server.start()
        restarted = time.time()
        swarm.join(timeout=150)
    finally:
        server.stop()
    assert not swarm.is_alive() and results, server.output()
    return db, codes, results[0], at_kill, (restarting, restarted)


@pytest.mark.minutes(0.5)
def test_a_killed_server_loses_nothing_and_everyone_resumes(crashed_and_restarted):
    db, codes, result, at_kill, (restarting, restarted) = crashed_and_restarted
    assert [o.error for o in result.outcomes] == [None] * len(codes), result.summary()
    assert {o.final_step for o in result.outcomes} == {"done"}
    assert len(at_kill) >= 3

    # Nothing acknowledged is missing: every accepted message and cookie is stored.
    stored = {(r["code"], r["msg_id"]) for r in query(
        db, "SELECT p.code, m.msg_id FROM messages m JOIN participants p ON p.id = "
            "m.participant_id")}
    assert {(a.code, a.msg_id) for a in result.log.acked} <= stored
    cookies = {r["msg_id"] for r in query(db, "SELECT msg_id FROM cookies WHERE actor = "
                                              "'participant'")}
    assert {a.msg_id for a in result.log.acked if a.event == "cookie"} <= cookies
    assert {reason for _, _, reason in result.log.refused} <= {"round-closed"}

    # Everyone resumed where they were: the whole journey once, no round played twice.
    for code in codes:
        steps = [r["step"] for r in query(db, "SELECT s.step FROM steps s JOIN participants "
                                              "p ON p.id = s.participant_id WHERE p.code = ? "
                                              "ORDER BY s.id", code)]
        assert len(steps) == len(set(steps)) and steps[-1] == "done", (code, steps)
        rounds = query(db, "SELECT r.number, s.number AS session FROM rounds r JOIN sessions s "
                           "ON s.id = r.session_id JOIN participants p ON p.id = "
                           "r.participant_id WHERE p.code = ? ORDER BY r.id", code)
        assert len(rounds) == ROUNDS_PER_BOT

    # Rounds open at the kill: those due while the server was down were closed by recovery
    # at start, those due after it was up again ran on to their deadline (a round due while
    # it was starting may be either); their counts only grew.
    closed = {r["id"]: r for r in query(db, "SELECT * FROM rounds")}
    reasons = set()
    for round_id, before in at_kill.items():
        row = closed[round_id]
        reasons.add(row["close_reason"])
        assert row["closed_at"] >= row["deadline"]
        if row["deadline"] < restarting:
            assert row["close_reason"] == "recovery"
        elif row["deadline"] > restarted:
            assert row["close_reason"] == "deadline"
        assert row["participant_cookies"] >= before["participant_cookies"]
    assert "recovery" in reasons

    # Every round, recovered or not: counts equal the stored cookies, none after a deadline,
    # and the teammate finished every cookie its schedule had due by the deadline, or, in a
    # round the crash cut, by the server's last sign of life: it did not work while down.
    protocol = load_protocol(db.parent / "quick.toml")
    cut = [row for row in closed.values() if row["alive_until"] is not None]
    assert cut and all(row["close_reason"] == "recovery" for row in cut)
    for row in closed.values():
        if row["teammate_task_type"] is not None:
            teammate = query(db, "SELECT * FROM teammates WHERE participant_id = ?",
                             row["participant_id"])[0]
            session = query(db, "SELECT number FROM sessions WHERE id = ?", row["session_id"])[0]
            times = teammate_times(protocol, dict(teammate), dict(row), session["number"])
            until = min(row["deadline"], row["alive_until"] or row["deadline"])
            assert row["teammate_cookies"] == sum(row["started_at"] + t <= until for t in times)
        for actor, column in (("participant", "participant_cookies"),
                              ("teammate", "teammate_cookies")):
            stored_cookies = query(db, "SELECT finished_at FROM cookies WHERE round_id = ? "
                                       "AND actor = ?", row["id"], actor)
            assert len(stored_cookies) == row[column]
            assert all(c["finished_at"] <= row["deadline"] + 1e-6 for c in stored_cookies)
