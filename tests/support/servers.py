"""Shared parts of the tests that run ``study serve`` as real processes with bots."""

from __future__ import annotations

import sqlite3
import threading
import time
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

from study.bots import (
    BEHAVIOURS,
    Behaviour,
    Profile,
    StudyFacts,
    SwarmResult,
    bot_codes,
    run_swarm,
)
from study.protocol.loader import load_protocol

# Bots that decorate, dawdle, refresh, idle and drop their connection.
BEHAVIOUR_MIX = (BEHAVIOURS["fast"], replace(BEHAVIOURS["slow"], read_seconds=0.2),
                 BEHAVIOURS["refreshing"], replace(BEHAVIOURS["idle"], read_seconds=0.2),
                 BEHAVIOURS["fast"], Behaviour("disconnecting", refresh_at=0.2, away_seconds=1.0))


def query(db: Path, sql: str, *params) -> list[sqlite3.Row]:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def open_rounds(db: Path, codes: list[str]) -> list[sqlite3.Row]:
    marks = ",".join("?" * len(codes))
    return query(db, "SELECT r.*, p.code FROM rounds r JOIN participants p ON "
                     f"p.id = r.participant_id WHERE r.closed_at IS NULL AND p.code IN ({marks})",
                 *codes)


def wait_for_open_rounds(db: Path, codes: list[str], at_least: int, timeout: float) -> None:
    """Until ``at_least`` bots are inside a running round, past its first half second."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        now = time.time()
        if db.exists() and sum(1 for r in open_rounds(db, codes)
                               if r["started_at"] + 0.5 < now < r["deadline"] - 0.3) >= at_least:
            return
        time.sleep(0.05)
    raise TimeoutError("the bots never were in rounds together")


@dataclass
class BackgroundSwarm:
    """Bots of every behaviour of ``BEHAVIOUR_MIX`` playing a served study in a thread of
    their own while a test breaks something."""

    thread: threading.Thread
    codes: list[str]
    results: list[SwarmResult]

    def result(self, context: str = "") -> SwarmResult:
        """The swarm's result; ``context`` (e.g. the server's log) explains a failure."""
        assert not self.thread.is_alive() and self.results, context
        return self.results[0]


def worker_of(url: str, code: str) -> str:
    """The worker the balancer routes ``code`` to, as its answer names it."""
    with urllib.request.urlopen(f"{url}/healthz?route={code}", timeout=10) as response:
        worker = response.headers["X-Study-Worker"]
    assert worker, "the balancer's answer names no worker"
    return worker


def codes_on_every_worker(url: str, count: int, prefix: str, workers: int) -> list[str]:
    """``count`` fresh codes the balancer spreads over all ``workers``: random codes are
    hashed, and six of them land on one of two workers once in 32 draws."""
    while True:
        codes = bot_codes(count, prefix)
        if len({worker_of(url, code) for code in codes}) == workers:
            return codes


def swarm_in_background(url: str, protocol: Path, prefix: str, max_seconds: float,
                        patience: float, workers: int) -> BackgroundSwarm:
    """The swarm starts on every one of the server's ``workers``, so a killed worker
    always had someone on it."""
    codes = codes_on_every_worker(url, len(BEHAVIOUR_MIX), prefix, workers)
    profiles = [Profile((0.8, 0.6), (0.6, 0.4), behaviour, seed=i)
                for i, behaviour in enumerate(BEHAVIOUR_MIX)]
    facts = StudyFacts.from_protocol(load_protocol(protocol))
    results: list[SwarmResult] = []
    thread = threading.Thread(target=lambda: results.append(run_swarm(
        url, codes, profiles, facts=facts, max_seconds=max_seconds, patience=patience)))
    thread.start()
    return BackgroundSwarm(thread, codes, results)


def processes_serving(db: Path, workers: int, timeout: float) -> set[str]:
    """The processes with a live connection, once all ``workers`` have one: a bot that
    refreshes or drops its connection has none for a moment, and a worker whose bots all
    do so at once looks empty. As they are at the timeout if that never comes."""
    give_up = time.monotonic() + timeout
    while True:
        served = {row["process"] for row in query(db, "SELECT process FROM connections")}
        if len(served) == workers or time.monotonic() > give_up:
            return served
        time.sleep(0.05)


def lease_holder(db: Path) -> tuple[str, int]:
    [row] = query(db, "SELECT l.holder, p.pid FROM leases l JOIN processes p ON "
                      "p.id = l.holder")
    return row["holder"], row["pid"]


def worker_to_kill(db: Path, which: str) -> tuple[str, int]:
    """The process id and pid of the worker holding the scheduler's lease (``holder``) or
    of another live one (``other``), which keeps the rounds of the people on it."""
    if which == "holder":
        return lease_holder(db)
    holder, _ = lease_holder(db)
    row = query(db, "SELECT id, pid FROM processes WHERE id != ? ORDER BY last_seen DESC "
                    "LIMIT 1", holder)[0]
    return row["id"], row["pid"]
