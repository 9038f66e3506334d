"""How long a person takes to decorate a cookie with a mouse, element by element.

Each letter of a letters cookie is a choice among the tray's tiles, a point-select on the
tile and a drag-select onto the cookie (MacKenzie & Buxton 1994 model a point-drag as these
two Fitts' law tasks); each box of a squares cookie is a perceive-decide-act cycle and a
point-select on the box. Movement times follow Fitts' law with MacKenzie, Sellen & Buxton's
(1991) mouse coefficients, choice times Hick-Hyman, the cycle Card, Moran & Newell's Model
Human Processor. People differ by a speed factor (person to person), every element's time
varies around its mean (trial to trial), and now and then an element goes wrong and is taken
off again. Sources and figures: ``docs/human-model.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FittsLaw:
    """Movement time ``a + b * log2(D / W + 1)`` (Shannon form), in seconds."""

    intercept: float
    slope: float

    def seconds(self, distance: float, width: float) -> float:
        return max(0.0, self.intercept + self.slope * math.log2(distance / width + 1.0))


# MacKenzie, Sellen & Buxton (1991), mouse: pointing -107 + 223 ID ms, dragging 135 + 249 ID ms.
POINTING = FittsLaw(-0.107, 0.223)
DRAGGING = FittsLaw(0.135, 0.249)
# Model Human Processor (Card, Moran & Newell 1983): perceive + decide + act, 100 + 70 + 70 ms.
CYCLE_SECONDS = 0.24
# Hick-Hyman choice time among n equally likely tiles: a + b * log2(n + 1).
HICK_INTERCEPT, HICK_SLOPE = 0.20, 0.15
# Person to person: log-normal speed factor; trial to trial: log-normal factor per element.
PERSON_SPREAD = 0.13
ELEMENT_SPREAD = 0.30
SLIP_RATE = 0.03  # elements placed wrong, about the 4 % error rate Fitts' law studies aim at
TAKE_IN_SECONDS = 0.8  # looking at a new cookie before the first element
REDRAW_SECONDS = 0.25  # the page shows the next cookie this long after one is finished


@dataclass(frozen=True)
class Layout:
    """Sizes and distances in CSS pixels of the bakery page (``static/css/bakery.css``)."""

    tile: float = 44.0
    tray_to_cookie: float = 260.0
    cookie: float = 310.0
    slot: float = 30.0
    box: float = 42.0
    box_pitch: float = 46.0


DESKTOP = Layout()


@dataclass(frozen=True)
class Action:
    """One thing the person did: the cookie as decorated after it, how many of its elements
    count towards the target, and whether it completed the cookie (sent as a cookie)."""

    at: float
    content: Any
    correct: int
    elements: int
    finished: bool

    @property
    def fraction(self) -> float:
        return self.correct / self.elements


def noise(rng: np.random.Generator, sigma: float) -> float:
    """A log-normal factor with mean 1."""
    return float(np.exp(sigma * rng.standard_normal() - sigma ** 2 / 2))


@dataclass(frozen=True)
class Human:
    """One simulated person: ``pace`` multiplies every mean time (1 is the typical person,
    above 1 slower), ``spread`` is the trial-to-trial variation of each element."""

    pace: float = 1.0
    spread: float = ELEMENT_SPREAD
    slip: float = SLIP_RATE

    @classmethod
    def sample(cls, rng: np.random.Generator) -> Human:
        """A person drawn from the population."""
        return cls(pace=noise(rng, PERSON_SPREAD))

    def _time(self, mean: float, rng: np.random.Generator) -> float:
        return self.pace * mean * noise(rng, self.spread)

    def letter_seconds(self, tiles: int, rng: np.random.Generator,
                       layout: Layout = DESKTOP) -> float:
        """Find the tile among ``tiles``, point at it, drag it onto the cookie."""
        choose = HICK_INTERCEPT + HICK_SLOPE * math.log2(tiles + 1)
        point = POINTING.seconds(layout.tray_to_cookie, layout.tile)
        drag = DRAGGING.seconds(layout.tray_to_cookie, layout.cookie)
        return self._time(choose + point + drag, rng)

    def click_seconds(self, distance: float, width: float, rng: np.random.Generator) -> float:
        """Decide on the next target and point-select it ``distance`` pixels away."""
        return self._time(CYCLE_SECONDS + POINTING.seconds(max(distance, 1.0), width), rng)

    def take_in_seconds(self, rng: np.random.Generator) -> float:
        return self._time(TAKE_IN_SECONDS, rng)

    def round_actions(self, target: dict[str, Any], seconds: float, rng: np.random.Generator,
                      layout: Layout = DESKTOP) -> list[Action]:
        """Everything the person does in a round of ``seconds`` on ``target`` (the round's
        target as the server sends it), cookie after cookie, in time order."""
        decorate = self._letters if target["kind"] == "letters" else self._squares
        actions: list[Action] = []
        now = self.take_in_seconds(rng)
        while now < seconds:
            cookie = decorate(target, now, rng, layout)
            actions += [a for a in cookie if a.at < seconds]
            now = cookie[-1].at + REDRAW_SECONDS + self.take_in_seconds(rng)
        return actions

    def _letters(self, target: dict[str, Any], now: float, rng: np.random.Generator,
                 layout: Layout) -> list[Action]:
        wanted, tray = target["letters"], target["tray"]
        actions, placed = [], ""
        for letter in wanted:
            if rng.uniform() < self.slip:
                now += self.letter_seconds(len(tray), rng, layout)
                wrong = str(rng.choice([t for t in tray if t != letter]))
                actions.append(Action(now, placed + wrong, len(placed), len(wanted), False))
                now += self.click_seconds(layout.tray_to_cookie / 2, layout.slot, rng)
                actions.append(Action(now, placed, len(placed), len(wanted), False))
            now += self.letter_seconds(len(tray), rng, layout)
            placed += letter
            actions.append(Action(now, placed, len(placed), len(wanted),
                                  placed == wanted))
        return actions

    def _squares(self, target: dict[str, Any], now: float, rng: np.random.Generator,
                 layout: Layout) -> list[Action]:
        cols, cells = target["cols"], list(target["cells"])
        others = sorted(set(range(target["rows"] * cols)) - set(cells))
        actions, filled, previous = [], [], cells[0]
        for cell in cells:
            distance = layout.box_pitch * math.dist(divmod(previous, cols), divmod(cell, cols))
            if others and rng.uniform() < self.slip:
                wrong = int(rng.choice(others))
                now += self.click_seconds(distance, layout.box, rng)
                actions.append(Action(now, sorted([*filled, wrong]), max(0, len(filled) - 1),
                                      len(cells), False))
                now += self.click_seconds(0.0, layout.box, rng)
                actions.append(Action(now, sorted(filled), len(filled), len(cells), False))
            now += self.click_seconds(distance, layout.box, rng)
            filled.append(cell)
            previous = cell
            actions.append(Action(now, sorted(filled), len(filled), len(cells),
                                  len(filled) == len(cells)))
        return actions


def measured_speed(actions: list[Action], seconds: float) -> float:
    """Cookies per second as the server measures a round
    (``study.web.participant.progress``): finished cookies plus the correct fraction of the
    unfinished one, over the round's seconds."""
    done = [a for a in actions if a.at <= seconds]
    finished = sum(a.finished for a in done)
    last = done[-1] if done else None
    fraction = last.fraction if last is not None and not last.finished else 0.0
    return (finished + fraction) / seconds


# The paces (times the model's times) of the robustness test: a person three times as quick
# as the model and one two and a half times as slow end in a declared outcome.
ROBUSTNESS_PACES = (0.3, 2.5)


def population_speeds(targets: list[dict[str, Any]], seconds: float, people: int,
                      seed: int = 0) -> np.ndarray:
    """``[people, types]`` speeds measured in one round of ``seconds`` per target, each
    person drawn from the population and measured on every type."""
    rng = np.random.default_rng(seed)
    speeds = np.zeros((people, len(targets)))
    for person in range(people):
        human = Human.sample(rng)
        for task_type, target in enumerate(targets):
            speeds[person, task_type] = measured_speed(
                human.round_actions(target, seconds, rng), seconds)
    return speeds


def pace_speeds(targets: list[dict[str, Any]], seconds: float, pace: float, people: int,
                seed: int = 0) -> np.ndarray:
    """``[people, types]`` speeds of people all at ``pace`` times the model's times."""
    rng = np.random.default_rng(seed)
    return np.array([[measured_speed(Human(pace=pace).round_actions(target, seconds, rng),
                                     seconds) for target in targets] for _ in range(people)])


def coefficients(speeds: np.ndarray, references: tuple[float, ...]) -> np.ndarray:
    """Capability coefficients as the server maps speeds: ``clip(speed / ref, .01, .99)``."""
    return np.clip(speeds / np.asarray(references), 0.01, 0.99)
