"""The live path's one-team solving: plain-float goal sums equal the batch's to the last bit,
a float team is checked as strictly as any other, and cached values are computed once."""

import numpy as np
import pytest

from study.allocation.memo import cached_value
from study.allocation.model import InvalidInput, Team, goal_major_sums, state_space, team_goal_sums


@pytest.mark.parametrize(("humans", "kits"), [(2, (8, 8)), (2, (3, 3, 2)), (3, (3, 3, 3)),
                                            (2, (6, 6, 6))])
def test_one_teams_goal_metrics_equal_the_batch_metrics_exactly(humans, kits):
    rng = np.random.default_rng(3)
    space = state_space(humans, kits)
    c = rng.uniform(0.01, 0.99, (40, humans, len(kits)))
    p = rng.uniform(0.01, 0.99, (40, humans, len(kits)))
    batch = goal_major_sums(c, p, space.goal_allocations)
    for team in range(len(c)):
        one = team_goal_sums(c[team], p[team], space)
        assert one.efficiency == batch.efficiency()[:, team].tolist()
        assert one.fairness == batch.fairness()[:, team].tolist()
        assert one.fair_equity == batch.fair_equity()[:, team].tolist()


@pytest.mark.parametrize(("c", "p", "message"), [
    ([[0.2, np.nan], [0.3, 0.4]], [[0.5, 0.5], [0.5, 0.5]], r"c\[0, 1\].*within \[0, 1\]"),
    ([[0.2, 0.3], [0.3, 0.4]], [[0.5, 1.5], [0.5, 0.5]], r"p\[0, 1\].*within \[0, 1\]"),
    ([[0.2, 0.3], [-0.1, 0.4]], [[0.5, 0.5], [0.5, 0.5]], r"c\[1, 0\].*within \[0, 1\]"),
    ([[0.2, 0.3], [0.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]], r"c\[1\].*sum to more than 0"),
    ([[0.2, 0.3]], [[0.5, 0.5]], "at least 2 humans"),
])
def test_a_team_of_float_arrays_is_checked_like_any_other(c, p, message):
    for given_c, given_p in ((np.array(c), np.array(p)), (c, p)):
        with pytest.raises(InvalidInput, match=message):
            Team(given_c, given_p)


def test_a_valid_float_team_keeps_its_arrays():
    c, p = np.array([[0.2, 0.3], [0.4, 0.5]]), np.array([[0.6, 0.7], [0.8, 0.9]])
    team = Team(c, p)
    assert team.c is c and team.p is p
    widened = Team(np.array([[1, 0], [0, 1]]), np.array([[0, 1], [1, 0]]))
    assert widened.c.dtype == np.float64


def test_a_cached_value_is_computed_once_per_instance():
    class Counting:
        calls = 0

        @cached_value
        def value(self) -> int:
            """The number of calls so far."""
            Counting.calls += 1
            return Counting.calls

    first, second = Counting(), Counting()
    assert (first.value, first.value, second.value) == (1, 1, 2)
    assert Counting.value.__doc__ == "The number of calls so far."
