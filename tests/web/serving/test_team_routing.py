"""Teammates on one process under ``study serve --workers 2``: light bots (which connect as
the page does, asking for their team's route once in a team) form real teams; every
member's Socket.IO connection then ends on one worker, and the station pushes between
teammates never go through the message queue (each process counts what it publishes).
"""

from __future__ import annotations

import threading
import time

import pytest
from support.servers import query
from support.teams import team_study_on_two_workers

from study.bots.light import FAST, SwarmPlan, SwarmReport, run_light_swarm
from study.bots.participant import StudyFacts
from study.protocol.loader import load_protocol

pytestmark = pytest.mark.slow

PEOPLE = 6
RUN_SECONDS = 150.0
# Members' connections per team and the processes they are on, from the connections table
# every process keeps of its own.
PLACES = ("SELECT s.team_id, count(DISTINCT c.code) AS members, "
          "count(DISTINCT c.process) AS processes FROM connections c "
          "JOIN participants p ON p.code = c.code JOIN seats s ON s.participant_id = p.id "
          "GROUP BY s.team_id")


def wait_for_team_rounds(db, timeout: float) -> None:
    """Until every bot is in a running team round."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if db.exists() and len(query(db, "SELECT * FROM rounds WHERE closed_at IS NULL AND "
                                         "team_round_id IS NOT NULL")) == PEOPLE:
            return
        time.sleep(0.05)
    raise TimeoutError("the bots never were in team rounds together")


def swarm(url: str, protocol, prefix: str) -> tuple[threading.Thread, list[SwarmReport]]:
    now = time.time()
    plan = SwarmPlan(url, PEOPLE, now, 0.5, now, now + RUN_SECONDS, pace=FAST,
                     facts=StudyFacts.from_protocol(load_protocol(protocol)), patience=30.0,
                     prefix=prefix, recycle=False)
    reports: list[SwarmReport] = []
    thread = threading.Thread(target=lambda: reports.append(run_light_swarm(plan)))
    thread.start()
    return thread, reports


@pytest.mark.parametrize("seats", [2, 3])
@pytest.mark.minutes(0.75)
def test_teammates_share_a_worker_and_push_in_memory(tmp_path, seats):
    protocol, db, server = team_study_on_two_workers(tmp_path, seats)
    try:
        server.start(timeout=180)
        thread, reports = swarm(server.url, protocol, f"r{seats}")
        wait_for_team_rounds(db, timeout=120)
        places = query(db, PLACES)
        thread.join(timeout=RUN_SECONDS + 60)
        time.sleep(2.5)  # each process stores its counts every second
        published = {row["name"]: row["count"]
                     for row in query(db, "SELECT * FROM counters WHERE name LIKE 'queued:%'")}
    finally:
        server.stop()
    assert reports, server.output()[-3000:]
    tally = reports[0].tally
    assert tally.finished == PEOPLE, (tally, server.output()[-3000:])
    assert tally.rerouted == PEOPLE  # every person connected again once in a team
    teams = query(db, "SELECT * FROM teams")
    assert len(teams) == PEOPLE // seats
    assert [(row["members"], row["processes"]) for row in places] == [(seats, 1)] * len(teams)
    assert tally.stations_seen  # teammates told each other of their cookies ...
    assert published.get("queued:stations", 0) == 0, published  # ... never through Redis
