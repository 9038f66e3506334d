"""A lost acknowledgement loses nothing: the page sends the message again with the same id.

Real Chromium against ``study serve`` (gunicorn with gevent). Playwright sits on the page's
websocket and drops the server's first acknowledgement of the consent; the page must send
the consent again after its ack timeout (the state push alone already moved the page on),
the server must apply it once (the repeat is a duplicate), and the participant must land
on the next page.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import WebSocketRoute, sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Socket.IO over Engine.IO: "4" message, "2" event or "3" ack, then the ack id.
EVENT_WITH_ACK = re.compile(r"^42(\d+)(\[.*)$", re.S)
ACK = re.compile(r"^43(\d+)\[")


class AckDropper:
    """Forwards the page's websocket both ways but swallows the first ack of a submit."""

    def __init__(self) -> None:
        self.submit_ids: set[str] = set()
        self.dropped: list[str] = []
        self.sent: list[dict] = []

    def route(self, page_side: WebSocketRoute) -> None:
        server_side = page_side.connect_to_server()

        def from_page(frame: str | bytes) -> None:
            if isinstance(frame, str) and (event := EVENT_WITH_ACK.match(frame)):
                name, *args = json.loads(event.group(2))
                if name == "submit":
                    self.submit_ids.add(event.group(1))
                    self.sent.append(args[0])
            server_side.send(frame)

        def from_server(frame: str | bytes) -> None:
            if (isinstance(frame, str) and (ack := ACK.match(frame))
                    and ack.group(1) in self.submit_ids and not self.dropped):
                self.dropped.append(frame)
                return
            page_side.send(frame)

        page_side.on_message(from_page)
        server_side.on_message(from_server)


def test_a_lost_ack_is_resent_with_the_same_id_and_applied_once(tmp_path):
    server = ServeProcess(ROOT / "protocols" / "demo.toml", tmp_path / "study.sqlite",
                          tmp_path / "pools", tmp_path / "serve.log").start(timeout=120)
    dropper = AckDropper()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.route_web_socket(re.compile(r".*/socket\.io/.*"), dropper.route)
            page.goto(f"{server.url}/start")
            page.wait_for_selector('[data-step="consent"]', timeout=30_000)
            page.click('[data-action="agree"]:not([disabled])')
            page.wait_for_selector('[data-step="themes"]', timeout=30_000)
            for _ in range(300):  # the resend comes after the page's ack timeout
                if len(dropper.sent) >= 2:
                    break
                page.wait_for_timeout(100)
            page.wait_for_timeout(500)  # and its answer
            browser.close()
    finally:
        server.stop()
    assert len(dropper.dropped) == 1, server.output()
    consents = [m for m in dropper.sent if m.get("step") == "consent"]
    assert len(consents) == 2 and consents[0]["msg_id"] == consents[1]["msg_id"]
    with sqlite3.connect(tmp_path / "study.sqlite") as db:
        applied = db.execute("SELECT count(*) FROM messages WHERE msg_id = ?",
                             (consents[0]["msg_id"],)).fetchone()[0]
        repeats = db.execute("SELECT reason FROM rejections WHERE msg_id = ?",
                             (consents[0]["msg_id"],)).fetchall()
        steps = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY id")]
    assert applied == 1 and repeats == [("duplicate",)]
    assert steps == ["consent", "themes"]
