"""A full disk: the database on a small tmpfs that a file fills, then freed.

Nothing the server acknowledged is lost (an event whose transaction the full disk rolled
back is never acknowledged), participants are answered ``storage-unavailable`` (not
``malformed``), page loads get a calm 503, the log says so once a minute, the console
shows it with the disk's free space, and once space is freed the study goes on without a
restart: rounds closed late are marked ``late`` with their delay, and the write-ahead log
gives back the space it took.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.servers import query, wait_for_open_rounds
from support.storage import fill, insert_participant, pin_the_log, stored_codes, tmpfs, wait_for
from support.web import DEMO, make_app, msg, page_socket

from study.bots import BEHAVIOURS, Profile, StudyFacts, SwarmResult, bot_codes, run_swarm
from study.bots.audit import missing_acknowledged
from study.bots.client import AckLog, Connection
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol
from study.storage.database import Storage
from study.storage.health import StorageHealth, StorageUnavailable
from study.web.participant.rounds import LATE_SECONDS

ROOT = Path(__file__).resolve().parents[2]
HANG = 120.0  # seconds: only catches a hang


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        yield disk


@pytest.fixture
def served_disk(tmp_path: Path) -> Iterator[Path]:
    """Room for a served study's database and its log before the filler comes."""
    with tmpfs(tmp_path / "disk", "16m") as disk:
        yield disk


# --- the storage --------------------------------------------------------------------------


def test_a_full_disk_fails_the_event_as_unavailable_and_freeing_space_empties_the_log(small_disk):
    storage = Storage(small_disk / "study.sqlite")
    insert_participant(storage, "before")
    filler = fill(small_disk)
    with pytest.raises(StorageUnavailable):
        insert_participant(storage, "during")
    assert not storage.health.available and storage.health.failures == 1
    assert stored_codes(storage.path) == {"before"}

    filler.unlink()
    wal = Path(f"{storage.path}-wal")
    assert wal.stat().st_size > 0
    insert_participant(storage, "after")
    assert storage.health.available
    # Once writes succeed again a checkpoint empties the log: the freed space stays free.
    assert wal.stat().st_size == 0
    assert stored_codes(storage.path) == {"before", "after"}


def test_an_event_whose_transaction_the_full_disk_rolled_back_is_never_acknowledged(small_disk):
    """The scheduler closes each round in its own nested event and goes on past a failed
    one. A full disk rolls back the whole transaction, earlier savepoints included; an event
    after that must not start a transaction of its own (SQLite commits it when its savepoint
    is released; here space is freed in between, so it would succeed): the outer event
    commits all of its work or none, and reports which."""
    storage = Storage(small_disk / "study.sqlite")
    storage.db.execute("PRAGMA cache_size = 5")  # a large row spills to the log at once
    filler = fill(small_disk)
    outcomes = []
    with pytest.raises(StorageUnavailable), storage.event():
        insert_participant(storage, "first")
        try:
            with storage.event() as db:
                db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                           "VALUES ('large', ?, 1.0, 'consent')", ("x" * 200_000,))
        except StorageUnavailable:
            outcomes.append("large failed")
        filler.unlink()
        try:
            insert_participant(storage, "third")
        except StorageUnavailable:
            outcomes.append("third failed")
    assert outcomes == ["large failed", "third failed"]
    assert stored_codes(storage.path) == set()
    insert_participant(storage, "next")  # the next event starts afresh
    assert stored_codes(storage.path) == {"next"}


def test_the_condition_is_logged_once_a_minute_and_once_when_it_ends(caplog):
    health = StorageHealth()
    error = sqlite3.OperationalError("database or disk is full")
    with caplog.at_level(logging.WARNING, logger="study.storage.health"):
        for _ in range(500):
            health.failed(error)
        health._logged_at -= 61  # a minute later
        health.failed(error)
        assert health.succeeded()
        assert not health.succeeded()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert "1 write(s) failed" in lines[0] and "500 write(s) failed" in lines[1]
    assert "written again" in lines[2] and "501 write(s) failed" in lines[2]


# --- the journey in process ---------------------------------------------------------------


def practice_round(app, code: str) -> tuple[object, dict]:
    """A participant in the first practice round, through the documented protocol."""
    client, _ = page_socket(app, code)

    def send(event: str, **payload: object) -> dict:
        reply = client.emit(event, {"msg_id": msg(), **payload}, callback=True)
        assert reply["ok"], reply
        return reply

    assert client.emit("join", {"code": code}, callback=True)["ok"]
    send("submit", step="consent", data={"agree": True})
    send("submit", step="themes", data={})
    send("submit", step="preferences", data={"ratings": {"ravens": 7, "steelers": 1}})
    return client, send("start_round", round=1)["state"]["round"]


def test_participants_wait_and_go_on_and_a_late_round_is_marked_late(small_disk, teammates,
                                                                      clock, caplog):
    app = make_app(small_disk, teammates, clock, DEMO)
    journey = app.extensions["study"]
    client, running = practice_round(app, "alice")
    target = running["target"]
    content = target["text"] if target["kind"] == "letters" else target["cells"]
    cookie = {"msg_id": msg(), "round_id": running["id"], "content": content}
    clock.advance(1.0)
    filler = fill(small_disk)

    with caplog.at_level(logging.WARNING):
        reply = client.emit("cookie", cookie, callback=True)
        assert reply["reason"] == "storage-unavailable" and reply["error"] == "unavailable"
        assert reply["retry_after"] > 0 and "state" not in reply
        for _ in range(5):  # the page sends it again; none of it is a refusal
            assert client.emit("cookie", cookie, callback=True)["reason"] == \
                "storage-unavailable"
        page = app.test_client().get("/p/newcomer")
        assert page.status_code == 503 and int(page.headers["Retry-After"]) > 0
        assert b"One moment" in page.data
        storage = app.test_client().get("/console/live.json").get_json()["storage"]
        assert not storage["available"] and storage["failures"] > 5
        assert storage["disk"]["low"] and storage["disk"]["free_bytes"] == 0
        with pytest.raises(StorageUnavailable):
            journey.tick(running["deadline"] + 1.0)

        filler.unlink()
        reply = client.emit("cookie", cookie, callback=True)
        assert reply["ok"], reply
        assert client.emit("cookie", cookie, callback=True)["reason"] == "duplicate"
        late = running["deadline"] + 60.0
        assert journey.tick(late) == 1
    records = [r for r in caplog.records if r.name == "study.storage.health"]
    assert [r.levelname for r in records] == ["ERROR", "WARNING"], caplog.text
    assert "Traceback" not in caplog.text and "malformed" not in caplog.text
    assert journey.storage.all("SELECT reason FROM rejections") == [
        {"reason": "duplicate"}]
    closed = journey.storage.one("SELECT * FROM rounds WHERE id = ?", (running["id"],))
    assert closed["close_reason"] == "late"
    assert closed["close_delay"] == pytest.approx(60.0)
    assert closed["participant_cookies"] == 1
    assert app.test_client().get("/console/live.json").get_json()["storage"]["available"]


def test_a_round_closed_in_time_keeps_its_small_delay(tmp_path, teammates, clock):
    app = make_app(tmp_path, teammates, clock, DEMO)
    journey = app.extensions["study"]
    _, running = practice_round(app, "bob")
    assert journey.tick(running["deadline"] + LATE_SECONDS - 0.5) == 1
    closed = journey.storage.one("SELECT * FROM rounds WHERE id = ?", (running["id"],))
    assert closed["close_reason"] == "deadline"
    assert closed["close_delay"] == pytest.approx(LATE_SECONDS - 0.5)


# --- a served study -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.minutes(0.55)
def test_a_served_study_rides_out_a_full_disk_without_a_restart(tmp_path, served_disk):
    """Bots take part in ``study serve`` whose database is on a small tmpfs; a file fills
    it mid-round for longer than a round, then is deleted. Whether a bot happens to send
    during the fault is up to its pace; a probe participant's consent, sent while the disk
    is full, is answered ``storage-unavailable`` until space is freed, then recorded."""
    disk = served_disk
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp_path / "quick.toml",
                              round_seconds=3.0, practice_seconds=2.0)
    db = disk / "study.sqlite"
    server = ServeProcess(protocol, db, tmp_path / "pools", tmp_path / "serve.log",
                          env={"STUDY_CONSOLE_PASSWORD": ""}).start()
    codes = bot_codes(3)
    profiles = [Profile((0.8, 0.6), (0.6, 0.4), BEHAVIOURS["fast"], seed=i)
                for i in range(len(codes))]
    results: list[SwarmResult] = []
    swarm = threading.Thread(target=lambda: results.append(run_swarm(
        server.url, codes, profiles, facts=StudyFacts.from_protocol(load_protocol(protocol)),
        max_seconds=240, patience=120)))
    probe_log = AckLog()
    probe = Connection(server.url, bot_codes(1, prefix="probe")[0], probe_log)
    consent: list[dict] = []
    consenting = threading.Thread(target=lambda: consent.append(probe.request(
        "submit", {"step": "consent", "data": {"agree": True}}, patience=HANG)))
    try:
        swarm.start()
        probe.open()
        wait_for_open_rounds(db, codes, at_least=1, timeout=HANG)
        pin = pin_the_log(db)
        filler = fill(disk)
        filled_at = time.time()
        wait_for(lambda: "cannot be written" in server.output(), HANG, "the fault in the log")
        consenting.start()
        wait_for(lambda: probe_log.refused, HANG, "the probe's consent refused")
        page = server_get(server, "/p/newcomer")
        assert page.status_code == 503 and int(page.headers["Retry-After"]) > 0
        live = server_get(server, "/console/live.json").json()["storage"]
        assert not live["available"] and live["disk"]["low"]
        time.sleep(max(0.0, filled_at + 2 * LATE_SECONDS - time.time()))  # rounds fall due
        wal_when_full = os.path.getsize(f"{db}-wal")
        filler.unlink()
        pin.close()
        wait_for(lambda: "written again" in server.output(), HANG, "the recovery in the log")
        swarm.join(timeout=300)
        consenting.join(timeout=HANG)
        assert not swarm.is_alive() and results, server.output()
        free_after = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    finally:
        probe.close()
        server.stop()
    result = results[0]
    output = server.output()
    assert [o.error for o in result.outcomes] == [None] * len(codes), result.summary()
    assert {o.final_step for o in result.outcomes} == {"done"}
    assert missing_acknowledged(db, result.log) == []
    assert {reason for _, _, reason in probe_log.refused} == {"storage-unavailable"}
    assert consent and consent[0]["ok"], consent
    assert missing_acknowledged(db, probe_log) == []
    reasons = [reason for _, _, reason in result.log.refused]
    # A message sent again after the disk came back may find its moment gone: its round
    # closed, or the rounds the scheduler closed meanwhile moved the step on.
    assert set(reasons) <= {"storage-unavailable", "round-closed", "out-of-order"}, reasons
    assert output.count("cannot be written") <= 2, output
    assert output.count("written again") == 1 and "Traceback" not in output, output
    late = query(db, "SELECT close_reason, close_delay FROM rounds WHERE close_reason = 'late'")
    assert late and all(row["close_delay"] > LATE_SECONDS for row in late)
    assert {row["close_reason"] for row in query(db, "SELECT close_reason FROM rounds")} <= {
        "deadline", "late"}
    # The space freed went to the study, not to a log that kept what the full disk left.
    assert os.path.getsize(f"{db}-wal") <= max(wal_when_full, 4 * 1024 * 1024)
    assert free_after > 8 * 1024 * 1024


def server_get(server: ServeProcess, path: str) -> requests.Response:
    return requests.get(server.url + path, timeout=10)
