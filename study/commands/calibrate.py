"""``study calibrate``: a protocol calibrated from a pilot database, the paper's step from
one user study to the next (``docs/pilot-to-study.md``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from study.calibration.pilot import Calibration

# numpy and the protocol loader are imported by the handler.


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "calibrate", help="calibrate a protocol's reference speeds (and ranges, FEA bounds) "
                          "from a pilot database",
        description="Write a protocol identical to PROTOCOL but for its reference speeds, "
                    "chosen so that the pilot's people measure inside the target ranges "
                    "(and, if asked, the pool's sampling ranges and FEA bounds taken from "
                    "the pilot), with a [calibration] block saying where they came from. "
                    "Rules and refusals: docs/pilot-to-study.md.")
    parser.add_argument("pilot", type=Path, metavar="PILOT_DB", help="the pilot's database")
    parser.add_argument("--protocol", type=Path, required=True,
                        help="the protocol the pilot ran")
    parser.add_argument("--out", type=Path, required=True, help="the new protocol file")
    parser.add_argument("--target", action="append", default=[], metavar="TYPE=LO,HI",
                        help="target capability range of a type (default: the range the "
                             "pool samples it from), e.g. letters=0.63,1")
    parser.add_argument("--ranges", action="store_true",
                        help="set [pool.sample] c from the pilot's capabilities")
    parser.add_argument("--fea-bounds", choices=("people",),
                        help="set [pool.fea] bounds from |FE| over the goal states of the "
                             "live teams the pilot's people form, offline, under the "
                             "calibrated protocol (default: the bounds of the calibrated "
                             "protocol's pool, unless bounds_fixed)")
    parser.add_argument("--percentiles", metavar="LOW,HIGH",
                        help="with --fea-bounds: these percentiles of |FE| (default: min "
                             "and max)")
    parser.add_argument("--min-participants", type=int, default=None, metavar="N",
                        help="fewest pilot participants accepted (default: 5)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from study.allocation.terms import InvalidInput
    from study.calibration.pilot import MIN_PARTICIPANTS, Request, parse_target, read_pilot
    from study.calibration.update import calibrate
    from study.commands.check import refuse_stale_bounds
    from study.pool.bounds import parse_percentiles
    from study.protocol.loader import load_protocol, parse_protocol
    from study.protocol.toml_source import TomlSource

    if args.out.resolve() == args.protocol.resolve():
        raise InvalidInput("--out", str(args.out), "is the protocol itself; write a new file")
    if args.percentiles and not args.fea_bounds:
        raise InvalidInput("--percentiles", args.percentiles, "needs --fea-bounds people")
    minimum = MIN_PARTICIPANTS if args.min_participants is None else args.min_participants
    if minimum < 2:
        raise InvalidInput("--min-participants", minimum, "a spread needs at least 2")
    protocol = load_protocol(args.protocol)
    request = Request(dict(parse_target(text) for text in args.target), args.ranges,
                      bool(args.fea_bounds),
                      parse_percentiles(args.percentiles) if args.percentiles else None,
                      minimum)
    calibration = calibrate(protocol, args.protocol.read_text(encoding="utf-8-sig"),
                            read_pilot(args.pilot, protocol), request)
    refuse_stale_bounds(parse_protocol(calibration.text, args.out),
                        TomlSource.parse(calibration.text, args.out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(calibration.text, encoding="utf-8")
    print("\n".join(table(calibration)))
    print(f"-> {args.out} (passes `study check`); its pool: `study pool build {args.out} "
          f"--out POOL`, its contrast: `study contrast {args.out}`")
    return 0


def table(calibration: Calibration) -> list[str]:
    """The pilot, and per type the values before and after, then the other changes."""
    pilot = calibration.pilot
    left = ", ".join(f"{n} {why}" for why, n in sorted(pilot.left_out.items())) or "none"
    lines = [f"pilot {pilot.path.name} (sha256 {pilot.digest[:16]}): {pilot.people} "
             f"participants measured {pilot.dates[0]} to {pilot.dates[1]}; left out: {left}",
             f"{'type':<8} {'target':<13} {'reference':<18} {'median c':<14} "
             f"{'clipped':<9} inside target"]
    for t in calibration.types:
        medians = [t.median(ref) for ref in (t.old, t.new)]
        lines.append(
            f"{t.name:<8} {f'[{t.target[0]:g}, {t.target[1]:g}]':<13} "
            f"{f'{t.old:g} -> {t.new:g}':<18} {f'{medians[0]:.2f} -> {medians[1]:.2f}':<14} "
            f"{f'{t.clipped(t.old)} -> {t.clipped(t.new)}':<9} "
            f"{t.inside(t.old)} -> {t.inside(t.new)} of {len(t.speeds)}")
    lines += [f"{key}: {old} -> {new}" for key, old, new in calibration.changes
              if not key.startswith("cookies.")]
    return lines + list(calibration.notes)

