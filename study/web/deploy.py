"""Serving a study for real: gunicorn with one gevent worker per process, and for several
processes HAProxy in front and Redis between them, as Flask-SocketIO's deployment guide
describes (one worker per gunicorn, a balancer with sticky sessions, a message queue).

Nothing here balances, queues or supervises by itself: gunicorn's master restarts its
worker, HAProxy routes (cookie stickiness for Socket.IO's long-polling, health checks to
route around a dead process), Redis carries the pushes between processes. This module only
writes their configuration, starts them, and stops them together.
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.model import InvalidInput
from study.web.collector import ShortCollections

# Connections one gevent worker accepts (gunicorn's default is 1,000).
WORKER_CONNECTIONS = 10_000


def ensure_pool_of(protocol: Any, pools: Path) -> Path:
    """Build the protocol's team pool once (cached); the server processes only load it."""
    from study.pool import ensure_pool

    return ensure_pool(protocol.pool_spec(), pools)


def raise_open_file_limit() -> None:
    """Allow as many open sockets as the system lets this user have: a thousand
    participants are a thousand connections through each layer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def app_factory(protocol: Path, database: Path, pools: Path, message_queue: str | None,
                durability: str = "full") -> Any:
    """The app a gunicorn worker serves, made in the worker (after gevent's patching)."""
    from study.web import create_app

    app = create_app({"PROTOCOL": protocol, "DATABASE": database, "POOL_DIR": pools,
                      "MESSAGE_QUEUE": message_queue, "ASYNC_MODE": "gevent",
                      "DURABILITY": durability})
    app.extensions["socketio"].start_background_task(ShortCollections().run)
    return app


def _gunicorn_application(options: dict[str, Any], factory: Any) -> Any:
    from gunicorn.app.base import BaseApplication

    class StudyApplication(BaseApplication):
        """gunicorn's documented way to embed it: options set here, app made per worker."""

        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return factory()

    return StudyApplication()


@dataclass
class Single:
    """One gunicorn process with one gevent worker."""

    protocol: Path
    database: Path
    pools: Path
    host: str
    port: int
    message_queue: str | None = None
    durability: str = "full"

    def run(self) -> int:
        raise_open_file_limit()
        options = {"bind": f"{self.host}:{self.port}", "workers": 1,
                   "worker_class": "gevent", "worker_connections": WORKER_CONNECTIONS,
                   "timeout": 30, "graceful_timeout": 5, "keepalive": 5,
                   "loglevel": "warning", "proc_name": f"study-{self.port}"}
        factory = lambda: app_factory(self.protocol, self.database, self.pools,  # noqa: E731
                                      self.message_queue, self.durability)
        _gunicorn_application(options, factory).run()
        return 0


@dataclass
class Balanced:
    """``workers`` gunicorn processes on one database behind HAProxy, with Redis between
    them; started together, stopped together."""

    protocol: Path
    database: Path
    pools: Path
    host: str
    port: int
    workers: int
    message_queue: str | None = None
    durability: str = "full"
    children: list[subprocess.Popen] = field(default_factory=list)

    def run(self) -> int:
        raise_open_file_limit()
        directory = Path(tempfile.mkdtemp(prefix="study-serve-"))
        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
        try:
            queue = self.message_queue or self._start_redis(directory)
            ports = [free_port() for _ in range(self.workers)]
            # Workers listen on loopback behind HAProxy (``option forwardfor``): the
            # client's address, which the login limit is kept per, is the forwarded one.
            env = {**os.environ, "STUDY_TRUST_PROXY": "1",
                   "STUDY_SECRET_KEY": os.environ.get("STUDY_SECRET_KEY")
                   or secrets.token_hex(16)}
            for port in ports:
                self._start_worker(port, queue, env)
            for port, worker in zip(ports, self.children[-len(ports):], strict=True):
                _wait_until_healthy(port, worker)
            self._start_haproxy(directory, ports)
            return self._wait(stopping)
        except KeyboardInterrupt:
            return 0
        finally:
            self._stop_all()
            shutil.rmtree(directory, ignore_errors=True)

    def _start_redis(self, directory: Path) -> str:
        binary = _need("redis-server")
        port = free_port()
        self.children.append(subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             "--appendonly", "no", "--dir", str(directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait_for_port(port, self.children[-1])
        return f"redis://127.0.0.1:{port}/0"

    def _start_worker(self, port: int, queue: str, env: dict[str, str]) -> None:
        self.children.append(subprocess.Popen(
            [sys.executable, "-m", "study.cli", "serve", str(self.protocol), "--quiet",
             "--host", "127.0.0.1", "--port", str(port), "--db", str(self.database),
             "--pools", str(self.pools), "--message-queue", queue,
             "--durability", self.durability], env=env))

    def _start_haproxy(self, directory: Path, ports: list[int]) -> None:
        binary = _need("haproxy")
        config = directory / "haproxy.cfg"
        config.write_text(haproxy_config(self.host, self.port, ports), encoding="utf-8")
        self.children.append(subprocess.Popen([binary, "-f", str(config), "-db"]))
        _wait_for_port(self.port, self.children[-1], host=self.host)

    def _wait(self, stopping: list[int]) -> int:
        """Until asked to stop. A worker that dies is routed around by HAProxy (gunicorn
        restarts a worker process whose master lives); the study stops only when the
        balancer, the queue, or every worker is gone."""
        workers = [c for c in self.children if "study.cli" in c.args]
        reported: set[int] = set()
        while not stopping:
            for child in self.children:
                if child.poll() is not None and child.pid not in reported:
                    reported.add(child.pid)
                    print(f"study serve: {Path(str(child.args[0])).name} (pid {child.pid}) "
                          f"exited with {child.returncode}", file=sys.stderr, flush=True)
            essential = [c for c in self.children if c not in workers]
            if any(c.poll() is not None for c in essential) or all(
                    w.poll() is not None for w in workers):
                return 1
            time.sleep(0.2)
        return 0

    def _stop_all(self) -> None:
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
        for child in self.children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def haproxy_config(host: str, port: int, worker_ports: list[int]) -> str:
    """HAProxy in front of the workers: new participants in turn, a cookie that keeps a
    browser's long-polling requests on one worker, health checks every second so a dead
    worker is routed around (a busy one, slow to answer, is not), and tunnels (websockets)
    kept open for a whole study."""
    servers = "\n".join(
        f"    server w{index} 127.0.0.1:{worker} check inter 1s fall 3 rise 1 "
        f"cookie w{index}" for index, worker in enumerate(worker_ports, 1))
    return f"""global
    maxconn {haproxy_max_connections()}

defaults
    mode http
    timeout connect 5s
    timeout client 2h
    timeout server 2h
    timeout tunnel 2h
    timeout http-request 30s
    timeout check 5s
    option redispatch
    retries 3

frontend study
    bind {host}:{port}
    option forwardfor
    default_backend workers

backend workers
    balance roundrobin
    cookie STUDY_WORKER insert indirect nocache httponly
    option httpchk GET /healthz
{servers}
"""


def haproxy_max_connections() -> int:
    """Connections HAProxy may hold: each takes two descriptors (client and worker side)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 100_000
    return max(256, min(50_000, (limit - 200) // 2))


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _need(program: str) -> str:
    path = shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/bin")
    if path is None:
        raise InvalidInput("--workers", program, f"needs Debian's {program} "
                                                  f"(apt-get install {program})")
    return path


def _wait_until_healthy(port: int, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the worker's app answers ``/healthz`` (gunicorn listens before its worker has
    loaded the pool): the balancer then starts with every worker in service."""
    import urllib.error
    import urllib.request

    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise InvalidInput("--workers", process.args[0],
                               f"exited with {process.returncode} while starting")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise InvalidInput("--workers", process.args[0], f"not healthy within {timeout} s")


def _wait_for_port(port: int, process: subprocess.Popen, host: str = "127.0.0.1",
                   timeout: float = 30.0) -> None:
    import socket

    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise InvalidInput("--workers", process.args[0],
                               f"exited with {process.returncode} while starting")
        with socket.socket() as probe:
            if probe.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise InvalidInput("--workers", process.args[0],
                       f"did not listen on {host}:{port} within {timeout} s")
