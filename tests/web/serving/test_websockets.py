"""A participant page's websocket is not compressed, the console's is
(``study.web.serving.websockets``): what a real ``study serve`` (gunicorn, gevent) answers
to a browser's handshake, which always offers permessage-deflate."""

from __future__ import annotations

import base64
import os
import socket
from pathlib import Path

import pytest

from study.bots.servers import ServeProcess
from study.web.serving.websockets import OFFER, PlainParticipantSockets

ROOT = Path(__file__).resolve().parents[3]
BROWSERS_OFFER = "permessage-deflate; client_max_window_bits"  # Chromium's


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("websockets")
    served = ServeProcess(ROOT / "protocols" / "demo.toml", tmp / "study.sqlite",
                          tmp / "pools", tmp / "serve.log")
    served.start(timeout=120)
    yield served
    served.stop()


def handshake(port: int, query: str) -> dict[str, str]:
    """Open a Socket.IO websocket as a browser does; the 101 answer's headers."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET /socket.io/?EIO=4&transport=websocket{query} HTTP/1.1\r\n"
               f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               f"Sec-WebSocket-Extensions: {BROWSERS_OFFER}\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(4096)
            assert chunk, answer
            answer += chunk
    status, *lines = answer.split(b"\r\n\r\n")[0].decode().split("\r\n")
    assert status.startswith("HTTP/1.1 101"), status
    return {name.lower(): value.strip() for name, _, value in
            (line.partition(":") for line in lines)}


def test_a_participant_pages_websocket_is_plain(server):
    headers = handshake(server.port, "&route=anycode1")
    assert headers["upgrade"].lower() == "websocket"
    assert "sec-websocket-extensions" not in headers


def test_the_consoles_websocket_keeps_compression(server):
    headers = handshake(server.port, "")
    assert headers["sec-websocket-extensions"].startswith("permessage-deflate")


@pytest.mark.parametrize(("query", "kept"), [
    ("EIO=4&transport=websocket&route=ab12cd34", False),
    ("route=team-7&EIO=4", False),
    ("EIO=4&transport=websocket", True),
    ("EIO=4&transport=websocket&route=", True),  # no route named: not a page's socket
    ("EIO=4&router=x", True),
])
def test_only_a_routed_sockets_offer_is_taken_away(query, kept):
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        return [b""]

    PlainParticipantSockets(app)({"QUERY_STRING": query, OFFER: BROWSERS_OFFER}, None)
    assert (OFFER in seen) is kept
