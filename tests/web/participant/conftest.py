"""Fixtures the participant tests share: the demo served live and a pool of three-human
teams."""

from __future__ import annotations

import time

import pytest
from support.web import LiveServer, make_app, small_pool


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """The demo study served live with its round scheduler, on the wall clock."""
    directory = tmp_path_factory.mktemp("browser")
    teammates = small_pool(directory / "pools")
    app = make_app(directory, teammates, time.time, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


@pytest.fixture(scope="module")
def teammates3(tmp_path_factory: pytest.TempPathFactory):
    """A small real pool of three-human teams."""
    return small_pool(tmp_path_factory.mktemp("pools3"), kits=(3, 3), humans=3)
