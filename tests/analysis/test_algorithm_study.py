"""The pool and the simulation study take declared algorithms: a pool's columns of a
declared algorithm are ``solve_batch``'s, and ``analysis simulate`` (the paper's
Simulation Studies #1 and #2 for every algorithm of a protocol) writes its tables and
figures for 500,000 teams, its numbers those of a team-by-team recomputation."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.allocation import brute_reward
from support.protocols import SECOND_CONDITION

from analysis import algorithm_study
from analysis.cli import main
from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve, solve_batch
from study.allocation.terms import TERMS
from study.pool import Pool, PoolSpec, build_pool
from study.pool.teamtypes import TEAM_TYPES
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[2]
DECLARED = '''[[algorithms]]
id = "balance"
terms = { fairness = 0.7, efficiency = 0.3 }
memory = "study"

[[algorithms]]
id = "nash"
terms = { nash_p = 0.6, efficiency = 0.4 }

[[algorithms]]
id = "slowest"
python = "goal_rewards_example:slowest_first"

[[conditions]]
id = "fair"
algorithm = "balance"'''
ALGORITHMS = {"efficient": Algorithm("efficient"),
              "balance": Algorithm("balance", terms={"fairness": 0.7, "efficiency": 0.3},
                                   memory=True),
              "nash": Algorithm("nash", terms={"nash_p": 0.6, "efficiency": 0.4})}


def study1_with_declared(directory: Path, teams: int, in_pool: bool = True) -> Path:
    """Study #1 (uniform teams) with its Fair robot replaced by ``balance`` (memory over
    the study), a Nash robot and a goal reward given as code declared beside it."""
    text = (ROOT / "protocols" / "study1.toml").read_text(encoding="utf-8")
    assert SECOND_CONDITION in text
    text = text.replace(SECOND_CONDITION, DECLARED, 1).replace("teams = 500_000",
                                                               f"teams = {teams}")
    if in_pool:
        text = text.replace('algorithms = ["efficient", "fair", "fea"]',
                            'algorithms = ["efficient", "fair", "fea", "balance", "nash", '
                            '"slowest"]')
    path = directory / f"declared-{teams}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_pools_columns_of_declared_algorithms_are_solve_batchs(tmp_path):
    spec = PoolSpec.from_protocol(study1_with_declared(tmp_path, 3000))
    assert spec.algorithms == ("efficient", "fair", "fea", "balance", "nash", "slowest")
    declared = spec.to_dict()["declared"]
    assert [entry["id"] for entry in declared] == ["balance", "nash", "slowest"]
    assert len(declared[2]["python_sha256"]) == 64
    pool = Pool.open(build_pool(spec, tmp_path / "pool.parquet", chunk=1000, workers=2,
                                progress=False))
    c, p = pool.coefficients
    for name in ("balance", "nash", "slowest"):
        batch = solve_batch(c, p, spec.algorithm(name), spec.kits)
        goals = np.stack([np.stack([pool.column(f"{name}_goal_{i}_{j}") for j in range(2)],
                                   axis=1) for i in range(2)], axis=1)
        assert (goals == batch.goal_allocations).all(), name
        assert np.array_equal(pool.column(f"{name}_reward"), batch.reward), name
        capable = np.argmax(c, axis=2)
        for i in range(2):
            expected = batch.goal_allocations[np.arange(len(c)), i, capable[:, i]]
            assert (pool.column(f"{name}_rounds_capable_{i}") == expected).all()
    assert spec.algorithm("slowest").code.source == "goal_rewards_example:slowest_first"
    other = PoolSpec.from_protocol(study1_with_declared(tmp_path, 3000)).to_dict()
    assert other == spec.to_dict()
    changed = (tmp_path / "changed.toml")
    changed.write_text((tmp_path / "declared-3000.toml").read_text().replace(
        "nash_p = 0.6, efficiency = 0.4", "nash_p = 0.5, efficiency = 0.5"))
    assert PoolSpec.from_protocol(changed).digest() != spec.digest()


def test_the_simulation_study_of_500000_teams_writes_its_tables_and_figures(tmp_path,
                                                                           capsys):
    protocol = study1_with_declared(tmp_path, 500_000, in_pool=False)
    started = time.perf_counter()
    assert main(["simulate", str(protocol), "--pools", str(tmp_path / "pools"),
                 "--out", str(tmp_path / "study")]) == 0
    elapsed = time.perf_counter() - started
    printed = capsys.readouterr()
    print(f"analysis simulate, 500,000 teams (pool built first): {elapsed:.1f} s")
    for name in ("departures", "term_gaps", "rounds", "fair_gap_bins"):
        assert (tmp_path / "study" / f"{name}.csv").stat().st_size > 0
    for figure in ("departures", "term_gaps", "rounds"):
        for suffix in ("png", "svg"):
            assert (tmp_path / "study" / f"{figure}.{suffix}").stat().st_size > 5000
    departures = pd.read_csv(tmp_path / "study" / "departures.csv")
    robots = list(dict.fromkeys(departures["robot"]))
    assert robots == ["balance", "nash", "slowest", "balance after efficient"]
    every = departures[departures["team_type"] == "all"].set_index("robot")
    assert (every["teams"] == 500_000).all()
    assert ((every["departs_share"] > 0) & (every["departs_share"] < 1)).all()
    assert (every["efficiency_cost"] > 0).all()
    assert "solving balance after efficient for 500,000 teams" in printed.err
    assert "How often each algorithm departs from Efficient" in printed.out


def test_the_simulation_studys_numbers_equal_a_team_by_team_recomputation(tmp_path):
    path = study1_with_declared(tmp_path, 400)
    protocol = load_protocol(path)
    pool = Pool.open(build_pool(protocol.pool_spec(), tmp_path / "pool.parquet",
                                progress=False))
    study = algorithm_study.run(pool, protocol, progress=lambda message: None)
    assert {entry["robot"]: entry["goals"] for entry in study.algorithms}["nash"] == "pool"
    c, p = pool.coefficients
    names = np.array(TEAM_TYPES)[pool.team_types]
    top = pool.column("most_capable_human").astype(int)
    bounds = pool.fea_bounds
    kits = protocol.kits
    expected = recompute(c, p, names, top, bounds, kits)
    departures = study.tables["departures"].set_index(["robot", "team_type"])
    gaps = study.tables["term_gaps"].set_index(["robot", "team_type"])
    rounds = study.tables["rounds"].set_index(["algorithm", "team_type", "human"])
    for (robot, team_type), row in expected["departures"].iterrows():
        mine = departures.loc[(robot, team_type)]
        for column in ("teams", "departs_share", "efficiency_cost", "fairness_gap"):
            assert mine[column] == pytest.approx(row[column], abs=1e-12), (robot, column)
        for term in TERMS:
            assert gaps.loc[(robot, team_type), term] == pytest.approx(
                expected["gaps"].loc[(robot, team_type), term], abs=1e-12), (robot, term)
    for key, row in expected["rounds"].iterrows():
        assert rounds.loc[key, "capable_rounds"] == pytest.approx(row["capable"], abs=1e-12)
        assert rounds.loc[key, "preferred_rounds"] == pytest.approx(row["preferred"],
                                                                    abs=1e-12)
    bins = study.tables["fair_gap_bins"]
    for robot, above in expected["above"].items():
        assert (bins.loc[bins["robot"] == robot, "teams_above"] == above).all(), robot


def recompute(c: np.ndarray, p: np.ndarray, names: np.ndarray, top: np.ndarray,
              bounds: tuple[float, float], kits: tuple[int, ...]) -> dict:
    """The study's numbers team by team: each team solved on its own (``solve``), every
    term in plain Python (MODEL.md's table), means per team type by pandas."""
    from goal_rewards_example import slowest_first

    code = Algorithm("slowest", code=_code(slowest_first))
    robots = {"balance": (ALGORITHMS["balance"], False), "nash": (ALGORITHMS["nash"], False),
              "slowest": (code, False), "balance after efficient": (ALGORITHMS["balance"],
                                                                    True)}
    records, rounds = [], []
    for k in range(len(c)):
        team = Team(c[k], p[k])
        efficient = solve(team, ALGORITHMS["efficient"], kits).goal_allocation
        for robot, (algorithm, after) in robots.items():
            history = efficient if after else None
            goal = solve(team, algorithm, kits, history=history).goal_allocation
            earlier = 0 if history is None else history
            values = {term: brute_reward({term: 1.0}, c[k], p[k], goal + earlier, bounds)
                      - brute_reward({term: 1.0}, c[k], p[k], efficient + earlier, bounds)
                      for term in TERMS}
            records.append({"robot": robot, "team_type": names[k], **values,
                            "departs": bool((goal != efficient).any())})
        for robot, goal in (("efficient", efficient), ("nash", solve(
                team, ALGORITHMS["nash"], kits).goal_allocation)):
            for human, role in ((top[k], "most capable human"), (1 - top[k], "other human")):
                rounds.append({"algorithm": robot, "team_type": names[k], "human": role,
                               "capable": goal[human][int(np.argmax(c[k][human]))],
                               "preferred": goal[human][int(np.argmax(p[k][human]))]})
    frame = pd.DataFrame(records)
    frame = pd.concat([frame, frame.assign(team_type="all")])
    grouped = frame.groupby(["robot", "team_type"])
    departures = pd.DataFrame({"teams": grouped.size(), "departs_share": grouped["departs"].mean(),
                               "efficiency_cost": -grouped["efficiency"].mean(),
                               "fairness_gap": grouped["fairness"].mean()})
    every = frame[frame["team_type"] == "all"]
    above = (every.assign(above=every["fairness"] > 0.60).groupby("robot")["above"].sum())
    rounds_frame = pd.DataFrame(rounds)
    rounds_frame = pd.concat([rounds_frame, rounds_frame.assign(team_type="all")])
    return {"departures": departures, "gaps": grouped[list(TERMS)].mean(),
            "rounds": rounds_frame.groupby(["algorithm", "team_type", "human"]).mean(),
            "above": above.to_dict()}


def _code(function):
    from study.allocation.model import GoalRewardCode

    return GoalRewardCode("goal_rewards_example:slowest_first", function)


def test_study_contrast_reads_a_declared_robot_off_the_pool_and_leaves_out_memory(tmp_path):
    from study.pool.contrast import contrast

    text = study1_with_declared(tmp_path, 2000).read_text(encoding="utf-8")
    remembering = load_protocol(study1_with_declared(tmp_path, 2000))
    nash_path = tmp_path / "nash.toml"
    nash_path.write_text(text.replace('algorithm = "balance"', 'algorithm = "nash"'),
                         encoding="utf-8")
    nash = load_protocol(nash_path)
    pool = Pool.open(build_pool(nash.pool_spec(), tmp_path / "pool.parquet", progress=False))
    left_out = contrast(pool, remembering.conditions)["left_out"]
    assert len(left_out) == 1 and "balance has memory over the study" in left_out[0]
    figures = contrast(pool, nash.conditions)
    assert figures["left_out"] == [] and [r["algorithm"] for r in figures["robots"]] == [
        "efficient", "nash"]
    rows = np.flatnonzero(pool.eligible())
    c, p = pool.coefficients
    differ = (solve_batch(c[rows], p[rows], ALGORITHMS["nash"]).goal_allocations
              != solve_batch(c[rows], p[rows], ALGORITHMS["efficient"]).goal_allocations
              ).any(axis=(1, 2))
    assert figures["pairs"][0]["teams_differ"] == int(differ.sum()) > 0


def test_the_study_covers_every_robot_and_memory_after_the_sessions_before_it(tmp_path):
    welfare = load_protocol(ROOT / "protocols" / "welfare.toml")
    bounds = (welfare.pool_spec().fea.lo, welfare.pool_spec().fea.hi)
    names = [robot.name for robot in algorithm_study.study_robots(welfare, bounds)]
    assert names == ["efficient", "fea", "nash", "balance", "balance after efficient",
                     "balance after fea", "balance after nash"]
    text = (ROOT / "protocols" / "welfare.toml").read_text(encoding="utf-8")
    path = tmp_path / "remembering.toml"
    path.write_text(text.replace('id = "nash"\nalgorithm = "nash"',
                                 'id = "nash"\nalgorithm = "balance"'), encoding="utf-8")
    remembering = load_protocol(path)
    names = [robot.name for robot in algorithm_study.study_robots(remembering, bounds)]
    assert names[-3:] == ["balance after efficient", "balance after fea",
                          "balance after efficient, fea"]
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(path.read_text().replace('condition_order = "alternate"',
                                              'condition_order = "fixed"'), encoding="utf-8")
    names = [robot.name for robot in algorithm_study.study_robots(load_protocol(fixed), bounds)]
    assert names[-1] == "balance after efficient, fea" and "balance after fea" not in names
