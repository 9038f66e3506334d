"""How a simulated participant answers round probes: a declared response model, so the
analysis of probes has a known signal to find in bots' answers (docs/study-day.md, Bots).

A bot reads every probe as the fairness question it usually is: its answer rises with the
share of the session's rounds so far that gave it the kit type it prefers, plus normal
noise, placed on the probe's scale; a share of probes it misses (it never taps one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ProbeAnswers:
    """The response model: the answer's place on the scale (0 its first point, 1 its last)
    is ``intercept + slope * share + noise``, ``share`` the fraction of the session's rounds
    so far with the bot's preferred kit, noise normal with sd ``noise``, clipped and rounded
    to a point; ``miss_rate`` of the probes are missed."""

    intercept: float = 0.15
    slope: float = 0.7
    noise: float = 0.12
    miss_rate: float = 0.1

    def answer(self, share: float, points: int, rng: np.random.Generator) -> int | None:
        """The point tapped (1..points), or None for a probe missed."""
        if rng.random() < self.miss_rate:
            return None
        place = self.intercept + self.slope * share + rng.normal(0.0, self.noise)
        return 1 + round(float(np.clip(place, 0.0, 1.0)) * (points - 1))


class KitsSeen:
    """The kit types a bot was handed in each session, by round, so a probe reads the
    share of preferred rounds so far (a round resumed after a refresh counts once)."""

    def __init__(self, preferences: tuple[float, ...]) -> None:
        self.preferred = int(np.argmax(preferences))
        self.kits: dict[int, dict[int, int]] = {}

    def saw(self, session: int, round_id: int, task_type: int) -> None:
        self.kits.setdefault(session, {})[round_id] = task_type

    def preferred_share(self, session: int) -> float:
        """The share of the session's rounds so far that gave the preferred kit (0.5
        before any round: no evidence either way)."""
        kits = list(self.kits.get(session, {}).values())
        return sum(kit == self.preferred for kit in kits) / len(kits) if kits else 0.5
