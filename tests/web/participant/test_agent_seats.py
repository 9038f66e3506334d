"""Agent seats against the search written out plainly (``real_teams.agents``): every
seating of the people, every admitted pool team's live team classified, the nearest of a
wanted type kept; and a live team typed by the protocol's reading of the most capable
human."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.teams import team_protocol
from support.web import FakeClock, journey, make_app, small_pool

from study.pool.teamtypes import team_type_codes
from study.protocol.pool_names import COMPARATIVE_ADVANTAGE, HIGHEST_COEFFICIENT, TEAM_TYPES
from study.web.participant.real_teams.agents import fill_with_agents, live_type
from study.web.participant.real_teams.founding import Person

# Ada has the highest coefficient and little advantage, and is negatively correlated; Bo
# has the advantage on the team's best type (squares) and is positively correlated.
ADA_BO_C, ADA_BO_P = np.array([[0.9, 0.8], [0.7, 0.1]]), np.array([[0.3, 0.7], [0.7, 0.3]])


def plainly(pool, c: np.ndarray, p: np.ndarray,
            team_types: tuple[str, ...]) -> tuple[int, tuple[int, ...], float] | None:
    """The nearest admitted team whose live team is of ``team_types`` (any, if none),
    over every seating; ties to the first seating and the lowest row."""
    rows = np.flatnonzero(pool.eligible())
    pool_c, pool_p = (side[rows] for side in pool.coefficients)
    best = None
    for seats in itertools.permutations(range(pool_c.shape[1]), len(c)):
        live_c, live_p = pool_c.copy(), pool_p.copy()
        live_c[:, list(seats)], live_p[:, list(seats)] = c, p
        cost = ((live_c - pool_c) ** 2).sum(axis=(1, 2)) + ((live_p - pool_p) ** 2).sum(
            axis=(1, 2))
        if team_types:
            wanted = np.isin(team_type_codes(live_c, live_p, COMPARATIVE_ADVANTAGE),
                             [TEAM_TYPES.index(name) for name in team_types])
            cost = np.where(wanted, cost, np.inf)
        row = int(np.argmin(cost))
        if np.isfinite(cost[row]) and (best is None or cost[row] < best[2] - 1e-12):
            best = (int(rows[row]), seats, float(cost[row]))
    return None if best is None else (best[0], best[1], float(np.sqrt(best[2])))


@pytest.fixture(scope="module", params=[2, 3], ids=["two-humans", "three-humans"])
def pool(request, tmp_path_factory):
    kits = (2, 2) if request.param == 2 else (3, 3)  # a multiple of the humans
    return small_pool(tmp_path_factory.mktemp("pools"), kits, humans=request.param).pool


@pytest.mark.parametrize("team_types", [(), ("mixed",), ("twins",), ("negative",),
                                        ("twins", "negative")])
def test_the_seats_are_the_nearest_team_of_a_wanted_type(pool, team_types):
    rng = np.random.default_rng(len(team_types))
    coefficients = pool.coefficients
    humans = coefficients[0].shape[1]
    checked = 0
    for people in range(1, humans):
        for _ in range(12):
            donors = rng.integers(len(coefficients[0]), size=people)
            c = coefficients[0][donors, 0] * rng.uniform(0.7, 1.3, (people, 2))
            p = coefficients[1][donors, 0][:, ::-1].copy() if rng.random() < 0.5 else \
                coefficients[1][donors, 0]
            fill = fill_with_agents(pool, c, p, team_types, COMPARATIVE_ADVANTAGE)
            expected = plainly(pool, c, p, team_types)
            if expected is None:
                assert fill is None
                continue
            assert (fill.pool_team, fill.seat_of) == expected[:2]
            assert fill.distance == pytest.approx(expected[2], rel=1e-9)
            assert (fill.c[list(fill.seat_of)] == c).all()
            assert (fill.p[list(fill.seat_of)] == p).all()
            checked += 1
    assert checked >= 6


def test_a_wanted_type_far_down_the_pool_is_still_found_first():
    person_c, person_p = np.array([[0.8, 0.4]]), np.array([[0.7, 0.3]])  # positive
    teams = 3000
    steps = np.arange(teams) * 1e-3
    others_c = person_c[0] + steps[:, None]
    others_p = np.where((np.arange(teams) >= 1500)[:, None], [0.7, 0.3], [0.3, 0.7])
    pool_c = np.repeat(others_c[:, None], 2, axis=1)  # both seats the same other person
    pool_p = np.repeat(others_p[:, None], 2, axis=1)
    pool = type("Pool", (), {"admitted": (np.arange(teams) + 7, pool_c, pool_p)})()
    nearer = plainly_ranked(pool_c, pool_p, person_c, person_p, 1500)
    assert nearer > 512  # more than two rounds of the search look past negative teammates
    fill = fill_with_agents(pool, person_c, person_p, ("twins",), COMPARATIVE_ADVANTAGE)
    assert (fill.pool_team, fill.seat_of) == (1507, (0,))
    assert fill.distance == pytest.approx(np.sqrt(2) * 1.5)
    assert fill_with_agents(pool, person_c, person_p, (), COMPARATIVE_ADVANTAGE).pool_team == 7
    assert fill_with_agents(pool, person_c, person_p, ("negative",),
                            COMPARATIVE_ADVANTAGE) is None


def plainly_ranked(pool_c: np.ndarray, pool_p: np.ndarray, c: np.ndarray, p: np.ndarray,
                   row: int) -> int:
    """How many teams lie nearer the person in seat 0 than ``row``."""
    cost = ((pool_c[:, 0] - c[0]) ** 2).sum(axis=1) + ((pool_p[:, 0] - p[0]) ** 2).sum(axis=1)
    return int((cost < cost[row]).sum())


def test_the_live_type_follows_the_protocols_reading_of_the_most_capable_human(tmp_path,
                                                                                 teammates):
    assert live_type(ADA_BO_C, ADA_BO_P, COMPARATIVE_ADVANTAGE) == "mixed-reversed"
    assert live_type(ADA_BO_C, ADA_BO_P, HIGHEST_COEFFICIENT) == "mixed"
    # Bo alone, beside an agent like Ada: Mixed only where Ada counts as the most capable
    pool = type("Pool", (), {"admitted": (np.array([0]), ADA_BO_C[None], ADA_BO_P[None])})()
    for reading, found in ((COMPARATIVE_ADVANTAGE, False), (HIGHEST_COEFFICIENT, True)):
        fill = fill_with_agents(pool, ADA_BO_C[1:], ADA_BO_P[1:], ("mixed",), reading)
        assert (fill is not None) == found
    source = team_protocol(tmp_path)
    source.write_text(source.read_text(encoding="utf-8").replace(
        "[pool]\n", f'[pool]\nmost_capable_reading = "{HIGHEST_COEFFICIENT}"\n', 1),
        encoding="utf-8")
    study = journey(make_app(tmp_path, teammates, FakeClock(), source))
    people = [Person(study.enrol(code)["id"], tuple(c), tuple(p))
              for code, c, p in zip(("ada-1", "bo-22"), ADA_BO_C, ADA_BO_P, strict=True)]
    with study.storage.event():
        study.teams.lobby.founding.found(people, None, "arrival", 10.0)
    assert [team["live_type"] for team in study.storage.all("SELECT * FROM teams")] == [
        "mixed"]
