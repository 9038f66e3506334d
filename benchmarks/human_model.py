"""Calibration of the protocols' reference speeds to the human decorating-speed model.

    python -m benchmarks.human_model [--people 4000] [--seed 1]

For each shipped protocol: the model's population measured in one practice round of the
protocol's length on its two cookies; the reference speeds that map the typical person to
the centre of the paper's observed ranges (``study.bots.human.calibrated_reference``); the
same multiplied by one factor so that people from 0.3 to 2.5 times the model's times
measure unclipped (``headroom_references``); the protocol's own reference speeds; and,
under them, the share of clipped capabilities at the quickest and slowest pace and the
typical person's capabilities (``docs/human-model.md`` quotes this table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.bots.human import (
    HEADROOM_PACES,
    OBSERVED_RANGES,
    calibrated_reference,
    coefficients,
    headroom_references,
    pace_speeds,
    population_speeds,
)
from study.protocol.loader import load_protocol
from study.task.cookies import target

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("demo", "study1", "study2")


def _pair(values: tuple[float, ...] | np.ndarray, form: str) -> str:
    return " / ".join(format(value, form) for value in values)


def report(name: str, people: int, seed: int) -> str:
    protocol = load_protocol(ROOT / "protocols" / f"{name}.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    seconds = protocol.practice_seconds
    speeds = population_speeds(targets, seconds, people, seed)
    quickest, slowest = (pace_speeds(targets, seconds, pace, people // 4, seed)
                         for pace in HEADROOM_PACES)
    paper = [calibrated_reference(speeds[:, j], *OBSERVED_RANGES[j]) for j in range(2)]
    headroom = headroom_references(speeds, quickest)
    shipped = tuple(c.reference_speed for c in protocol.cookies)
    clipped = [((values <= 0.01) | (values >= 0.99)).mean(axis=0)
               for values in (coefficients(quickest, shipped), coefficients(slowest, shipped))]
    return (f"| {name} | {seconds:g} | {_pair(np.median(speeds, axis=0), '.4f')} | "
            f"{_pair(paper, '.4f')} | {_pair(headroom, '.4f')} | {_pair(shipped, 'g')} | "
            f"{_pair(clipped[0], '.1%')} | {_pair(clipped[1], '.1%')} | "
            f"{_pair(np.median(coefficients(speeds, shipped), axis=0), '.3f')} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    quick, slow = HEADROOM_PACES
    print(f"{args.people} simulated people per protocol ({args.people // 4} at each of "
          f"{quick:g} and {slow:g} times the model's times), seed {args.seed}\n")
    print("| protocol | practice s | median speed sq / le (cookies/s) | reference for the "
          "paper's ranges sq / le | reference with headroom sq / le | shipped reference "
          f"sq / le | clipped at {quick:g}x sq / le | clipped at {slow:g}x sq / le | median c "
          "sq / le |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in PROTOCOLS:
        print(report(name, args.people, args.seed), flush=True)


if __name__ == "__main__":
    main()
