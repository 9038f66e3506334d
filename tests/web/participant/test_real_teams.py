"""Real teams through the real Socket.IO server and a real SQLite file (docs/teams.md).

The clock is injected: lobby timers, grace periods and deadlines are crossed by moving a
fake clock and calling ``tick(now)``, never by sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from support.people import Person, play_round, practise, running, tick_until, to_session
from support.teams import team_protocol
from support.web import FakeClock, journey, make_app, moment, msg, rows

from study.web.participant import playing
from study.web.participant.real_teams import play


def test_two_people_by_arrival_play_every_round_on_one_clock(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    assert ada.state()["step"] == "lobby"
    lobby = ada.state()["lobby"]
    assert (lobby["waiting"], lobby["needed"]) == (1, 2)
    assert lobby["shared_deadline"] == moment(lobby["entered_at"] + 300)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    assert [ada.state()["step"], bo.state()["step"]] == ["teammate", "teammate"]
    (team,) = rows(app, "SELECT * FROM teams")
    assert (team["formed_by"], team["persons"], team["humans"]) == ("arrival", 2, 2)
    assert [s["kind"] for s in rows(app, "SELECT kind FROM seats ORDER BY seat")] == \
        ["person", "person"]
    assert ada.state()["team"]["seats"][0]["you"] is True

    to_session(app, clock, [ada, bo], 1)
    first, second = running(ada), running(bo)
    assert first["started_at"] == second["started_at"]
    assert first["deadline"] == second["deadline"]
    refused = ada.send("start_round", {"round": 2})
    assert refused["reason"] == "out-of-order"
    assert [s["kind"] for s in first["stations"]] == ["person"]

    bo.client.get_received()
    clock.advance(1.5)
    assert ada.cookie(first)["ok"]
    (push,) = bo.pushed("stations")
    (station,) = push["stations"]
    assert (station["seat"], station["cookies"]) == (0, 1)
    assert running(bo)["stations"][0]["cookies"] == 1
    clock.advance(journey(app).protocol.round_seconds)
    journey(app).tick(clock.now)
    tick_until(app, clock, lambda: running(ada) is not None)
    play_round(app, clock, [ada, bo])
    for person in (ada, bo):
        assert person.state()["step"] == "questionnaire-1"
    team_kits = rows(app, "SELECT round, seat, task_type FROM team_allocations "
                          "WHERE session = 1 ORDER BY round, seat")
    for pid in (1, 2):
        seen = rows(app, "SELECT a.round, a.human AS seat, a.task_type FROM allocations a "
                         "JOIN sessions s ON s.id = a.session_id WHERE s.number = 1 AND "
                         "a.participant_id = ? ORDER BY a.round, a.human", pid)
        assert seen == team_kits
    sessions = rows(app, "SELECT participant_id, condition, team_id, participant_human FROM "
                         "sessions WHERE number = 1 ORDER BY participant_id")
    assert {s["condition"] for s in sessions} == {json.loads(team["condition_order"])[0]}
    assert [s["participant_human"] for s in sessions] == [0, 1]


def test_a_shared_timeout_starts_the_person_with_an_agent(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path, timers=(
        "shared_seconds = 30\nindividual_seconds = 90")))
    ada = Person(app, "ada-1")
    practise(app, clock, ada)
    deadline = ada.state()["lobby"]["deadline"]
    tick_until(app, clock, lambda: ada.state()["step"] != "lobby")
    assert clock.now >= deadline
    assert ada.state()["step"] == "teammate"
    (team,) = rows(app, "SELECT * FROM teams")
    assert team["formed_by"] == "shared-timeout"
    seats = rows(app, "SELECT * FROM seats ORDER BY seat")
    assert sorted(s["kind"] for s in seats) == ["agent", "person"]
    agent = next(s for s in seats if s["kind"] == "agent")
    assert agent["pool_team"] is not None and agent["participant_id"] is None
    (entry,) = rows(app, "SELECT * FROM lobby")
    assert (entry["outcome"], entry["team_id"]) == ("team", team["id"])

    to_session(app, clock, [ada], 1)
    (station,) = running(ada)["stations"]
    assert station["kind"] == "agent" and station["times"] == sorted(station["times"])
    play_round(app, clock, [ada])
    cookies = rows(app, "SELECT * FROM seat_cookies WHERE seat = ?", agent["seat"])
    assert len(cookies) == len(station["times"])


def test_an_individual_timeout_sends_the_person_away(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock,
                   team_protocol(tmp_path, timers="individual_seconds = 50",
                                 on_timeout="unmatched"))
    ada = Person(app, "ada-1")
    practise(app, clock, ada)
    lobby = ada.state()["lobby"]
    assert lobby["shared_deadline"] is None
    assert lobby["deadline"] == moment(lobby["entered_at"] + 50)
    clock.advance(30)
    bo = Person(app, "bo-22")
    bo.submit("consent", {"agree": True})
    tick_until(app, clock, lambda: ada.state()["step"] != "lobby")
    assert clock.now >= lobby["deadline"]
    assert ada.state()["step"] == "unmatched"
    assert rows(app, "SELECT outcome FROM lobby")[0]["outcome"] == "timeout"
    assert rows(app, "SELECT * FROM teams") == []


def test_a_person_may_leave_the_lobby_only_after_the_wait(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path, timers=(
        "individual_seconds = 300")))
    ada = Person(app, "ada-1")
    practise(app, clock, ada)
    assert ada.send("submit", {"step": "lobby", "data": {"leave": True}})["reason"] == \
        "out-of-order"
    clock.advance(41)
    assert ada.submit("lobby", {"leave": True})["step"] == "unmatched"
    assert rows(app, "SELECT outcome FROM lobby")[0]["outcome"] == "left"


def test_traits_form_the_mixed_team_and_pass_over_a_pair_that_is_not(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock,
                   team_protocol(tmp_path, formation="traits", timers="shared_seconds = 900"))
    # letters-fast people who prefer the squares theme are negative, the others positive
    negative, positive, other = (Person(app, code) for code in ("neg-1", "pos-1", "pos-2"))
    practise(app, clock, positive, squares=2, letters=2, ratings=(1, 7))
    practise(app, clock, other, squares=2, letters=3, ratings=(2, 6))
    assert rows(app, "SELECT * FROM teams") == []  # two positive people make Twins
    journey(app).tick(clock.now)  # the same people again: still no team
    assert rows(app, "SELECT * FROM teams") == []
    practise(app, clock, negative, squares=1, letters=6, ratings=(7, 1))
    (team,) = rows(app, "SELECT * FROM teams")
    assert (team["formed_by"], team["live_type"]) == ("traits", "mixed")
    members = {row["code"] for row in rows(
        app, "SELECT p.code FROM seats s JOIN participants p ON p.id = s.participant_id")}
    assert members == {"neg-1", "pos-1"}
    assert other.state()["step"] == "lobby"


def two_in_session(tmp_path, teammates) -> tuple[Any, FakeClock, Person, Person]:
    """Two people by arrival in the first round of session 1."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    to_session(app, clock, [ada, bo], 1)
    return app, clock, ada, bo


def test_a_teammates_elements_within_a_second_reach_the_page_in_one_push(tmp_path, teammates):
    app, _, ada, bo = two_in_session(tmp_path, teammates)
    stations = app.extensions["stations"]
    stations.clock = FakeClock()  # the interval's clock, moved by hand
    first = running(ada)
    target = first["target"]
    elements = target["letters"] if target["kind"] == "letters" else target["cells"]
    bo.client.get_received()
    for placed in (1, 2, 3):
        assert ada.send("progress", {"round_id": first["id"], "content": elements[:placed],
                                     "msg_id": msg()}) == {"ok": True}
    (push,) = bo.pushed("stations")  # the first at once, the others wait
    assert [(s["seat"], s["placed"]) for s in push["stations"]] == [(0, 1)]
    stations.clock.advance(1.0)
    stations.send_due()
    (push,) = bo.pushed("stations")
    assert [(s["seat"], s["cookies"], s["placed"]) for s in push["stations"]] == [(0, 0, 3)]
    assert ada.pushed("stations") == []  # a page is not told of its own station


def test_a_closed_page_past_the_grace_hands_the_seat_to_an_agent(tmp_path, teammates):
    app, clock, ada, bo = two_in_session(tmp_path, teammates)
    bo.leave()
    left = clock.now
    tick_until(app, clock, lambda: rows(app, "SELECT dropped_at FROM seats WHERE seat = 1")[0][
        "dropped_at"] is not None)
    assert clock.now - left > 5
    play_round(app, clock, [ada])
    tick_until(app, clock, lambda: running(ada) is not None)
    seat = rows(app, "SELECT * FROM seats WHERE seat = 1")[0]
    assert seat["drop_reason"] == "away"
    assert (seat["agent_from_session"], seat["agent_from_round"]) == (1, 2)
    assert rows(app, "SELECT step FROM participants WHERE code = 'bo-22'")[0]["step"] == \
        "dropped"
    (station,) = running(ada)["stations"]
    assert station["kind"] == "agent" and station["taken_over"] is True
    play_round(app, clock, [ada])
    assert rows(app, "SELECT count(*) AS n FROM rounds WHERE participant_id = 2 "
                     "AND team_round_id IS NOT NULL")[0]["n"] == 1
    assert rows(app, "SELECT DISTINCT seat FROM seat_cookies") in ([], [{"seat": 1}])
    assert ada.state()["step"] == "questionnaire-1"


def test_presence_is_scanned_once_a_second_at_most_however_many_deadlines_fall(
        tmp_path, teammates):
    app, clock, _ada, bo = two_in_session(tmp_path, teammates)

    def away_since() -> float | None:
        return rows(app, "SELECT away_since FROM seats WHERE seat = 1")[0]["away_since"]

    clock.advance(0.2)
    journey(app).tick(clock.now)  # looked at now
    bo.leave()
    journey(app).tick(clock.now + 0.5)  # a deadline half a second later: not again
    assert away_since() is None
    journey(app).tick(clock.now + 1.0)
    assert away_since() == moment(clock.now + 1.0)


def test_a_team_waiting_for_its_members_is_looked_at_once_a_second_at_most(
        tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))

    def session() -> int:
        return rows(app, "SELECT session FROM teams")[0]["session"]

    for person in (ada, bo):
        person.submit("teammate")
    ada.submit("intro-1")
    journey(app).tick(clock.now)  # looked at now: ada waits for bo
    bo.submit("intro-1")
    journey(app).tick(clock.now + 0.5)  # a deadline half a second later: not again
    assert session() == 0
    journey(app).tick(clock.now + 1.0)
    assert session() == 1


def test_each_team_keeps_a_clock_of_its_own_however_late_the_ticks(tmp_path, teammates):
    """Two teams ready 0.2 s apart, both seen by one once-a-second tick, start their first
    rounds a break after each became ready; rounds closed late by one tick start again a
    break after their own deadlines. Timed from the ticks, the two would share one clock
    to the end, as a dozen teams at a time did at a thousand people."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    people = {f"mate-{n}": Person(app, f"mate-{n}") for n in range(4)}
    for person in people.values():
        practise(app, clock, person)
    for person in people.values():
        person.submit("teammate")
    teams = rows(app, "SELECT s.team_id, p.code FROM seats s JOIN participants p "
                      "ON p.id = s.participant_id ORDER BY s.team_id, s.seat")
    journey(app).tick(clock.now)  # looked at: nobody has reached the session yet
    looked, ready = clock.now, []
    for team_id in sorted({row["team_id"] for row in teams}):
        clock.advance(0.2)
        for row in teams:
            if row["team_id"] == team_id:
                people[row["code"]].submit("intro-1")
        ready.append(clock.now)
    journey(app).tick(looked + 1.0)
    break_seconds = journey(app).protocol.team.break_seconds

    def next_rounds() -> list[float]:
        return [row["next_round_at"] for row in rows(
            app, "SELECT next_round_at FROM teams ORDER BY id")]

    assert next_rounds() == moment([at + break_seconds for at in ready])
    for at in ready:
        journey(app).tick(at + break_seconds + 0.01)
    deadlines = [row["deadline"] for row in rows(
        app, "SELECT deadline FROM team_rounds ORDER BY team_id")]
    assert deadlines[1] - deadlines[0] == pytest.approx(0.2)
    journey(app).tick(deadlines[1] + 0.1)  # late for both
    assert next_rounds() == moment([at + break_seconds for at in deadlines])


def test_a_member_late_to_the_session_is_dropped_and_the_rest_start_on_time(
        tmp_path, teammates):
    """Whoever is not at the session ``start_seconds`` after the first of the team got there
    is dropped, an agent plays their seat from the first round, and the round starts a
    break after that moment, whichever tick saw it."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    for person in (ada, bo):
        person.submit("teammate")
    arrived = clock.now
    ada.submit("intro-1")
    design = journey(app).protocol.team
    tick_until(app, clock, lambda: rows(app, "SELECT session FROM teams")[0]["session"] == 1,
               step=0.7)
    seat = rows(app, "SELECT * FROM seats WHERE seat = 1")[0]
    assert (seat["drop_reason"], seat["agent_from_session"], seat["agent_from_round"]) == \
        ("late", 1, 1)
    assert bo.state()["step"] == "dropped"
    (team,) = rows(app, "SELECT next_round_at FROM teams")
    assert team["next_round_at"] == moment(arrived + design.start_seconds + design.break_seconds)
    tick_until(app, clock, lambda: running(ada) is not None)
    assert [s["kind"] for s in running(ada)["stations"]] == ["agent"]


def test_a_team_round_closed_across_a_restart_records_recovery_like_its_peoples_rounds(
        tmp_path, teammates):
    app, clock, ada, _bo = two_in_session(tmp_path, teammates)
    first = running(ada)
    clock.now = first["deadline"] + 30  # the server was down across the round's deadline
    make_app(tmp_path, teammates, clock, app.config["PROTOCOL"])  # the restart recovers
    (team_round,) = rows(app, "SELECT close_reason FROM team_rounds")
    people = rows(app, "SELECT close_reason FROM rounds WHERE team_round_id IS NOT NULL")
    assert team_round["close_reason"] == "recovery"
    assert [row["close_reason"] for row in people] == ["recovery", "recovery"]


def test_a_round_the_scheduler_closes_late_is_late_like_its_peoples_and_half_a_break_follows(
        tmp_path, teammates):
    app, clock, ada, _bo = two_in_session(tmp_path, teammates)
    clock.now = running(ada)["deadline"] + 20  # the database could not be written meanwhile
    journey(app).tick(clock.now)
    (team,) = rows(app, "SELECT next_round_at FROM teams")
    half_a_break = journey(app).protocol.team.break_seconds / 2
    assert team["next_round_at"] == moment(clock.now + half_a_break)
    reasons = {row["close_reason"] for row in rows(app, "SELECT close_reason FROM rounds "
                                                         "WHERE team_round_id IS NOT NULL")}
    assert reasons == {"late"}
    assert rows(app, "SELECT close_reason FROM team_rounds") == [{"close_reason": "late"}]


def test_a_withdrawal_deletes_the_persons_rows_and_keeps_the_teams(tmp_path, teammates):
    app, clock, ada, bo = two_in_session(tmp_path, teammates)
    play_round(app, clock, [ada, bo])
    assert bo.send("withdraw", {})["ok"]
    for table in ("rounds", "allocations", "sessions", "measurements", "lobby"):
        assert rows(app, f"SELECT * FROM {table} WHERE participant_id = 2") == []
    seat = rows(app, "SELECT * FROM seats WHERE seat = 1")[0]
    assert (seat["participant_id"], seat["drop_reason"]) == (None, "withdrawn")
    assert len(rows(app, "SELECT * FROM allocations WHERE participant_id = 1")) == 2
    tick_until(app, clock, lambda: running(ada) is not None)
    assert running(ada)["stations"][0]["kind"] == "agent"


def test_three_people_by_arrival_share_one_robot(tmp_path, teammates3):
    clock = FakeClock()
    app = make_app(tmp_path, teammates3, clock, team_protocol(tmp_path, seats=3))
    people = [Person(app, f"member-{n}") for n in range(3)]
    for n, person in enumerate(people):
        practise(app, clock, person, squares=1 + n, letters=3 - n % 2)
    (team,) = rows(app, "SELECT * FROM teams")
    assert (team["humans"], team["persons"]) == (3, 3)
    to_session(app, clock, people, 1)
    assert all(len(running(person)["stations"]) == 2 for person in people)
    play_round(app, clock, people)
    kits = rows(app, "SELECT seat, task_type FROM team_allocations WHERE round = 1")
    assert len(kits) == 3


def test_a_declared_agent_seat_is_filled_from_the_pool_when_the_people_arrive(
        tmp_path, teammates3):
    clock = FakeClock()
    app = make_app(tmp_path, teammates3, clock, team_protocol(tmp_path, seats=3, agents=1))
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    assert ada.state()["lobby"]["needed"] == 2
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    (team,) = rows(app, "SELECT * FROM teams")
    assert (team["humans"], team["persons"], team["formed_by"]) == (3, 2, "arrival")
    seats = rows(app, "SELECT kind, participant_id, pool_team FROM seats ORDER BY seat")
    assert sorted(s["kind"] for s in seats) == ["agent", "person", "person"]
    assert all((s["pool_team"] is None) == (s["kind"] == "person") for s in seats)
    to_session(app, clock, [ada, bo], 1)
    assert [s["kind"] for s in running(ada)["stations"]].count("agent") == 1


def test_a_tick_at_a_deadline_reads_the_team_clock_through_indexes(tmp_path, teammates):
    """A tick holds the write transaction every message waits for: what it reads at a
    deadline between the once-a-second looks is an index search, never a table scan or
    a sort, however many teams play."""
    app, clock, _ada, _bo = two_in_session(tmp_path, teammates)
    the_journey = journey(app)
    the_journey.tick(clock.now)
    statements: list[str] = []
    connection = the_journey.storage.db.conn
    connection.set_trace_callback(statements.append)
    try:
        the_journey.tick(clock.now + 0.5)
        the_journey.next_deadline()
    finally:
        connection.set_trace_callback(None)
    reads = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    assert any("team_rounds" in sql for sql in reads) and any("teams" in sql for sql in reads)
    for sql in reads:
        plan = [row[-1] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert all(step.startswith("SEARCH") or " USING " in step for step in plan), (sql, plan)


def test_teams_on_one_clock_close_and_start_a_few_to_a_transaction(
        tmp_path, teammates, monkeypatch):
    """Teams formed together keep one clock: a tick at their deadline closes their rounds,
    and one at their next start starts them, ``TEAMS_A_TURN`` teams to a commit, so the
    messages that arrive meanwhile go in between; every team is brought up to the tick."""
    monkeypatch.setattr(play, "TEAMS_A_TURN", 2)
    app = three_teams_in_their_first_session(tmp_path, teammates)
    (deadline,) = {row["deadline"] for row in rows(
        app, "SELECT deadline FROM team_rounds WHERE closed_at IS NULL")}
    for now, change in ((deadline, "UPDATE \"team_rounds\""),
                        (deadline + journey(app).protocol.team.break_seconds,
                         "INSERT INTO \"team_rounds\"")):
        statements = traced(app, partial(journey(app).tick, now))
        assert changes_per_commit(statements, change) == [2, 1], change
    assert len(rows(app, "SELECT id FROM team_rounds WHERE closed_at IS NULL")) == 3


def test_members_rounds_on_one_deadline_close_a_few_to_a_transaction(
        tmp_path, teammates, monkeypatch):
    """The members of teams formed together share a deadline: their own rounds close
    ``ROUNDS_A_TURN`` to a commit, and every one of them closes in the tick."""
    monkeypatch.setattr(playing, "ROUNDS_A_TURN", 4)
    app = three_teams_in_their_first_session(tmp_path, teammates)
    (deadline,) = {row["deadline"] for row in rows(
        app, "SELECT deadline FROM rounds WHERE closed_at IS NULL")}
    closed: list[int] = []
    statements = traced(app, lambda: closed.append(journey(app).rounds.tick(deadline)))
    assert closed == [6]
    assert changes_per_commit(statements, 'UPDATE "rounds"') == [4, 2]
    assert rows(app, "SELECT id FROM rounds WHERE closed_at IS NULL") == []


def test_a_round_that_fails_to_close_waits_for_the_next_tick_without_holding_others(
        tmp_path, teammates, monkeypatch):
    """A round whose closing raises is logged and left open; the tick still closes the
    others, turn after turn, and stops; the next tick closes it."""
    monkeypatch.setattr(playing, "ROUNDS_A_TURN", 2)
    app = three_teams_in_their_first_session(tmp_path, teammates)
    open_rounds = rows(app, "SELECT id, deadline FROM rounds WHERE closed_at IS NULL "
                            "ORDER BY id")
    stuck = open_rounds[0]["id"]
    the_rounds = journey(app).rounds
    close = the_rounds._close_round

    def fail_for_stuck(row: dict[str, Any], *args: Any) -> bool:
        if row["id"] == stuck:
            raise RuntimeError("a fault in one round")
        return close(row, *args)

    monkeypatch.setattr(the_rounds, "_close_round", fail_for_stuck)
    assert the_rounds.tick(open_rounds[0]["deadline"]) == 5
    assert [row["id"] for row in rows(
        app, "SELECT id FROM rounds WHERE closed_at IS NULL")] == [stuck]
    monkeypatch.setattr(the_rounds, "_close_round", close)
    assert the_rounds.tick(open_rounds[0]["deadline"] + 1) == 1


def three_teams_in_their_first_session(tmp_path: Any, teammates: Any) -> Any:
    """Six people, practised and formed into teams together, in their first team
    session: three teams on one clock."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    people = [Person(app, f"mate-{n}") for n in range(6)]
    for person in people:
        practise(app, clock, person)
    to_session(app, clock, people, 1)
    return app


def traced(app: Any, action: Callable[[], object]) -> list[str]:
    """The SQL statements ``action`` runs on the journey's connection."""
    statements: list[str] = []
    connection = journey(app).storage.db.conn
    connection.set_trace_callback(statements.append)
    try:
        action()
    finally:
        connection.set_trace_callback(None)
    return statements


def changes_per_commit(statements: list[str], change: str) -> list[int]:
    """How many of the traced statements start with ``change``, commit by commit (the
    commits that made none left out)."""
    counts: list[int] = []
    count = 0
    for sql in statements:
        count += sql.startswith(change)
        if sql == "COMMIT":
            counts += [count] if count else []
            count = 0
    return counts
