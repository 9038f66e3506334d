"""``study pool``: build a team pool, read the paper's tables off it, derive FEA bounds,
and match a participant to an agent teammate."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from study.pool.teamtypes import TEAM_TYPES
from study.protocol.pool_spec import DEFAULT_CHUNK, ROLES, TeammateFilter

if TYPE_CHECKING:
    from study.pool.store import Pool

# Parquet, the k-d tree and the build machinery are imported by the handlers that use them.


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "pool", help="build team pools, summarise them, derive FEA bounds, match teammates",
        description="Team pools: simulated teams solved once (docs/pool.md).")
    actions = parser.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    _register_build(actions)
    _register_summary(actions)
    _register_bounds(actions)
    _register_match(actions)


def _register_build(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser(
        "build", help="build the pool of a protocol's [pool] section into a Parquet file",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("protocol", type=Path, help="protocol TOML with a [pool] section")
    parser.add_argument("--out", type=Path, required=True, help="pool file to write (.parquet)")
    parser.add_argument("--teams", type=int, help="override pool.teams (e.g. a quick run)")
    parser.add_argument("--seed", type=int, help="override pool.seed")
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK,
                        help="teams per task and row group (does not change the pool)")
    parser.add_argument("--workers", type=int,
                        help="local compute threads (default: one per core but the "
                             "writer's)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the chunks on this dask.distributed scheduler")
    parser.set_defaults(handler=run_build)


def _register_summary(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser("summary", help="the paper's Study #1 and #2 tables")
    parser.add_argument("pool", type=Path, help="pool file")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.set_defaults(handler=run_summary)


def _register_bounds(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser(
        "bounds", help="FEA bounds from |FE| over every goal state of a pool",
        description="Min and max (or percentiles) of |FE| over every goal state of every "
                    "team; prints lines to paste under [pool.fea].")
    parser.add_argument("pool", type=Path, help="pool file")
    parser.add_argument("--percentiles", type=str, metavar="LOW,HIGH",
                        help="e.g. 1,99 (default: min and max)")
    parser.add_argument("--json", action="store_true", help="print the bounds as JSON")
    parser.set_defaults(handler=run_bounds)


def _register_match(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser(
        "match", help="the agent teammate for a participant's measured coefficients",
        description="Exact nearest pool member to the participant under the pool's "
                    "teammate filter (override it with --role/--team-types/--fair-gap-above).")
    parser.add_argument("pool", type=Path, help="pool file")
    parser.add_argument("--c", required=True, metavar="C0,C1,...",
                        help="the participant's capability per task type")
    parser.add_argument("--p", required=True, metavar="P0,P1,...",
                        help="the participant's preference per task type")
    parser.add_argument("--role", choices=ROLES, help="the participant's role in the team")
    parser.add_argument("--team-types", metavar="T1,T2",
                        help=f"allowed team types among {', '.join(TEAM_TYPES)}")
    parser.add_argument("--fair-gap-above", type=float, help="minimum fair gap (exclusive)")
    parser.add_argument("--json", action="store_true", help="print the match as JSON")
    parser.set_defaults(handler=run_match)


def _numbers(text: str, name: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected numbers like 0.3,0.8") from None


def run_build(args: argparse.Namespace) -> int:
    from study.pool.build import build_pool
    from study.protocol.loader import load_protocol

    # the protocol's checks first, as `study check` runs them: a protocol it refuses is
    # refused here with its message, before a pool of that shape is sampled and solved
    spec = load_protocol(args.protocol).pool_spec().with_changes(args.teams, args.seed)
    started = time.perf_counter()
    path = build_pool(spec, args.out, chunk=args.chunk, workers=args.workers,
                      scheduler=args.scheduler)
    print(f"wrote {spec.teams:,} teams of pool {spec.name} to {path} "
          f"in {time.perf_counter() - started:.2f} s (digest {spec.digest()[:16]})")
    return 0


def run_summary(args: argparse.Namespace) -> int:
    from study.pool.summary import format_summary, summarize

    summary = summarize(args.pool)
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def run_bounds(args: argparse.Namespace) -> int:
    from study.pool.bounds import derive_bounds, parse_percentiles

    percentiles = parse_percentiles(args.percentiles) if args.percentiles else None
    bounds = derive_bounds(args.pool, percentiles)
    if args.json:
        print(json.dumps({"lo": bounds.lo, "hi": bounds.hi, "source": bounds.source,
                          "goal_states": bounds.goal_states}, indent=2))
    else:
        print(f"# FEA bounds: lo = {bounds.lo:.6g}, hi = {bounds.hi:.6g}; under [pool.fea]:")
        print(bounds.toml())
    return 0


def _filter_from(args: argparse.Namespace, pool: Pool) -> TeammateFilter:
    """The pool's teammate filter with the command line's overrides."""
    teammate = pool.spec.teammate
    criteria = teammate.criteria
    if args.team_types is not None:
        names = tuple(name.strip() for name in args.team_types.split(","))
        unknown = [name for name in names if name not in TEAM_TYPES]
        if unknown:
            raise argparse.ArgumentTypeError(f"--team-types: unknown {', '.join(unknown)}")
        criteria = replace(criteria, team_types=names)
    if args.fair_gap_above is not None:
        criteria = replace(criteria, fair_gap_above=args.fair_gap_above)
    return TeammateFilter(criteria, args.role or teammate.role)


def run_match(args: argparse.Namespace) -> int:
    import numpy as np

    from study.pool.match import NoEligibleTeam
    from study.pool.store import Pool

    pool = Pool.open(args.pool)
    try:
        teammate = _filter_from(args, pool)
        c, p = _numbers(args.c, "--c"), _numbers(args.p, "--p")
        started = time.perf_counter()
        match = pool.match(c, p, filter=teammate)
        elapsed = time.perf_counter() - started
    except (NoEligibleTeam, argparse.ArgumentTypeError) as error:
        print(f"study: error: {error}", file=sys.stderr)
        return 2
    result = {"team_index": match.team_index, "participant_human": match.participant_human,
              "teammate_human": match.teammate_human,
              "teammate_c": match.teammate_c.tolist(), "teammate_p": match.teammate_p.tolist(),
              "distance": match.distance, "filter": match.filter,
              "query_ms": 1000 * elapsed}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"filter: {match.filter}")
    print(f"matched team {match.team_index} as human {match.participant_human} "
          f"(distance d = {match.distance:.4f}, query {1000 * elapsed:.2f} ms)")
    print(f"agent teammate (human {match.teammate_human}): "
          f"c = {np.round(match.teammate_c, 4).tolist()}, "
          f"p = {np.round(match.teammate_p, 4).tolist()}")
    return 0
