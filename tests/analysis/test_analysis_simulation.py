"""Simulation comparisons over pool frames built with the pool's own column code."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import simulation
from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve
from study.pool.build import chunk_table
from study.protocol.pool_spec import PoolSpec


def pool_frame(teams: int, seed: int, **spec: object) -> pd.DataFrame:
    """A pool exactly as a pool file holds it, in memory."""
    return chunk_table(PoolSpec.from_dict({"teams": teams, "seed": seed, **spec}),
                       0, teams).to_pandas()


@pytest.fixture(scope="module")
def study2_pool():
    return pool_frame(3000, 4, sample={"c": [[[0.20, 0.32], [0.63, 1.00]]] * 2},
                      fea={"w": 0.7, "bounds": [0.0, 1.5], "bounds_source": "test"})


def test_table3_bins_are_closed_where_the_paper_says():
    pool = pd.DataFrame({"fair_gap": [0.5, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95],
                         "efficiency_gap": [0.0, 0.0, -0.1, -0.2, -0.5, -0.6, 0.0]})
    table = simulation.table3(pool).set_index(["measure", "bin"])["teams"]
    assert table["fair gap"].tolist() == [1, 1, 2, 1]
    # Kept (gap > 0.60): efficiency gaps -0.1, -0.2, -0.5, -0.6, 0.0.
    assert table["efficiency gap"].tolist() == [2, 2, 1]


def test_table3_from_the_shipped_study1_spec_matches_the_paper_within_sampling_error():
    spec = PoolSpec.from_protocol(Path(__file__).parents[2] / "protocols" / "study1.toml")
    assert spec.teams == 500_000
    table = simulation.table3(chunk_table(spec, 0, spec.teams).to_pandas())
    fair = table[table["measure"] == "fair gap"].set_index("bin")
    kept = fair["teams"].sum()
    # The paper kept 7,072 of 500,000 teams; binomial sd about 84.
    sd = np.sqrt(500_000 * 0.0141 * (1 - 0.0141))
    assert abs(kept - 7072) < 4 * sd
    for label in simulation.PAPER_FAIR_GAP_TEAMS:
        share = fair.loc[label, "paper_share"]
        assert abs(fair.loc[label, "share"] - share) < 4 * np.sqrt(share * (1 - share) / kept)
    assert fair.loc["above 0.90", "share"] < 0.005


def test_per_human_array_reads_coefficient_columns(study2_pool):
    c, p = simulation.coefficients(study2_pool)
    assert c.shape == p.shape == (3000, 2, 2)
    assert c[5, 1, 0] == study2_pool.loc[5, "c_1_0"]


def test_allocation_summary_against_single_solves(study2_pool):
    table = simulation.allocation_summary(study2_pool, ["efficient", "fea"])
    c, p = simulation.coefficients(study2_pool)
    mixed = np.flatnonzero(study2_pool["team_type"].astype(str) == "mixed")[:40]
    sub = study2_pool.iloc[mixed]
    sub_table = simulation.allocation_summary(sub, ["fea"]).set_index("human")
    capable_top, preferred_other = [], []
    for k in mixed:
        goal = solve(Team(c[k], p[k]), Algorithm("fea", w=0.7, lo=0.0, hi=1.5)).goal_allocation
        top = int(np.argmax(c[k].max(axis=1)))
        capable_top.append(goal[top, np.argmax(c[k, top])])
        preferred_other.append(goal[1 - top, np.argmax(p[k, 1 - top])])
    assert sub_table.loc["most capable human", "capable_rounds"] == pytest.approx(
        np.mean(capable_top))
    assert sub_table.loc["other human", "preferred_rounds"] == pytest.approx(
        np.mean(preferred_other))
    assert set(table["team_type"]) <= {"mixed", "twins", "negative", "mixed-reversed"}
    assert (table["capable_rounds"].between(0, 8) & table["preferred_rounds"].between(0, 8)).all()


def test_gap_summary_counts_every_team(study2_pool):
    summary = simulation.gap_summary(study2_pool)
    assert summary.groupby("gap")["count"].sum().tolist() == [3000, 3000]


def test_order_comparison_changes_only_path_metrics(study2_pool):
    frame, per_round = simulation.order_comparison(study2_pool, [Algorithm("fair")],
                                                   sample=20)
    assert len(per_round) == 8 * len(frame)
    last = per_round[per_round["round"] == 8]
    assert last["F"].abs().to_numpy() == pytest.approx(frame["F_long_term"].to_numpy())
    default = frame[frame["order"] == "default"].reset_index(drop=True)
    fairer = frame[frame["order"] == "anytime-fair"].reset_index(drop=True)
    assert len(default) == len(fairer) == 20 * study2_pool["team_type"].nunique()
    assert fairer["F_long_term"].to_numpy() == pytest.approx(default["F_long_term"].to_numpy())
    assert (fairer["F_anytime"] <= default["F_anytime"] + 1e-12).all()
