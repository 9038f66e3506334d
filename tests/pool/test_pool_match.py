"""Choosing the agent teammate: exact nearest neighbour under the filter and the role."""

import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from study.allocation.model import InvalidInput
from study.pool import NoEligibleTeam, Pool, PoolSpec, TeammateFilter, build_pool
from study.pool.match import MemberIndex, kd_tree_class
from study.pool.teamtypes import TEAM_TYPES
from study.protocol.pool_spec import Criteria

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"


@pytest.fixture(scope="module")
def study2(tmp_path_factory):
    spec = PoolSpec.from_protocol(PROTOCOLS / "study2.toml").with_changes(teams=30_000)
    return Pool.load(build_pool(spec, tmp_path_factory.mktemp("s2") / "pool.parquet",
                                progress=False))


@pytest.fixture(scope="module")
def study1(tmp_path_factory):
    spec = PoolSpec.from_protocol(PROTOCOLS / "study1.toml").with_changes(teams=100_000)
    return Pool.load(build_pool(spec, tmp_path_factory.mktemp("s1") / "pool.parquet",
                                progress=False))


def brute_force(pool: Pool, c, p, teammate: TeammateFilter) -> tuple[int, int, float]:
    """The nearest eligible member by checking every one, ties to the lowest team."""
    pc, pp = pool.coefficients
    eligible = pool.eligible(teammate)
    top = pool.column("most_capable_human")
    best = (np.inf, -1, -1)
    for member in (0, 1):
        allowed = eligible.copy()
        if teammate.role == "most-capable":
            allowed &= top == member
        elif teammate.role == "other":
            allowed &= top != member
        d = np.sqrt(((pc[:, member] - c) ** 2).sum(1) + ((pp[:, member] - p) ** 2).sum(1))
        d[~allowed] = np.inf
        team = int(np.argmin(d))
        best = min(best, (float(d[team]), team, member))
    return best[1], best[2], best[0]


def test_matches_are_the_exact_nearest_neighbour_under_each_role(study2):
    rng = np.random.default_rng(5)
    for role in ("most-capable", "other", "any"):
        teammate = TeammateFilter(Criteria(team_types=("mixed",)), role)
        for _ in range(20):
            c, p = rng.uniform(0, 1, 2), rng.uniform(0, 1, 2)
            match = study2.match(c, p, filter=teammate)
            team, member, distance = brute_force(study2, c, p, teammate)
            assert (match.team_index, match.participant_human) == (team, member)
            assert match.distance == pytest.approx(distance, abs=1e-12)


def test_the_spec_filter_gives_a_mixed_team_with_the_participant_most_capable(study2):
    match = study2.match([0.3, 0.8], [0.9, 0.2])
    row = match.team_index
    assert TEAM_TYPES[study2.team_types[row]] == "mixed"
    assert study2.column("most_capable_human")[row] == match.participant_human
    c, p = study2.coefficients
    assert match.teammate_human == 1 - match.participant_human
    assert (match.teammate_c == c[row, match.teammate_human]).all()
    assert (match.teammate_p == p[row, match.teammate_human]).all()
    d = np.sqrt(((c[row, match.participant_human] - [0.3, 0.8]) ** 2).sum()
                + ((p[row, match.participant_human] - [0.9, 0.2]) ** 2).sum())
    assert match.distance == pytest.approx(d)
    assert "mixed" in match.filter and "most capable" in match.filter


def test_a_pool_member_matches_itself_at_distance_zero(study1):
    c, p = study1.coefficients
    eligible = np.flatnonzero(study1.eligible())
    assert len(eligible) > 1_000
    assert (study1.column("fair_gap")[eligible] > 0.6).all()
    team = int(eligible[17])
    match = study1.match(c[team, 1], p[team, 1])
    assert (match.team_index, match.participant_human, match.distance) == (team, 1, 0.0)


def test_ties_go_to_the_lowest_team_then_the_lowest_human():
    c = np.array([[[0.9, 0.1], [0.5, 0.5]], [[0.2, 0.3], [0.2, 0.3]],
                  [[0.7, 0.7], [0.1, 0.1]], [[0.2, 0.3], [0.4, 0.4]]])
    p = np.array([[[0.9, 0.1], [0.5, 0.5]], [[0.6, 0.6], [0.6, 0.6]],
                  [[0.7, 0.7], [0.1, 0.1]], [[0.6, 0.6], [0.8, 0.8]]])
    eligible = np.ones(4, dtype=bool)
    top = np.array([0, 0, 0, 0])
    index = MemberIndex(c, p, eligible, top, "any", "every team", "test")
    match = index.query([0.2, 0.3], [0.6, 0.6])
    assert (match.team_index, match.participant_human, match.distance) == (1, 0, 0.0)
    skipping_1 = MemberIndex(c, p, np.array([True, False, True, True]), top, "most-capable",
                             "not team 1", "test")
    assert skipping_1.query([0.2, 0.3], [0.6, 0.6]).team_index == 3


def test_an_empty_filter_is_a_clear_error_naming_it(study2):
    impossible = TeammateFilter(Criteria(team_types=("mixed-reversed",)), "most-capable")
    with pytest.raises(NoEligibleTeam, match=r"team type in mixed-reversed.*most capable"):
        study2.match([0.3, 0.8], [0.9, 0.2], filter=impossible)


def test_participant_coefficients_are_checked(study2):
    with pytest.raises(InvalidInput, match="one value per task type"):
        study2.match([0.3, 0.8, 0.1], [0.9, 0.2])
    with pytest.raises(InvalidInput, match="within \\[0, 1\\]"):
        study2.match([0.3, 1.8], [0.9, 0.2])


def test_fea_bounds_come_from_the_metadata(study2):
    spec = PoolSpec.from_protocol(PROTOCOLS / "study2.toml")
    assert study2.fea_bounds == (spec.fea.lo, spec.fea.hi)


def test_opening_reads_the_metadata_and_matching_only_the_columns_it_needs(tmp_path,
                                                                           monkeypatch):
    spec = PoolSpec.from_protocol(PROTOCOLS / "study1.toml").with_changes(teams=20_000)
    path = build_pool(spec, tmp_path / "pool.parquet", progress=False)
    requested: list[list[str]] = []
    read_group = pq.ParquetFile.read_row_group

    def recording(self, group, columns=None, **kwargs):
        requested.append(list(columns))
        return read_group(self, group, columns=columns, **kwargs)

    def whole_file(*args, **kwargs):
        raise AssertionError("matching must not read the whole table")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", recording)
    monkeypatch.setattr(pq, "read_table", whole_file)
    monkeypatch.setattr(pq.ParquetFile, "read", whole_file)
    pool = Pool.open(path)
    assert requested == [] and pool.teams == 20_000
    match = pool.match([0.3, 0.8], [0.9, 0.2])
    assert len(requested) == pq.ParquetFile(path).num_row_groups
    needed = {"c_0_0", "c_0_1", "c_1_0", "c_1_1", "p_0_0", "p_0_1", "p_1_0", "p_1_1",
              "team_type", "most_capable_human", "fair_gap"}
    assert {frozenset(columns) for columns in requested} == {frozenset(needed)}
    monkeypatch.undo()
    again = Pool.load(path).match([0.3, 0.8], [0.9, 0.2])
    assert (again.team_index, again.participant_human, again.distance) == (
        match.team_index, match.participant_human, match.distance)
    assert pool.column("fair_gap")[match.team_index] > 0.6


def test_many_coinciding_members_still_tie_to_the_lowest_team():
    """More members at the nearest distance than the tree is first asked for."""
    c = np.tile(np.array([[0.4, 0.6], [0.2, 0.3]]), (40, 1, 1))
    p = np.tile(np.array([[0.5, 0.5], [0.6, 0.6]]), (40, 1, 1))
    c[:5] = [[0.9, 0.9], [0.1, 0.1]]          # the lowest teams lie elsewhere
    eligible = np.ones(40, dtype=bool)
    index = MemberIndex(c, p, eligible, np.zeros(40, dtype=np.int8), "any", "all", "test")
    match = index.query([0.2, 0.3], [0.6, 0.6])
    assert (match.team_index, match.participant_human, match.distance) == (5, 1, 0.0)


def test_random_queries_match_a_brute_force_search_with_ties():
    rng = np.random.default_rng(11)
    c = np.round(rng.uniform(0.01, 0.99, (3000, 2, 2)), 1)   # many exact duplicates
    p = np.round(rng.uniform(0.01, 0.99, (3000, 2, 2)), 1)
    top = rng.integers(0, 2, 3000)
    index = MemberIndex(c, p, rng.uniform(size=3000) < 0.5, top, "other", "half", "test")
    for participant in np.round(rng.uniform(0, 1, (300, 4)), 1):
        match = index.query(participant[:2], participant[2:])
        distances = np.sqrt(((index.points - participant) ** 2).sum(axis=1))
        nearest = np.flatnonzero(distances <= distances.min() * (1 + 1e-12) + 1e-12)
        best = min(nearest, key=lambda k: (index.teams[k], index.members[k]))
        assert (match.team_index, match.participant_human) == (index.teams[best],
                                                               index.members[best])
        assert match.distance == pytest.approx(distances.min(), abs=1e-12)


@pytest.mark.parametrize("given", [None, "3"])
def test_the_tree_library_is_loaded_without_changing_the_environment(monkeypatch, given):
    if given is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", given)
    tree = kd_tree_class.__wrapped__()(np.eye(4))
    assert os.environ.get("OMP_NUM_THREADS") == given
    assert tree.query(np.array([[0.0, 1.0, 0.0, 0.0]]), k=1)[1][0] == 1
