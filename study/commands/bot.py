"""``study bot``: simulated participants against a running server, for pilots and demos."""

from __future__ import annotations

import argparse
import itertools
import re
from dataclasses import replace
from pathlib import Path

from study.allocation.model import InvalidInput
from study.bots import BEHAVIOURS, StudyFacts, bot_codes, profile_for, run_swarm

LINK_CODE = re.compile(r"/p/([^/?#\s]+)")
PEOPLE = ("protocol", "uniform")


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "bot", help="run simulated participants against a running server",
        description="Run N simulated participants concurrently against a study server, each "
                    "going through the whole study over HTTP and Socket.IO as a browser "
                    "would, then print a summary. Without --codes the bots enrol with fresh "
                    "codes (the protocol must allow open enrolment).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:5000")
    parser.add_argument("--participants", type=int, default=1, help="bots to run at once")
    parser.add_argument("--behaviour", default="fast",
                        help="comma-separated behaviours, cycled over the bots: "
                             + ", ".join(BEHAVIOURS))
    parser.add_argument("--codes", type=Path,
                        help="file with one participant code or link per line (from the "
                             "console); its first N are used")
    parser.add_argument("--protocol", type=Path,
                        help="the served protocol file: its reference speeds, and the "
                             "capabilities its people measure (its pool's ranges, or the "
                             "paper's), which --people protocol draws the bots from")
    parser.add_argument("--people", choices=PEOPLE, default="protocol",
                        help="the bots' capabilities: the protocol's people (needs "
                             "--protocol), or uniform in 0.3-0.95 whatever the protocol")
    parser.add_argument("--stop-at", default="",
                        help="comma-separated points where bots leave the study, cycled over "
                             "the bots: a step (session-2), a round step after that many "
                             "rounds (session-1:2), or end to go to the end")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bots' profiles")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop every bot after this long")
    parser.add_argument("--stagger", type=float, default=0.05,
                        help="seconds between starting two bots")
    parser.set_defaults(handler=run)


def behaviours_from(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BEHAVIOURS]
    if not names or unknown:
        raise InvalidInput("--behaviour", text, f"choose from {', '.join(BEHAVIOURS)}")
    return names


def stop_points_from(text: str) -> list[str | None]:
    """``--stop-at`` as one stop point per bot pattern; ``end`` (or nothing) is no stop."""
    points: list[str | None] = []
    for part in (part.strip() for part in text.split(",")):
        rounds = part.partition(":")[2]
        if rounds and not rounds.isdigit():
            raise InvalidInput("--stop-at", text, f"{part!r}: rounds must be a number")
        points.append(None if part in ("", "end") else part)
    return points


def codes_from(path: Path, count: int) -> list[str]:
    """Codes from a file of codes or participant links, one per line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InvalidInput("--codes", str(path), f"cannot be read ({error.strerror})") from None
    codes = []
    for line in (line.strip() for line in lines):
        if line and not line.startswith("#"):
            match = LINK_CODE.search(line)
            codes.append(match.group(1) if match else line)
    if len(codes) < count:
        raise InvalidInput("--codes", str(path), f"holds {len(codes)} codes, {count} needed")
    return codes[:count]


def facts_from(path: Path | None, people: str) -> StudyFacts:
    if path is None:
        if people == "protocol":
            raise InvalidInput("--people", people, "the protocol's people need --protocol "
                                                   "FILE (the served protocol); or choose "
                                                   "--people uniform")
        return StudyFacts()
    from study.protocol.loader import load_protocol

    facts = StudyFacts.from_protocol(load_protocol(path))
    return facts if people == "protocol" else replace(
        facts, capability_ranges=StudyFacts().capability_ranges)


def run(args: argparse.Namespace) -> int:
    if args.participants < 1:
        raise InvalidInput("--participants", args.participants, "must be at least 1")
    names = behaviours_from(args.behaviour)
    count = args.participants
    codes = codes_from(args.codes, count) if args.codes else bot_codes(count)
    behaviours = list(itertools.islice(itertools.cycle(names), count))
    stops = itertools.cycle(stop_points_from(args.stop_at))
    facts = facts_from(args.protocol, args.people)
    profiles = [replace(profile_for(i, b, args.seed, facts.capability_ranges),
                        stop_at=next(stops)) for i, b in enumerate(behaviours)]
    result = run_swarm(args.url, codes, profiles, facts=facts,
                       max_seconds=args.max_seconds, stagger=args.stagger)
    print(result.summary())
    return 0 if all(o.error is None for o in result.outcomes) else 1
