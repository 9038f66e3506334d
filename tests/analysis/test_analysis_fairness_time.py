"""Fairness over time: hand-computed running metrics (MODEL.md) and their summaries."""

import numpy as np
import pytest

from analysis import fairness_time as ft
from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve

C = np.array([[0.2, 0.9], [0.3, 0.7]])
P = np.array([[0.9, 0.1], [0.4, 0.6]])
# Round 1: human 0 squares, human 1 letters; round 2 the other way; round 3 both letters.
TRAJECTORY = np.array([[[0, 0], [0, 0]], [[1, 0], [0, 1]], [[1, 1], [1, 1]],
                       [[1, 2], [1, 2]]])


def test_running_metrics_by_hand():
    metrics = ft.running_metrics(C, P, TRAJECTORY)
    # After round 1: F_c = (0.2 - 0.7) / 1, F_p = (0.9 - 0.6) / 1, F = -0.1;
    # FE = 0.9 / 1.1 - 0.6 / 1.0. After round 3: F_c = (2.0 - 1.7) / 3,
    # F_p = (1.1 - 1.6) / 3, FE = 1.1 / 1.1 - 1.6 / 1.0 = -0.6, rate -0.2.
    assert metrics["E"] == pytest.approx([0.45, 2.1 / 4, 3.7 / 6])
    assert metrics["F_c"] == pytest.approx([-0.5, 0.05, 0.1])
    assert metrics["F_p"] == pytest.approx([0.3, 0.0, -0.5 / 3])
    assert metrics["F"] == pytest.approx([-0.1, 0.025, (0.1 - 0.5 / 3) / 2])
    assert metrics["FE"] == pytest.approx([0.9 / 1.1 - 0.6, 1 / 1.1 - 1, -0.6])
    assert metrics["FE_rate"] == pytest.approx([0.9 / 1.1 - 0.6, (1 / 1.1 - 1) / 2, -0.2])


def test_temporal_summary_by_hand():
    gap = np.array([0.1, 0.025, 1 / 30, 0.05])
    summary = ft.temporal_summary(gap, period=2)
    assert summary["long_term"] == pytest.approx(0.05)
    assert summary["anytime"] == pytest.approx(0.1)
    assert summary["average"] == pytest.approx(gap.mean())
    assert summary["periodic"] == pytest.approx((0.025 + 0.05) / 2)
    assert np.isnan(ft.temporal_summary(gap, period=5)["periodic"])
    later = ft.temporal_summary(gap, period=2, first_round=2)
    assert later["anytime"] == pytest.approx(0.05)
    assert later["average"] == pytest.approx(gap[1:].mean())


def test_lead_measures_by_hand():
    signed = np.array([0.0, 1.0, 0.0, -1.0, -1.0, 2.0])
    assert ft.lead_share(signed) == pytest.approx((0.5 + 1 + 0.5 + 0 + 0 + 1) / 6)
    assert ft.lead_changes(signed) == 2
    assert ft.cumulative_advantage(signed) == pytest.approx(1.0)
    batch = np.array([[1.0, 1.0, 1.0], [-1.0, 1.0, -1.0], [0.0, 0.0, 0.0]])
    assert ft.lead_changes(batch).tolist() == [0, 2, 0]
    assert ft.lead_share(batch) == pytest.approx([1.0, 1 / 3, 0.5])


def test_summary_frame_of_one_trajectory():
    row = ft.summary(C, P, TRAJECTORY, period=2).iloc[0]
    assert row["F_long_term"] == pytest.approx(abs(0.1 - 0.5 / 3) / 2)
    assert row["F_anytime"] == pytest.approx(0.1)
    assert row["F_periodic"] == pytest.approx(0.025)
    assert row["F_cumulative_advantage"] == pytest.approx(-0.1 + 0.025 + (0.1 - 0.5 / 3) / 2)
    assert row["F_lead_changes"] == 2
    assert row["FE_rate_long_term"] == pytest.approx(0.2)


def test_rounds_frame_is_long():
    frame = ft.rounds_frame(np.stack([C, C]), np.stack([P, P]), np.stack([TRAJECTORY] * 2))
    assert list(frame["unit"]) == [0, 0, 0, 1, 1, 1]
    assert list(frame["round"]) == [1, 2, 3, 1, 2, 3]
    assert frame["F"].iloc[:3].to_numpy() == pytest.approx([-0.1, 0.025, (0.1 - 0.5 / 3) / 2])


@pytest.mark.parametrize("order", ["default", "anytime-fair"])
def test_policy_trajectories_match_the_solver(order):
    rng = np.random.default_rng(3)
    c, p = rng.uniform(0.01, 0.99, (2, 12, 2, 2))
    trajectories = ft.policy_trajectories(c, p, Algorithm("fair"), order=order)
    for k in range(len(c)):
        policy = solve(Team(c[k], p[k]), Algorithm("fair"), order=order)
        assert (trajectories[k] == policy.trajectory).all()


def test_anytime_fair_order_keeps_the_goal_and_never_has_a_worse_worst_round():
    rng = np.random.default_rng(5)
    c, p = rng.uniform(0.01, 0.99, (2, 60, 2, 2))
    default = ft.summary(c, p, ft.policy_trajectories(c, p, Algorithm("fair")))
    fairer = ft.summary(c, p, ft.policy_trajectories(c, p, Algorithm("fair"),
                                                     order="anytime-fair"))
    assert fairer["F_long_term"].to_numpy() == pytest.approx(default["F_long_term"].to_numpy())
    assert (fairer["F_anytime"] <= default["F_anytime"] + 1e-12).all()
    assert (fairer["F_anytime"] < default["F_anytime"] - 1e-6).any()
