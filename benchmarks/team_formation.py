"""The typed teammate search (``study.pool.forming``) on large pools, per participant.

    python -m benchmarks.team_formation [--teams 1000000] [--participants 300] [--seed 1]

Builds a Study #2 pool of ``--teams`` rows (protocols/study2.toml's spec at that size),
then places simulated participants, their coefficients measured from the human model at
paces from 0.3 to 2.5 times its times with every rating pattern
(``tests/support/human_journeys.py`` uses the same population), and times, per participant in one
run:

- the paper's Eq. 6 nearest member alone (the k-d tree query), the baseline;
- the typed search up to its first candidate (what a placed participant costs before the
  robots' plans are compared);
- the typed search to exhaustion for the participants no member places (the bounded worst
  case: every member the prefilter keeps is classified).

Figures are in milliseconds of processor time for one thread, median, 95th percentile and
maximum; the goal is the typed search under 50 ms per participant at 1e6 pool rows.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from study.people.speed import Human, measured_speed
from study.pool import Pool, PoolSpec, build_pool
from study.pool.forming import targets
from study.protocol.loader import load_protocol, preference_coefficient
from study.task.cookies import target

ROOT = Path(__file__).resolve().parents[1]
PACES = (0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)  # as tests/support/human_journeys.py
RATINGS = ((7, 1), (1, 7), (5, 4), (4, 5), (6, 6), (2, 2))


def participants(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(c, p)`` of simulated people measured as study2 measures them, themes by rating."""
    protocol = load_protocol(ROOT / "protocols" / "study2.toml")
    rng = np.random.default_rng(seed)
    cells = list(itertools.product(PACES, RATINGS))
    people = []
    for index in range(count):
        pace, (first, second) = cells[index % len(cells)]
        human = Human(pace=float(pace))
        speeds = [measured_speed(human.round_actions(target(protocol, j), 30, rng), 30)
                  for j in range(2)]
        c = np.clip([s / cookie.reference_speed for s, cookie
                     in zip(speeds, protocol.cookies, strict=True)], 0.01, 0.99)
        themes, _ = protocol.assign_themes({"ravens": first, "steelers": second})
        ratings = {"ravens": first, "steelers": second}
        p = np.array([preference_coefficient(ratings[theme], 7) for theme in themes])
        people.append((c, p))
    return people


def cpu_ms(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return 1000 * (time.process_time() - start)


def row(name: str, values: list[float]) -> str:
    if not values:
        return f"| {name} | 0 | - | - | - |"
    array = np.array(values)
    return (f"| {name} | {len(array)} | {np.median(array):.2f} | "
            f"{np.percentile(array, 95):.2f} | {array.max():.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=float, default=1e6)
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    spec = PoolSpec.from_protocol(ROOT / "protocols" / "study2.toml").with_changes(
        teams=int(args.teams))
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        pool = Pool.load(build_pool(spec, Path(directory) / "pool.parquet", progress=False))
        index = pool.index(spec.teammate)
        print(f"pool of {spec.teams:,} teams ({len(index):,} members the filter admits) "
              f"built and indexed in {time.perf_counter() - started:.1f} s\n")
        nearest, first, exhausted = [], [], []
        for c, p in participants(args.participants, args.seed):
            nearest.append(cpu_ms(lambda: pool.match(c, p)))  # noqa: B023
            found: list = []
            took = cpu_ms(lambda: found.append(next(targets(spec, spec.teammate, index, c, p),  # noqa: B023
                                                    None)))
            if found[0] is not None:
                first.append(took)
            else:
                exhausted.append(took)
    print("| per participant | participants | median ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    print(row("Eq. 6 nearest (k-d tree)", nearest))
    print(row("typed search, first target member", first))
    print(row("typed search, none found (exhausted)", exhausted))


if __name__ == "__main__":
    main()
