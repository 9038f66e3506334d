"""Full durability by group commit (``study.storage.wal_sync.WalSync``): events committed while a
sync of the write-ahead log runs share the next one, so concurrent events cost fewer fsyncs
than events, and none returns (is acknowledged) before a sync that began after its commit
has ended.

The sync used here is the real one (``fsync_file``), wrapped to record, as each sync
begins, which rows were committed then: those, and only those, are durable once it ends.
The first sync waits until every event has committed, so the grouping is decided, not left
to timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.storage import HANG, insert_participant, stored_codes, wait_for

from study.storage.database import BATCH_LIMIT, Storage, StorageUnavailable
from study.storage.wal_sync import fsync_file

EVENTS = 20


class RecordingSync:
    """The real fsync, recording what each sync makes durable; the first one holds until
    ``hold_first`` says go."""

    def __init__(self, path: Path, hold_first: Callable[[], None]) -> None:
        self.path = path
        self.hold_first = hold_first
        self.durable: set[str] = set()
        self.runs = 0
        self.lock = threading.Lock()

    def __call__(self, wal: Path) -> None:
        covered = stored_codes(self.path)
        with self.lock:
            self.runs += 1
            first = self.runs == 1
        if first:
            self.hold_first()
        fsync_file(wal)
        with self.lock:
            self.durable |= covered


def test_concurrent_events_share_fsyncs_and_each_returns_only_once_durable(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")
    assert storage.wal_sync is not None
    before, syncs_before = storage.wal_sync.committed, storage.wal_sync.syncs
    codes = {f"event{i}" for i in range(EVENTS)}
    sync = RecordingSync(storage.path,
                         lambda: wait_for(lambda: stored_codes(storage.path) == codes))
    storage.wal_sync.sync = sync
    durable_on_return: dict[str, bool] = {}

    def run(code: str) -> None:
        insert_participant(storage, code)
        with sync.lock:
            durable_on_return[code] = code in sync.durable

    threads = [threading.Thread(target=run, args=(code,)) for code in sorted(codes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG)
        assert not thread.is_alive()
    assert durable_on_return == dict.fromkeys(codes, True)
    # Events queued behind another's transaction share its commit, too.
    assert 1 <= storage.wal_sync.committed - before <= EVENTS
    # The first sync covered what was committed when it began; the rest shared the second.
    assert storage.wal_sync.syncs - syncs_before == sync.runs <= 2 < EVENTS
    assert storage.wal_sync.synced == storage.wal_sync.committed


def test_one_event_alone_is_synced_before_it_returns(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")
    sync = RecordingSync(storage.path, lambda: None)
    storage.wal_sync.sync = sync
    syncs = storage.wal_sync.syncs
    insert_participant(storage, "alone")
    assert "alone" in sync.durable
    assert storage.wal_sync.syncs == syncs + 1


def test_a_failed_sync_is_not_acknowledged_and_the_next_event_syncs_again(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")

    def failing(_: Path) -> None:
        raise OSError(5, "Input/output error")

    storage.wal_sync.sync = failing
    with pytest.raises(StorageUnavailable, match="could not be synced"):
        insert_participant(storage, "unsynced")
    storage.wal_sync.sync = fsync_file
    insert_participant(storage, "synced")
    assert storage.wal_sync.synced == storage.wal_sync.committed


def test_events_made_durable_together_share_one_sync_at_the_end(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")
    sync = RecordingSync(storage.path, lambda: None)
    storage.wal_sync.sync = sync
    with storage.durable_together():
        insert_participant(storage, "closing")
        insert_participant(storage, "timer")
        assert sync.runs == 0 and storage.wal_sync.synced < storage.wal_sync.committed
    assert sync.runs == 1 and sync.durable == {"closing", "timer"}
    insert_participant(storage, "after")  # each event waits for its own sync again
    assert sync.runs == 2 and "after" in sync.durable


def test_the_seconds_the_syncs_took_are_counted_for_the_heartbeat(tmp_path):
    storage = Storage(tmp_path / "study.sqlite")
    syncs, seconds = storage.syncs()

    def slow(wal: Path) -> None:
        time.sleep(0.05)  # a disk that takes its time
        fsync_file(wal)

    storage.wal_sync.sync = slow
    for code in ("first", "second"):
        insert_participant(storage, code)
    after, waited = storage.syncs()
    assert after == syncs + 2 and waited - seconds >= 0.1


def test_normal_durability_runs_no_sync_of_its_own(tmp_path):
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    assert storage.wal_sync is None
    insert_participant(storage, "normal")
    storage.wait_durable()  # nothing to wait for
    assert stored_codes(storage.path) == {"normal"} and storage.syncs() == (0, 0.0)


def test_a_refusal_counted_only_still_waits_for_what_it_reports(tmp_path):
    """Beyond the kept rows a refusal writes nothing, yet it may report a row (a duplicate)
    committed by an event still waiting for its sync: it waits for every commit so far."""
    storage = Storage(tmp_path / "study.sqlite")
    insert_participant(storage, "p")
    pid = storage.participant("p")["id"]
    for _ in range(5):
        storage.reject(pid, "progress", None, "duplicate", "", {}, 1.0)
    storage.wal_sync.committed += 1  # a commit of another event, not yet synced
    syncs = storage.wal_sync.syncs
    storage.reject(pid, "progress", None, "duplicate", "", {}, 1.0)
    assert storage.wal_sync.syncs == syncs + 1
    assert storage.wal_sync.synced == storage.wal_sync.committed


GEVENT_EVENTS = """
import json, sys
from gevent import monkey
monkey.patch_all()
import gevent
from study.storage.database import Storage

storage = Storage(sys.argv[1])
sync = storage.wal_sync
def event(i):
    with storage.event() as db:
        db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                   "VALUES (?, 'demo', 1.0, 'consent')", (f"g{i}",))
        batch = storage._batch  # the commit this event shares
    return sync.synced >= batch.commit
syncs, committed = sync.syncs, sync.committed
greenlets = [gevent.spawn(event, i) for i in range(int(sys.argv[2]))]
gevent.joinall(greenlets)
print(json.dumps({"syncs": sync.syncs - syncs, "commits": sync.committed - committed,
                  "durable_on_return": [g.value for g in greenlets]}))
"""


def test_under_gevent_greenlets_share_commits_and_commits_share_syncs(tmp_path):
    """As under ``study serve``: the greenlets ready to run share a commit, and a sync run
    by the sync helper covers every commit made before it, so there are fewer syncs than commits,
    and each greenlet returns only once its commit is on the disk."""
    greenlets = 10 * BATCH_LIMIT  # ten commits at least: ready greenlets share one each
    run = subprocess.run([sys.executable, "-c", GEVENT_EVENTS, str(tmp_path / "g.sqlite"),
                          str(greenlets)], capture_output=True, text=True, timeout=HANG,
                         check=True)
    result = json.loads(run.stdout)
    assert result["durable_on_return"] == [True] * greenlets
    assert 1 <= result["syncs"] < result["commits"] < greenlets


GEVENT_HELPER = """
import json, os, signal, sys, time
from gevent import monkey
monkey.patch_all()
import gevent
from study.storage.database import Storage, StorageUnavailable

storage = Storage(sys.argv[1])
sync, hang = storage.wal_sync, float(sys.argv[2])
ticks = [0]

def ticker():
    while True:
        ticks[0] += 1
        gevent.sleep(0.001)

def insert(code):
    storage.insert("participants", {"code": code, "protocol": "demo", "created_at": 1.0,
                                    "step": "consent"})
    return sync.synced >= sync.committed

def while_helper_stopped(code):
    # the helper is stopped: the event's sync waits for it, and the loop goes on
    os.kill(sync.sync.pid, signal.SIGSTOP)
    event, start, give_up = gevent.spawn(insert, code), ticks[0], time.monotonic() + hang
    while ticks[0] < start + 5 and time.monotonic() < give_up:
        gevent.sleep(0.01)
    return event, ticks[0] - start, event.ready()

gevent.spawn(ticker)
first = insert("first")
helper = sync.sync.pid
event, ticked, returned = while_helper_stopped("slow")
os.kill(helper, signal.SIGCONT)
durable = event.get(timeout=hang)
event, _, _ = while_helper_stopped("lost")
os.kill(helper, signal.SIGKILL)
try:
    event.get(timeout=hang)
    refused = None
except StorageUnavailable as error:
    refused = str(error)
after = insert("after")
print(json.dumps({"first": first, "ticked_while_syncing": ticked,
                  "returned_before_synced": returned, "durable": durable,
                  "refused": refused, "after": after, "new_helper": sync.sync.pid != helper,
                  "synced_all": sync.synced == sync.committed}))
"""


def test_under_gevent_the_loop_goes_on_while_a_helper_syncs_the_log(tmp_path):
    """Under gevent the fsync is a helper process's: while it works (here: while it is
    stopped) the other greenlets run and the event waits, returning once synced; a helper
    that dies with a sync under way refuses that event, and the next event starts
    another helper and syncs again."""
    run = subprocess.run([sys.executable, "-c", GEVENT_HELPER, str(tmp_path / "s.sqlite"),
                          str(HANG / 4)], capture_output=True, text=True, timeout=HANG,
                         check=True)
    result = json.loads(run.stdout)
    assert result["first"] is True
    assert result["ticked_while_syncing"] >= 5 and result["returned_before_synced"] is False
    assert result["durable"] is True
    assert "could not be synced" in result["refused"]
    assert result["after"] is True and result["new_helper"] is True
    assert result["synced_all"] is True
