"""``study serve --tls-cert --tls-key`` serves the study over HTTPS in real Chromium, with one
server process (no Redis) and with two behind HAProxy: the page and its Socket.IO connection
work over TLS, every cookie is ``Secure``, HSTS is sent, TLS 1.1 is refused and plain HTTP
on the redirect port is sent to HTTPS. The certificate is a self-signed one made by openssl."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, sync_playwright
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess, free_port
from study.cli import main
from study.web.serving.deploy import Tls, haproxy_config

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "protocols" / "demo.toml"
PASSWORD = "a console password for the https test"


class HttpsServe(ServeProcess):
    """``study serve`` whose address (and health check) is https."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    assert openssl, "openssl is missing: run `make system-packages`"
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=120)
    return cert, key


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           certificate: tuple[Path, Path]) -> Iterator[HttpsServe]:
    cert, key = certificate
    directory = tmp_path_factory.mktemp(f"https-{request.param}")
    served = HttpsServe(DEMO, directory / "study.sqlite", directory.parent / "https-pools",
                        directory / "serve.log", env={"STUDY_CONSOLE_PASSWORD": PASSWORD},
                        extra=("--workers", str(request.param), "--tls-cert", str(cert),
                               "--tls-key", str(key), "--http-port", str(free_port())))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # the health checks trust it
        try:
            yield served.start(timeout=300)
        finally:
            served.stop()
    assert "Traceback" not in served.output(), served.output()[-3000:]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Chromium is missing: run `make system-packages`"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def http_port_of(server: HttpsServe) -> int:
    return int(server.extra[server.extra.index("--http-port") + 1])


@pytest.mark.browser
@pytest.mark.slow
def test_a_participant_plays_over_https_with_secure_cookies(server, browser):
    context = browser.new_context(ignore_https_errors=True)  # self-signed
    page = context.new_page()
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    response = page.goto(f"{server.url}/start")
    assert response is not None and response.ok and page.url.startswith(f"{server.url}/p/")
    assert response.headers["strict-transport-security"] == "max-age=31536000"
    page.wait_for_selector('[data-step="consent"]', timeout=60_000)
    page.click('[data-action="agree"]:not([disabled])')  # sent over the socket
    page.wait_for_selector('[data-step="themes"]', timeout=60_000)
    assert sockets and all(url.startswith("wss://127.0.0.1:") for url in sockets), sockets

    page.goto(f"{server.url}/console/login")
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.wait_for_url(lambda url: "/login" not in url, timeout=60_000)  # logged in
    cookies = {cookie["name"]: cookie for cookie in context.cookies()}
    assert {"study_browser", "study_code", "session", "STUDY_WORKER"} <= set(cookies)
    assert all(cookie["secure"] for cookie in cookies.values()), cookies
    context.close()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_tls_older_than_1_2_is_refused(server):
    def handshake(version: ssl.TLSVersion) -> str:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # this client offers TLS 1.1 at all
        context.minimum_version = context.maximum_version = version
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw, \
                context.wrap_socket(raw) as tls:
            return str(tls.version())

    with pytest.raises(ssl.SSLError, match="TLSV1_ALERT_PROTOCOL_VERSION"):  # the server's
        handshake(ssl.TLSVersion.TLSv1_1)
    assert handshake(ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    assert handshake(ssl.TLSVersion.TLSv1_3) == "TLSv1.3"


@pytest.mark.slow
def test_plain_http_is_redirected_to_https_and_the_links_say_https(server):
    reply = requests.get(f"http://127.0.0.1:{http_port_of(server)}/p/abc?x=1",
                         allow_redirects=False, timeout=30)
    assert reply.status_code == 301
    assert reply.headers["Location"] == f"{server.url}/p/abc?x=1"
    assert f"https://localhost:{server.port}/start" in server.output()
    assert "http://localhost" not in server.output()


@pytest.mark.slow
def test_haproxy_in_front_and_redis_only_between_several_processes(server):
    """One process behind TLS needs no Redis; two share one."""
    several = server.extra[server.extra.index("--workers") + 1] != "1"
    assert server.process is not None
    programs = [status.read_bytes().split(b"\0")[0] for status in Path("/proc").glob(
        "[0-9]*/cmdline") if _session_of(status.parent) == server.process.pid]
    assert any(program.endswith(b"haproxy") for program in programs), programs
    assert any(b"redis" in program for program in programs) == several, programs


def _session_of(process: Path) -> int | None:
    try:
        return int((process / "stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def test_haproxy_gets_the_chain_then_the_key_in_a_private_file(tmp_path):
    cert, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nleaf\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n")
    pem = Tls(cert, key, 80).write_pem(tmp_path)
    assert pem.stat().st_mode & 0o777 == 0o600
    assert pem.read_text() == cert.read_text() + key.read_text()


def test_on_port_443_the_redirect_names_no_port(tmp_path):
    config = haproxy_config("0.0.0.0", 443, [tmp_path / "worker-1.sock"],
                            Tls(Path("c"), Path("k"), 80), tmp_path / "tls.pem")
    assert f"bind 0.0.0.0:443 ssl crt {tmp_path / 'tls.pem'} ssl-min-ver TLSv1.2" in config
    assert "bind 0.0.0.0:80\n" in config
    assert f"server w1 unix@{tmp_path / 'worker-1.sock'} check" in config
    assert "location https://%[req.hdr(host),regsub(:[0-9]+$,)]%[capture.req.uri]" in config


@pytest.mark.parametrize("arguments", [
    ["--tls-cert", "cert.pem"],
    ["--tls-key", "key.pem"],
    ["--http-port", "8080"],
    ["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"],
])
def test_incomplete_or_unreadable_tls_options_are_refused(arguments):
    assert main(["serve", str(DEMO), *arguments]) == 2
