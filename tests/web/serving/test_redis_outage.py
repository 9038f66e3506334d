"""A Redis outage strands nobody: ``study serve --workers 2`` on a Redis the test stops
mid-round and starts again on the same port.

While Redis is away every push between the processes is lost ("Cannot publish to
redis"). A round closes on the process its person is connected to, which tells them in
memory, so few pushes cross: the rounds of a person reconnecting, or connected to no
process, close on the lease holder. The bots wait as the page does for a push that did
not come: they ask for the state (``sync``) once a deadline is past and then every few
seconds, so every bot still finishes the study, and nothing acknowledged is missing. The
rate limits fall back to each process's memory, and a page loaded during the outage
still loads.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
import requests
from support.servers import query, swarm_in_background, wait_for_open_rounds

from study.bots.audit import missing_acknowledged
from study.bots.servers import ServeProcess, free_port, quick_protocol

ROOT = Path(__file__).resolve().parents[3]
OUTAGE_SECONDS = 15.0
pytestmark = pytest.mark.slow


class RedisServer:
    """A private Redis without persistence on a fixed loopback port: stopped and started
    again on that port, as a restarted Redis would be."""

    def __init__(self, directory: Path) -> None:
        assert shutil.which("redis-server"), "needs Debian's redis-server"
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = redis.Redis(host="127.0.0.1", port=self.port)
        give_up = time.monotonic() + 30
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > give_up or self.process.poll() is not None:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.mark.minutes(0.5)
def test_a_redis_restart_mid_round_strands_no_bot(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0)
    db = tmp_path / "study.sqlite"
    queue = RedisServer(tmp_path)
    queue.start()
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--workers", "2", "--message-queue", queue.url))
    try:
        server.start(timeout=180)
        swarm = swarm_in_background(server.url, protocol, "outage", max_seconds=240,
                                    patience=60, workers=2)
        wait_for_open_rounds(db, swarm.codes, at_least=3, timeout=90)
        queue.stop()
        stopped = time.time()
        # A page reloaded meanwhile still loads (the rate limits fall back to memory).
        reloaded = requests.get(f"{server.url}/p/{swarm.codes[0]}", timeout=30).status_code
        while time.time() - stopped < OUTAGE_SECONDS:  # rounds close meanwhile, unheard
            time.sleep(0.5)
        queue.start()
        unheard = query(db, "SELECT id FROM rounds WHERE closed_at BETWEEN ? AND ?",
                        stopped, stopped + OUTAGE_SECONDS)
        swarm.thread.join(timeout=300)
    finally:
        server.stop()
        queue.stop()
    result = swarm.result(server.output()[-3000:])
    assert unheard, "rounds closed while Redis was away"
    assert reloaded == 200
    assert [o.final_step for o in result.outcomes] == ["done"] * len(swarm.codes), (
        result.summary(), server.output()[-3000:])
    assert missing_acknowledged(db, result.log) == []
    rounds = query(db, "SELECT * FROM rounds")
    assert rounds and all(r["closed_at"] >= r["deadline"] for r in rounds)
