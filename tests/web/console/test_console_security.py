"""Console hardening (docs/study-day.md): server-side sessions that logout revokes, cookie
flags, security headers on every response, proxy headers trusted only when configured, and
a login limit per client address that other addresses cannot turn into a lockout, shared
by every server process through Redis."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests
from support.web import DEMO, FakeClock, make_app

from study.bots.servers import ServeProcess, quick_protocol

PASSWORD = "correct horse"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def app(tmp_path, teammates, monkeypatch):
    monkeypatch.setenv("STUDY_CONSOLE_PASSWORD", PASSWORD)
    return make_app(tmp_path, teammates, FakeClock())


def csrf_of(html: bytes | str) -> str:
    text = html.decode() if isinstance(html, bytes) else html
    return re.search(r'name="csrf_token" value="([^"]+)"', text).group(1)


def log_in(client: Any, password: str = PASSWORD, **request: Any) -> Any:
    token = csrf_of(client.get("/console/login", **request).data)
    return client.post("/console/login", data={"password": password, "csrf_token": token},
                       **request)


def test_a_session_cookie_kept_from_before_logout_opens_nothing(app):
    client = app.test_client()
    assert log_in(client).status_code == 302
    kept = client.get_cookie("session").value
    assert client.get("/console/live.json").status_code == 200
    token = csrf_of(client.get("/console/").data)
    assert client.post("/console/logout", data={"csrf_token": token}).status_code == 302
    replay = app.test_client()
    replay.set_cookie("session", kept)
    for path in ("/console/live.json", "/console/export.zip", "/console/"):
        assert replay.get(path, headers={"Accept": "application/json"}).status_code == 401
    storage = app.extensions["study"].storage
    assert storage.all("SELECT * FROM console_sessions") == []


def test_the_session_cookie_is_samesite_httponly_and_secure_over_https(app):
    plain = log_in(app.test_client())
    [cookie] = [c for c in plain.headers.getlist("Set-Cookie") if c.startswith("session=")]
    assert "SameSite=Lax" in cookie and "HttpOnly" in cookie and "Secure" not in cookie
    secure = log_in(app.test_client(), base_url="https://study.example")
    [cookie] = [c for c in secure.headers.getlist("Set-Cookie") if c.startswith("session=")]
    assert "Secure" in cookie and "SameSite=Lax" in cookie


@pytest.mark.parametrize("path", ["/", "/console/login", "/p/page-1", "/static/js/bakery.js",
                                  "/no/such/page", "/healthz"])
def test_every_response_forbids_framing_and_sniffing(app, path):
    reply = app.test_client().get(path)
    policy = reply.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    assert reply.headers["X-Content-Type-Options"] == "nosniff"


def test_inline_scripts_of_the_console_carry_the_response_nonce(app):
    client = app.test_client()
    log_in(client)
    page = client.get("/console/")
    nonce = re.search(r"'nonce-([^']+)'", page.headers["Content-Security-Policy"]).group(1)
    inline = re.findall(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)([^>]*)>",
                        page.data.decode())
    assert inline and all(f'nonce="{nonce}"' in attributes for attributes in inline)


def test_a_lockout_by_others_never_refuses_the_experimenter_at_her_address(app):
    attacker = {"environ_base": {"REMOTE_ADDR": "203.0.113.9"}}
    experimenter = {"environ_base": {"REMOTE_ADDR": "192.0.2.20"}}
    for _ in range(5):
        assert log_in(app.test_client(), "guess", **attacker).status_code == 403
    assert log_in(app.test_client(), **attacker).status_code == 429  # the attacker's own
    assert log_in(app.test_client(), **experimenter).status_code == 302


def test_proxy_headers_count_only_when_the_deployment_trusts_a_proxy(tmp_path, teammates,
                                                                     monkeypatch):
    monkeypatch.setenv("STUDY_CONSOLE_PASSWORD", PASSWORD)
    forwarded = {"headers": {"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "https"}}
    untrusted = make_app(tmp_path / "direct", teammates, FakeClock())
    for _ in range(5):
        log_in(untrusted.test_client(), "guess", **forwarded)
    # A spoofed header changes nothing: the failures counted against the real address.
    assert log_in(untrusted.test_client()).status_code == 429
    behind = make_app(tmp_path / "proxied", teammates, FakeClock(), STUDY_TRUST_PROXY="1")
    for _ in range(5):
        log_in(behind.test_client(), "guess", **forwarded)
    reply = log_in(behind.test_client())
    assert reply.status_code == 302  # the proxy's own address is not locked out
    [cookie] = [c for c in log_in(behind.test_client(), **forwarded).headers.getlist(
        "Set-Cookie") if c.startswith("session=")] or [""]
    assert cookie == ""  # that client is locked out (429, no session)
    secure = log_in(behind.test_client(), headers={"X-Forwarded-Proto": "https",
                                                   "X-Forwarded-For": "198.51.100.8"})
    assert "Secure" in secure.headers["Set-Cookie"]


def web_log_in(base: str, password: str) -> int:
    session = requests.Session()
    token = csrf_of(session.get(f"{base}/console/login", timeout=30).text)
    return session.post(f"{base}/console/login", data={"password": password,
                                                       "csrf_token": token},
                        allow_redirects=False, timeout=30).status_code


def test_the_login_limit_holds_across_server_processes(tmp_path, redis_url):
    """Three failures on one process and two on another lock the address out of both."""
    protocol = quick_protocol(DEMO, tmp_path / "quick.toml")
    env = {"STUDY_CONSOLE_PASSWORD": PASSWORD}
    servers = [ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                            tmp_path / f"serve-{n}.log", extra=("--message-queue", redis_url),
                            env=env)
               for n in range(2)]
    try:
        first, second = (server.start().url for server in servers)
        assert [web_log_in(first, "guess") for _ in range(3)] == [403] * 3
        assert [web_log_in(second, "guess") for _ in range(2)] == [403] * 2
        assert web_log_in(first, PASSWORD) == 429
        assert web_log_in(second, PASSWORD) == 429
    finally:
        for server in servers:
            server.stop()
