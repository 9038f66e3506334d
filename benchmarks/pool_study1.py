"""Team pools: the full Study #1 pool, workers and Dask, scaling, opening for matching,
and the live path, each figure beside a baseline measured in the same run.

    python -m benchmarks.pool_study1 [--reference-teams 200] [--sizes 1e4,1e5,1e6]
        [--dask-teams 500000] [--dask-workers 1,2,4] [--open-teams 1e6]
        [--queries 2000] [--live 500] [--only open|live] [--variant-teams 0]

1. Builds the shipped Study #1 pool (protocols/study1.toml: 500,000 teams, three
   algorithms, gaps), prints the paper's figures, the build time and the compute alone,
   and the ratio to solving a sample of the same teams one by one with pymdptoolbox.
2. Builds the same pool on 1 and 2 local compute threads (the default: one per core but
   the writer's) and on Dask clusters of 1, 2 and 4 single-threaded worker processes
   (cluster start-up apart).
3. Builds pools of each size in fresh processes: wall time and peak resident memory
   (and, with ``--variant-teams``, pools of other kits, task types and humans).
4. Opens a pool of ``--open-teams`` for matching in a fresh process (the spec's filter),
   against reading the whole file, and times queries (median and 99th percentile).
5. The live path on a Study #2 pool: the teammate match, the live team and the policy of
   each of the two conditions, per algorithm, against the same path with scipy's k-d tree
   for the query, with ``solve_batch`` (the plain numpy path) and with pymdptoolbox for
   the policies; then each part alone.

``--only open`` or ``--only live`` runs part 4 or 5 alone.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from study.allocation.model import Algorithm, Team, state_space, team_goal_sums
from study.allocation.solver import goal_rewards, reference_action_table, solve, solve_batch
from study.pool import Match, Pool, PoolSpec, TeammateFilter, build_pool
from study.pool.build import chunk_table, default_workers
from study.pool.match import kd_tree_class
from study.pool.summary import format_summary, summarize

PROTOCOLS = Path(__file__).resolve().parent.parent / "protocols"
STUDY1 = PROTOCOLS / "study1.toml"
STUDY2 = PROTOCOLS / "study2.toml"
PAPER = "paper: 7,072 of 500,000 (1.41%); 74.97% / 22.14% / 2.8%"
CHUNK = 65_536


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def full_pool(directory: Path) -> tuple[Path, float]:
    """Build the shipped Study #1 pool with the defaults; its path and the wall time."""
    spec = PoolSpec.from_protocol(STUDY1)
    build_pool(spec.with_changes(teams=20_000), directory / "warm.parquet", progress=False)
    path = directory / "study1.parquet"
    return path, timed(lambda: build_pool(spec, path, progress=False))


def compute_only(workers: int) -> float:
    """The same pool's sampling and solving into Arrow tables, without writing."""
    spec = PoolSpec.from_protocol(STUDY1)
    starts = range(0, spec.teams, CHUNK)
    with ThreadPoolExecutor(workers) as executor:
        return timed(lambda: list(executor.map(
            lambda s: chunk_table(spec, s, min(s + CHUNK, spec.teams)), starts)))


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


def workers_table(directory: Path, teams: int, dask_workers: list[int]) -> None:
    """Local threads against Dask clusters of single-threaded worker processes."""
    from distributed import Client, LocalCluster

    spec = PoolSpec.from_protocol(STUDY1).with_changes(teams=teams)
    out = directory / "workers.parquet"
    rows = [(f"local, {n} thread{'s' * (n > 1)}",
             timed(lambda n=n: build_pool(spec, out, workers=n, progress=False)), 0.0)
            for n in (1, 2)]
    default = timed(lambda: build_pool(spec, out, progress=False))
    for count in dask_workers:
        started = time.perf_counter()
        with LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster):
            start_up = time.perf_counter() - started
            address = cluster.scheduler_address
            first = timed(lambda a=address: build_pool(spec, out, scheduler=a, progress=False))
            again = timed(lambda a=address: build_pool(spec, out, scheduler=a, progress=False))
        rows.append((f"Dask, {count} worker process{'es' * (count > 1)}",
                     min(first, again), start_up))
    print(f"\n{teams:,} teams, written (default: {default_workers()} compute thread(s), "
          f"{default:.2f} s):")
    for label, seconds, start_up in rows:
        extra = f"  (+ {start_up:.2f} s cluster start-up)" if start_up else ""
        print(f"  {label:<28}{seconds:7.2f} s  {seconds / default:5.2f} x the default{extra}")


def variant_spec(teams: int, humans: int, kits: tuple[int, ...]) -> PoolSpec:
    """Study #1's distribution with other sizes, kits, task types or humans."""
    return PoolSpec.from_dict({"teams": teams, "seed": 1, "humans": humans, "kits": list(kits),
                               "algorithms": ["efficient", "fair", "fea"],
                               "fea": {"w": 0.7, "bounds": [0.05, 34.0],
                                       "bounds_source": "benchmark"}}, name="variant")


def child(arguments: str) -> None:
    """Run in a fresh process: build one pool, or open one for matching."""
    options = json.loads(arguments)
    if options["task"] == "build":
        spec = variant_spec(options["teams"], options["humans"], tuple(options["kits"]))
        with tempfile.TemporaryDirectory() as directory:
            seconds = timed(lambda: build_pool(spec, Path(directory) / "pool.parquet",
                                               progress=False))
        print(json.dumps({"seconds": seconds, "peak_mib": peak_mib()}))
        return
    if options["task"] == "open":
        kd_tree_class()   # imports apart: the k-d tree's module
        holder: list[Pool] = []
        seconds = timed(lambda: holder.append(Pool.load(options["path"])))
        result = {"seconds": seconds, "peak_mib": peak_mib(),
                  "members": len(holder[0].index(holder[0].spec.teammate))}
        result.update(query_latency(holder[0], options["queries"], holder[0].spec.teammate))
    else:
        seconds = timed(lambda: pq.read_table(options["path"]))
        result = {"seconds": seconds, "peak_mib": peak_mib()}
    print(json.dumps(result))


def peak_mib() -> float:
    """This process's peak resident memory. ``VmHWM`` restarts at ``exec``; ``ru_maxrss``
    would carry over the parent's peak on Linux."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_child(**options: object) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-m", "benchmarks.pool_study1", "--child",
                             json.dumps(options)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def query_latency(pool: Pool, queries: int, teammate: TeammateFilter) -> dict[str, float]:
    """Median and 99th percentile seconds of one query."""
    pool.index(teammate)
    points = np.random.default_rng(9).uniform(0.01, 0.99, (queries, 2, 2))
    times = []
    for c, p in points:
        started = time.perf_counter()
        pool.match(c, p, filter=teammate)
        times.append(time.perf_counter() - started)
    return {"median": float(np.median(times)), "p99": float(np.percentile(times, 99))}


def open_table(directory: Path, teams: int, queries: int) -> None:
    spec = PoolSpec.from_protocol(STUDY1).with_changes(teams=teams)
    path = build_pool(spec, directory / "open.parquet", progress=False)
    size = path.stat().st_size / 2**20
    whole = in_child(task="read", path=str(path))
    opened = in_child(task="open", path=str(path), queries=queries)
    print(f"\nopening a {teams:,}-team pool ({size:,.0f} MiB file) for matching, fresh "
          f"process, imports apart:")
    print(f"  reading the whole file      {whole['seconds']:6.2f} s, peak "
          f"{whole['peak_mib']:6.0f} MiB")
    print(f"  Pool.load (spec's filter)   {opened['seconds']:6.2f} s, peak "
          f"{opened['peak_mib']:6.0f} MiB  ({whole['seconds'] / opened['seconds']:.1f} x "
          f"faster, {opened['members']:,} members)")
    print(f"  a query: median {opened['median'] * 1e3:.3f} ms, "
          f"p99 {opened['p99'] * 1e3:.3f} ms ({queries:,} random participants)")


def best_seconds(action: Callable[[], object], repeats: int = 5) -> float:
    """The least processor time of ``repeats`` runs (other processes' load apart)."""
    return min(timeit.repeat(action, number=1, repeat=repeats, timer=time.process_time))


def live_team_of(match: Match, c: np.ndarray, p: np.ndarray) -> Team:
    """The participant in the matched member's role, the teammate in the other (as
    ``study.web.participant.agent_pool.live_team`` places them)."""
    team_c, team_p = np.empty((2, len(c))), np.empty((2, len(c)))
    team_c[match.participant_human], team_p[match.participant_human] = c, p
    team_c[match.teammate_human], team_p[match.teammate_human] = match.teammate_c, match.teammate_p
    return Team(team_c, team_p)


def live_path(directory: Path, participants: int) -> None:
    """Per participant: the match, the live team, and both conditions' policies; then the
    same path with scipy's k-d tree for the query, with the batch path (``solve_batch`` of
    one team) and with pymdptoolbox for the policies, and each part alone."""
    from scipy.spatial import cKDTree

    spec = PoolSpec.from_protocol(STUDY2)
    pool = Pool.load(build_pool(spec, directory / "study2.parquet", progress=False))
    algorithms = (Algorithm("efficient"), Algorithm("fea", lo=spec.fea.lo, hi=spec.fea.hi))
    people = np.random.default_rng(4).uniform([[0.2, 0.63], [0.01, 0.01]],
                                              [[0.32, 1.0], [0.99, 0.99]],
                                              (participants, 2, 2))
    index = pool.index(spec.teammate)
    scipy_index = copy.copy(index)
    scipy_index.tree = cKDTree(index.points)

    def policy(team: Team, algorithm: Algorithm) -> None:
        solved = solve(team, algorithm)
        _ = solved.plan, solved.goal_allocation, solved.reward

    def batch_policy(team: Team, algorithm: Algorithm) -> None:
        solved = solve_batch(team.c[None], team.p[None], algorithm)
        _ = solved.plans[0].tolist(), solved.goal_allocations[0], float(solved.reward[0])

    def reference_policy(team: Team, algorithm: Algorithm) -> None:
        solved = solve(team, algorithm, solver="mdptoolbox")
        _ = solved.plan, solved.goal_allocation, solved.reward

    def path(match: Callable[..., Match], solver: Callable[[Team, Algorithm], None],
             count: int = participants) -> float:
        """Processor time per participant and algorithm: the participants in groups of
        25, each group's best of 5 runs (short runs, so another process's time slice
        rarely evicts the caches within one)."""
        def group(members: np.ndarray) -> None:
            for c, p in members:
                team = live_team_of(match(c, p), c, p)
                for algorithm in algorithms:
                    solver(team, algorithm)
        repeats = 5 if count == participants else 1
        total = sum(best_seconds(lambda g=people[start:start + 25]: group(g), repeats)
                    for start in range(0, count, 25))
        return total / (count * len(algorithms))

    rows = [("this path: pykdtree query, one-team solve", path(pool.match, policy)),
            ("scipy cKDTree for the query", path(scipy_index.query, policy)),
            ("solve_batch of one team for the policies", path(pool.match, batch_policy)),
            ("pymdptoolbox for the policies", path(pool.match, reference_policy, 30))]
    fastest = rows[0][1]
    print(f"\nlive path on the Study #2 pool ({pool.teams:,} teams, {len(index):,} members; "
          f"{participants} participants): match, live team and the policy, per algorithm "
          "(processor time)")
    for label, seconds in rows:
        print(f"  {label:<44}{seconds * 1e6:9.1f} us  {seconds / fastest:7.1f} x")
    live_parts(pool, index, scipy_index, people, algorithms)


def live_parts(pool: Pool, index: object, scipy_index: object, people: np.ndarray,
               algorithms: tuple[Algorithm, ...]) -> None:
    """Each part of the live path alone for one participant, repeated on a warm process
    (so with warm caches: the whole path above costs more than its parts)."""
    c, p = people[0]
    query = np.concatenate([c, p])[None]
    match = pool.match(c, p)
    team = live_team_of(match, c, p)
    space = state_space(2, pool.spec.kits)

    def policies() -> None:
        new_team = Team(team.c, team.p)
        for algorithm in algorithms:
            solved = solve(new_team, algorithm)
            _ = solved.plan, solved.goal_allocation, solved.reward

    parts = [("query, pykdtree (k = 2)", lambda: index.tree.query(query, k=2)),
             ("query, scipy cKDTree (k = 2)", lambda: scipy_index.tree.query(query, k=2)),
             ("match (query, checks, the Match)", lambda: pool.match(c, p)),
             ("live team (its arrays, checked)", lambda: live_team_of(match, c, p)),
             ("goal sums of the live team", lambda: team_goal_sums(team.c, team.p, space)),
             ("both policies of a new team, sums included", policies)]
    print("  each part alone, one participant (processor time, best of 40 x 2,000):")
    for label, action in parts:
        seconds = min(timeit.repeat(action, number=2000, repeat=40, timer=time.process_time))
        print(f"    {label:<44}{seconds / 2000 * 1e6:7.2f} us")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-teams", type=int, default=200)
    parser.add_argument("--sizes", default="1e4,1e5,1e6",
                        help="pool sizes for the scaling table, e.g. 1e4,1e5,1e6,1e7")
    parser.add_argument("--dask-teams", type=float, default=5e5)
    parser.add_argument("--dask-workers", default="1,2,4")
    parser.add_argument("--open-teams", type=float, default=1e6)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--live", type=int, default=500, help="participants on the live path")
    parser.add_argument("--only", choices=("open", "live"),
                        help="run one part alone: opening for matching, or the live path")
    parser.add_argument("--variant-teams", type=float, default=0,
                        help="teams per kits / task types / humans variant (0: skip)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    if args.only:
        with tempfile.TemporaryDirectory() as folder:
            if args.only == "open":
                open_table(Path(folder), int(args.open_teams), args.queries)
            else:
                live_path(Path(folder), args.live)
        return
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        path, build_seconds = full_pool(directory)
        print(format_summary(summarize(path)))
        print(PAPER)
        workers = default_workers()
        print(f"\nfull Study #1 pool: 500,000 teams x 3 algorithms, written, in "
              f"{build_seconds:.2f} s wall ({workers} compute thread(s)); compute alone "
              f"{compute_only(workers):.2f} s")
        pool = Pool.open(path)
        per_solve, agree = reference_seconds(pool, args.reference_teams)
        solves = args.reference_teams * len(pool.spec.algorithms)
        whole = per_solve * pool.teams * len(pool.spec.algorithms)
        print(f"pymdptoolbox: {per_solve * 1e3:.2f} ms per team and algorithm "
              f"({agree}/{solves} sampled solves reach the pool's reward); the whole pool "
              f"one by one ~ {whole / 3600:.1f} h = {whole / build_seconds:,.0f} x the build")
        workers_table(directory, int(args.dask_teams),
                      [int(n) for n in args.dask_workers.split(",")])
        open_table(directory, int(args.open_teams), args.queries)
        live_path(directory, args.live)
    print("\nscaling with the number of teams (fresh process each):")
    for size in (int(float(s)) for s in args.sizes.split(",")):
        result = in_child(task="build", teams=size, humans=2, kits=[8, 8])
        print(f"  {size:>12,} teams: {result['seconds']:8.2f} s, peak {result['peak_mib']:7.0f} "
              f"MiB, {result['seconds'] / size * 1e6:.2f} us/team")
    if args.variant_teams:
        variants(int(args.variant_teams))


def variants(teams: int) -> None:
    print(f"\nscaling with kits, task types and humans ({teams:,} teams each):")
    for humans, kits in ((2, (8, 8)), (2, (12, 12)), (2, (16, 16)), (2, (6, 6, 6)),
                         (3, (9, 9))):
        space = state_space(humans, kits)
        result = in_child(task="build", teams=teams, humans=humans, kits=list(kits))
        print(f"  humans {humans}, kits {kits!s:<10} ({space.size:>4} states, "
              f"{len(space.goals):>3} goals): {result['seconds']:7.2f} s, "
              f"peak {result['peak_mib']:6.0f} MiB")


if __name__ == "__main__":
    main()
