"""What HAProxy answers by itself, when no worker can, is the study's calm page in the
study's language: a participant who reloads while both workers are stalled reads German
in the German demo, and the page reloads itself until the workers answer again. It
carries its frame's styles inline (no worker is there to serve the stylesheet), so it
looks like the study's pages in Chromium on a desktop and a phone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright
from support.browser import DESKTOP, PHONE, assert_fits, frame_styles, screenshot_directory
from support.servers import query
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol
from study.web.serving.unavailable import balancer_error_files

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def answer_once(url: str, status: int, timeout: float) -> requests.Response:
    """The first answer with ``status`` (a stalled worker leaves a request hanging: each
    try gives up after a few seconds)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        try:
            reply = requests.get(url, timeout=3)
        except requests.RequestException:
            continue
        if reply.status_code == status:
            return reply
        time.sleep(0.5)
    raise TimeoutError(f"{url} never answered {status}")


@pytest.mark.minutes(0.45)
def test_stalled_workers_leave_the_balancer_answering_the_calm_page_in_german(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo-de.toml", tmp_path / "de.toml")
    texts = load_protocol(protocol).texts
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--workers", "2"))
    pids: list[int] = []
    try:
        server.start(timeout=180)
        pids = [row["pid"] for row in query(db, "SELECT pid FROM processes")]
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        calm = answer_once(f"{server.url}/", 503, timeout=60)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        answer_once(f"{server.url}/", 200, timeout=60)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        server.stop()
    assert texts["storage_wait"] in calm.text and 'lang="de"' in calm.text
    assert "No server is available" not in calm.text
    assert calm.headers["Refresh"] == calm.headers["Retry-After"]
    assert calm.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "<style>" in calm.text and 'rel="stylesheet"' not in calm.text


@pytest.mark.browser
def test_the_balancers_calm_page_is_styled_without_a_worker(tmp_path):
    """HAProxy's copy, every request from it refused (as while no worker answers), is
    drawn in the study's frame: the sign, the card, its heading's serif font."""
    files = balancer_error_files(load_protocol(ROOT / "protocols" / "demo-de.toml"), tmp_path)
    html = files[503].read_bytes().split(b"\r\n\r\n", 1)[1].decode("utf-8")
    shots = screenshot_directory(tmp_path)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                page = chromium.new_page(viewport=viewport, device_scale_factor=2)
                page.route("**/*", lambda route: route.abort())
                page.set_content(html)
                frame = frame_styles(page)
                assert frame["heading"].startswith("Georgia")
                assert frame["sign"] == "rgb(90, 56, 37)" and frame["border"] == "3px"
                assert_fits(page, f"the balancer's calm page on a {name}")
                page.screenshot(path=str(shots / f"balancer-calm-de-{name}.png"),
                                full_page=True)
                page.close()
        finally:
            chromium.close()
