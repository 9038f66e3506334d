"""A study of real teams in which no team formed (docs/teams.md): the report shows how the
people who waited left the lobby and how long they waited, every count as the lobby table
holds it, instead of taking the study for a database older than the record of the team
under study.

People go through the real journey in-process on the injected clock: in a team of two the
first leaves the lobby after the wait, the second's own timer runs out, the third is still
waiting; in a team of three the first two wait together, then the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.analysis import read_report, table
from support.people import Person, practise, tick_until
from support.teams import team_protocol
from support.web import FakeClock, make_app, small_pool

from analysis import cli

WAIT = 300  # the lobby's individual timer, seconds: longer than a practice


@pytest.fixture(scope="module", params=[2, 3], ids=["teams2", "teams3"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             teammates) -> Path:
    """A lobby that formed no team: one person left it, one timed out, one still waits."""
    seats = request.param
    directory = tmp_path_factory.mktemp(f"no-team-{seats}")
    pool = teammates if seats == 2 else small_pool(directory / "pools", kits=(3, 3), humans=3)
    clock = FakeClock()
    app = make_app(directory, pool, clock, team_protocol(
        directory, seats=seats, timers=f"individual_seconds = {WAIT}", on_timeout="unmatched"))
    leaver, waiter, last = (Person(app, f"member-{n}") for n in range(3))
    practise(app, clock, leaver)
    if seats == 3:  # two of three wait together
        practise(app, clock, waiter, squares=2)
    clock.advance(41)
    assert leaver.submit("lobby", {"leave": True})["step"] == "unmatched"
    if seats == 2:
        practise(app, clock, waiter, squares=2)
    tick_until(app, clock, lambda: waiter.state()["step"] == "unmatched", limit=WAIT + 60)
    practise(app, clock, last, letters=2)
    assert last.state()["step"] == "lobby"
    return directory / "study.sqlite"


def query(database: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture(scope="module")
def report(database: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("no-team-report")
    assert cli.main(["report", str(database), "--out", str(out)]) == 0
    return (*read_report(out), out)


def test_no_team_formed(database):
    assert query(database, "SELECT count(*) FROM teams") == [(0,)]
    assert sorted(query(database, "SELECT coalesce(outcome, '') FROM lobby")) == [
        ("",), ("left",), ("timeout",)]


def test_the_report_shows_the_lobbys_outcomes_and_waits_as_the_lobby_table_holds_them(
        database, report):
    tables, page, out = report
    assert "predates the record" not in page
    assert "No team formed: 3 people entered the lobby" in page
    counts = dict(table(tables, "Team flow").itertuples(index=False))
    assert counts["teams"] == "0"
    for outcome, people in query(database, "SELECT coalesce(outcome, 'still waiting'), "
                                           "count(*) FROM lobby GROUP BY 1"):
        assert counts[f"left the lobby: {outcome}"] == str(people)
    waits = sorted(wait for (wait,) in query(
        database, "SELECT left_at - entered_at FROM lobby WHERE left_at IS NOT NULL"))
    assert len(waits) == 2 and waits[0] >= 41 and waits[1] >= WAIT
    assert float(counts["lobby wait, median s"]) == pytest.approx(sum(waits) / 2, abs=0.05)
    assert float(counts["lobby wait, max s"]) == pytest.approx(waits[1], abs=0.05)
    assert (out / "figures" / "lobby_wait.png").exists()
    assert "Time in the lobby" in page
