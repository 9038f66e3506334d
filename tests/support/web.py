"""Shared parts of the web tests: a controllable clock, a small real pool, a real app and
the journey behind it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from study.bots.servers import ServeProcess
from study.pool import Pool, PoolSpec, ensure_pool
from study.web import create_app
from study.web.participant.agent_pool import PoolTeammates

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"
STUDY2 = ROOT / "protocols" / "study2.toml"
START = 1_750_000_000.0


def moment(seconds: Any) -> Any:
    """A time of day (or a list of them) compared to the microsecond: pytest's approx
    allows a millionth of the value, half an hour at today's epoch seconds."""
    return pytest.approx(seconds, rel=0, abs=1e-6)


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
               teammate: dict[str, Any] | None = None, humans: int = 2) -> PoolTeammates:
    """A real pool of a few thousand teams of ``humans``, built once per directory."""
    spec = PoolSpec.from_dict({
        "teams": 3000, "seed": 11, "kits": list(kits), "humans": humans,
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
    """The study in-process, where the journey is tested: under normal durability unless
    told otherwise (what an acknowledged event survives, full durability's sync of the log,
    is tested in tests/storage and by the served studies)."""
    return create_app({"PROTOCOL": protocol, "DATABASE": tmp_path / "study.sqlite",
                       "TEAMMATES": teammates, "CLOCK": clock, "SCHEDULER": False,
                       "DURABILITY": "normal", **config})


class LiveServer:
    """The app's study served for real: ``study serve`` (gunicorn with a gevent worker) on
    the app's protocol and database, on a free port. The in-process ``app`` stays for
    reading what the served study wrote; its own scheduler is stopped, so the served
    process holds the round scheduler's lease."""

    def __init__(self, app: Any, env: dict[str, str] | None = None) -> None:
        self.app = app
        scheduler = app.extensions.get("scheduler")
        if scheduler is not None:
            scheduler.stop()
        database = Path(app.extensions["study"].storage.path)
        self.process = ServeProcess(Path(app.config["PROTOCOL"]), database,
                                    database.parent / "served-pools",
                                    database.parent / "serve.log", env=env)
        self.url = self.process.url

    def __enter__(self) -> LiveServer:
        self.process.start(timeout=180)
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()

    def output(self) -> str:
        return self.process.output()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def journey(app: Any) -> Any:
    """The study behind ``app``: its journey, storage, protocol and clock ticks."""
    return app.extensions["study"]


def rows(app: Any, sql: str, *params: Any) -> list[dict[str, Any]]:
    return journey(app).storage.all(sql, params)
