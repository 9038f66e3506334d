"""A page never depends on a push: with every ``state`` push lost, it still moves on.

Real Chromium against ``study serve``. Playwright sits on the page's websocket and drops
every ``state`` push of the server (acks pass). The participant plays the practice rounds
without decorating: each round closes at its deadline unheard, and the team is formed
after practice unheard; the page asks for the state itself (``sync``) after the deadline
and while it waits, so it reaches the teammate page by itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, WebSocketRoute, sync_playwright
from support.browser import Participant
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess, quick_protocol

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.slow]
STATE_PUSH = re.compile(r'^42\["state"')


class PushDropper:
    """Forwards the page's websocket both ways but swallows every ``state`` push."""

    def __init__(self) -> None:
        self.dropped: list[str] = []
        self.syncs = 0

    def route(self, page_side: WebSocketRoute) -> None:
        server_side = page_side.connect_to_server()

        def from_page(frame: str | bytes) -> None:
            if isinstance(frame, str) and re.match(r'^42\d*\["sync"', frame):
                self.syncs += 1
            server_side.send(frame)

        def from_server(frame: str | bytes) -> None:
            if isinstance(frame, str) and STATE_PUSH.match(frame):
                self.dropped.append(frame)
                return
            page_side.send(frame)

        page_side.on_message(from_page)
        server_side.on_message(from_server)


def wait_until(page: Page, condition: Callable[[], bool], what: str) -> None:
    for _ in range(300):
        if condition():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"never: {what}")


def test_lost_pushes_strand_nobody(tmp_path):
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=4.0, practice_seconds=3.0)
    server = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log").start(timeout=120)
    dropper = PushDropper()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.route_web_socket(re.compile(r".*/socket\.io/.*"), dropper.route)
            page.goto(f"{server.url}/p/unheard-1")
            you = Participant(page, None)
            you.reach_practice({"ravens": 4, "steelers": 4})
            for number in range(1, 5):
                you.click("start-round")
                page.wait_for_selector(".bakery .cookie")
                pushed = len(dropper.dropped)
                if number < 4:  # the round closes unheard; the page asks and moves on
                    page.wait_for_selector('[data-action="start-round"]', timeout=60_000)
                    wait_until(page, lambda pushed=pushed: len(dropper.dropped) > pushed,
                               "the round's close was pushed (and lost)")
            you.step("teammate", timeout=60_000)
            browser.close()
    finally:
        server.stop()
    assert dropper.syncs >= 4, server.output()
