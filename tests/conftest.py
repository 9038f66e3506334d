"""Fixtures most web tests share: a small real pool, a clock that moves when told, an app."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_support import FakeClock, make_app, small_pool


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
