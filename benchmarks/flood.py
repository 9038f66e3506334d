"""Flood: what hostile socket traffic costs a real ``study serve`` (issue 11, item 3).

    python -m benchmarks.flood             # 20,000 messages + 2,000 joins, as in the issue
    python -m benchmarks.flood --quick     # a tenth of that

Two connections flood a fresh ``study serve`` (gunicorn with gevent) of the demo protocol
while bots take the study at the same time:

- a stranger that never joins: half the messages (forged cookies) and half the joins (codes
  that do not exist);
- a joined participant: the other half, forged cookies with a 200-byte payload and joins
  with its own code.

Both spread their messages evenly over a minute (the issue's rate: 22,000 in about 60 s),
up to 32 unanswered at a time (``study.bots.flood``).

The server answers the stranger without touching the database and drops it after
``PRE_JOIN_LIMIT`` messages, and drops the joined flooder after ``REFUSAL_LIMIT`` refusals in a
row (``study.web.participant.sockets``); a dropped flooder reconnects and goes on until it has
sent everything. Measured: the database's growth (after a TRUNCATE checkpoint: what is stored),
the refusals stored and counted, the server's CPU time, and the bots' cookie ack p50/p95 with
and without the flood (the bots run once alone, then once under the flood). Goal: growth under
1 MB, ack p95 under 100 ms under the flood.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import requests

from study.bots import BEHAVIOURS, Profile, StudyFacts, bot_codes, run_swarm
from study.bots.flood import Flooded, flood, stored_bytes
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[1]


def server_cpu(process: ServeProcess) -> float:
    """CPU seconds of the server's process tree so far."""
    root = psutil.Process(process.process.pid)  # type: ignore[union-attr]
    total = 0.0
    for member in [root, *root.children(recursive=True)]:
        try:
            times = member.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def bots_ack(base_url: str, facts: StudyFacts, count: int) -> np.ndarray:
    """Cookie ack latencies (ms) of ``count`` fast bots taking the whole study."""
    profiles = [Profile((0.8, 0.7), (0.5, 0.5), BEHAVIOURS["fast"], seed=i)
                for i in range(count)]
    result = run_swarm(base_url, bot_codes(count), profiles, facts=facts, max_seconds=300)
    errors = [o.error for o in result.outcomes if o.error]
    if errors:
        raise RuntimeError(f"bots failed: {errors}")
    return result.latencies() * 1000


def count_rows(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as connection:
        return int(connection.execute(sql).fetchone()[0] or 0)


def run(messages: int, joins: int, bots: int, workdir: Path,
        seconds: float = 60.0) -> dict[str, float]:
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", workdir / "quick.toml",
                              round_seconds=6.0, practice_seconds=4.0)
    facts = StudyFacts.from_protocol(load_protocol(protocol))
    db = workdir / "study.sqlite"
    server = ServeProcess(protocol, db, workdir / "pools", workdir / "serve.log").start(120)
    try:
        alone = bots_ack(server.url, facts, bots)
        requests.get(f"{server.url}/p/flooder-joined", timeout=30)
        before, cpu_before = stored_bytes(db), server_cpu(server)
        floods: list[Flooded] = [Flooded(), Flooded()]
        took = [0.0, 0.0]

        def flooder(index: int, code: str | None) -> None:
            began = time.monotonic()
            floods[index] = flood(server.url, code, messages // 2, joins // 2, seconds)
            took[index] = time.monotonic() - began

        threads = [threading.Thread(target=flooder, args=(0, None)),
                   threading.Thread(target=flooder, args=(1, "flooder-joined"))]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        flooded = bots_ack(server.url, facts, bots)
        bots_seconds = time.monotonic() - started
        for thread in threads:
            thread.join()
        growth = stored_bytes(db) - before
        cpu = server_cpu(server) - cpu_before
        unjoined = requests.get(f"{server.url}/console/live.json",  # demo: no password
                                timeout=30).json()["unjoined_messages"]
    finally:
        server.stop()
    return {
        "messages sent": sum(f.messages for f in floods),
        "joins sent": sum(f.joins for f in floods),
        "answered before a drop": sum(f.answered for f in floods),
        "reconnects after being dropped": sum(f.reconnects for f in floods) - 2,
        "flood seconds": max(took),
        "bots' seconds (from the flood's start)": bots_seconds,
        "database growth KB": growth / 1024,
        "rejection rows": count_rows(db, "SELECT count(*) FROM rejections"),
        "rejections counted": count_rows(db, "SELECT sum(count) FROM rejection_counts"),
        "rows of never-joined sockets": count_rows(
            db, "SELECT count(*) FROM rejections WHERE participant_id IS NULL"),
        "never-joined messages counted": unjoined,
        "server CPU s during the flood": cpu,
        "ack p50 ms alone": float(np.percentile(alone, 50)),
        "ack p95 ms alone": float(np.percentile(alone, 95)),
        "ack p50 ms under flood": float(np.percentile(flooded, 50)),
        "ack p95 ms under flood": float(np.percentile(flooded, 95)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the flood")
    parser.add_argument("--bots", type=int, default=3, help="participants during the flood")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        figures = run(20_000 // scale, 2_000 // scale, args.bots, Path(tmp))
    print("| measure | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value:,.1f} |" if isinstance(value, float) else
              f"| {name} | {value:,} |")


if __name__ == "__main__":
    main()
