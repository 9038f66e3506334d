"""The allocation model against MODEL.md: state space, metrics, rewards and refusals."""

import numpy as np
import pytest

from study.allocation.model import (
    Algorithm,
    InvalidInput,
    Team,
    all_metrics,
    efficiency,
    equality,
    fair_equity,
    fairness,
    goal_reward,
    scaled_fair_equity,
    state_space,
    sums_over_goals,
    validate_kits,
)

C = np.array([[0.2, 0.9], [0.4, 0.6]])
P = np.array([[0.8, 0.3], [0.1, 0.7]])
# human 0: 3 squares + 5 letters, human 1: 5 squares + 3 letters
ALLOCATION = np.array([[3, 5], [5, 3]])


def test_paper_state_space_has_145_states_and_9_goals():
    space = state_space(2, (8, 8))
    assert space.size == 145
    assert len(space.goals) == 9
    assert space.rounds == 8
    assert (space.states[space.goals, 0] == 0).all()


def test_actions_are_numbered_with_human_0_most_significant():
    space = state_space(2, (8, 8))
    assert space.actions.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert space.action_number((1, 0)) == 2


def test_states_are_numbered_breadth_first_in_action_order():
    space = state_space(2, (8, 8))
    # the start, then the successors of the start under actions 0..3
    assert space.states[0].tolist() == [[8, 8], [0, 0], [0, 0]]
    assert space.states[1].tolist() == [[6, 8], [1, 0], [1, 0]]
    assert space.states[2].tolist() == [[7, 7], [1, 0], [0, 1]]
    assert space.states[3].tolist() == [[7, 7], [0, 1], [1, 0]]
    assert space.states[4].tolist() == [[8, 6], [0, 1], [0, 1]]


def test_every_state_keeps_the_kits():
    space = state_space(3, (3, 3, 3))
    totals = space.states.sum(axis=1)
    assert (totals == np.array([3, 3, 3])).all()


def test_invalid_actions_have_no_successor():
    space = state_space(2, (2, 2))
    # after one round of (squares, squares) no squares are left
    state = space.state_of(np.array([[1, 0], [1, 0]]))
    assert space.states[state, 0].tolist() == [0, 2]
    assert space.successor[state, space.action_number((0, 0))] == -1
    assert space.successor[state, space.action_number((0, 1))] == -1
    assert space.successor[state, space.action_number((1, 1))] >= 0


def test_efficiency_by_hand():
    # (0.2*3 + 0.9*5 + 0.4*5 + 0.6*3) / 16
    assert efficiency(C, ALLOCATION) == pytest.approx((0.6 + 4.5 + 2.0 + 1.8) / 16)


def test_equality_of_capability_and_preference_by_hand():
    # shares over the mean kits per human (8): (0.6 + 4.5) / 8 - (2.0 + 1.8) / 8
    assert equality(C, ALLOCATION) == pytest.approx((5.1 - 3.8) / 8)
    # (0.8*3 + 0.3*5) / 8 - (0.1*5 + 0.7*3) / 8
    assert equality(P, ALLOCATION) == pytest.approx((3.9 - 2.6) / 8)


def test_fairness_is_signed_and_averages_the_two_features():
    expected = ((5.1 - 3.8) / 8 + (3.9 - 2.6) / 8) / 2
    assert fairness(C, P, ALLOCATION) == pytest.approx(expected)
    mirrored = fairness(C[::-1], P[::-1], ALLOCATION[::-1])
    assert mirrored == pytest.approx(-expected)


def test_fair_equity_is_outcome_over_input():
    # O_0 = 3.9, I_0 = 1.1; O_1 = 2.6, I_1 = 1.0
    assert fair_equity(C, P, ALLOCATION) == pytest.approx(3.9 / 1.1 - 2.6 / 1.0)


def test_scaled_fair_equity_clips_to_the_unit_interval():
    fe = abs(3.9 / 1.1 - 2.6)
    assert scaled_fair_equity(C, P, ALLOCATION, 0.5, 1.5) == pytest.approx((fe - 0.5) / 1.0)
    assert scaled_fair_equity(C, P, ALLOCATION, 0.0, 0.1) == 1.0
    assert scaled_fair_equity(C, P, ALLOCATION, 5.0, 6.0) == 0.0


def test_goal_rewards_by_hand():
    e = (0.6 + 4.5 + 2.0 + 1.8) / 16
    f = ((5.1 - 3.8) / 8 + (3.9 - 2.6) / 8) / 2
    fe = abs(3.9 / 1.1 - 2.6)
    assert goal_reward(Algorithm("efficient"), C, P, ALLOCATION) == pytest.approx(e)
    assert goal_reward(Algorithm("fair"), C, P, ALLOCATION) == pytest.approx(1 - abs(f))
    fea = Algorithm("fea", w=0.6, lo=0.2, hi=1.2)
    expected = 0.6 * e + 0.4 * (1 - (fe - 0.2) / 1.0)
    assert goal_reward(fea, C, P, ALLOCATION) == pytest.approx(expected)


def test_metrics_broadcast_over_rounds_and_teams():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.01, 0.99, (5, 2, 2))
    p = rng.uniform(0.01, 0.99, (5, 2, 2))
    rounds = np.array([[[1, 0], [0, 1]], [[2, 0], [0, 2]], [[2, 1], [1, 2]]])
    batch = all_metrics(c[:, None], p[:, None], rounds[None])
    for team in range(5):
        for step in range(3):
            single = all_metrics(c[team], p[team], rounds[step])
            for name, values in batch.items():
                assert values[team, step] == pytest.approx(single[name])


def test_matrix_sums_agree_with_direct_metrics():
    rng = np.random.default_rng(4)
    c = rng.uniform(0.01, 0.99, (7, 2, 2))
    p = rng.uniform(0.01, 0.99, (7, 2, 2))
    space = state_space(2, (8, 8))
    goals = space.allocations[space.goals]
    sums = sums_over_goals(c, p, goals)
    direct = fairness(c[:, None], p[:, None], goals[None])
    assert np.allclose(sums.fairness(), direct)
    assert np.allclose(sums.fair_equity(), fair_equity(c[:, None], p[:, None], goals[None]))


def test_goal_rewards_stay_in_the_unit_interval():
    rng = np.random.default_rng(5)
    c = rng.uniform(0.0, 1.0, (2000, 2, 2)) + 1e-6
    c = np.clip(c, 0, 1)
    p = rng.uniform(0.0, 1.0, (2000, 2, 2))
    space = state_space(2, (8, 8))
    goals = space.allocations[space.goals]
    for algorithm in (Algorithm("efficient"), Algorithm("fair"),
                      Algorithm("fea", w=0.3, lo=0.1, hi=2.0)):
        rewards = goal_reward(algorithm, c[:, None], p[:, None], goals[None])
        assert rewards.min() >= 0.0
        assert rewards.max() <= 1.0


def test_three_humans_use_the_spread_of_shares():
    c = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])
    p = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    allocation = np.array([[1, 1], [2, 0], [0, 2]])
    shares = np.array([1.0, 1.8, 1.6]) / 2
    assert equality(c, allocation) == pytest.approx(shares.max() - shares.min())
    combined = (shares + np.array([0.5, 0.5, 0.5])) / 2
    assert fairness(c, p, allocation) == pytest.approx(combined.max() - combined.min())


@pytest.mark.parametrize(("c", "p", "message"), [
    ([[1.2, 0.5], [0.3, 0.4]], [[0.5, 0.5], [0.5, 0.5]], "c[0, 0] = 1.2"),
    ([[0.2, 0.5], [0.3, 0.4]], [[0.5, -0.1], [0.5, 0.5]], "p[0, 1] = -0.1"),
    ([[0.2, np.nan], [0.3, 0.4]], [[0.5, 0.5], [0.5, 0.5]], "c[0, 1] = nan"),
    ([[0.0, 0.0], [0.3, 0.4]], [[0.5, 0.5], [0.5, 0.5]], "capabilities must sum"),
    ([[0.2, 0.5], [0.3, 0.4]], [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]], "must have shape"),
    ([0.2, 0.5], [0.5, 0.5], "must have shape"),
    ([[0.2, 0.5]], [[0.5, 0.5]], "at least 2 humans"),
    ([["a", 0.5], [0.3, 0.4]], [[0.5, 0.5], [0.5, 0.5]], "must be numbers"),
])
def test_invalid_teams_are_refused_with_the_field_and_value(c, p, message):
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        Team(np.array(c, dtype=object) if message == "must be numbers" else c, p)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "greedy"}, "algorithm = 'greedy'"),
    ({"name": "fea", "w": 1.5}, "w = 1.5"),
    ({"name": "fea", "w": -0.1}, "w = -0.1"),
    ({"name": "fea", "lo": 1.0, "hi": 1.0}, "hi must be greater than lo"),
    ({"name": "fea", "lo": 2.0, "hi": 1.0}, "hi must be greater than lo"),
    ({"name": "fea", "w": float("nan")}, "must be a finite number"),
])
def test_invalid_algorithms_are_refused(kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        Algorithm(**kwargs)


@pytest.mark.parametrize(("kits", "humans", "message"), [
    ((8, 7), 2, "multiple of the number of humans"),
    ((3, 3, 3), 2, "multiple of the number of humans"),
    ((0, 0), 2, "positive multiple"),
    ((-1, 3), 2, "non-negative"),
    ((8.5, 7.5), 2, "whole numbers"),
])
def test_invalid_kits_are_refused(kits, humans, message):
    with pytest.raises(InvalidInput, match=message):
        validate_kits(kits, humans)


def test_unknown_state_is_refused():
    space = state_space(2, (8, 8))
    with pytest.raises(InvalidInput, match="not a reachable state"):
        space.state_of(np.array([[9, 0], [0, 0]]))
