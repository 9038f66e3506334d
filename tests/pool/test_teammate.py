"""The live path's web-side wrapper: the teammate source is indexed at start, the live
team puts the participant in the matched role, and a stored session solves again to the
same policy."""

from pathlib import Path

import numpy as np
import pytest

from study.allocation.solver import solve
from study.pool import Pool, build_pool
from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import (
    PoolTeammates,
    algorithm_for,
    live_team,
    policy_of,
    session_row,
)

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"


@pytest.fixture(scope="module")
def protocol():
    return load_protocol(PROTOCOLS / "study2.toml")


@pytest.fixture(scope="module")
def teammates(protocol, tmp_path_factory):
    spec = protocol.pool_spec().with_changes(teams=5_000)
    path = build_pool(spec, tmp_path_factory.mktemp("pool") / "pool.parquet", progress=False)
    return PoolTeammates(Pool.load(path), str(path))


def test_the_source_indexes_its_members_when_prepared(teammates):
    assert "_index" not in teammates.__dict__
    teammates.prepare()
    index = teammates.__dict__["_index"]
    assert len(index.teams) == len(index.members) == len(index.points) > 0
    assert "admitted" not in teammates.pool.__dict__  # an individual study seats no agents


def test_a_lobby_that_seats_agents_has_its_admitted_teams_gathered_at_start(tmp_path):
    spec = load_protocol(PROTOCOLS / "study2.toml").pool_spec().with_changes(teams=2_000)
    pool = Pool.load(build_pool(spec, tmp_path / "pool.parquet", progress=False))
    PoolTeammates(pool, "pool").prepare(seats_agents=True)
    rows, c, p = pool.__dict__["admitted"]
    assert (rows == np.flatnonzero(pool.eligible())).all() and len(rows) > 0
    assert (c == pool.coefficients[0][rows]).all() and (p == pool.coefficients[1][rows]).all()


def test_the_live_team_puts_the_participant_in_the_matched_role(teammates):
    c, p = np.array([0.25, 0.8]), np.array([0.3, 0.7])
    match = teammates.nearest(c, p).match
    team = live_team(match, c, p)
    human = match.participant_human
    assert (team.c[human] == c).all() and (team.p[human] == p).all()
    assert (team.c[1 - human] == match.teammate_c).all()
    assert (team.p[1 - human] == match.teammate_p).all()


def test_a_stored_session_solves_again_to_the_same_policy(protocol, teammates):
    c, p = np.array([0.3, 0.9]), np.array([0.8, 0.2])
    match = teammates.nearest(c, p).match
    team = live_team(match, c, p)
    for condition in protocol.conditions:
        algorithm = algorithm_for(condition, teammates.fea_bounds)
        row, policy = session_row(protocol, condition, team, match.participant_human,
                                  algorithm)
        assert policy.plan == solve(team, algorithm, protocol.kits).plan
        assert row["reward"] == policy.reward
        assert policy_of(protocol, row).plan == policy.plan
