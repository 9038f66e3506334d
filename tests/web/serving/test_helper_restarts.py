"""``study serve --workers 2`` starts its balancer (HAProxy) and its queue (Redis) again when
one dies, and the study goes on: killed with SIGKILL mid-study, each is back (a new
process, logged), ``/healthz`` answers through the balancer again, and every bot plays to
the end with nothing acknowledged missing. One that keeps dying stops the study, which
then says that running the same command resumes everyone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
import requests
from support.servers import swarm_in_background, wait_for_open_rounds

from study.bots.audit import missing_acknowledged
from study.bots.servers import ServeProcess, quick_protocol, wait_healthy
from study.web.serving.deploy import RESTARTS

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def helper_pid(server: ServeProcess, name: str) -> int | None:
    """The pid of ``study serve``'s child called ``name`` (``haproxy``, ``redis-server``)."""
    assert server.process is not None
    for child in psutil.Process(server.process.pid).children():
        if child.name() == name and child.status() != psutil.STATUS_ZOMBIE:
            return child.pid
    return None


def await_line(server: ServeProcess, line: str, count: int = 1,
               timeout: float = 60.0) -> None:
    """Until ``study serve`` has logged ``line`` ``count`` times."""
    give_up = time.monotonic() + timeout
    while server.output().count(line) < count:
        assert time.monotonic() < give_up, f"no {line!r}: {server.output()[-3000:]}"
        assert server.process.poll() is None, server.output()[-3000:]
        time.sleep(0.05)


def kill_and_await_another(server: ServeProcess, name: str) -> None:
    """SIGKILL the helper ``name``, and wait until ``study serve`` runs another."""
    killed = helper_pid(server, name)
    assert killed is not None, f"no {name} under study serve"
    restarted = server.output().count(f"study serve: {name} runs again")
    os.kill(killed, signal.SIGKILL)
    await_line(server, f"study serve: {name} runs again", restarted + 1)
    assert helper_pid(server, name) not in (None, killed)


def served(tmp_path: Path, protocol: Path) -> ServeProcess:
    return ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                        tmp_path / "serve.log", extra=("--workers", "2"))


@pytest.mark.minutes(2)
def test_killed_balancer_and_queue_are_started_again_and_the_study_goes_on(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0)
    server = served(tmp_path, protocol)
    db = tmp_path / "study.sqlite"
    try:
        server.start(timeout=180)
        await_line(server, "study serve: serving: ")
        swarm = swarm_in_background(server.url, protocol, "hr", max_seconds=200,
                                    patience=60, workers=2)
        answers = {}
        for name in ("haproxy", "redis-server"):
            wait_for_open_rounds(db, swarm.codes, at_least=2, timeout=120)
            kill_and_await_another(server, name)
            wait_healthy(server.url, timeout=60)
            answers[name] = requests.get(f"{server.url}/healthz", timeout=30).status_code
        swarm.thread.join(timeout=300)
    finally:
        server.stop()
    output = server.output()
    result = swarm.result(output[-3000:])
    assert answers == {"haproxy": 200, "redis-server": 200}
    assert [o.final_step for o in result.outcomes] == ["done"] * len(swarm.codes), (
        result.summary(), output[-3000:])
    assert missing_acknowledged(db, result.log) == []
    for name in ("haproxy", "redis-server"):
        assert f"study serve: starting {name} again (1 of at most {RESTARTS} restarts" \
               in output, output[-3000:]
        assert f"study serve: {name} runs again (pid " in output


@pytest.mark.minutes(0.5)
def test_a_balancer_that_keeps_dying_stops_the_study_saying_how_to_resume(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml")
    server = served(tmp_path, protocol)
    try:
        server.start(timeout=180)
        await_line(server, "study serve: serving: ")
        for _ in range(RESTARTS):
            kill_and_await_another(server, "haproxy")
        os.kill(helper_pid(server, "haproxy"), signal.SIGKILL)
        assert server.process.wait(timeout=60) == 1
    finally:
        server.stop()
    output = server.output()
    assert f"study serve: haproxy was started again {RESTARTS} times within 10 minutes and " \
           "is gone again: the study stops; every participant's place is stored in the " \
           "database: run the same command again (study serve " in output, output[-3000:]
    assert "and everyone resumes where they were" in output
