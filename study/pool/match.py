"""Choosing the agent teammate: the exact nearest pool member to a participant.

For one teammate filter the eligible members (per the participant's role) are put once
into a k-d tree over their ``(c, p)`` vectors; a query is then microseconds. The tree's
answer is re-checked against every member within a hair of it, so ties go to the lowest
pool row (then the lowest human) whatever the tree's internal order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from study.model import InvalidInput

TIE_SLACK = 1e-12


class NoEligibleTeam(LookupError):
    """No pool team meets the teammate filter; the message names the filter."""

    def __init__(self, description: str, pool: str) -> None:
        self.filter = description
        super().__init__(f"no team in pool {pool} meets the teammate filter "
                         f"({description}); change pool.teammate or build a larger pool")


@dataclass(frozen=True)
class Match:
    """The matched pool team, which of its humans the participant takes, and the teammate."""

    team_index: int
    participant_human: int
    teammate_human: int
    teammate_c: np.ndarray
    teammate_p: np.ndarray
    distance: float
    filter: str


def participant_vector(c: object, p: object, types: int) -> np.ndarray:
    """The participant's ``[c..., p...]`` as one vector, checked like any coefficient."""
    vector = []
    for name, values in (("c", c), ("p", p)):
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError) as error:
            raise InvalidInput(name, values, "must be numbers") from error
        if array.shape != (types,):
            raise InvalidInput(name, values, f"must hold one value per task type ({types})")
        if not (np.isfinite(array) & (array >= 0) & (array <= 1)).all():
            raise InvalidInput(name, array.tolist(), "must be finite numbers within [0, 1]")
        vector.append(array)
    return np.concatenate(vector)


class MemberIndex:
    """The members a participant may match under one filter, ready for queries."""

    def __init__(self, c: np.ndarray, p: np.ndarray, eligible: np.ndarray,
                 most_capable: np.ndarray, role: str, description: str, pool: str) -> None:
        teams = np.flatnonzero(eligible)
        if role == "any":
            teams = np.repeat(teams, 2)
            members = np.tile(np.array([0, 1]), len(teams) // 2)
        elif role == "most-capable":
            members = most_capable[teams].astype(np.intp)
        else:
            members = 1 - most_capable[teams].astype(np.intp)
        self.teams, self.members = teams, members
        self.c, self.p = c, p
        self.points = np.ascontiguousarray(np.concatenate([c[teams, members],
                                                           p[teams, members]], axis=1))
        self.description, self.pool = description, pool
        self.tree = cKDTree(self.points) if len(teams) else None

    def __len__(self) -> int:
        return len(self.teams)

    def query(self, c: object, p: object) -> Match:
        """The nearest eligible member to the participant; ties to the lowest team."""
        if self.tree is None:
            raise NoEligibleTeam(self.description, self.pool)
        point = participant_vector(c, p, self.c.shape[2])
        nearest, _ = self.tree.query(point)
        near = np.asarray(self.tree.query_ball_point(point, nearest + TIE_SLACK * (1 + nearest)))
        distances = np.sqrt(((self.points[near] - point) ** 2).sum(axis=1))
        best = near[distances == distances.min()].min()
        team, member = int(self.teams[best]), int(self.members[best])
        return Match(team, member, 1 - member, self.c[team, 1 - member].copy(),
                     self.p[team, 1 - member].copy(), float(distances.min()), self.description)
