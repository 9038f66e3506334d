"""The journey's parts on a real SQLite file: pushes leave only after the transaction that
queued them, and a step entered is logged (``study.web.participant.outbox``, ``records``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from support.web import DEMO, FakeClock

from study.protocol.loader import load_protocol
from study.storage.database import Storage
from study.web.participant import withdrawal
from study.web.participant.journey import Journey
from study.web.participant.outbox import Push, Unheard
from study.web.participant.pages import progress, steps_of
from study.web.participant.records import Records
from study.web.participant.rejections import Rejected


class Page(Unheard):
    """A notify sink that records each push and whether a transaction was open at the time."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.pushes: list[tuple[str, str, bool]] = []

    def __call__(self, pushes: list[Push], alone_here: set[str] | None = None) -> None:
        self.pushes += [(code, event, self.storage.db.conn.in_transaction)
                        for code, event, _ in pushes]


def journey_with_page(tmp_path: Path, teammates: Any) -> tuple[Journey, Page]:
    storage = Storage(tmp_path / "study.sqlite")
    page = Page(storage)
    return Journey(load_protocol(DEMO), storage, teammates, FakeClock(), page), page


def test_states_queued_in_a_transaction_are_pushed_after_it(tmp_path, teammates):
    journey, page = journey_with_page(tmp_path, teammates)
    ids = {journey.enrol(code)["id"] for code in ("out-1", "out-2")}
    with journey.storage.event():
        journey.outbox.queue_states(ids)
        assert page.pushes == []
    journey.outbox.flush()
    assert sorted(page.pushes) == [("out-1", "state", False), ("out-2", "state", False)]
    journey.outbox.flush()
    assert len(page.pushes) == 2  # each push leaves once


def test_pushed_states_leave_one_at_a_time_with_a_pause_between(tmp_path, teammates):
    """A tick after teams formed together pushes dozens of states: each leaves as soon as
    it is built, and the others' messages run before the next is built."""
    journey, page = journey_with_page(tmp_path, teammates)
    ids = {journey.enrol(f"many-{n}")["id"] for n in range(5)}
    sent_at_pause: list[int] = []
    journey.outbox.pause = lambda: sent_at_pause.append(len(page.pushes))
    journey.outbox.queue("before-1", "station", {})
    journey.push_states(ids)
    assert page.pushes[0][0] == "before-1"  # what was queued before goes first
    assert sorted(code for code, _, _ in page.pushes[1:]) == [f"many-{n}" for n in range(5)]
    assert sent_at_pause == [2, 3, 4, 5, 6]


def test_a_flush_sends_only_what_its_own_thread_queued(tmp_path, teammates):
    """Events of several participants share a commit, and each flushes after it: one must
    not send what another event queued in a transaction that has not committed yet."""
    journey, page = journey_with_page(tmp_path, teammates)
    other = journey.enrol("other-1")["id"]
    queued, committing = threading.Event(), threading.Event()

    def another_event() -> None:
        with journey.storage.event():
            journey.outbox.queue_states({other})
            queued.set()
            committing.wait(10)
        journey.outbox.flush()

    thread = threading.Thread(target=another_event)
    thread.start()
    queued.wait(10)
    journey.outbox.queue("own-1", "station", {})
    journey.outbox.flush()
    assert [code for code, _, _ in page.pushes] == ["own-1"]
    committing.set()
    thread.join(10)
    assert [code for code, _, _ in page.pushes] == ["own-1", "other-1"]  # after its commit


def test_what_a_refused_message_queued_is_not_sent(tmp_path, teammates, monkeypatch):
    """Its savepoint was rolled back: a push of it would tell of a change never stored."""
    journey, page = journey_with_page(tmp_path, teammates)
    code = journey.enrol("refused-1")["code"]

    def queues_then_refuses(participant, payload, now) -> None:
        journey.outbox.queue("teammate-1", "station", {"cookies": 1})
        raise Rejected("round-closed", "after queueing")

    monkeypatch.setattr(journey.rounds, "progress", queues_then_refuses)
    reply = journey.handle("progress", code, {"msg_id": "refused-msg-1"})
    assert reply["reason"] == "round-closed"
    journey.outbox.flush()
    assert page.pushes == []


def test_an_operation_that_fails_forgets_its_pushes(tmp_path, teammates):
    journey, page = journey_with_page(tmp_path, teammates)
    try:
        with journey.outbox.forgotten_on_failure():
            journey.outbox.queue("gone-1", "state", {})
            raise OSError("disk full")
    except OSError:
        pass
    journey.outbox.flush()
    assert page.pushes == []


def test_participants_no_longer_on_record_are_not_pushed(tmp_path, teammates):
    journey, page = journey_with_page(tmp_path, teammates)
    gone = journey.enrol("gone-1")["id"]
    journey.storage.delete_participants([gone])
    journey.push_states({gone})
    journey.announce("gone-1")
    assert page.pushes == []


def test_a_step_entered_is_logged_and_done_issues_the_withdrawal_link(tmp_path, teammates):
    journey, _ = journey_with_page(tmp_path, teammates)
    storage = journey.storage
    pid = journey.enrol("done-1")["id"]
    with storage.event():
        Records(storage).advance(pid, "done", 5.0)
    participant = storage.participant("done-1")
    assert (participant["step"], participant["finished_at"]) == ("done", 5.0)
    logged = storage.all("SELECT step, at FROM steps WHERE participant_id = ?", (pid,))
    assert logged[-1] == {"step": "done", "at": 5.0}
    token = withdrawal.token_of(storage, pid)
    assert token is not None and withdrawal.participant_of(storage, token)["code"] == "done-1"


def test_the_progress_bar_rises_through_the_journey_and_is_full_at_its_end(tmp_path,
                                                                           teammates):
    journey, _ = journey_with_page(tmp_path, teammates)
    steps = steps_of(journey.protocol)
    bars = [progress(journey.protocol, step) for step in steps]
    assert {bar["total"] for bar in bars} == {len(steps)}
    assert [bar["index"] for bar in bars] == [*range(len(steps) - 1), len(steps)]
    full = {"index": len(steps), "total": len(steps)}
    for code, end in (("finisher", "done"), ("leaver", "withdrawn")):
        pid = journey.enrol(code)["id"]
        assert journey.state(code)["progress"] == {"index": 0, "total": len(steps)}
        with journey.storage.event():
            Records(journey.storage).advance(pid, end, 5.0)
        assert journey.state(code)["progress"] == full
