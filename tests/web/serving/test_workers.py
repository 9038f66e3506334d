"""``study serve --workers 2``: two gunicorn processes behind HAProxy, Redis between them.

Bots take part through the one balanced address. A worker is killed with SIGKILL
mid-round, the one that holds the round scheduler's lease or the other: each keeps the
rounds of the people connected to it, so either way its participants reconnect through
the balancer, the survivor holds the lease and closes their rounds, every round still
closes at or after its deadline (as a deadline, not a recovery: the study never went
down), nothing acknowledged is missing and no write ever met "database is locked".
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.servers import (
    lease_holder,
    processes_serving,
    query,
    swarm_in_background,
    wait_for_open_rounds,
    worker_to_kill,
)

from study.bots.audit import missing_acknowledged
from study.bots.servers import ServeProcess, quick_protocol

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("which", ["holder", "other"])
@pytest.mark.minutes(0.5)
def test_killing_a_worker_loses_nothing(tmp_path, which):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0)
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--workers", "2"))
    try:
        server.start(timeout=180)
        swarm = swarm_in_background(server.url, protocol, "w2", max_seconds=150, patience=30,
                                    workers=2)
        wait_for_open_rounds(db, swarm.codes, at_least=3, timeout=90)
        served = processes_serving(db, 2, timeout=60)
        killed, pid = worker_to_kill(db, which)
        os.kill(pid, signal.SIGKILL)
        swarm.thread.join(timeout=200)
        survivor, _ = lease_holder(db)
    finally:
        server.stop()
    result = swarm.result(server.output()[-3000:])
    assert len(served) == 2, "the balancer spread the participants over both workers"
    assert survivor != killed
    assert [o.final_step for o in result.outcomes] == ["done"] * len(swarm.codes), (
        result.summary(), server.output()[-3000:])
    assert missing_acknowledged(db, result.log) == []
    assert "database is locked" not in server.output()
    rounds = query(db, "SELECT * FROM rounds")
    assert rounds and all(r["closed_at"] >= r["deadline"] for r in rounds)
    assert {r["close_reason"] for r in rounds} == {"deadline"}
