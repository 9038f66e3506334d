"""A full disk in real Chromium: the page shows a calm "one moment" banner, keeps the
participant's answer and sends it again until the server can store it, then goes on by
itself once space is freed; a page load meanwhile gets the calm 503 page.

``study serve`` (gunicorn with gevent) with its database on a small tmpfs that a file fills.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from support.storage import fill, pin_the_log, tmpfs
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_page_waits_calmly_on_a_full_disk_and_goes_on_once_space_is_freed(tmp_path):
    with tmpfs(tmp_path / "disk", "16m") as disk:
        db = disk / "study.sqlite"
        server = ServeProcess(ROOT / "protocols" / "demo.toml", db, tmp_path / "pools",
                              tmp_path / "serve.log").start(timeout=120)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                     args=CHROMIUM_ARGS)
                page = browser.new_page()
                page.goto(f"{server.url}/start")
                page.wait_for_selector('[data-step="consent"]', timeout=30_000)
                pin = pin_the_log(db)
                filler = fill(disk)
                page.click('[data-action="agree"]:not([disabled])')
                banner = page.wait_for_selector("#one-moment", state="visible",
                                                timeout=30_000)
                assert re.search(r"One moment", banner.inner_text())
                assert page.query_selector('[data-step="consent"]') is not None
                other = browser.new_page()
                response = other.goto(f"{server.url}/p/newcomer")
                assert response.status == 503 and response.headers["retry-after"]
                assert "One moment" in other.inner_text("main")
                filler.unlink()
                pin.close()
                page.wait_for_selector('[data-step="themes"]', timeout=60_000)
                page.wait_for_selector("#one-moment", state="hidden", timeout=10_000)
                browser.close()
        finally:
            server.stop()
        with sqlite3.connect(db) as connection:
            steps = [s for (s,) in connection.execute("SELECT step FROM steps ORDER BY id")]
            reasons = [r for (r,) in connection.execute("SELECT reason FROM rejections")]
    assert steps == ["consent", "themes"]
    assert reasons == []
    assert "Traceback" not in server.output()
