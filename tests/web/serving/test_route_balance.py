"""How evenly HAProxy, configured as ``study serve --workers N`` configures it
(``deploy.haproxy_config``), spreads teams' routes over the workers: each team is served
by the worker its route hashes to, and the busiest worker bounds the server."""

from __future__ import annotations

import http.server
import shutil
import socketserver
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from study.bots.servers import free_port
from study.web.serving.deploy import haproxy_config

TEAMS = 333  # teams3 at 1,000 people


class Answer(http.server.BaseHTTPRequestHandler):
    """A worker that answers every request with an empty page (HAProxy names it)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


class UnixWorker(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[object, tuple[str, int]]:
        request, _ = super().get_request()
        return request, ("unix", 0)  # the handler's log and address want a pair


def workers_of_routes(tmp_path: Path, workers: int, routes: list[str]) -> Counter[str]:
    """The worker each route goes to, through a real HAProxy in front of ``workers``."""
    haproxy = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    assert haproxy, "haproxy is missing: run `make system-packages`"
    sockets = [tmp_path / f"worker-{number}.sock" for number in range(1, workers + 1)]
    servers = [UnixWorker(str(path), Answer) for path in sockets]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config("127.0.0.1", port, sockets))
    balancer = subprocess.Popen([haproxy, "-f", str(config)], stderr=subprocess.PIPE)
    try:
        served: Counter[str] = Counter()
        for route in routes:
            served[worker_of(port, route, balancer)] += 1
        return served
    finally:
        balancer.terminate()
        balancer.wait(timeout=10)
        for server, path in zip(servers, sockets, strict=True):
            server.shutdown()
            server.server_close()
            path.unlink()


def worker_of(port: int, route: str, balancer: subprocess.Popen[bytes]) -> str:
    """The worker HAProxy sends ``route`` to (once HAProxy listens)."""
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?route={route}",
                                        timeout=10) as answer:
                return answer.headers["X-Study-Worker"]
        except OSError:
            assert balancer.poll() is None, balancer.stderr.read().decode()  # type: ignore[union-attr]
            time.sleep(0.05)
    raise AssertionError(f"HAProxy on port {port} never answered")


@pytest.mark.parametrize(("workers", "busiest"), [(2, 1.03), (4, 1.2)])
def test_teams_routes_spread_over_the_workers_about_evenly(tmp_path, workers, busiest):
    served = workers_of_routes(tmp_path, workers,
                               [f"team-{team}" for team in range(1, TEAMS + 1)])
    assert sorted(served) == [f"w{number}" for number in range(1, workers + 1)]
    assert max(served.values()) / (TEAMS / workers) <= busiest, served


def test_a_route_goes_to_one_worker_every_time(tmp_path):
    routes = [f"team-{team}" for team in range(1, 21)]
    served = workers_of_routes(tmp_path, 2, routes * 3)
    again = workers_of_routes(tmp_path, 2, routes)
    assert sum(served.values()) == 60 and served == Counter(
        {worker: 3 * count for worker, count in again.items()})
