"""``study serve --workers N`` starts on a fresh database without a race, and a process
that fails while starting is reported with the cause it gave."""

from __future__ import annotations

import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from study.bots.servers import free_port
from study.web.serving import deploy
from study.web.serving.deploy import Balanced, Child, StartFailed

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"


def test_the_database_is_set_up_before_any_worker_starts(tmp_path, monkeypatch):
    database = tmp_path / "study.sqlite"
    seen: dict[str, object] = {}

    def first_worker(*_: object) -> None:
        with sqlite3.connect(database) as db:
            seen["journal"] = db.execute("PRAGMA journal_mode").fetchone()[0]
            seen["tables"] = {name for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        raise StartFailed("server process 1 of 2", "stopped by the test")

    monkeypatch.setattr(signal, "signal", lambda *_: None)  # keep pytest's own handlers
    monkeypatch.setattr(Balanced, "_start_redis", lambda *_: "redis://127.0.0.1:1/0")
    monkeypatch.setattr(Balanced, "_start_worker", first_worker)
    server = Balanced(DEMO, database, tmp_path / "pools", "127.0.0.1", free_port(), workers=2)
    with pytest.raises(StartFailed, match="stopped by the test"):
        server.run()
    assert seen["journal"] == "wal"
    assert {"participants", "rounds", "processes", "leases"} <= seen["tables"]


BOOT_FAILURE = """
import sys
print("Traceback (most recent call last):", file=sys.stderr)
print('  File "storage.py", line 213, in __init__', file=sys.stderr)
print("sqlite3.OperationalError: database is locked", file=sys.stderr)
print("[2026-01-01 10:00:00 +0000] [7] [ERROR] Worker (pid:8) exited with code 3", file=sys.stderr)
print("[2026-01-01 10:00:00 +0000] [7] [ERROR] Reason: Worker failed to boot.", file=sys.stderr)
sys.exit(3)
"""


def test_a_worker_that_dies_while_starting_is_named_with_its_cause():
    worker = Child("server process 2 of 2 (127.0.0.1:1)", [sys.executable, "-c", BOOT_FAILURE],
                   forward=False)
    with pytest.raises(StartFailed) as caught:
        deploy._wait_until_healthy(1, worker)
    assert str(caught.value) == (
        f"server process 2 of 2 (127.0.0.1:1) (pid {worker.pid}): exited with 3 while "
        "starting: sqlite3.OperationalError: database is locked")


def test_without_an_error_line_the_last_line_is_the_cause():
    quiet = Child("haproxy", [sys.executable, "-c", "import sys; print('first', file=sys.stderr)"
                              "; print('no such file', file=sys.stderr); sys.exit(1)"],
                  forward=False)
    assert quiet.failed("while starting").args[0].endswith(
        "exited with 1 while starting: no such file")
