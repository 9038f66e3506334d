"""The fast solver against pymdptoolbox on the same teams, as ratios measured in one run.

    python -m benchmarks.solver [--reference-teams 300] [--batch-teams 500000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from study.model import Algorithm, state_space
from study.solver import exact_action_table, goal_rewards, reference_action_table, solve_batch

ALGORITHMS = (Algorithm("efficient"), Algorithm("fair"), Algorithm("fea", lo=0.0, hi=2.0))


def random_teams(count: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.01, 0.99, (count, 2, 2)), rng.uniform(0.01, 0.99, (count, 2, 2))


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def reference_per_team(c: np.ndarray, p: np.ndarray, algorithm: Algorithm) -> float:
    """pymdptoolbox, building the MDP for each team as a per-team study would."""
    space = state_space(2, (8, 8))

    def run() -> None:
        for team in range(len(c)):
            rewards = goal_rewards(space, algorithm, c[team:team + 1], p[team:team + 1])
            reference_action_table(space, rewards[0])

    return seconds(run) / len(c)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-teams", type=int, default=300)
    parser.add_argument("--batch-teams", type=int, default=500_000)
    args = parser.parse_args(argv)
    c, p = random_teams(args.batch_teams)
    sample = slice(0, args.reference_teams)
    space = state_space(2, (8, 8))
    solve_batch(c[:1000], p[:1000], ALGORITHMS[0])
    reference_per_team(c[:5], p[:5], ALGORITHMS[0])
    print(f"{'algorithm':<26}{'pymdptoolbox/team':>19}{'fast plan/team':>16}"
          f"{'ratio':>10}{'fast table/team':>17}{'ratio':>9}")
    for algorithm in ALGORITHMS:
        reference = reference_per_team(c[sample], p[sample], algorithm)
        plan = seconds(lambda a=algorithm: solve_batch(c, p, a)) / len(c)
        table = seconds(lambda a=algorithm: exact_action_table(
            space, goal_rewards(space, a, c[sample], p[sample]))) / args.reference_teams
        print(f"{algorithm.describe():<26}{reference * 1e3:>16.3f} ms{plan * 1e6:>13.3f} us"
              f"{reference / plan:>10.0f}{table * 1e6:>14.2f} us{reference / table:>9.0f}")
    total = seconds(lambda: [solve_batch(c, p, a) for a in ALGORITHMS])
    print(f"\n{args.batch_teams:,} teams x 3 algorithms with the fast solver: {total:.2f} s")


if __name__ == "__main__":
    main()
