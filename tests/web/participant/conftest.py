"""Fixtures the participant tests share: the demo served live, Chromium, and a pool of
three-human teams."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS, LiveServer, make_app, small_pool


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """The demo study served live with its round scheduler, on the wall clock."""
    directory = tmp_path_factory.mktemp("browser")
    teammates = small_pool(directory / "pools")
    app = make_app(directory, teammates, time.time, SCHEDULER=True)
    with LiveServer(app) as live:
        yield live


@pytest.fixture(scope="module")
def browser():
    """Chromium, launched once per test module."""
    assert Path(CHROMIUM).exists(), "Chromium is missing: run `make system-packages`"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def teammates3(tmp_path_factory: pytest.TempPathFactory):
    """A small real pool of three-human teams."""
    return small_pool(tmp_path_factory.mktemp("pools3"), kits=(3, 3), humans=3)
