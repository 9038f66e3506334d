"""Fixtures tests share: a small real pool, a clock that moves when told, an app, a private
Redis, and Chromium."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from playwright.sync_api import sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS, FakeClock, make_app, small_pool

from study.bots.servers import free_port


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (their ``minutes`` mark): pytest-xdist hands the tests out in
    this order, so the tests of minutes start at once and the short ones fill the gaps,
    and a run is no longer than its longest test where it can be."""
    items.sort(key=lambda item: -expected_minutes(item))


def expected_minutes(item: pytest.Item) -> float:
    mark = item.get_closest_marker("minutes")
    return float(mark.args[0]) if mark else 0.0


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


@pytest.fixture(scope="module")
def browser():
    """Chromium, launched once per test module."""
    assert Path(CHROMIUM).exists(), "Chromium is missing: run `make system-packages`"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
