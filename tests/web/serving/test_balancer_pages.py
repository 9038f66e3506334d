"""What HAProxy answers by itself, when no worker can, is the study's calm page in the
study's language: a participant who reloads while both workers are stalled reads German
in the German demo, and the page reloads itself until the workers answer again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests
from support.servers import query

from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol

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
