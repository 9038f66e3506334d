"""The full Study #1 pool, its ratio to pymdptoolbox, scaling, and matching latency.

    python -m benchmarks.pool_study1 [--reference-teams 200] [--sizes 1e4,1e5,1e6]
        [--variant-teams 100000] [--queries 2000] [--workers 2]

1. Builds the shipped Study #1 pool (protocols/study1.toml: 500,000 teams, three
   algorithms, gaps) and prints the paper's figures and the build time.
2. Solves a sample of the same teams one by one with pymdptoolbox (building each team's
   MDP, as a per-team study does) and extrapolates to the whole pool.
3. Builds pools of each size, and of other kits, task types and humans, each in a fresh
   process, reporting wall time and peak resident memory.
4. Loads the 500,000-team pool and times teammate queries (median and 99th percentile).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from study.model import state_space
from study.pool import Pool, PoolSpec, TeammateFilter, build_pool
from study.pool.build import chunk_table
from study.pool.summary import format_summary, summarize
from study.solver import goal_rewards, reference_action_table

STUDY1 = Path(__file__).resolve().parent.parent / "protocols" / "study1.toml"
PAPER = "paper: 7,072 of 500,000 (1.41%); 74.97% / 22.14% / 2.8%"


def full_pool(directory: Path, workers: int) -> tuple[Path, float]:
    """Build the shipped Study #1 pool; returns its path and the wall time."""
    spec = PoolSpec.from_protocol(STUDY1)
    build_pool(spec.with_changes(teams=20_000), directory / "warm.parquet", progress=False)
    started = time.perf_counter()
    path = build_pool(spec, directory / "study1.parquet", workers=workers, progress=False)
    return path, time.perf_counter() - started


def compute_only(workers: int) -> float:
    """The same pool's sampling and solving without writing, on ``workers`` threads."""
    from concurrent.futures import ThreadPoolExecutor

    spec = PoolSpec.from_protocol(STUDY1)
    starts = range(0, spec.teams, 65_536)
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as executor:
        list(executor.map(lambda s: chunk_table(spec, s, min(s + 65_536, spec.teams)), starts))
    return time.perf_counter() - started


def reference_seconds(pool: Pool, teams: int) -> tuple[float, int]:
    """pymdptoolbox per team and algorithm on a sample of the pool, and how many of its
    goals reach the pool's goal reward."""
    spec = pool.spec
    space = state_space(2, spec.kits)
    c, p = pool.coefficients
    rows = np.linspace(0, pool.teams - 1, teams).astype(int)
    agree = 0
    started = time.perf_counter()
    for row in rows:
        for name in spec.algorithms:
            rewards = goal_rewards(space, spec.algorithm(name), c[row:row + 1], p[row:row + 1])
            table = reference_action_table(space, rewards[0])
            state = 0
            while space.depth[state] < space.rounds:
                state = space.successor[state, table[state]]
            reached = rewards[0][np.searchsorted(space.goals, state)]
            agree += bool(np.isclose(reached, pool.column(f"{name}_reward")[row], atol=1e-9))
    return (time.perf_counter() - started) / (teams * len(spec.algorithms)), agree


def variant_spec(teams: int, humans: int = 2, kits: tuple[int, ...] = (8, 8)) -> PoolSpec:
    """Study #1's distribution with other sizes, kits, task types or humans."""
    return PoolSpec.from_dict({"teams": teams, "seed": 1, "humans": humans, "kits": list(kits),
                               "algorithms": ["efficient", "fair", "fea"],
                               "fea": {"w": 0.7, "bounds": [0.05, 34.0],
                                       "bounds_source": "benchmark"}}, name="variant")


def child_build(arguments: str) -> None:
    """Run in a fresh process: build one variant, print wall time and peak memory."""
    options = json.loads(arguments)
    spec = variant_spec(options["teams"], options["humans"], tuple(options["kits"]))
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        build_pool(spec, Path(directory) / "pool.parquet", workers=options["workers"],
                   progress=False)
        elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "peak_mib": peak_mib()}))


def peak_mib() -> float:
    """This process's peak resident memory. ``VmHWM`` restarts at ``exec``; ``ru_maxrss``
    would carry over the parent's peak on Linux."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(teams: int, workers: int, humans: int = 2,
            kits: tuple[int, ...] = (8, 8)) -> dict[str, float]:
    options = json.dumps({"teams": teams, "humans": humans, "kits": list(kits),
                          "workers": workers})
    result = subprocess.run([sys.executable, "-m", "benchmarks.pool_study1", "--child",
                             options], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def latency(pool: Pool, queries: int, teammate: TeammateFilter) -> tuple[float, float, int]:
    """Median and 99th percentile seconds of one query, and the members searched."""
    index = pool.index(teammate)
    rng = np.random.default_rng(9)
    points = rng.uniform(0.01, 0.99, (queries, 2, 2))
    times = []
    for c, p in points:
        started = time.perf_counter()
        pool.match(c, p, filter=teammate)
        times.append(time.perf_counter() - started)
    return float(np.median(times)), float(np.percentile(times, 99)), len(index)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-teams", type=int, default=200)
    parser.add_argument("--sizes", default="1e4,1e5,1e6",
                        help="pool sizes for the scaling table, e.g. 1e4,1e5,1e6,1e7")
    parser.add_argument("--variant-teams", type=float, default=1e5,
                        help="teams per kits / task types / humans variant")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_build(args.child)
        return
    with tempfile.TemporaryDirectory() as directory:
        path, build_seconds = full_pool(Path(directory), args.workers)
        print(format_summary(summarize(path)))
        print(PAPER)
        print(f"\nfull Study #1 pool: 500,000 teams x 3 algorithms, written, in "
              f"{build_seconds:.2f} s wall ({args.workers} threads); compute alone "
              f"{compute_only(args.workers):.2f} s")
        pool = Pool.load(path)
        per_solve, agree = reference_seconds(pool, args.reference_teams)
        solves = args.reference_teams * len(pool.spec.algorithms)
        whole = per_solve * pool.teams * len(pool.spec.algorithms)
        print(f"pymdptoolbox: {per_solve * 1e3:.2f} ms per team and algorithm "
              f"({agree}/{solves} sampled solves reach the pool's reward); the whole pool "
              f"one by one ~ {whole / 3600:.1f} h = {whole / build_seconds:,.0f} x the build")
        print("\nmatching latency on 500,000 teams:")
        for label, teammate in (("study1 filter", pool.spec.teammate),
                                ("every team", TeammateFilter())):
            median, p99, members = latency(pool, args.queries, teammate)
            print(f"  {label:<14} {members:>9,} members: median {median * 1e3:.3f} ms, "
                  f"p99 {p99 * 1e3:.3f} ms")
    print("\nscaling with the number of teams (fresh process each):")
    for size in (int(float(s)) for s in args.sizes.split(",")):
        result = measure(size, args.workers)
        print(f"  {size:>12,} teams: {result['seconds']:8.2f} s, peak {result['peak_mib']:7.0f} "
              f"MiB, {result['seconds'] / size * 1e6:.2f} us/team")
    teams = int(args.variant_teams)
    print(f"\nscaling with kits, task types and humans ({teams:,} teams each):")
    for humans, kits in ((2, (8, 8)), (2, (12, 12)), (2, (16, 16)), (2, (6, 6, 6)),
                         (3, (9, 9))):
        space = state_space(humans, kits)
        result = measure(teams, args.workers, humans, kits)
        print(f"  humans {humans}, kits {kits!s:<10} ({space.size:>4} states, "
              f"{len(space.goals):>3} goals): {result['seconds']:7.2f} s, "
              f"peak {result['peak_mib']:6.0f} MiB")


if __name__ == "__main__":
    main()
