"""``study contrast``: what the protocol's robots can show in its target teams, read off
its pool before anyone is recruited (``study.pool.contrast``, docs/teams-by-design.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

# numpy and the pool are imported by the handler.


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "contrast", help="how much the protocol's robots differ in its target teams",
        description="For the protocol's target teams (the pool teams [pool.teammate] "
                    "admits): per pair of its robots, the share of teams in which they "
                    "follow different plans and the mean rounds that differ per role; per "
                    "robot, the rounds each role spends on its most capable and most "
                    "preferred type; per robot, the share of target teams whose goal is "
                    "the one it reaches on the paper's capability scale. Builds the "
                    "protocol's pool first if it is not cached.")
    parser.add_argument("protocol", type=Path, metavar="PROTOCOL", help="the protocol file")
    parser.add_argument("--pools", type=Path, default=Path("var/pools"),
                        help="where team pools are built and cached (as `study serve`)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import json

    from study.people.scale import protocol_scale
    from study.pool import Pool, ensure_pool
    from study.pool.contrast import contrast, format_contrast
    from study.protocol.loader import load_protocol

    protocol = load_protocol(args.protocol)
    pool = Pool.open(ensure_pool(protocol.pool_spec(), args.pools))
    figures = contrast(pool, protocol.conditions, protocol_scale(protocol))
    print(json.dumps(figures, indent=2) if args.json
          else f"{args.protocol}: {format_contrast(figures)}")
    return 0
