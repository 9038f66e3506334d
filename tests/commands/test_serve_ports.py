"""``study serve --workers N`` listens where it is told (``--worker-ports``,
``--redis-port``) or on the first free ports of a documented range, and holds each port
from the moment it is chosen: nothing else can take it before the worker listens."""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import requests

from study.bots.servers import ServeProcess, free_port
from study.commands.serve import PORT_RANGE_TEXT
from study.web.serving.deploy import PORT_RANGE, Child, StartFailed, _redis_ready, hold_ports

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"


def listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def free_run(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports (below the range), among a
    thousand of this test process's own: tests on other xdist workers hold ports they
    found free, and one found 15000 free and held it while another started a server
    there."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    first = 15000 + 1000 * (worker % 4)
    for start in range(first, first + 1000 - count, count + 1):
        try:
            for sock in [listening(start + offset) for offset in range(count)]:
                sock.close()
        except OSError:
            continue
        return start
    raise AssertionError("no free ports")


def test_the_help_names_the_range_the_workers_take_ports_from():
    assert f"{PORT_RANGE.start}-{PORT_RANGE.stop - 1}" == PORT_RANGE_TEXT
    assert PORT_RANGE.stop <= 32768  # below Linux's ephemeral ports


def test_ports_from_the_range_are_held_from_the_moment_they_are_chosen():
    taken, held = hold_ports(1), []
    try:
        held = hold_ports(3)
        ports = [sock.getsockname()[1] for sock in held]
        assert all(port in PORT_RANGE for port in ports)
        assert taken[0].getsockname()[1] not in ports  # a taken port is skipped
        for port in ports:
            with pytest.raises(OSError) as caught:
                listening(port)
            assert caught.value.errno == errno.EADDRINUSE
    finally:
        for sock in [*taken, *held]:
            sock.close()


def test_given_worker_ports_are_taken_exactly_or_refused_by_number():
    start = free_run(2)
    held = hold_ports(2, start)
    assert [sock.getsockname()[1] for sock in held] == [start, start + 1]
    for sock in held:
        sock.close()
    with listening(start + 1), pytest.raises(StartFailed) as caught:
        hold_ports(2, start)
    assert str(caught.value) == (f"--worker-ports {start}: 127.0.0.1:{start + 1}: Address "
                                 "already in use")


def serve(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "study.cli", "serve", str(DEMO), "--port", str(free_port()),
         "--db", str(tmp_path / "study.sqlite"), "--pools", str(tmp_path / "pools"),
         "--quiet", *extra], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_ports_for_one_process_are_refused():
    from study.cli import main

    assert main(["serve", str(DEMO), "--worker-ports", "20000"]) == 2


@pytest.mark.slow
def test_a_taken_redis_port_is_refused_by_number(tmp_path):
    port = free_run(1)
    with listening(port):
        done = serve(tmp_path, "--workers", "2", "--redis-port", str(port))
    assert done.returncode == 2
    assert done.stderr == (f"study: error: --redis-port {port}: 127.0.0.1:{port}: Address "
                           "already in use\n"), done.stderr  # before Redis is started


@pytest.mark.slow
def test_workers_and_redis_listen_on_the_given_ports_of_a_fresh_database(tmp_path):
    start = free_run(4)
    db = tmp_path / "study.sqlite"
    server = ServeProcess(DEMO, db, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--workers", "3", "--worker-ports", str(start),
                                 "--redis-port", str(start + 3)))
    try:
        server.start(timeout=180)
        for port in range(start, start + 3):
            assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).ok
        assert redis.Redis(port=start + 3).ping()
        assert requests.get(f"{server.url}/healthz", timeout=10).ok
    finally:
        server.stop()
    assert "Traceback" not in server.output(), server.output()[-3000:]
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_why_redis_exited_is_read_before_the_next_port_is_chosen():
    """Redis that lost its port to another program exits, and says so on a line the
    reader may not have taken yet: two servers starting at once then stopped at the taken
    port instead of trying the next one. Here the line comes after the exit."""
    late = Child("redis-server", ["sh", "-c", "(sleep 0.3; echo 'bind: Address already in "
                                  "use') & exit 1"], forward=False,
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert not _redis_ready(late)
    assert late.said("Address already in use")
