"""Real teams under ``study serve --workers 2``: bots in teams of two and of three, a
worker SIGKILLed mid-round: the one holding the round scheduler's lease, or the other.

Each worker keeps the rounds of the teams connected to it; the survivor holds the lease and
goes on starting and closing every team's rounds, the killed worker's too; every bot
finishes, nothing acknowledged is missing, and every team round's people played it on one
clock (the same start and deadline for each of their rounds).
"""

from __future__ import annotations

import os
import signal

import pytest
from support.servers import (
    lease_holder,
    query,
    swarm_in_background,
    wait_for_open_rounds,
    worker_to_kill,
)
from support.teams import team_study_on_two_workers

from study.bots.audit import missing_acknowledged

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seats, which", [(2, "holder"), (3, "holder"), (3, "other")])
@pytest.mark.minutes(0.7)
def test_killing_a_worker_loses_no_team_round(tmp_path, seats, which):
    protocol, db, server = team_study_on_two_workers(tmp_path, seats)
    try:
        server.start(timeout=180)
        swarm = swarm_in_background(server.url, protocol, f"t{seats}", max_seconds=240,
                                    patience=30, workers=2)
        wait_for_open_rounds(db, swarm.codes, at_least=3, timeout=150)
        killed, pid = worker_to_kill(db, which)
        os.kill(pid, signal.SIGKILL)
        swarm.thread.join(timeout=300)
        survivor, _ = lease_holder(db)
    finally:
        server.stop()
    result = swarm.result(server.output()[-3000:])
    assert survivor != killed
    assert [o.final_step for o in result.outcomes] == ["done"] * len(swarm.codes), (
        result.summary(), server.output()[-3000:])
    assert missing_acknowledged(db, result.log) == []
    teams = query(db, "SELECT * FROM teams")
    assert teams and all(team["finished_at"] is not None for team in teams)
    assert sum(team["persons"] for team in teams) == len(swarm.codes)
    clocks = query(db, "SELECT t.id, count(DISTINCT r.started_at) AS starts, "
                       "count(DISTINCT r.deadline) AS deadlines, count(*) AS people "
                       "FROM team_rounds t JOIN rounds r ON r.team_round_id = t.id GROUP BY t.id")
    assert clocks and all((c["starts"], c["deadlines"]) == (1, 1) for c in clocks)
    assert max(c["people"] for c in clocks) == seats
    assert query(db, "SELECT * FROM team_rounds WHERE closed_at IS NULL "
                     "OR closed_at < deadline") == []
