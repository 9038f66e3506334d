"""The fast solver against pymdptoolbox and the plain numpy path, as ratios from one run.

    python -m benchmarks.solver [--reference-teams 300] [--batch-teams 500000]
        [--repeats 5]

1. Per algorithm, per team: pymdptoolbox (building each team's MDP, as a per-team study
   would), the batch plan (``solve_batch`` over many teams), the action table in every
   state, and one team alone through ``solve`` (the live path: the plan, goal and reward
   the web app reads), the last also against ``solve_batch`` called with one team; the
   presets, then two declared algorithms (weighted terms taking the general path).
2. Many teams, three algorithms: ``solve_batch`` once per algorithm, and the pool's path
   (the goal sums shared by the three algorithms, then each one's optimal goals).

Fast timings are the least processor time of ``--repeats`` runs (the least disturbed by
other work).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from study.allocation.model import Algorithm, Team, reward_from_sums, state_space
from study.allocation.solver import (
    exact_action_table,
    goal_rewards,
    optimal_goal_positions,
    reference_action_table,
    solve,
    solve_batch,
)
from study.pool.columns import COMPUTE_SLICE, goal_sums

ALGORITHMS = (Algorithm("efficient"), Algorithm("fair"), Algorithm("fea", lo=0.0, hi=2.0))
DECLARED = (Algorithm("maximin", terms={"efficiency": 0.5, "egalitarian_c": 0.5}),
            Algorithm("nash", terms={"efficiency": 0.3, "nash_c": 0.4, "nash_p": 0.3}))


def random_teams(count: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.01, 0.99, (count, 2, 2)), rng.uniform(0.01, 0.99, (count, 2, 2))


def seconds(action: Callable[[], object], repeats: int = 1) -> float:
    """The least processor time of ``repeats`` runs (every timed path runs on one thread,
    so this is its time without other processes' load)."""
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return best


def reference_per_team(c: np.ndarray, p: np.ndarray, algorithm: Algorithm) -> float:
    """pymdptoolbox, building the MDP for each team as a per-team study would."""
    space = state_space(2, (8, 8))

    def run() -> None:
        for team in range(len(c)):
            rewards = goal_rewards(space, algorithm, c[team:team + 1], p[team:team + 1])
            reference_action_table(space, rewards[0])

    return seconds(run) / len(c)


def one_team(c: np.ndarray, p: np.ndarray, algorithm: Algorithm, repeats: int) -> float:
    """What the live server reads for each team: plan, goal and reward; best seconds per
    team of ``repeats`` runs, each on new ``Team`` objects (a team keeps its goal sums,
    so a second run on the same objects would skip them)."""
    best = np.inf
    for _ in range(repeats):
        teams = [Team(c[k], p[k]) for k in range(len(c))]
        start = time.process_time()
        for team in teams:
            policy = solve(team, algorithm)
            _ = policy.plan, policy.goal_allocation, policy.reward
        best = min(best, time.process_time() - start)
    return best / len(c)


def one_team_by_batch(c: np.ndarray, p: np.ndarray, algorithm: Algorithm) -> None:
    """The same through the batch solver, one team at a time."""
    for team in range(len(c)):
        batch = solve_batch(c[team:team + 1], p[team:team + 1], algorithm)
        _ = batch.plans, batch.goal_allocations, batch.reward


def shared_sums(c: np.ndarray, p: np.ndarray) -> None:
    """The pool's path: goal sums once per slice of teams, every algorithm's goals."""
    space = state_space(2, (8, 8))
    for start in range(0, len(c), COMPUTE_SLICE):
        part = slice(start, start + COMPUTE_SLICE)
        sums = goal_sums(c[part], p[part], space.goal_allocations)
        for algorithm in ALGORITHMS:
            optimal_goal_positions(space, reward_from_sums(algorithm, sums))


def per_team_table(c: np.ndarray, p: np.ndarray, batch_teams: int, repeats: int) -> None:
    space = state_space(2, (8, 8))
    sample = slice(0, len(c))
    big_c, big_p = random_teams(batch_teams)
    print(f"{'per team':<26}{'pymdptoolbox':>14}{'batch plan':>12}{'ratio':>8}"
          f"{'table':>10}{'ratio':>7}{'one team':>10}{'ratio':>7}{'batch of 1':>12}"
          f"{'ratio':>7}")
    for algorithm in (*ALGORITHMS, *DECLARED):
        reference = reference_per_team(c[sample], p[sample], algorithm)
        plan = seconds(lambda a=algorithm: solve_batch(big_c, big_p, a), repeats) / batch_teams
        table = seconds(lambda a=algorithm: exact_action_table(
            space, goal_rewards(space, a, c, p)), repeats) / len(c)
        live = one_team(c, p, algorithm, repeats)
        plain = seconds(lambda a=algorithm: one_team_by_batch(c, p, a), repeats) / len(c)
        label = algorithm.describe() if algorithm in ALGORITHMS else algorithm.name
        print(f"{label:<26}{reference * 1e3:>11.3f} ms{plan * 1e6:>9.2f} us"
              f"{reference / plan:>8.0f}{table * 1e6:>7.2f} us{reference / table:>7.0f}"
              f"{live * 1e6:>7.2f} us{reference / live:>7.0f}{plain * 1e6:>9.2f} us"
              f"{plain / live:>7.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-teams", type=int, default=300)
    parser.add_argument("--batch-teams", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    c, p = random_teams(args.reference_teams)
    solve_batch(c, p, ALGORITHMS[0])
    reference_per_team(c[:5], p[:5], ALGORITHMS[0])
    per_team_table(c, p, args.batch_teams, args.repeats)
    big_c, big_p = random_teams(args.batch_teams)
    per_algorithm = seconds(lambda: [solve_batch(big_c, big_p, a) for a in ALGORITHMS],
                            args.repeats)
    fused = seconds(lambda: shared_sums(big_c, big_p), args.repeats)
    reference = np.mean([reference_per_team(c[:50], p[:50], a) for a in ALGORITHMS])
    whole = reference * args.batch_teams * len(ALGORITHMS)
    print(f"\n{args.batch_teams:,} teams x 3 algorithms, one thread:")
    print(f"  solve_batch per algorithm      {per_algorithm:7.3f} s")
    print(f"  shared goal sums (pool's path) {fused:7.3f} s   "
          f"{per_algorithm / fused:5.1f} x faster; pymdptoolbox one by one ~ {whole:,.0f} s "
          f"= {whole / fused:,.0f} x")


if __name__ == "__main__":
    main()
