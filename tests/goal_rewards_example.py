"""Goal rewards given as code (``python = "goal_rewards_example:<function>"``): a worked
example and the mistakes ``study check`` must refuse.

A goal reward given as code receives the teams' capabilities and preferences
``c, p [B, h, n]`` and the allocation of every goal ``[B, G, h, n]`` (the kits each human
holds there, with memory including earlier sessions' kits), all read-only, and returns
one value in [0, 1] per team and goal, ``[B, G]``.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time

import numpy as np

CALLS = itertools.count(1)


def output_rates(c: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """``[B, G, h]``: each human's capability-weighted kits over their kits."""
    return (c[:, None] * allocations).sum(axis=-1) / allocations.sum(axis=-1)


def nash_welfare(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """The Nash welfare of the humans' output rates (the term ``nash_c``), as code."""
    rates = output_rates(c, allocations)
    return np.prod(rates, axis=-1) ** (1.0 / rates.shape[-1])


def slowest_first(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """A reward no term spells: the slowest human's output rate counts twice as much as
    the team's mean rate, so the robot lifts whoever is slowest."""
    rates = output_rates(c, allocations)
    return (2.0 * rates.min(axis=-1) + rates.mean(axis=-1)) / 3.0


def one_per_team(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: one value per team instead of one per goal."""
    return output_rates(c, allocations).mean(axis=(-1, -2))


def undefined_somewhere(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: NaN where a human holds no kit of type 0."""
    held = allocations[..., 0].min(axis=-1)
    return np.where(held > 0, nash_welfare(c, p, allocations), np.nan)


def above_one(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: summed rates, not averaged, so above 1."""
    return output_rates(c, allocations).sum(axis=-1)


def noisy(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: a fresh random value on every call."""
    return np.random.default_rng().uniform(0.0, 1.0, allocations.shape[:2])


def in_place(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: writes into the solver's allocations."""
    allocations[...] = 0
    return np.zeros(allocations.shape[:2])


def exits(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: ends the process that runs it."""
    sys.exit(3)


def hangs(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: never returns in any time a study can wait."""
    time.sleep(60)
    return nash_welfare(c, p, allocations)


def crashes(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: kills its process as a segmentation fault in compiled code would."""
    os.kill(os.getpid(), signal.SIGSEGV)
    return nash_welfare(c, p, allocations)


def texts(c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
    """Wrong: the numbers written as texts, in an object array."""
    return np.full(allocations.shape[:2], "0.5", dtype=object)


def random_after_two_calls(c: np.ndarray, p: np.ndarray, allocations: np.ndarray
                           ) -> np.ndarray:
    """Wrong: the Nash welfare on its first two calls, random values after."""
    if next(CALLS) <= 2:
        return nash_welfare(c, p, allocations)
    return noisy(c, p, allocations)
