"""Where the shipped protocols measure the human decorating-speed model's people.

    python -m benchmarks.human_model [--people 4000] [--seed 1]

For each shipped protocol: the model's population measured in one practice round of the
protocol's length on its two cookies; the reference speeds that put the typical person at
the centres of the paper's ranges (``study.people.scale.paper_references``); the
protocol's own reference speeds, the typical person's capabilities under them and their
factor against the paper's centres; and the share of the population clipped per type
(people faster than the paper's fastest), and at 0.3 and 2.5 times the model's times,
the robustness test's paces (``docs/human-model.md`` quotes this table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from study.people.scale import paper_references, protocol_scale
from study.people.speed import (
    ROBUSTNESS_PACES,
    coefficients,
    pace_speeds,
    population_speeds,
)
from study.protocol.loader import load_protocol
from study.task.cookies import target

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("demo", "demo-de", "study1", "study2", "study2-paper", "welfare", "teams2",
             "teams3")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
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
