"""Several server processes on one database: the scheduler's lease, heartbeats, the console's
connection counts, and writes from two processes at once."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from study.storage.database import Storage
from study.web.participant import sockets
from study.web.participant.outbox import Outbox
from study.web.serving.processes import LEASE_SECONDS, Processes


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_one_process_holds_the_lease_until_it_stops_renewing(tmp_path):
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    first, second = Processes(storage, clock), Processes(storage, clock)
    assert first.beat() and not second.beat()
    clock.now += LEASE_SECONDS * 0.9
    assert first.beat() and not second.beat()  # renewed in time: still the first's
    clock.now += LEASE_SECONDS * 0.9
    assert not second.beat()
    clock.now += LEASE_SECONDS + 0.01  # the first is silent past its lease: taken over
    assert second.beat() and not first.beat()
    assert storage.one("SELECT holder FROM leases")["holder"] == second.id


def test_a_clean_stop_frees_the_lease_at_once(tmp_path):
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    first, second = Processes(storage, clock), Processes(storage, clock)
    assert first.beat()
    first.leave()
    assert second.beat()


def test_liveness_and_connections_count_only_live_processes(tmp_path):
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    first, second = Processes(storage, clock), Processes(storage, clock)
    first.beat()
    second.beat()
    first.connected("sid-a", "code-1")
    second.connected("sid-b", "code-1")
    second.connected("sid-c", "code-2")
    assert first.connection_counts() == {"code-1": 2, "code-2": 1}
    assert first.others_alive() and second.others_alive()
    clock.now += 5  # the second dies without a goodbye; the first goes on beating
    first.beat()
    assert not first.others_alive()
    assert first.connection_counts() == {"code-1": 1}
    first.forget_dead()
    assert storage.one("SELECT count(*) AS n FROM connections")["n"] == 1
    assert first.last_sign_of_life() == clock.now - 5
    second.disconnected("sid-b")


def _increment(path: str, times: int) -> None:
    """Read a counter, then write it plus one, ``times`` times: a lost update or a
    'database is locked' would show in the final count or as an exception."""
    storage = Storage(Path(path))
    for _ in range(times):
        with storage.event() as db:
            value = storage.one("SELECT value FROM counter WHERE id = 1")["value"]
            db.execute("UPDATE counter SET value = ? WHERE id = 1", (value + 1,))
    storage.close()


def test_two_writer_processes_wait_their_turn_and_lose_no_update(tmp_path):
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    storage.db.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER)")
    storage.db.execute("INSERT INTO counter VALUES (1, 0)")
    storage.db.conn.commit()
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_increment, args=(str(path), 300)) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=300)
    assert [w.exitcode for w in writers] == [0, 0]
    assert storage.one("SELECT value FROM counter WHERE id = 1")["value"] == 600


class RecordingSocketIO:
    """What the notifier hands Flask-SocketIO: the rooms with a connection on this process,
    and every emit with whether it skips the message queue."""

    def __init__(self, local_rooms: set[str]) -> None:
        self.server = SimpleNamespace(manager=SimpleNamespace(
            rooms={"/": {room: {"sid": "eio"} for room in local_rooms}}))
        self.emits: list[tuple[list[str], bool]] = []

    def emit(self, event: str, payload: dict, to: list[str], ignore_queue: bool = False) -> None:
        self.emits.append((to, ignore_queue))


def test_a_push_skips_the_queue_only_for_a_participant_connected_here_alone(tmp_path):
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    here, other = Processes(storage, clock), Processes(storage, clock)
    here.connected("sid-a", "alone-here")
    here.connected("sid-b", "two-tabs")
    other.connected("sid-c", "two-tabs")
    other.connected("sid-d", "elsewhere")
    socketio = RecordingSocketIO({"alone-here", "two-tabs"})
    notify = sockets.Notifier(socketio, here, shared=True)
    asked: list[str] = []
    storage.db.conn.set_trace_callback(asked.append)
    notify([(code, "station", {}) for code in ("alone-here", "two-tabs", "elsewhere")])
    storage.db.conn.set_trace_callback(None)
    assert socketio.emits == [(["alone-here"], True), (["two-tabs"], False),
                              (["elsewhere"], False)]
    assert len([sql for sql in asked if "FROM connections" in sql]) == 1  # once a flush
    one_process = RecordingSocketIO({"alone-here"})
    sockets.Notifier(one_process, here, shared=False)([("alone-here", "station", {})])
    assert one_process.emits == [(["alone-here"], False)]


def test_where_a_message_s_pushes_go_is_asked_inside_its_transaction(tmp_path):
    """Asked after the commit, a worker sharing the file would find the other's commits and
    read SQLite's pages again; asked before it, a tab joining on another process waits
    for the commit and then reads the state itself."""
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    here, other = Processes(storage, clock), Processes(storage, clock)
    here.connected("sid-a", "mate-a")
    here.connected("sid-b", "mate-b")
    other.connected("sid-c", "mate-b")
    socketio = RecordingSocketIO({"mate-a", "mate-b"})
    outbox = Outbox(storage, None, None, sockets.Notifier(socketio, here, shared=True))
    asked: list[str] = []
    storage.db.conn.set_trace_callback(asked.append)
    with storage.event():
        outbox.queue("mate-a", "station", {"seat": 1})
        outbox.queue("mate-b", "station", {"seat": 1})
        outbox.locate()
    outbox.flush()
    storage.db.conn.set_trace_callback(None)
    lookups = [i for i, sql in enumerate(asked) if "FROM connections" in sql]
    assert len(lookups) == 1 and lookups[0] < asked.index("COMMIT")
    assert socketio.emits == [(["mate-a"], True), (["mate-b"], False)]


def test_one_payload_for_several_participants_is_one_emit_to_their_rooms(tmp_path):
    """A teammate's station, queued once for each of the others, is encoded once; where
    the message queue is needed for some of them, those get it through the queue."""
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    here, other = Processes(storage, clock), Processes(storage, clock)
    for sid, code in (("sid-a", "mate-a"), ("sid-b", "mate-b"), ("sid-c", "mate-c")):
        here.connected(sid, code)
    other.connected("sid-d", "mate-c")
    station, state = {"seat": 1}, {"step": "session-1"}
    pushes = [("mate-a", "station", station), ("mate-b", "station", station),
              ("mate-c", "station", station), ("mate-a", "state", state),
              ("mate-b", "state", dict(state))]
    one_process = RecordingSocketIO({"mate-a", "mate-b", "mate-c"})
    sockets.Notifier(one_process, here, shared=False)(pushes)
    assert one_process.emits == [(["mate-a", "mate-b", "mate-c"], False),
                                 (["mate-a"], False), (["mate-b"], False)]
    shared = RecordingSocketIO({"mate-a", "mate-b", "mate-c"})
    sockets.Notifier(shared, here, shared=True)(pushes)
    assert shared.emits == [(["mate-a", "mate-b"], True), (["mate-c"], False),
                            (["mate-a"], True), (["mate-b"], True)]


def count_event(storage: Storage) -> None:
    with storage.event() as db:
        db.execute("INSERT INTO counters (name, count, at) VALUES ('n', 1, 0) ON CONFLICT "
                   "(name) DO UPDATE SET count = count + 1")


def test_the_time_a_process_held_the_write_lock_goes_into_the_heartbeat(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")
    storage.one("SELECT count(*) FROM participants")  # a read takes no write lock
    held = storage.lock_held  # the schema's transaction
    started = time.monotonic()
    with storage.event():
        time.sleep(0.02)  # the transaction's work
    with pytest.raises(ZeroDivisionError), storage.event():  # a rolled-back one counts too
        time.sleep(0.02)
        raise ZeroDivisionError
    elapsed = time.monotonic() - started
    assert 0.04 <= storage.lock_held - held <= elapsed
    processes, recorded = Processes(storage, Clock()), storage.lock_held
    processes.beat()  # its own transaction counts from the next beat on
    row = storage.one("SELECT lock_held FROM processes WHERE id = ?", (processes.id,))
    assert row == {"lock_held": recorded} and storage.lock_held > recorded


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_the_logs_syncs_and_their_seconds_go_into_the_heartbeat(tmp_path, durability):
    storage = Storage(tmp_path / "study.sqlite", durability=durability)
    processes = Processes(storage, Clock())
    processes.beat()
    syncs, seconds = storage.syncs()  # as the next beat finds them: its own sync comes after
    processes.beat()
    row = storage.one("SELECT syncs, sync_seconds FROM processes WHERE id = ?",
                      (processes.id,))
    assert row == {"syncs": syncs, "sync_seconds": seconds}
    assert (syncs > 0 and seconds > 0) if durability == "full" else (syncs, seconds) == (0, 0)


def test_the_time_waited_for_another_processs_write_lock_goes_into_the_heartbeat(
        tmp_path, monkeypatch):
    path = tmp_path / "study.sqlite"
    holder, waiter = Storage(path), Storage(path)  # two connections, as two processes
    count_event(waiter)
    assert waiter.lock_wait == 0.0  # nobody else wrote: no wait
    asked_again, held = threading.Event(), threading.Event()
    sleep, waiting_thread = time.sleep, threading.current_thread()

    def noting(seconds: float) -> None:  # the waiter's pause before asking again
        if threading.current_thread() is waiting_thread:  # not another thread's nap
            asked_again.set()
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", noting)

    def hold() -> None:
        with holder.event():  # the write lock, until the waiter has found it taken
            held.set()
            asked_again.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(30)
    started = time.monotonic()
    count_event(waiter)
    elapsed = time.monotonic() - started
    thread.join()
    assert asked_again.is_set() and 0.0 < waiter.lock_wait <= elapsed
    processes = Processes(waiter, Clock())
    processes.beat()
    row = waiter.one("SELECT lock_wait FROM processes WHERE id = ?", (processes.id,))
    assert row == {"lock_wait": waiter.lock_wait}


def test_the_console_sees_each_live_process_and_its_share_of_time_waiting_for_the_lock(
        tmp_path):
    storage, clock = Storage(tmp_path / "study.sqlite"), Clock()
    first, second = Processes(storage, clock), Processes(storage, clock)
    first.beat()
    clock.now += 10
    storage.lock_wait = 2.5  # the second process's connection waited 2.5 s in its 20 s
    storage.lock_held = 6.0  # and held the lock 6 s
    second.beat()
    clock.now += 20
    first.beat()
    second.beat()
    seen = second.alive()  # oldest first; this test's two share one storage and pid
    assert [(p["pid"], p["this"], p["started_at"]) for p in seen] == [
        (os.getpid(), False, 1_000.0), (os.getpid(), True, 1_010.0)]
    assert [p["lock_wait_share"] for p in seen] == [round(2.5 / 30, 3), round(2.5 / 20, 3)]
    # The beats are events too: the lock they held themselves (milliseconds of real time
    # on a busy machine) comes on top of the 6 s set here.
    assert [p["lock_held_share"] for p in seen] == [pytest.approx(6 / 30, abs=0.005),
                                                    pytest.approx(6 / 20, abs=0.005)]
    clock.now += 5  # the first stops beating: no longer answering
    second.beat()
    assert [p["this"] for p in second.alive()] == [True]
