"""Teammates' stations pushed at most once a second to each page (``station_pushes``).

The interval's clock is the test's: nothing sleeps, and what waited is sent by calling
``send_due`` as the worker's background task would.
"""

from __future__ import annotations

from typing import Any

import pytest

from study.web.participant.station_pushes import EVENT, StationPushes


class Sent:
    """What the pushes' sender was given, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], set[str] | None]] = []

    def __call__(self, pushes: list[Any], alone_here: set[str] | None) -> None:
        self.calls.append((pushes, alone_here))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def station(seat: int, placed: int, cookies: int = 0, team_round: int = 7) -> dict[str, Any]:
    return {"team_round": team_round, "seat": seat, "cookies": cookies, "placed": placed}


def throttle(interval: float = 1.0) -> tuple[StationPushes, Sent, Clock]:
    sent, clock = Sent(), Clock()
    return StationPushes(sent, interval, clock), sent, clock


def test_a_page_that_heard_of_no_station_within_the_interval_is_told_at_once():
    pushes, _, _ = throttle()
    one = station(seat=1, placed=1)
    now = pushes.admit([("bo", "station", one), ("cy", "station", one),
                        ("bo", "state", {"step": "session-1"})], None)
    assert now[0] == ("bo", EVENT, {EVENT: [one]})
    assert now[1][2] is now[0][2]  # one station told to two pages: one payload, one encoding
    assert now[2] == ("bo", "state", {"step": "session-1"})  # other pushes pass as they were


def test_what_changes_within_the_interval_waits_and_goes_in_one_push_each_station_at_its_latest():
    pushes, sent, clock = throttle()
    pushes.admit([("bo", "station", station(seat=0, placed=1))], None)
    clock.now += 0.3
    held = [("bo", "station", station(seat=0, placed=2)),
            ("bo", "station", station(seat=2, placed=1))]
    assert pushes.admit(held, None) == []
    clock.now += 0.4
    assert pushes.admit([("bo", "station", station(seat=0, placed=0, cookies=1))], None) == []
    assert pushes.send_due() == 101.0  # the page's interval has not passed: nothing yet
    assert sent.calls == []
    clock.now = 101.0
    assert pushes.send_due() == 102.0  # a push starts the page's next interval
    ((due, alone),) = sent.calls
    assert due == [("bo", EVENT, {EVENT: [station(seat=0, placed=0, cookies=1),
                                          station(seat=2, placed=1)]})]
    assert alone is None  # one process serves every page


def test_a_page_quiet_for_an_interval_is_told_at_once_again():
    pushes, sent, clock = throttle()
    pushes.admit([("bo", "station", station(seat=0, placed=1))], None)
    clock.now += 1.0
    assert pushes.send_due() is None  # nothing waited: the page's interval just ends
    assert sent.calls == []
    clock.now += 5.0
    assert pushes.admit([("bo", "station", station(seat=0, placed=2))], None) != []


def test_each_page_keeps_an_interval_of_its_own():
    pushes, sent, clock = throttle()
    pushes.admit([("bo", "station", station(seat=0, placed=1))], None)
    clock.now += 0.5
    assert pushes.admit([("cy", "station", station(seat=0, placed=2))], None) != []
    assert pushes.admit([("bo", "station", station(seat=0, placed=2))], None) == []
    clock.now += 0.5
    assert pushes.send_due() == 101.5  # bo's waited; cy's interval ends next
    assert [push[0] for push, _ in sent.calls] == [("bo", EVENT, {EVENT: [station(0, 2)]})]


def test_where_several_processes_serve_the_study_a_page_that_waited_goes_where_it_last_was():
    pushes, sent, clock = throttle()
    pushes.admit([("bo", "station", station(seat=0, placed=1)),
                  ("cy", "station", station(seat=0, placed=1))], {"bo", "cy"})
    pushes.admit([("bo", "station", station(seat=0, placed=2)),
                  ("cy", "station", station(seat=0, placed=2))], {"bo"})  # cy elsewhere too
    clock.now += 1.0
    pushes.send_due()
    ((due, alone),) = sent.calls
    assert [code for code, _, _ in due] == ["bo", "cy"]
    assert alone == {"bo"}


def test_no_interval_pushes_every_station_at_once():
    pushes, _, _ = throttle(interval=0)
    for placed in (1, 2, 3):
        assert pushes.admit([("bo", "station", station(seat=0, placed=placed))], None) != []
    assert pushes.send_due() is None


class Stop(Exception):
    """Ends ``run``'s loop from its sleep."""


def test_a_failed_send_loses_its_stations_and_the_later_ones_still_go_out(caplog):
    sent, clock = Sent(), Clock()
    failures = [ConnectionError("the message queue is away")]

    def send(due: list[Any], alone_here: set[str] | None) -> None:
        if failures:
            raise failures.pop()
        sent(due, alone_here)

    pushes = StationPushes(send, 1.0, clock)
    pushes.admit([("bo", "station", station(seat=0, placed=1))], None)
    clock.now += 0.5
    pushes.admit([("bo", "station", station(seat=0, placed=2))], None)  # sent at 101: fails
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:
            pushes.admit([("bo", "station", station(seat=0, placed=3))], None)
        clock.now += seconds
        if len(naps) == 3:
            raise Stop

    with pytest.raises(Stop):
        pushes.run(sleep)
    assert naps == [0.5, 1.0, 1.0]
    assert sent.calls == [([("bo", EVENT, {EVENT: [station(seat=0, placed=3)]})], None)]
    assert "teammates' stations could not be pushed" in caplog.text
