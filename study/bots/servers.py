"""Study servers for bots to visit: ``study serve`` as a real process (killable, restartable),
plus a quick variant of a protocol for tests and load runs.

Only loopback addresses are used; every wait is bounded.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import requests


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def quick_protocol(source: Path, out: Path, *, round_seconds: float = 3.0,
                   practice_seconds: float = 2.0, reference_speed: tuple[float, float] = (3.0, 2.0),
                   min_cookie_seconds: float = 0.1) -> Path:
    """A copy of ``source`` with short rounds and fast reference speeds, so a bot finishes
    the whole study in seconds and still decorates several cookies a round."""
    text = source.read_text(encoding="utf-8")
    replacements = {
        r"(?m)^round_seconds = [\d.]+": f"round_seconds = {round_seconds}",
        r"(?m)^practice_seconds = [\d.]+": f"practice_seconds = {practice_seconds}",
        r"(?m)^min_cookie_seconds = [\d.]+": f"min_cookie_seconds = {min_cookie_seconds}",
    }
    for pattern, value in replacements.items():
        text, count = re.subn(pattern, value, text)
        if count != 1:
            raise ValueError(f"{source}: expected one match of {pattern}")
    speeds = iter(reference_speed)
    text = re.sub(r"(?m)^reference_speed = [\d.]+",
                  lambda _: f"reference_speed = {next(speeds)}", text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def wait_healthy(base_url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Poll ``/healthz`` until it answers (or the process dies, or time runs out)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before it was ready")
        try:
            if requests.get(f"{base_url}/healthz", timeout=1).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{base_url} did not become healthy within {timeout} s")


class ServeProcess:
    """``study serve`` in a child process: started, killed with SIGKILL, started again."""

    def __init__(self, protocol: Path, db: Path, pools: Path, log: Path, *,
                 port: int | None = None, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.protocol = protocol
        self.db = db
        self.pools = pools
        self.log = log
        self.port = port or free_port()
        self.extra = extra
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None
        self._log_file: IO[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:
        self._log_file = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop
        command = [sys.executable, "-m", "study.cli", "serve", str(self.protocol),
                   "--host", "127.0.0.1", "--port", str(self.port), "--db", str(self.db),
                   "--pools", str(self.pools), *self.extra]
        self.process = subprocess.Popen(command, stdout=self._log_file,
                                        stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True)
        try:
            wait_healthy(self.url, timeout, self.process)
        except RuntimeError as exited:
            self._close_log()
            raise RuntimeError(f"{exited}; its last words: {self.last_words()}") from None
        return self

    def last_words(self) -> str:
        """The line of the server's output that says why it stopped: ``study serve``'s own
        error (a missing Redis or HAProxy, a malformed protocol), else its last line."""
        lines = [line for line in self.output().splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("study: error:")]
        return (errors or lines or ["(no output)"])[-1]

    def kill(self) -> None:
        """SIGKILL to every process of the server (gunicorn's master and worker, or a
        balanced server's workers, balancer and queue): no shutdown code runs, as in a
        crash or power cut."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._close_log()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8") if self.log.exists() else ""
