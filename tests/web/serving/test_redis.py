"""Several server processes: Flask-SocketIO's message queue on Redis, one shared database.

Two ``study serve`` processes share the SQLite file and a Redis queue; the first to start
holds the round scheduler's lease, so only it closes rounds. Bots connected to the second
process must still get every push the scheduler sends (rounds closing) through Redis,
finish the study, and find everything they were acknowledged in the database, with no
"database is locked" anywhere. Needs Debian's ``redis-server``; the test starts its own on
a free loopback port.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from study.bots import BEHAVIOURS, Profile, StudyFacts, SwarmResult, bot_codes, run_swarm
from study.bots.audit import closing_drift, missing_acknowledged
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[3]


def sqlite_rows(db: Path, sql: str) -> list[dict]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute(sql)]
pytestmark = pytest.mark.slow


@pytest.mark.minutes(0.5)
def test_two_processes_share_pushes_through_redis(tmp_path, redis_url):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=2.5, practice_seconds=1.5)
    db, pools = tmp_path / "study.sqlite", tmp_path / "pools"
    queue = ("--message-queue", redis_url)
    ticking = ServeProcess(protocol, db, pools, tmp_path / "a.log", extra=queue)
    quiet = ServeProcess(protocol, db, pools, tmp_path / "b.log", extra=queue)
    facts = StudyFacts.from_protocol(load_protocol(protocol))
    results: dict[str, SwarmResult] = {}
    codes = {"a": bot_codes(2, "onA"), "b": bot_codes(3, "onB")}
    try:
        ticking.start()
        quiet.start()

        def swarm(name: str, url: str) -> None:
            profiles = [Profile((0.8, 0.6), (0.7, 0.3), BEHAVIOURS[b], seed=i)
                        for i, b in enumerate(("fast", "refreshing", "fast")[:len(codes[name])])]
            results[name] = run_swarm(url, codes[name], profiles, facts=facts, max_seconds=90,
                                      patience=10)

        threads = [threading.Thread(target=swarm, args=("a", ticking.url)),
                   threading.Thread(target=swarm, args=("b", quiet.url))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        processes = sqlite_rows(db, "SELECT * FROM processes ORDER BY started_at")
        leases = sqlite_rows(db, "SELECT * FROM leases")
    finally:
        quiet.stop()
        ticking.stop()
    assert set(results) == {"a", "b"}, ticking.output() + quiet.output()
    for name, result in results.items():
        assert [o.final_step for o in result.outcomes] == ["done"] * len(codes[name]), (
            result.summary(), ticking.output()[-2000:], quiet.output()[-2000:])
        assert missing_acknowledged(db, result.log) == []
    # The first process holds the lease: the second's bots' rounds were closed by it, never
    # before their deadline, and the pushes that told them so crossed over Redis (how soon
    # after the deadline is a benchmark figure, not a test).
    drift = closing_drift(db, codes["b"])
    assert len(drift) == 3 * 8 and (drift >= 0).all()
    assert len(processes) == 2 and [lease["holder"] for lease in leases] == [
        processes[0]["id"]]
    for server in (ticking, quiet):
        assert "database is locked" not in server.output()
