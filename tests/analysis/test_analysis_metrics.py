"""The seed papers' metrics against hand-computed cases and direct re-solves."""

import numpy as np
import pytest

from analysis import fairness_time, metrics
from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve

C = np.array([[0.9, 0.2], [0.4, 0.6]])
P = np.array([[0.1, 0.8], [0.5, 0.3]])
# human 0: squares, squares, letters; human 1: letters every round
KITS = np.array([[[0, 0], [0, 0]], [[1, 0], [0, 1]], [[2, 0], [0, 2]], [[2, 1], [0, 3]]])


def test_windowed_fairness_of_one_round_is_that_rounds_kits():
    series = metrics.windowed_fairness(C, P, KITS, window=1)
    # round 3: human 0 letters (c .2, p .8), human 1 letters (c .6, p .3)
    assert series["F_window"][2] == pytest.approx(((0.2 - 0.6) + (0.8 - 0.3)) / 2)
    # round 1: human 0 on their most capable type (squares), human 1 on theirs (letters)
    assert series["opportunity_gap_window"][0] == pytest.approx(0.0)
    assert series["opportunity_gap_window"][2] == pytest.approx(0 - 1)


def test_a_window_as_long_as_the_session_is_the_running_fairness():
    series = metrics.windowed_fairness(C, P, KITS, window=3)
    running = fairness_time.running_metrics(C, P, KITS)
    assert series["F_window"] == pytest.approx(running["F"])
    summary = metrics.windowed_summary(C, P, KITS, window=3)
    assert summary["F_window_worst"].iloc[0] == pytest.approx(np.abs(running["F"]).max())


def test_jensen_shannon_and_wasserstein_known_values():
    a = np.array([0.12, 0.13, 0.14])
    assert metrics.jensen_shannon_bits(a, a) == pytest.approx(0.0)
    assert metrics.jensen_shannon_bits(a, a + 0.5) == pytest.approx(1.0)
    # half the mass in a shared bin: M = (.25, .5, .25); KL(P||M) = .5 log2 2 = .5 for each
    b = np.array([0.12, 0.62])
    c = np.array([0.12, 0.92])
    assert metrics.jensen_shannon_bits(b, c) == pytest.approx(0.5)
    assert metrics.wasserstein(a, a + 0.3) == pytest.approx(0.3)


def test_welfare_by_hand():
    status = np.array([[2.0, 5.0]])
    result = metrics.welfare(status)
    assert result["utilitarian"][0] == 7 and result["rawlsian"][0] == 2
    assert result["nash"][0] == pytest.approx(np.log(3) + np.log(6))
    frame = metrics.welfare_frame(C, P, KITS[-1])
    assert frame["rawlsian_P"].iloc[0] == pytest.approx(min(2 * 0.1 + 0.8, 3 * 0.3))


@pytest.mark.parametrize("name", ["efficient", "fair", "fea"])
def test_counterfactuals_equal_direct_re_solves(name):
    rng = np.random.default_rng(4)
    c, p = rng.uniform(0.01, 0.99, (2, 30, 2, 2))
    algorithm = Algorithm(name, w=0.7, lo=0.0, hi=2.0)
    frame = metrics.counterfactuals(c, p, algorithm, (4, 4))
    for k in range(len(c)):
        goal = solve(Team(c[k], p[k]), algorithm, (4, 4)).goal_allocation
        swapped = solve(Team(c[k, ::-1], p[k, ::-1]), algorithm, (4, 4)).goal_allocation
        flipped_p = p[k].copy()
        flipped_p[0] = p[k, 0, ::-1]
        flipped = solve(Team(c[k], flipped_p), algorithm, (4, 4)).goal_allocation
        assert frame["seat_swap_P"][k] == pytest.approx(
            (p[k, 0] * goal[0]).sum() - (p[k, 0] * swapped[1]).sum())
        assert frame["preference_flip_C"][k] == pytest.approx(
            (c[k, 0] * goal[0]).sum() - (c[k, 0] * flipped[0]).sum())


def test_preference_flip_of_indifferent_human_changes_nothing():
    c = np.array([[[0.8, 0.3], [0.5, 0.6]]])
    p = np.array([[[0.5, 0.5], [0.2, 0.9]]])
    frame = metrics.counterfactuals(c, p, Algorithm("fair"), (4, 4))
    assert frame["preference_flip_C"][0] == 0 and frame["preference_flip_Cap"][0] == 0
