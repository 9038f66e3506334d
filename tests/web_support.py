"""Shared parts of the web tests: a controllable clock, a small real pool, a real app."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

from study.pool import Pool, PoolSpec, ensure_pool
from study.web import create_app
from study.web.teammate import PoolTeammates

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "protocols" / "demo.toml"
STUDY2 = ROOT / "protocols" / "study2.toml"
START = 1_750_000_000.0


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def small_pool(directory: Path, kits: tuple[int, int] = (2, 2),
               teammate: dict[str, Any] | None = None) -> PoolTeammates:
    """A real pool of a few thousand teams, built once per directory."""
    spec = PoolSpec.from_dict({
        "teams": 3000, "seed": 11, "kits": list(kits),
        "algorithms": ["efficient", "fair", "fea"],
        "fea": {"w": 0.7, "bounds": [0.0, 1.5], "bounds_source": "test fixture"},
        "teammate": teammate or {}}, name="test")
    path = ensure_pool(spec, directory)
    return PoolTeammates(Pool.load(path), str(path))


_ids = itertools.count()


def msg() -> str:
    """A fresh client message id."""
    return f"test-msg-{next(_ids):06d}"


def page_socket(app: Any, code: str, browser: Any = None) -> tuple[Any, Any]:
    """A Socket.IO test client of a browser (a Flask test client, new unless given) that
    loaded the participant's page: its cookies, the key the code is bound to, reach the
    socket's handshake. The same ``browser`` again is another tab of that browser."""
    browser = browser or app.test_client()
    browser.get(f"/p/{code}")
    return app.extensions["socketio"].test_client(app, flask_test_client=browser), browser


def make_app(tmp_path: Path, teammates: PoolTeammates, clock: FakeClock,
             protocol: Path = DEMO, **config: Any) -> Any:
    return create_app({"PROTOCOL": protocol, "DATABASE": tmp_path / "study.sqlite",
                       "TEAMMATES": teammates, "CLOCK": clock, "SCHEDULER": False,
                       **config})


class LiveServer:
    """The real app on 127.0.0.1 and a free port, served by werkzeug in a thread."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)
        scheduler = self.app.extensions.get("scheduler")
        if scheduler is not None:
            scheduler.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
