"""The exact fast solver against pymdptoolbox, and the properties of solved policies."""

import numpy as np
import pytest

from study.allocation.model import Algorithm, InvalidInput, Team, state_space
from study.allocation.solver import (
    TIE_TOLERANCE,
    best_reachable,
    exact_action_table,
    goal_rewards,
    reference_action_table,
    solve,
    solve_batch,
)

ALGORITHMS = [
    Algorithm("efficient"),
    Algorithm("fair"),
    Algorithm("fea", w=0.7, lo=0.0, hi=2.0),
    Algorithm("fea", w=0.7, lo=0.3, hi=0.9),
]


def random_teams(count: int, humans: int, types: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.01, 0.99, (count, humans, types)),
            rng.uniform(0.01, 0.99, (count, humans, types)))


def disagreements(space, rewards, fast, reference) -> list[int]:
    """States where the two solvers choose actions that are not exactly tied."""
    best = best_reachable(space, rewards[None])[0]
    differing = []
    for state in np.flatnonzero(fast != reference):
        if state in space.goals:
            differing.append(int(state))
            continue
        values = [best[space.successor[state, a]] if space.successor[state, a] >= 0 else -1
                  for a in (fast[state], reference[state])]
        if abs(values[0] - values[1]) > TIE_TOLERANCE:
            differing.append(int(state))
    return differing


def compare_with_reference(algorithm: Algorithm, kits: tuple[int, ...], count: int,
                           humans: int, seed: int) -> tuple[int, int]:
    c, p = random_teams(count, humans, len(kits), seed)
    space = state_space(humans, kits)
    rewards = goal_rewards(space, algorithm, c, p)
    fast = exact_action_table(space, rewards)
    identical = 0
    for team in range(count):
        reference = reference_action_table(space, rewards[team])
        assert disagreements(space, rewards[team], fast[team], reference) == [], team
        identical += int((fast[team] == reference).all())
    return identical, count


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: a.describe())
def test_fast_solver_matches_pymdptoolbox_in_every_state(algorithm):
    identical, count = compare_with_reference(algorithm, (8, 8), 300, 2, seed=11)
    # with continuous random coefficients, exact ties between goals are rare
    assert identical >= count - 3


@pytest.mark.parametrize(("kits", "humans"), [((4, 4), 2), ((6, 2), 2), ((3, 3, 2), 2),
                                              ((3, 3, 3), 3)])
@pytest.mark.parametrize("algorithm", ALGORITHMS[:3], ids=lambda a: a.describe())
def test_fast_solver_matches_pymdptoolbox_for_other_shapes(kits, humans, algorithm):
    identical, count = compare_with_reference(algorithm, kits, 40, humans, seed=sum(kits))
    assert identical >= count - 1


def test_exact_ties_take_the_lowest_action_like_the_reference():
    # identical humans: every goal with the same split ties; both solvers take action 0 first
    team = Team([[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]])
    space = state_space(2, (8, 8))
    for algorithm in ALGORITHMS[:2]:
        rewards = goal_rewards(space, algorithm, team.c[None], team.p[None])
        fast = exact_action_table(space, rewards)[0]
        assert (fast == reference_action_table(space, rewards[0])).all()
        assert solve(team, algorithm).plan[0] == (0, 0)


def test_batch_plans_follow_the_per_state_policy():
    c, p = random_teams(200, 2, 2, seed=5)
    for algorithm in ALGORITHMS:
        batch = solve_batch(c, p, algorithm, chunk=64)
        for team in range(0, 200, 7):
            policy = solve(Team(c[team], p[team]), algorithm)
            assert [tuple(batch.space.actions[a]) for a in batch.plans[team]] == policy.plan
            assert (batch.goal_allocations[team] == policy.goal_allocation).all()
            assert batch.reward[team] == pytest.approx(policy.reward)


@pytest.mark.parametrize(("humans", "kits"), [(2, (8, 8)), (2, (4, 4)), (2, (3, 3, 2)),
                                            (3, (3, 3, 3)), (2, (6, 6, 6))])
def test_one_team_equals_its_row_of_the_batch_exactly(humans, kits):
    """The live path (``solve`` for one team) and ``solve_batch`` give the same rewards to
    the last bit, the same plan and the same goal."""
    c, p = random_teams(60, humans, len(kits), seed=21)
    c[:10] = np.round(c[:10], 1)          # exact ties between goals are common here
    for algorithm in ALGORITHMS:
        batch = solve_batch(c, p, algorithm, kits=kits, chunk=17)
        for team in range(len(c)):
            policy = solve(Team(c[team], p[team]), algorithm, kits=kits)
            assert (policy.goal_rewards == batch.rewards[team]).all()
            assert policy.plan == [tuple(batch.space.actions[a]) for a in batch.plans[team]]
            assert (policy.goal_allocation == batch.goal_allocations[team]).all()
            assert policy.reward == batch.reward[team]


def test_off_plan_states_follow_the_action_table():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    policy = solve(team, Algorithm("fair"))
    table = exact_action_table(policy.space, goal_rewards(policy.space, Algorithm("fair"),
                                                           team.c[None], team.p[None]))[0]
    off_plan = [state for state in range(policy.space.size)
                if state not in policy.start_path
                and policy.space.depth[state] < policy.space.rounds]
    assert len(off_plan) > 100
    for state in off_plan:
        held = policy.space.allocations[state]
        assert policy.action(held) == tuple(policy.space.actions[table[state]])


def test_batch_result_does_not_depend_on_chunk_size():
    c, p = random_teams(1000, 2, 2, seed=9)
    whole = solve_batch(c, p, Algorithm("fair"), chunk=100_000)
    pieces = solve_batch(c, p, Algorithm("fair"), chunk=37)
    assert (whole.plans == pieces.plans).all()
    assert (whole.goal_positions == pieces.goal_positions).all()
    assert (whole.rewards == pieces.rewards).all()


def test_batch_with_many_goals_uses_the_general_walk():
    c, p = random_teams(30, 2, 3, seed=2)
    batch = solve_batch(c, p, Algorithm("efficient"), kits=(6, 6, 6))
    assert len(batch.space.goals) > 16
    for team in range(30):
        policy = solve(Team(c[team], p[team]), Algorithm("efficient"), kits=(6, 6, 6))
        assert (batch.goal_allocations[team] == policy.goal_allocation).all()


def test_optimal_goal_has_the_best_reward():
    c, p = random_teams(500, 2, 2, seed=3)
    for algorithm in ALGORITHMS:
        batch = solve_batch(c, p, algorithm)
        assert np.allclose(batch.reward, batch.rewards.max(axis=1))


def test_swapping_the_humans_mirrors_the_plan():
    c, p = random_teams(100, 2, 2, seed=8)
    for algorithm in ALGORITHMS[:3]:
        for team in range(100):
            original = solve(Team(c[team], p[team]), algorithm)
            mirrored = solve(Team(c[team, ::-1], p[team, ::-1]), algorithm)
            assert mirrored.reward == pytest.approx(original.reward)
            rewards = np.sort(original.goal_rewards)
            if rewards[-1] - rewards[-2] > 1e-6:
                assert (mirrored.goal_allocation == original.goal_allocation[::-1]).all()


def test_policy_answers_in_any_state_and_reports_metrics_per_round():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    policy = solve(team, Algorithm("fair"))
    assert len(policy.plan) == 8
    trajectory = policy.trajectory
    assert trajectory[0].sum() == 0
    assert (trajectory[-1] == policy.goal_allocation).all()
    for step, types in enumerate(policy.plan):
        assert policy.action(trajectory[step]) == types
    metrics = policy.round_metrics()
    assert set(metrics) == {"E", "F_c", "F_p", "F", "FE", "unfairness"}
    assert metrics["unfairness"][-1] == pytest.approx(1 - policy.reward)
    with pytest.raises(ValueError, match="session is over"):
        policy.action(policy.goal_allocation)


def test_policy_refuses_unknown_order_solver_and_kits():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    with pytest.raises(InvalidInput, match="order = 'random'"):
        solve(team, Algorithm("fair"), order="random")
    with pytest.raises(InvalidInput, match="solver = 'vi'"):
        solve(team, Algorithm("fair"), solver="vi")
    with pytest.raises(InvalidInput, match="kits"):
        solve(team, Algorithm("fair"), kits=(4, 4, 4))
    with pytest.raises(InvalidInput, match="kits"):
        solve(team, Algorithm("fair"), kits=(4, 3))


def test_reference_solver_gives_the_same_policy_through_solve():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    for algorithm in ALGORITHMS:
        fast = solve(team, algorithm)
        reference = solve(team, algorithm, solver="mdptoolbox")
        assert fast.plan == reference.plan


@pytest.mark.parametrize("algorithm", ALGORITHMS[1:], ids=lambda a: a.describe())
def test_anytime_fair_order_keeps_the_goal_and_lowers_the_worst_round(algorithm):
    c, p = random_teams(150, 2, 2, seed=21)
    improved = 0
    for team in range(150):
        default = solve(Team(c[team], p[team]), algorithm)
        anytime = solve(Team(c[team], p[team]), algorithm, order="anytime-fair")
        assert (anytime.goal_allocation == default.goal_allocation).all()
        assert anytime.reward == default.reward
        worst_default = np.nanmax(default.round_metrics()["unfairness"])
        worst_anytime = np.nanmax(anytime.round_metrics()["unfairness"])
        assert worst_anytime <= worst_default + 1e-12
        improved += worst_anytime < worst_default - 1e-9
    assert improved > 0


def test_anytime_fair_order_is_best_among_all_orderings_of_a_small_plan():
    team = Team([[0.2, 0.8], [0.6, 0.5]], [[0.9, 0.2], [0.3, 0.6]])
    algorithm = Algorithm("fair")
    policy = solve(team, algorithm, kits=(4, 4), order="anytime-fair")
    goal = policy.goal_allocation
    space = policy.space
    best = (np.inf, np.inf)
    for sequence in np.ndindex(*(len(space.actions),) * space.rounds):
        held = np.zeros_like(goal)
        worst, total = 0.0, 0.0
        for action in sequence:
            held = held.copy()
            held[np.arange(2), space.actions[action]] += 1
            unfair = float(algorithm.running_unfairness(team.c, team.p, held))
            worst, total = max(worst, unfair), total + unfair
        if (held == goal).all():
            best = min(best, (round(worst, 12), round(total, 12)))
    unfairness = policy.round_metrics()["unfairness"]
    assert (round(unfairness.max(), 12), round(unfairness.sum(), 12)) == best
