"""``study serve`` never opens the console to others by accident, and takes its ports
before it prints a link.

Without ``STUDY_CONSOLE_PASSWORD`` a non-loopback ``--host`` or ``--tls-cert`` is refused
(the console would show every participant and let anyone download every answer) unless
``--open-console`` asks for it, which is then said loudly. A port another program holds
stops the start with its number and a non-zero exit, before the team pool is built or any
participant link is printed. Each runs the real CLI as a process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from study.bots.servers import ServeProcess, free_port
from study.commands.serve import is_loopback

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"
PASSWORD = "a console password for the serve test"


def without_password(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "STUDY_CONSOLE_PASSWORD"}
    return {**env, **extra}


def serve(tmp_path: Path, *options: str, env: dict[str, str] | None = None,
          port: int | None = None) -> subprocess.CompletedProcess:
    """``study serve`` of the demo that is expected to stop by itself (refused)."""
    return subprocess.run(
        [sys.executable, "-m", "study.cli", "serve", str(DEMO), "--port",
         str(port or free_port()), "--db", str(tmp_path / "study.sqlite"),
         "--pools", str(tmp_path / "pools"), *options],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env or without_password())


def tls_files(tmp_path: Path) -> list[str]:
    """A certificate and key to name (refused before they are used, so any text will do)."""
    cert, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nleaf\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n")
    return ["--tls-cert", str(cert), "--tls-key", str(key), "--http-port", str(free_port())]


def assert_refused_before_anything(done: subprocess.CompletedProcess, tmp_path: Path) -> None:
    assert done.returncode == 2, done.stderr
    assert "link" not in done.stdout and "Traceback" not in done.stderr, done
    assert not (tmp_path / "pools").exists() and not (tmp_path / "study.sqlite").exists()


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
    ("192.168.1.20", False), ("study.example.org", False), ("", False)])
def test_only_loopback_addresses_count_as_this_machine(host, loopback):
    assert is_loopback(host) == loopback


@pytest.mark.parametrize("where", [["--host", "0.0.0.0"], ["--host", "192.0.2.7"], "tls"],
                         ids=["all-addresses", "one-address", "https-on-loopback"])
def test_a_reachable_console_without_a_password_is_refused(tmp_path, where):
    options = tls_files(tmp_path) if where == "tls" else where
    done = serve(tmp_path, *options)
    assert_refused_before_anything(done, tmp_path)
    option = "--tls-cert" if where == "tls" else "--host"
    assert done.stderr.startswith(f"study: error: {option} = "), done.stderr
    assert "STUDY_CONSOLE_PASSWORD='something long'" in done.stderr
    assert "/console/export.zip" in done.stderr and "--open-console" in done.stderr


@pytest.mark.slow
def test_the_open_console_flag_starts_on_all_addresses_and_says_so_loudly(tmp_path):
    server = ServeProcess(DEMO, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log", env=without_password(),
                          extra=("--host", "0.0.0.0", "--open-console"))
    try:
        server.start(timeout=180)
        console = requests.get(f"{server.url}/console", timeout=30)
        assert console.ok and "DEMO MODE" in console.text  # open, as asked
    finally:
        server.stop()
    output = server.output()
    assert "OPEN CONSOLE (--open-console): no STUDY_CONSOLE_PASSWORD, served with --host " \
           "0.0.0.0" in output, output
    assert "Only for a demo on a trusted network" in output
    assert output.index("OPEN CONSOLE") < output.index("participant link")


@pytest.mark.slow
def test_with_a_password_a_public_address_starts_without_the_flag(tmp_path):
    server = ServeProcess(DEMO, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log", extra=("--host", "0.0.0.0"),
                          env=without_password(STUDY_CONSOLE_PASSWORD=PASSWORD))
    try:
        server.start(timeout=180)
        login = requests.get(f"{server.url}/console", timeout=30)
        assert login.ok and "/console/login" in login.url and 'name="password"' in login.text
    finally:
        server.stop()
    assert "OPEN CONSOLE" not in server.output() and "DEMO MODE" not in server.output()


def held(port: int) -> socket.socket:
    """Another program's socket listening on ``port``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


@pytest.mark.parametrize("busy", ["--port", "--http-port"])
def test_a_busy_port_stops_the_start_before_any_link(tmp_path, busy):
    port = free_port()
    options = tls_files(tmp_path) if busy == "--http-port" else []
    if busy == "--http-port":
        options[options.index("--http-port") + 1] = str(port)
    with held(port):
        done = serve(tmp_path, *options, port=None if options else port,
                     env=without_password(STUDY_CONSOLE_PASSWORD=PASSWORD))
    assert_refused_before_anything(done, tmp_path)
    assert done.stdout == "", done.stdout  # not even the pool's line
    assert done.stderr == (f"study: error: {busy} {port}: 127.0.0.1:{port}: Address already "
                           f"in use (another program listens there: stop it or choose "
                           f"another {busy})\n")
