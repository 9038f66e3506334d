"""Calibration of the protocols' reference speeds to the human decorating-speed model.

    python -m benchmarks.human_model [--people 4000] [--seed 1]

For each shipped protocol: the model's population measured in one practice round of the
protocol's length on its two cookies, the reference speeds that map the typical person to
the centre of the paper's observed ranges (``study.bots.human.calibrated_reference``), the
protocol's own reference speeds, and the share of people whose measured coefficients fall
in the ranges under the protocol's speeds (``docs/human-model.md`` quotes this table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.bots.human import (
    OBSERVED_RANGES,
    calibrated_reference,
    coefficients,
    population_speeds,
    share_in_ranges,
)
from study.cookies import target
from study.protocol import load_protocol

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("demo", "study1", "study2")


def report(name: str, people: int, seed: int) -> str:
    protocol = load_protocol(ROOT / "protocols" / f"{name}.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    speeds = population_speeds(targets, protocol.practice_seconds, people, seed)
    calibrated = [calibrated_reference(speeds[:, j], *OBSERVED_RANGES[j]) for j in range(2)]
    shipped = tuple(c.reference_speed for c in protocol.cookies)
    values = coefficients(speeds, shipped)
    per_type = [share_in_ranges(values[:, [j]], (OBSERVED_RANGES[j],)) for j in range(2)]
    clipped = float(((values <= 0.01) | (values >= 0.99)).any(axis=1).mean())
    return (f"| {name} | {protocol.practice_seconds:g} | "
            f"{np.median(speeds[:, 0]):.4f} / {np.median(speeds[:, 1]):.4f} | "
            f"{calibrated[0]:.4f} / {calibrated[1]:.4f} | {shipped[0]:g} / {shipped[1]:g} | "
            f"{per_type[0]:.1%} / {per_type[1]:.1%} | {share_in_ranges(values):.1%} | "
            f"{clipped:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.people} simulated people per protocol, seed {args.seed}\n")
    print("| protocol | practice s | median speed sq / le (cookies/s) | calibrated reference "
          "sq / le | shipped reference sq / le | in range sq / le | in both ranges | "
          "clipped |")
    print("|---|---|---|---|---|---|---|---|")
    for name in PROTOCOLS:
        print(report(name, args.people, args.seed))


if __name__ == "__main__":
    main()
