"""Where a protocol measures people: its capability scale against the paper's.

The robots' choices depend on the scale (MODEL.md, "The capability scale is part of the
algorithm"): multiplying every capability by ``k`` multiplies efficiency and capability
equality by ``k`` and leaves the preference terms and the scaled fair-equity alone, so the
presets choose other goals on another scale. The paper's people measured squares in
[0.20, 0.32] and letters in [0.63, 1.00] after its User Study #1; a protocol that runs the
paper's robots places the human model's typical person at the centres of those ranges.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.people.speed import population_speeds
from study.protocol.loader import TASK_NAMES, Protocol
from study.task.cookies import target

# Where the paper's people measured after its User Study #1, per task type: squares, letters.
PAPER_RANGES = ((0.20, 0.32), (0.63, 1.00))
# The typical person: the geometric mean over this many people of the model's population,
# one seed, so that every command and test names the same figures.
TYPICAL_PEOPLE = 4000
TYPICAL_SEED = 1
# A scale further than this from the paper's, on any type, is warned of.
OFF_SCALE = 0.10


def centre(low: float, high: float) -> float:
    """The geometric centre of a range: speeds spread by factors, not by differences."""
    return math.sqrt(low * high)


PAPER_CENTRES = tuple(centre(*bounds) for bounds in PAPER_RANGES)


def typical(values: np.ndarray) -> float:
    """The typical (geometric mean) value of positive measurements."""
    return float(np.exp(np.log(np.maximum(values, 1e-9)).mean()))


def calibrated_reference(speeds: np.ndarray, low: float, high: float) -> float:
    """The reference speed that maps the typical speed of ``speeds`` to the centre of
    ``[low, high]``."""
    return typical(speeds) / centre(low, high)


@functools.cache
def _typical_speeds(targets: str, seconds: float) -> tuple[float, ...]:
    speeds = population_speeds(json.loads(targets), seconds, TYPICAL_PEOPLE, TYPICAL_SEED)
    return tuple(typical(speeds[:, task_type]) for task_type in range(speeds.shape[1]))


def typical_speeds(protocol: Protocol) -> tuple[float, ...]:
    """The human model's typical person's speeds (cookies per second) per task type, in
    one of the protocol's practice rounds on its own cookies."""
    targets: list[dict[str, Any]] = [target(protocol, task_type)
                                     for task_type in range(len(protocol.cookies))]
    return _typical_speeds(json.dumps(targets, sort_keys=True), protocol.practice_seconds)


def paper_references(protocol: Protocol) -> tuple[float, ...]:
    """The reference speeds that put the model's typical person at the paper's centres."""
    return tuple(speed / middle for speed, middle in zip(typical_speeds(protocol),
                                                         PAPER_CENTRES, strict=True))


@dataclass(frozen=True)
class Scale:
    """A protocol's capability scale: where its typical person measures, and the factor
    per task type by which that differs from the paper's centres."""

    typical: tuple[float, ...]
    references: tuple[float, ...]
    source: str = "the human model's typical person"

    @property
    def factors(self) -> tuple[float, ...]:
        return tuple(value / middle for value, middle in zip(self.typical, PAPER_CENTRES,
                                                              strict=True))

    @property
    def factor(self) -> float:
        """One factor for the whole scale: the geometric mean of the types'."""
        return math.exp(sum(math.log(k) for k in self.factors) / len(self.factors))

    @property
    def off(self) -> bool:
        """Whether any type's typical person is more than ``OFF_SCALE`` off the paper's."""
        return any(abs(k - 1.0) > OFF_SCALE for k in self.factors)

    def on_paper_scale(self, c: np.ndarray) -> np.ndarray:
        """Capabilities ``[..., types]`` as the paper's scale would measure the same people,
        clipped to [0.01, 0.99] as a measurement there would be."""
        return np.clip(np.asarray(c, dtype=float) / np.asarray(self.factors), 0.01, 0.99)

    def describe(self) -> str:
        return f"{self.source} measures " + ", ".join(
            f"{TASK_NAMES[j]} {value:.3f} (paper {middle:.3f}, x{k:.2f})"
            for j, (value, middle, k) in enumerate(
                zip(self.typical, PAPER_CENTRES, self.factors, strict=True)))


def protocol_scale(protocol: Protocol) -> Scale:
    """Where the protocol's typical person lands under its reference speeds: a calibrated
    protocol's pilot people, as ``study calibrate`` recorded them (people, not a model,
    fix the speeds), else the human model's typical person."""
    references = tuple(cookie.reference_speed for cookie in protocol.cookies)
    if protocol.calibrated is not None:
        people, typical_values = protocol.calibrated
        return Scale(typical_values, references, f"the pilot's typical person ({people} people)")
    speeds = typical_speeds(protocol)
    return Scale(tuple(s / r for s, r in zip(speeds, references, strict=True)), references)


def weight_on_paper_scale(w: float, factor: float) -> float:
    """FEA's efficiency weight ``w`` on a scale ``factor`` times the paper's acts as this
    weight on the paper's: ``w'/(1-w') = factor * w/(1-w)``."""
    return factor * w / (factor * w + 1.0 - w)


def share_in_ranges(values: np.ndarray,
                    ranges: tuple[tuple[float, float], ...] = PAPER_RANGES) -> float:
    """Share of people whose every coefficient lies in its range."""
    inside = np.ones(len(values), dtype=bool)
    for task_type, (low, high) in enumerate(ranges):
        inside &= (values[:, task_type] >= low) & (values[:, task_type] <= high)
    return float(inside.mean())
