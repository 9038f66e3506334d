"""A click between a reconnect and its join's answer is kept, sent after the join, and
applied once.

Real Chromium against ``study serve`` (gunicorn with gevent). Playwright sits on the page's
websocket. Once the consent page shows, it closes the connection; the page connects again,
and its new connection's ``join`` is held back from the server. The participant agrees
while the join is held: the page must send nothing yet (the server would refuse a message
from a connection not yet the participant's, and the click would be lost), and once the
join goes through and is answered, it sends the consent, which the server applies once.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, WebSocketRoute, sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

EVENT = re.compile(r"^42\d*(\[.*)$", re.S)  # Socket.IO over Engine.IO: an event


def event_name(frame: str | bytes) -> tuple[str, dict] | None:
    """The event a frame carries, with its payload, or None."""
    if isinstance(frame, str) and (event := EVENT.match(frame)):
        name, *args = json.loads(event.group(1))
        return name, (args[0] if args else {})
    return None


class JoinHolder:
    """Forwards each of the page's websockets both ways, closes the first on ``drop()``,
    and holds the second connection's ``join`` until ``release()``."""

    def __init__(self) -> None:
        self.connections: list[WebSocketRoute] = []
        self.held: list[str] = []
        self.after_drop: list[tuple[str, dict]] = []  # what the page sent once it reconnected
        self.released = False
        self.forward_held: Callable[[], None] | None = None

    def route(self, page_side: WebSocketRoute) -> None:
        server_side = page_side.connect_to_server()
        reconnected = bool(self.connections)
        self.connections.append(page_side)

        def from_page(frame: str | bytes) -> None:
            event = event_name(frame)
            if reconnected and event:
                self.after_drop.append(event)
                if event[0] == "join" and not self.released:
                    self.held.append(frame)  # type: ignore[arg-type]
                    self.forward_held = lambda: server_side.send(frame)
                    return
            server_side.send(frame)

        page_side.on_message(from_page)
        server_side.on_message(page_side.send)

    def drop(self) -> None:
        self.connections[0].close()

    def release(self) -> None:
        self.released = True
        assert self.forward_held is not None
        self.forward_held()


def wait_until(page: Page, condition: Callable[[], bool], what: str) -> None:
    for _ in range(300):
        if condition():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"never: {what}")


def test_a_click_before_the_reconnects_join_is_answered_is_sent_after_it_once(tmp_path):
    server = ServeProcess(ROOT / "protocols" / "demo.toml", tmp_path / "study.sqlite",
                          tmp_path / "pools", tmp_path / "serve.log").start(timeout=120)
    holder = JoinHolder()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.route_web_socket(re.compile(r".*/socket\.io/.*"), holder.route)
            page.goto(f"{server.url}/start")
            page.wait_for_selector('[data-step="consent"]', timeout=30_000)
            holder.drop()
            wait_until(page, lambda: bool(holder.held), "the reconnect's join")
            page.click('[data-action="agree"]:not([disabled])')
            page.wait_for_timeout(1_000)  # time enough for a message sent too early to show
            sent_while_held = [name for name, _ in holder.after_drop]
            assert sent_while_held == ["join"], f"sent before the join: {sent_while_held}"
            assert page.is_visible('[data-step="consent"]')
            holder.release()
            page.wait_for_selector('[data-step="themes"]', timeout=30_000)
            browser.close()
    finally:
        server.stop()
    consents = [payload for name, payload in holder.after_drop
                if name == "submit" and payload.get("step") == "consent"]
    assert len(consents) == 1
    with sqlite3.connect(tmp_path / "study.sqlite") as db:
        applied = db.execute("SELECT count(*) FROM messages WHERE msg_id = ?",
                             (consents[0]["msg_id"],)).fetchone()[0]
        refused = db.execute("SELECT count(*) FROM rejections").fetchone()[0]
        steps = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY id")]
    assert (applied, refused) == (1, 0)
    assert steps == ["consent", "themes"]
