"""A start link whose id is 10 kB, longer than the server reads, gets the study's page for
a link without a valid participant id (in its words, with its headers), not gunicorn's
bare "414 Request Line is too large"; the server goes on serving."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
import requests
from support.recruitment import recruitment_protocol

from study.bots.servers import ServeProcess
from study.protocol.loader import load_protocol

pytestmark = pytest.mark.slow


def test_a_ten_kilobyte_id_gets_the_studys_page_for_an_invalid_id(tmp_path: Path):
    protocol = recruitment_protocol(tmp_path / "prolific.toml")
    texts = load_protocol(protocol).texts
    server = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log")
    try:
        server.start(timeout=180)
        reply = requests.get(f"{server.url}/start?PROLIFIC_PID={'a' * 10_000}", timeout=30)
        healthy = requests.get(f"{server.url}/healthz", timeout=30)
    finally:
        server.stop()
    assert reply.status_code == 414
    page = html.unescape(reply.text)
    assert texts["bad_id_title"] in page and texts["bad_id_text"] in page
    assert "Request Line is too large" not in reply.text
    assert reply.headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert healthy.status_code == 200
    assert "a" * 100 not in server.output()
