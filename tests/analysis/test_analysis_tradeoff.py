"""The fairness-efficiency sweep: ends of the curve, price of fairness, the front."""

import numpy as np
import pandas as pd
import pytest

from analysis import tradeoff
from study.allocation.model import Algorithm, Team, all_metrics
from study.allocation.solver import solve


@pytest.fixture(scope="module")
def teams():
    rng = np.random.default_rng(11)
    c = rng.uniform(0.2, 1.0, (400, 2, 2))
    p = rng.uniform(0.01, 0.99, (400, 2, 2))
    groups = np.where(np.arange(400) % 2, "odd", "even")
    return c, p, groups


def test_goal_outcomes_match_single_solves(teams):
    c, p, _ = teams
    algorithm = Algorithm("fea", w=0.4, lo=0.0, hi=2.0)
    outcomes = tradeoff.goal_outcomes(c[:5], p[:5], algorithm)
    for k in range(5):
        goal = solve(Team(c[k], p[k]), algorithm).goal_allocation
        metrics = all_metrics(c[k], p[k], goal)
        assert outcomes.loc[k, "E"] == pytest.approx(metrics["E"])
        assert outcomes.loc[k, "fair_reward"] == pytest.approx(1 - abs(metrics["F"]))
        assert outcomes.loc[k, "abs_FE"] == pytest.approx(abs(metrics["FE"]))


def test_sweep_ends_and_price_of_fairness(teams):
    c, p, groups = teams
    frame = tradeoff.sweep(c, p, groups, weights=(0.0, 0.7, 1.0), bounds=((0.0, 2.0),))
    assert set(frame["group"]) == {"all", "odd", "even"}
    assert len(frame) == 3 * (2 + 3)
    everyone = frame[frame["group"] == "all"].set_index(["algorithm", "w"])
    efficient = everyone.xs("efficient")
    assert efficient["price_of_fairness"].iloc[0] == 0
    # w = 1 rewards efficiency alone: the Efficient goal, no price paid.
    full = everyone.xs("fea").loc[1.0]
    assert full["E"] == pytest.approx(efficient["E"].iloc[0])
    assert full["price_of_fairness"] == pytest.approx(0)
    # The price of fairness is the mean per-team (E* - E) / E*, by hand.
    best = tradeoff.goal_outcomes(c, p, Algorithm("efficient"))["E"]
    fair = tradeoff.goal_outcomes(c, p, Algorithm("fair"))["E"]
    assert everyone.xs("fair")["price_of_fairness"].iloc[0] == pytest.approx(
        ((best - fair) / best).mean())
    assert everyone.xs("fair")["fair_reward"].iloc[0] >= efficient["fair_reward"].iloc[0]
    odd = frame[(frame["group"] == "odd") & (frame["algorithm"] == "fair")]
    assert odd["teams"].iloc[0] == 200
    assert odd["E"].iloc[0] == pytest.approx(fair[1::2].mean())


def test_front_marks_non_dominated_points():
    points = pd.DataFrame({"E": [1.0, 0.0, 0.5, 0.4, 1.0], "fair_reward": [0.0, 1.0, 0.5,
                                                                          0.4, 0.0]})
    assert tradeoff._non_dominated(points).tolist() == [True, True, True, False, True]


def test_sweep_front_keeps_efficient_and_fair_ends(teams):
    c, p, groups = teams
    frame = tradeoff.sweep(c, p, groups, weights=(0.0, 0.5, 1.0), bounds=((0.0, 2.0),))
    front = frame[frame["on_front_F"] & (frame["group"] == "all")]
    assert {"efficient", "fair"} <= set(front["algorithm"])
    # on fair-equity the ends are Efficient and FEA at w = 0 (pure fair-equity), not Fair
    everyone = frame[frame["group"] == "all"]
    front_fe = everyone[everyone["on_front_FE"]]
    assert "efficient" in set(front_fe["algorithm"])
    least = everyone.loc[everyone["abs_FE"].idxmin()]
    assert bool(least["on_front_FE"]) and least["algorithm"] == "fea"
    headline = tradeoff.price_of_fairness(tradeoff.sweep(c, p, groups, weights=(0.7,)))
    assert list(headline["algorithm"].unique()) == ["fair", "fea"]
    assert len(headline) == 6
