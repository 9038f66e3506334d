"""Each process's clock keeps the rounds of the people connected to it; the lease holder
also those of people connected to no other live process, and presence. Three real teams
on one clock, their members' connections moved between two processes by hand, the clock
injected."""

from __future__ import annotations

from typing import Any

import pytest
from support.people import Person, practise, to_session
from support.teams import team_protocol
from support.web import FakeClock, journey, make_app, moment, rows

from study.storage.database import Storage
from study.web.participant.real_teams import WATCH_SECONDS
from study.web.serving import shares
from study.web.serving.processes import ALIVE_SECONDS, Processes


class TwoProcesses:
    """Three teams of two in their first session, served by the app's process (which
    holds the lease) and by another process on the same file: team 1 is connected to the
    app's process, team 2 to the other, team 3 to none."""

    def __init__(self, tmp_path: Any, teammates: Any) -> None:
        self.clock = FakeClock()
        self.app = make_app(tmp_path, teammates, self.clock, team_protocol(tmp_path))
        people = [Person(self.app, f"mate-{n}") for n in range(6)]
        for person in people:
            practise(self.app, self.clock, person)
        to_session(self.app, self.clock, people, 1)
        self.journey = journey(self.app)
        self.journey.storage.shared_file = True  # as under ``study serve --workers``
        self.here: Processes = self.app.extensions["processes"]
        self.other = Processes(self.journey.storage, self.clock)
        assert self.here.beat() and not self.other.beat()
        self.teams = {team["id"]: [seat["code"] for seat in self.journey.teams.play.seats(
            team["id"]) if seat["code"]] for team in rows(self.app, "SELECT id FROM teams")}
        assert len(self.teams) == 3
        first, second, third = sorted(self.teams)
        self.members = {"here": self.teams[first], "other": self.teams[second],
                        "nowhere": self.teams[third]}
        self._connect(self.members["other"], self.other.id)
        self.journey.storage.db.execute(
            f"DELETE FROM connections WHERE code IN ({marks(self.members['nowhere'])})",
            self.members["nowhere"])
        self.journey.storage.db.conn.commit()

    def _connect(self, codes: list[str], process: str) -> None:
        self.journey.storage.db.execute(
            f"UPDATE connections SET process = ? WHERE code IN ({marks(codes)})",
            (process, *codes))
        self.journey.storage.db.conn.commit()

    def holder(self) -> shares.Share:
        share = self.here.share(True)
        assert share is not None and share.lease
        return share

    def not_holder(self) -> shares.Share:
        share = self.other.share(False)
        assert share is not None and not share.lease
        return share

    def open_rounds(self) -> set[str]:
        """The codes of the people whose round is open."""
        return {row["code"] for row in rows(
            self.app, "SELECT p.code FROM rounds r JOIN participants p ON "
                      "p.id = r.participant_id WHERE r.closed_at IS NULL")}

    def open_team_rounds(self) -> set[int]:
        return {row["team_id"] for row in rows(
            self.app, "SELECT team_id FROM team_rounds WHERE closed_at IS NULL")}

    def team_of(self, where: str) -> int:
        return next(team for team, codes in self.teams.items() if codes == self.members[where])

    def deadline(self) -> float:
        (deadline,) = {row["deadline"] for row in rows(
            self.app, "SELECT deadline FROM team_rounds WHERE closed_at IS NULL")}
        return deadline


def marks(values: list[str]) -> str:
    return ", ".join("?" * len(values))


@pytest.fixture
def two(tmp_path, teammates) -> TwoProcesses:
    return TwoProcesses(tmp_path, teammates)


def test_a_process_alone_keeps_every_round_while_it_holds_the_lease(tmp_path):
    processes = Processes(Storage(tmp_path / "study.sqlite"), FakeClock())
    assert processes.share(True) is shares.EVERYONE
    assert processes.share(False) is None


def test_each_process_closes_the_rounds_of_its_own_people_and_the_holder_the_rest(two):
    deadline = two.deadline()
    assert two.journey.next_deadline(two.not_holder()) == deadline
    two.journey.tick(deadline, share=two.not_holder())
    assert two.open_team_rounds() == {two.team_of("here"), two.team_of("nowhere")}
    assert two.open_rounds() == set(two.members["here"] + two.members["nowhere"])
    break_seconds = two.journey.protocol.team.break_seconds
    assert two.journey.next_deadline(two.not_holder()) == moment(
        deadline + break_seconds)  # its team's next round starts after the break
    assert two.journey.next_deadline(two.holder()) == min(  # its own still open, and
        deadline, two.clock.now + WATCH_SECONDS)  # the watch over presence and the lobby

    two.journey.tick(deadline, share=two.holder())
    assert two.open_team_rounds() == set() and two.open_rounds() == set()
    closed = rows(two.app, "SELECT close_reason FROM team_rounds")
    assert {row["close_reason"] for row in closed} == {"deadline"}

    two.journey.tick(deadline + break_seconds, share=two.holder())  # the next rounds start
    assert two.open_team_rounds() == {two.team_of("here"), two.team_of("nowhere")}
    two.journey.tick(deadline + break_seconds, share=two.not_holder())
    assert two.open_team_rounds() == set(two.teams)


def test_a_round_seen_by_two_processes_closes_once(two):
    """A person with tabs on both processes: both clocks keep the round, the first to
    take the write lock closes it, the other finds nothing to close."""
    two.journey.storage.insert("connections", {"sid": "second-tab", "process": two.here.id,
                                               "code": two.members["other"][0], "at": 0.0})
    deadline = two.deadline()
    assert two.journey.tick(deadline, share=two.holder()) == 4  # its own, the unclaimed
    assert two.journey.tick(deadline, share=two.not_holder()) == 2
    assert two.journey.tick(deadline, share=two.holder()) == 0
    assert len(rows(two.app, "SELECT id FROM rounds WHERE closed_at IS NOT NULL AND "
                             "team_round_id IS NOT NULL")) == 6


def test_the_rounds_of_a_process_that_died_pass_to_the_lease_holder(two):
    deadline = two.deadline()
    two.clock.now = deadline - 0.1
    two.here.beat()  # the other has not beaten since before the round
    assert two.clock.now - ALIVE_SECONDS > rows(
        two.app, "SELECT last_seen FROM processes WHERE id = ?", two.other.id)[0]["last_seen"]
    two.journey.tick(deadline, share=two.holder())
    assert two.open_team_rounds() == set() and two.open_rounds() == set()


def test_presence_is_the_lease_holders(two):
    """Team 3's pages are closed: only the holder's clock marks its seats away."""
    away = "SELECT count(*) AS n FROM seats WHERE away_since IS NOT NULL"
    two.journey.tick(two.clock.now + 1.5, share=two.not_holder())
    assert rows(two.app, away)[0]["n"] == 0
    two.journey.tick(two.clock.now + 1.5, share=two.holder())
    assert rows(two.app, away)[0]["n"] == 2


def test_each_share_reads_the_clock_through_indexes(two):
    """Every process's clock reads in the write transaction messages wait for: its
    share's conditions look connections up by code and seats by team, and scan only the
    handful of processes."""
    connection = two.journey.storage.db.conn
    for share in (two.holder(), two.not_holder()):
        statements: list[str] = []
        connection.set_trace_callback(statements.append)
        try:
            two.journey.tick(two.deadline() - 0.5, share=share)
            two.journey.next_deadline(share)
        finally:
            connection.set_trace_callback(None)
        reads = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")
                 and "c.process" in sql]
        assert len(reads) >= 4, statements
        for sql in reads:
            plan = [row[-1] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
            assert all(step.startswith(("SEARCH", "CORRELATED SCALAR SUBQUERY",
                                        "LIST SUBQUERY", "SCAN processes"))
                       or " USING " in step for step in plan), (sql, plan)
