"""The decorator model: speed and capability are inverse maps; the pace varies like a person."""

from __future__ import annotations

import numpy as np
import pytest

from study.task.cookies import matches, squares_grid, squares_target
from study.task.decorator import (
    Decorator,
    coefficient_from_speed,
    round_rng,
    speed_from_coefficient,
)


def test_speed_and_capability_are_inverse_within_the_range():
    for coefficient in (0.05, 0.3, 0.9):
        speed = speed_from_coefficient(coefficient, 0.4)
        assert coefficient_from_speed(speed, 0.4) == pytest.approx(coefficient)
    assert coefficient_from_speed(10.0, 0.4) == 0.99
    assert coefficient_from_speed(0.0, 0.4) == 0.01


def test_a_decorator_measures_back_to_its_capability():
    decorator = Decorator(capability=(0.3, 0.8), reference_speed=(0.4, 0.15))
    rng = np.random.default_rng(5)
    counts = [len(decorator.cookie_times(0, 30.0, rng)) for _ in range(4000)]
    measured = np.mean(counts) / 30.0
    assert coefficient_from_speed(measured, 0.4) == pytest.approx(0.3, abs=0.02)
    assert np.std(counts) > 0, "people do not work like metronomes"


def test_a_round_replays_the_same_times():
    decorator = Decorator(capability=(0.5, 0.5), reference_speed=(0.4, 0.15))
    first = decorator.cookie_times(1, 30, round_rng(3, 1, 2))
    assert first == decorator.cookie_times(1, 30, round_rng(3, 1, 2))
    assert first != decorator.cookie_times(1, 30, round_rng(3, 1, 3))


def test_squares_targets_come_from_the_pixel_font():
    rows, cols, cells = squares_grid("BR")
    assert (rows, cols, len(cells)) == (5, 7, 20)
    target = squares_target("BR")
    assert matches(target, list(cells[::-1]))
    assert not matches(target, cells[:-1])
    assert not matches(target, [*cells, cells[0]])
    assert not matches(target, [True] * 20)
