"""The round clock: the deadline queue, the team formed off the clock, and recovery after
downtime, driven through the journey with an injected clock."""

from __future__ import annotations

from support.web import FakeClock, make_app, msg


def at_practice(journey, code: str) -> None:
    journey.enrol(code)
    for step, data in (("consent", {"agree": True}), ("themes", {}),
                       ("preferences", {"ratings": {"ravens": 6, "steelers": 2}})):
        assert journey.handle("submit", code, {"msg_id": msg(), "step": step,
                                               "data": data})["ok"]


def start(journey, code: str, number: int) -> dict:
    reply = journey.handle("start_round", code, {"msg_id": msg(), "round": number})
    assert reply["ok"], reply
    return reply["state"]["round"]


def test_the_queue_gives_the_earliest_open_deadline_and_closes_only_what_is_due(
        tmp_path, teammates):
    clock = FakeClock()
    journey = make_app(tmp_path, teammates, clock).extensions["study"]
    assert journey.next_deadline() is None
    for code in ("early", "late"):
        at_practice(journey, code)
    early = start(journey, "early", 1)
    clock.advance(1.0)
    late = start(journey, "late", 1)
    assert journey.next_deadline() == early["deadline"]
    assert journey.tick(early["deadline"] - 0.001) == 0
    assert journey.tick(early["deadline"]) == 1
    assert journey.next_deadline() == late["deadline"]
    assert journey.tick(late["deadline"] + 5) == 1
    assert journey.tick(late["deadline"] + 10) == 0  # closed once, never twice
    closed = journey.storage.all("SELECT closed_at, deadline, close_reason FROM rounds")
    assert {r["close_reason"] for r in closed} == {"deadline"}


def test_the_team_is_formed_after_the_last_practice_round_closes(tmp_path, teammates):
    """The tick only closes the round; the team comes from work handed off the clock, and a
    crash before that work ran is completed at the next start."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock)
    journey = app.extensions["study"]
    handed_off: list = []
    journey.agent_team.background = handed_off.append
    at_practice(journey, "pp1")
    practice_rounds = len(journey.protocol.practice)
    for number in range(1, practice_rounds + 1):
        round_state = start(journey, "pp1", number)
        clock.now = round_state["deadline"]
        assert journey.tick(clock.now) == 1
    assert len(handed_off) == 1
    state = journey.state("pp1")
    assert state["step"] == "practice" and state["round"]["next"] is None
    assert journey.storage.all("SELECT * FROM teammates") == []

    restarted = make_app(tmp_path, teammates, clock).extensions["study"]  # the crash
    assert restarted.form_pending_teams() == 1
    assert restarted.state("pp1")["step"] == "teammate"
    handed_off[0]()  # the old process's work, if it still ran, changes nothing
    assert len(restarted.storage.all("SELECT * FROM teammates")) == 1
    assert len(restarted.storage.all("SELECT * FROM sessions WHERE number > 0")) == 2


def test_recovery_closes_overdue_rounds_and_the_teammate_stops_at_the_crash(
        tmp_path, teammates):
    clock = FakeClock()
    journey = make_app(tmp_path, teammates, clock).extensions["study"]
    at_practice(journey, "pp2")
    for number in range(1, len(journey.protocol.practice) + 1):
        round_state = start(journey, "pp2", number)
        clock.now = round_state["deadline"]
        journey.tick(clock.now)
    for step in ("teammate", "intro-1"):
        assert journey.handle("submit", "pp2", {"msg_id": msg(), "step": step, "data": {}})["ok"]
    journey.storage.update("teammates", journey.storage.participant("pp2")["id"],
                           {"c_squares": 0.99, "c_letters": 0.99})
    round_state = start(journey, "pp2", 1)
    times = round_state["teammate"]["times"]
    crash = times[0] + 0.001  # the teammate finished one cookie, then the server died
    clock.now = round_state["deadline"] + 30
    assert journey.recover(alive_until=crash) == 1
    row = journey.storage.one("SELECT * FROM rounds WHERE id = ?", (round_state["id"],))
    assert row["close_reason"] == "recovery" and row["alive_until"] == crash
    assert row["teammate_cookies"] == 1 < len(times)
    assert len(journey.storage.all("SELECT * FROM cookies WHERE round_id = ? AND actor = "
                                   "'teammate'", (row["id"],))) == 1
