"""Building pools: columns that agree with the model and solver, determinism whatever the
chunking or the workers (Dask included), rejection sampling, metadata and reuse."""

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from study.allocation.model import all_metrics, goal_reward, state_space
from study.allocation.solver import goal_rewards, reference_action_table, solve_batch
from study.pool import PoolSpec, build_pool, ensure_pool
from study.pool.sampling import SAMPLING_BLOCK, sample_teams
from study.pool.store import coefficients_of, read_metadata, team_type_codes_of
from study.pool.teamtypes import (
    TEAM_TYPES,
    best_type,
    comparative_advantage,
    most_capable_human,
    team_type_codes,
)

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"

SPEC_TOML = """\
[pool]
teams = {teams}
seed = 11
kits = [8, 8]
algorithms = ["efficient", "fair", "fea"]

[pool.fea]
w = 0.7
bounds = [0.0, 2.0]
bounds_source = "test"
"""


def make_spec(tmp_path: Path, teams: int, extra: str = "") -> PoolSpec:
    path = tmp_path / f"spec{teams}.toml"
    path.write_text(SPEC_TOML.format(teams=teams) + extra, encoding="utf-8")
    return PoolSpec.from_protocol(path)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 20,000-team pool built with small chunks (so several row groups)."""
    tmp = tmp_path_factory.mktemp("small")
    spec = make_spec(tmp, 20_000)
    path = build_pool(spec, tmp / "pool.parquet", chunk=7_000, workers=2, progress=False)
    return spec, path, pq.read_table(path)


def test_columns_and_row_groups(small):
    spec, path, table = small
    names = set(table.column_names)
    for i in range(2):
        for j in range(2):
            assert {f"c_{i}_{j}", f"p_{i}_{j}"} <= names
            for algorithm in spec.algorithms:
                assert f"{algorithm}_goal_{i}_{j}" in names
        for algorithm in spec.algorithms:
            assert {f"{algorithm}_rounds_capable_{i}", f"{algorithm}_rounds_preferred_{i}"} \
                <= names
    for algorithm in spec.algorithms:
        assert {f"{algorithm}_{k}" for k in ("reward", "E", "F", "FE")} <= names
    assert {"team_type", "most_capable_human", "fair_gap", "efficiency_gap", "fea_fair_gap",
            "fea_efficiency_gap"} <= names
    assert table.num_rows == 20_000
    assert pq.ParquetFile(path).metadata.num_row_groups == 3


def test_goals_agree_with_solve_batch_and_metrics_with_the_model(small):
    spec, _, table = small
    c, p = coefficients_of(table, 2, 2)
    for name in spec.algorithms:
        algorithm = spec.algorithm(name)
        batch = solve_batch(c, p, algorithm)
        goals = np.stack([table.column(f"{name}_goal_{i}_{j}").to_numpy()
                          for i in range(2) for j in range(2)], axis=1).reshape(-1, 2, 2)
        agree = (goals == batch.goal_allocations).all(axis=(1, 2))
        # Only goals whose rewards tie within the solver's tolerance may differ.
        assert agree.mean() > 0.9999
        assert np.allclose(table.column(f"{name}_reward").to_numpy()[~agree],
                           batch.reward[~agree], atol=1e-9)
        assert np.allclose(table.column(f"{name}_reward").to_numpy(),
                           goal_reward(algorithm, c, p, goals))
        metrics = all_metrics(c, p, goals)
        for key in ("E", "F", "FE"):
            assert np.allclose(table.column(f"{name}_{key}").to_numpy(), metrics[key])


def test_gaps_follow_model_md(small):
    _, _, table = small
    col = {name: table.column(name).to_numpy() for name in table.column_names
           if name != "team_type"}
    fair_gap = (1 - np.abs(col["fair_F"])) - (1 - np.abs(col["efficient_F"]))
    assert np.allclose(col["fair_gap"], fair_gap)
    assert np.allclose(col["efficiency_gap"], col["fair_E"] - col["efficient_E"])
    assert (col["efficiency_gap"] <= 1e-9).all()
    fea_term = 1 - np.clip((np.abs(col["fea_FE"]) - 0.0) / 2.0, 0, 1)
    efficient_term = 1 - np.clip(np.abs(col["efficient_FE"]) / 2.0, 0, 1)
    assert np.allclose(col["fea_fair_gap"], fea_term - efficient_term)


def test_rounds_types_and_most_capable_human(small):
    _, _, table = small
    c, p = coefficients_of(table, 2, 2)
    codes = team_type_codes_of(table.column("team_type"))
    assert (codes == team_type_codes(c, p)).all()
    assert set(np.unique(codes)) == set(range(len(TEAM_TYPES)))
    top = table.column("most_capable_human").to_numpy()
    assert (top == most_capable_human(c)).all()
    # Efficient gives the team's best type to the most capable human in every round
    # (MODEL.md), unless the two advantages tie
    best = best_type(c)
    advantage = np.sort(comparative_advantage(c), axis=1)
    clear = advantage[:, 1] - advantage[:, 0] > 1e-9
    held = np.stack([np.stack([table.column(f"efficient_goal_{i}_{j}").to_numpy()
                               for j in range(2)], 1) for i in range(2)], 1)
    rows = np.arange(len(c))
    assert clear.mean() > 0.99
    assert (held[rows, top, best][clear] == 8).all()
    goal_0 = np.stack([table.column(f"efficient_goal_0_{j}").to_numpy() for j in range(2)], 1)
    expected = goal_0[np.arange(len(c)), np.argmax(c[:, 0], axis=1)]
    assert (table.column("efficient_rounds_capable_0").to_numpy() == expected).all()


def test_a_sample_agrees_with_pymdptoolbox(small):
    spec, _, table = small
    c, p = coefficients_of(table, 2, 2)
    space = state_space(2, (8, 8))
    for team in range(0, 20_000, 4_000):
        for name in spec.algorithms:
            rewards = goal_rewards(space, spec.algorithm(name), c[team:team + 1],
                                   p[team:team + 1])[0]
            policy = reference_action_table(space, rewards)
            state = 0
            while space.depth[state] < space.rounds:
                state = space.successor[state, policy[state]]
            reached = space.allocations[state]
            goal = np.array([[table.column(f"{name}_goal_{i}_{j}")[team].as_py()
                              for j in range(2)] for i in range(2)])
            assert np.isclose(goal_reward(spec.algorithm(name), c[team], p[team], reached),
                              goal_reward(spec.algorithm(name), c[team], p[team], goal))


def test_same_seed_same_pool_whatever_chunk_or_workers(small, tmp_path):
    spec, _, table = small
    other = build_pool(spec, tmp_path / "other.parquet", chunk=SAMPLING_BLOCK + 123, workers=1,
                       progress=False)
    assert pq.read_table(other).equals(table)


def test_a_smaller_pool_is_a_prefix_and_another_seed_differs(small, tmp_path):
    spec, _, table = small
    c, _ = sample_teams(spec.with_changes(teams=5_000), 0, 5_000)
    full_c, _ = coefficients_of(table, 2, 2)
    assert (c == full_c[:5_000]).all()
    other_c, _ = sample_teams(spec.with_changes(seed=12), 0, 5_000)
    assert not np.isclose(other_c, c).all()
    middle_c, _ = sample_teams(spec, 16_000, 17_000)
    assert (middle_c == full_c[16_000:17_000]).all()


def test_dask_cluster_builds_the_identical_pool(small, tmp_path):
    distributed = pytest.importorskip("distributed")
    spec, _, table = small
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        path = build_pool(spec, tmp_path / "dask.parquet", chunk=5_000,
                          scheduler=cluster.scheduler_address, progress=False)
    assert pq.read_table(path).equals(table)


def test_metadata_records_spec_seed_bounds_and_versions(small):
    spec, path, _ = small
    record = read_metadata(path)
    assert record["seed"] == 11 and record["teams"] == 20_000
    assert record["fea_bounds"] == {"lo": 0.0, "hi": 2.0, "w": 0.7, "source": "test"}
    assert PoolSpec.from_dict(record["spec"], name=record["name"]) == spec
    assert record["digest"] == spec.digest()
    assert {"numpy", "pyarrow", "python", "fair-teaming-study"} <= set(record["versions"])
    json.dumps(record)


def test_rejection_sampling_meets_every_criterion(tmp_path):
    spec = make_spec(tmp_path, 3_000, """
[pool.sample]
c = [[0.20, 0.32], [0.63, 1.00]]

[pool.accept]
p = [[0.01, 0.99], [0.5, 0.99]]
team_types = ["mixed", "twins"]
fair_gap_above = 0.3
""")
    path = build_pool(spec, tmp_path / "rejected.parquet", progress=False)
    table = pq.read_table(path)
    c, p = coefficients_of(table, 2, 2)
    assert ((c[:, :, 0] >= 0.20) & (c[:, :, 0] <= 0.32)).all()
    assert ((c[:, :, 1] >= 0.63) & (c[:, :, 1] <= 1.00)).all()
    assert (p[:, :, 1] >= 0.5).all()
    kinds = {TEAM_TYPES[k] for k in team_type_codes_of(table.column("team_type"))}
    assert kinds == {"mixed", "twins"}
    assert (table.column("fair_gap").to_numpy() > 0.3).all()


def test_criteria_that_nothing_meets_fail_clearly(tmp_path, monkeypatch):
    from study.allocation.model import InvalidInput
    from study.pool import sampling

    monkeypatch.setattr(sampling, "GIVE_UP_AFTER", 50_000)
    monkeypatch.setattr(sampling, "MAX_CANDIDATES", 20_000)
    spec = make_spec(tmp_path, 10, "[pool.accept]\nfair_gap_above = 0.99\n")
    with pytest.raises(InvalidInput, match=r"pool\.accept.*fair gap > 0\.99.*none of"):
        build_pool(spec, tmp_path / "never.parquet", progress=False)
    assert not list(tmp_path.glob("*.parquet")) and not list(tmp_path.glob(".*partial"))


def test_study2_pool_keeps_the_three_team_types_in_about_equal_parts(tmp_path):
    spec = PoolSpec.from_protocol(PROTOCOLS / "study2.toml").with_changes(teams=6_000)
    table = pq.read_table(build_pool(spec, tmp_path / "s2.parquet", progress=False))
    codes = team_type_codes_of(table.column("team_type"))
    shares = np.bincount(codes, minlength=len(TEAM_TYPES)) / len(codes)
    assert shares[TEAM_TYPES.index("mixed-reversed")] == 0
    assert np.allclose(shares[:3], 1 / 3, atol=0.03)


def test_ensure_pool_builds_once(tmp_path):
    spec = PoolSpec.from_protocol(PROTOCOLS / "demo.toml")
    path = ensure_pool(spec, tmp_path, progress=False)
    assert path.exists() and spec.digest()[:16] in path.name
    modified = path.stat().st_mtime_ns
    assert ensure_pool(spec, tmp_path) == path
    assert path.stat().st_mtime_ns == modified
    assert ensure_pool(spec.with_changes(seed=4), tmp_path, progress=False) != path


CODED_SPEC = """\
[pool]
teams = 3000
seed = 11
kits = [8, 8]
algorithms = ["efficient", "coded"]

[[algorithms]]
id = "coded"
python = "goal_rewards_example:{function}"
"""


def coded_spec(tmp_path: Path, function: str) -> Path:
    path = tmp_path / f"{function}.toml"
    path.write_text(CODED_SPEC.format(function=function), encoding="utf-8")
    return path


def test_code_whose_values_change_between_a_chunks_two_evaluations_stops_the_build(tmp_path):
    from study.allocation.model import InvalidInput

    spec = PoolSpec.from_protocol(coded_spec(tmp_path, "noisy"))
    with pytest.raises(InvalidInput, match=r"^python = 'goal_rewards_example:noisy': algorithm "
                                           r"coded returned other values on a second "
                                           r"evaluation of the same pool teams \(team \d+, "
                                           r"goal \d+: .*a goal reward must be deterministic"
                       ) as caught:
        build_pool(spec, tmp_path / "noisy.parquet", chunk=1_000, workers=2, progress=False)
    assert not list(tmp_path.glob("*.parquet")) and not list(tmp_path.glob(".*partial"))
    arrived = pickle.loads(pickle.dumps(caught.value))   # as from a Dask worker: whole
    assert (str(arrived), arrived.field, arrived.reason) == (
        str(caught.value), "python", caught.value.reason)


def test_deterministic_code_builds_its_columns(tmp_path):
    spec = PoolSpec.from_protocol(coded_spec(tmp_path, "slowest_first"))
    table = pq.read_table(build_pool(spec, tmp_path / "slowest.parquet", chunk=1_000,
                                     progress=False))
    assert table.num_rows == 3000 and "coded_reward" in table.column_names


def test_study_pool_build_tries_the_code_in_a_child_process_first(tmp_path, capsys):
    from support.protocols import SECOND_CONDITION

    from study.cli import main

    demo = (PROTOCOLS / "demo.toml").read_text(encoding="utf-8")
    assert SECOND_CONDITION in demo
    text = demo.replace(SECOND_CONDITION, '[[algorithms]]\nid = "coded"\npython = '
                        '"goal_rewards_example:exits"\n\n' + SECOND_CONDITION.replace(
                            'algorithm = "fair"', 'algorithm = "coded"'), 1)
    path, out = tmp_path / "exits.toml", tmp_path / "exits.parquet"
    path.write_text(text, encoding="utf-8")
    assert main(["pool", "build", str(path), "--out", str(out)]) == 2
    line = text.splitlines().index('python = "goal_rewards_example:exits"') + 1
    assert capsys.readouterr().err.startswith(
        f"study: error: {path}:{line}: algorithms.0.python: called sys.exit(3) in call 1 of 6")
    assert not out.exists()
