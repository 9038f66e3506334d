"""Where the shipped protocols measure the human decorating-speed model's people.

    python -m benchmarks.human_model [--people 4000] [--seed 1]

For each shipped protocol: the model's population measured in one practice round of the
protocol's length on its two cookies; the reference speeds that put the typical person at
the centres of the paper's ranges (``study.people.scale.paper_references``); the
protocol's own reference speeds, the typical person's capabilities under them and their
factor against the paper's centres; and the share of the population clipped per type
(people faster than the paper's fastest), and at 0.3 and 2.5 times the model's times,
the robustness test's paces (``docs/human-model.md`` quotes this table).

    python -m benchmarks.human_model --reach [--people 2800]

Study1's limit (``docs/teams-by-design.md``): over people spread evenly from 0.3 to 2.5
times the model's times, the lowest reference speeds that clip fewer than 5 % of each type
(``study.calibration.pilot.lowest_references``), and per pace what a person who rates both
themes 6 of 7 measures under them and under study1's, and how many of them can reach a
fair gap above 0.60 with any teammate at all (``study.pool.forming.fair_gap_reach``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.calibration.pilot import lowest_references
from study.people.scale import paper_references, protocol_scale
from study.people.speed import (
    ROBUSTNESS_PACES,
    coefficients,
    pace_speeds,
    population_speeds,
)
from study.pool.forming import fair_gap_reach
from study.protocol.loader import load_protocol, preference_coefficient
from study.task.cookies import target

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("demo", "demo-de", "study1", "study2", "study2-paper", "welfare", "teams2",
             "teams3")
# The population test's paces (tests/support/human_journeys.py), six rating patterns each.
PACES = (0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)
PATTERNS = 6
CLIPPED_SHARE = 0.05


def _pair(values: tuple[float, ...] | np.ndarray, form: str) -> str:
    return " / ".join(format(value, form) for value in values)


def _clipped(values: np.ndarray) -> np.ndarray:
    return ((values <= 0.01) | (values >= 0.99)).mean(axis=0)


def report(name: str, people: int, seed: int) -> str:
    protocol = load_protocol(ROOT / "protocols" / f"{name}.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    seconds = protocol.practice_seconds
    speeds = population_speeds(targets, seconds, people, seed)
    shipped = tuple(c.reference_speed for c in protocol.cookies)
    paces = [coefficients(pace_speeds(targets, seconds, pace, people // 4, seed), shipped)
             for pace in ROBUSTNESS_PACES]
    scale = protocol_scale(protocol)
    return (f"| {name} | {seconds:g} | {_pair(np.median(speeds, axis=0), '.4f')} | "
            f"{_pair(paper_references(protocol), '.4f')} | {_pair(shipped, 'g')} | "
            f"{_pair(scale.typical, '.3f')} | {_pair(scale.factors, '.3f')} | "
            f"{_pair(_clipped(coefficients(speeds, shipped)), '.1%')} | "
            f"{_pair(_clipped(paces[0]), '.1%')} | {_pair(_clipped(paces[1]), '.1%')} |")


def reach_report(people: int, seed: int) -> str:
    """Study1's reach for people who rate both themes 6 of 7, per pace, under the lowest
    reference speeds that clip fewer than ``CLIPPED_SHARE`` per type and under study1's."""
    protocol = load_protocol(ROOT / "protocols" / "study1.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    gap = protocol.pool_spec().teammate.criteria.fair_gap_above
    tied = preference_coefficient(6, protocol.preference_scale.points)
    per_pace = {pace: pace_speeds(targets, protocol.practice_seconds, pace,
                                  people // len(PACES), seed) for pace in PACES}
    lowest = lowest_references(np.concatenate(list(per_pace.values())), CLIPPED_SHARE)
    shipped = np.array([cookie.reference_speed for cookie in protocol.cookies])
    lines = [f"{people // len(PACES)} people per pace; lowest reference speeds clipping under "
             f"{CLIPPED_SHARE:.0%} per type: {_pair(lowest, '.4f')} (study1: "
             f"{_pair(shipped, 'g')}); both themes rated 6 (p = {tied:.3f}) need a "
             f"capability above {2 * gap + 0.02 - tied:.3f} for a fair gap above {gap:g}\n",
             "| pace (x model times) | median c sq / le, lowest references | their reach > "
             f"{gap:g} | median c sq / le, study1 | their reach > {gap:g} |",
             "|---|---|---|---|---|"]
    reachable: dict[str, float] = {}
    for pace, speeds in per_pace.items():
        cells = []
        for name, references in (("lowest", lowest), ("study1", shipped)):
            values = coefficients(speeds, tuple(references))
            reach = np.mean([fair_gap_reach(c, (tied, tied)) > gap for c in values])
            reachable[name] = reachable.get(name, 0.0) + reach
            cells += [_pair(np.median(values, axis=0), ".3f"), f"{reach:.0%}"]
        lines.append(f"| {pace:g} | " + " | ".join(cells) + " |")
    for name, total in reachable.items():
        out = (len(PACES) - total) / (len(PACES) * PATTERNS)
        lines.append(f"\n{name}: at most {1 - out:.1%} of the population (paces x {PATTERNS} "
                     f"rating patterns) can be placed; the tied-high raters out of reach are "
                     f"{out:.1%} of it")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reach", action="store_true",
                        help="study1's reach for people who rate both themes high")
    args = parser.parse_args()
    if args.reach:
        print(reach_report(args.people, args.seed))
        return
    quick, slow = ROBUSTNESS_PACES
    print(f"{args.people} simulated people per protocol ({args.people // 4} at each of "
          f"{quick:g} and {slow:g} times the model's times), seed {args.seed}\n")
    print("| protocol | practice s | median speed sq / le (cookies/s) | reference for the "
          "paper's centres sq / le | shipped reference sq / le | typical c sq / le | x the "
          f"paper's centres sq / le | clipped sq / le | clipped at {quick:g}x sq / le | "
          f"clipped at {slow:g}x sq / le |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in PROTOCOLS:
        print(report(name, args.people, args.seed), flush=True)


if __name__ == "__main__":
    main()
