"""One model of a cookie decorator, shared by the agent teammate and the bots.

A participant's capability on a cookie type is measured as
``clip(speed / reference speed, 0.01, 0.99)``, the speed in cookies per second counting the
cookie unfinished at the deadline by its correct fraction (``docs/model.md``); a decorator
with capability ``c`` therefore works at ``c * reference speed`` cookies per second. The
protocols' reference speeds are calibrated to how fast people decorate
(``study.people.speed``), so the teammate works at a person's pace. Real people do not
finish cookies like a metronome, so the time per cookie is drawn from a gamma distribution
with that mean and a coefficient of variation of about a quarter. The first cookie of a round
takes the remaining part of a cookie in progress (the renewal process is started in its
steady state), so the expected count over a round is exactly ``speed * seconds`` and a
decorator measures back to its own capability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOWEST, HIGHEST = 0.01, 0.99


def coefficient_from_speed(speed: float, reference_speed: float) -> float:
    """Capability coefficient of a measured speed (cookies per second)."""
    return float(np.clip(speed / reference_speed, LOWEST, HIGHEST))


def speed_from_coefficient(coefficient: float, reference_speed: float) -> float:
    """Cookies per second of a decorator with this capability: the inverse mapping."""
    return float(coefficient) * reference_speed


@dataclass(frozen=True)
class Decorator:
    """A decorator with a capability per cookie type and the protocol's reference speeds."""

    capability: tuple[float, ...]
    reference_speed: tuple[float, ...]
    variation: float = 0.25

    def speed(self, task_type: int) -> float:
        return speed_from_coefficient(self.capability[task_type], self.reference_speed[task_type])

    def cookie_times(self, task_type: int, seconds: float,
                     rng: np.random.Generator) -> list[float]:
        """When, in seconds since the round started, each cookie is finished within
        ``seconds``. Gamma times with mean ``1 / speed``; the first is the forward
        recurrence time (a uniform share of a length-biased draw, gamma with shape + 1)."""
        mean = 1.0 / self.speed(task_type)
        shape = 1.0 / self.variation ** 2
        now = float(rng.uniform() * rng.gamma(shape + 1, mean / shape))
        times = []
        while now <= seconds:
            times.append(now)
            now += float(rng.gamma(shape, mean / shape))
        return times

    def fresh_times(self, task_type: int, seconds: float,
                    rng: np.random.Generator) -> list[float]:
        """When each cookie is finished by a decorator who starts the first cookie as the
        round starts, as a measured person does: finished cookies and the share of the one
        in progress at the deadline (``unfinished``) then measure the capability."""
        mean = 1.0 / self.speed(task_type)
        shape = 1.0 / self.variation ** 2
        times, now = [], float(rng.gamma(shape, mean / shape))
        while now <= seconds:
            times.append(now)
            now += float(rng.gamma(shape, mean / shape))
        return times

    def unfinished(self, task_type: int, since: float) -> float:
        """The share of the next cookie done ``since`` seconds after the last was finished,
        at the decorator's mean pace (never the whole cookie: that would be finished)."""
        return min(0.95, since * self.speed(task_type))


def round_rng(*key: int) -> np.random.Generator:
    """A generator seeded by integers (participant, session, round): the same round always
    replays the same cookie times, also after a server restart."""
    return np.random.default_rng([int(k) for k in key])
