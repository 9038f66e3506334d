"""Fixtures most web tests share: a small real pool, a clock that moves when told, an app;
and how the suite shares the machine when it runs in parallel (``make test``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from web_support import FakeClock, make_app, small_pool

from study.bots.servers import free_port

# Tests that drive Chromium at a person's pace run against the round clock, so the suite's
# other tests (CPU-bound solving, pools, reports) yield the processor to them: at most two
# such tests run at once, each in its own lane, and every other test runs at a lower
# priority. Priorities change only where allowed (as root, as in CI); elsewhere the tests
# run as they are.
HUMAN_PACE_LANES = 2
CPU_BOUND_NICENESS = 10


def runs_at_human_pace(item: pytest.Item) -> bool:
    return (item.get_closest_marker("browser") is not None
            and item.get_closest_marker("slow") is not None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each module of human-pace tests goes to one lane (``--dist loadgroup``)."""
    modules = sorted({item.nodeid.split("::")[0] for item in items if runs_at_human_pace(item)})
    lanes = {module: f"human-pace-{index % HUMAN_PACE_LANES}"
             for index, module in enumerate(modules)}
    for item in items:
        lane = lanes.get(item.nodeid.split("::")[0])
        if lane is not None:
            item.add_marker(pytest.mark.xdist_group(lane))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In a parallel run, a human-pace test (and the servers and browser it starts) gets the
    processor first."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    wanted = 0 if runs_at_human_pace(item) else CPU_BOUND_NICENESS
    # lowering the niceness needs root: elsewhere the test runs at the priority it has
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, wanted)


@pytest.fixture(scope="module")
def teammates(tmp_path_factory: pytest.TempPathFactory):
    """A real pool of a few thousand teams, built once per test module."""
    return small_pool(tmp_path_factory.mktemp("pools"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(tmp_path: Path, teammates, clock: FakeClock):
    """The demo study on a temporary database, its clock in the test's hands."""
    return make_app(tmp_path, teammates, clock)


@pytest.fixture
def redis_url(tmp_path):
    """A private Redis on a free loopback port, without persistence; stopped afterwards."""
    assert shutil.which("redis-server"), "needs Debian's redis-server (make test installs it)"
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        give_up = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > give_up or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)
