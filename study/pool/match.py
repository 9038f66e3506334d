"""Choosing the agent teammate: the exact nearest pool member to a participant.

For one teammate filter the eligible members (per the participant's role) are put once
into a k-d tree over their ``(c, p)`` vectors; a query is then microseconds. The tree's
answer is re-checked against every member within a hair of it, so ties go to the lowest
pool row (then the lowest human) whatever the tree's internal order.

The tree is pykdtree's: a query of one point costs a few microseconds where scipy's
``cKDTree.query`` spends about 12 on its call alone (``benchmarks/pool_study1.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from study.allocation.model import InvalidInput
from study.pool.teamtypes import positively_correlated
from study.protocol.pool_names import COMPARATIVE_ADVANTAGE

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
    """The participant's ``[c..., p...]`` as one vector, checked like any coefficient
    (a handful of numbers: checked as Python floats first, the fastest way)."""
    try:
        values = _floats(c) + _floats(p)
        fits = len(values) == 2 * types and len(c) == types  # type: ignore[arg-type]
    except (TypeError, ValueError):
        values, fits = [], False
    if fits and all(0.0 <= value <= 1.0 for value in values):
        return np.array(values, dtype=float)
    arrays = []
    for name, values in (("c", c), ("p", p)):
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError) as error:
            raise InvalidInput(name, values, "must be numbers") from error
        if array.shape != (types,):
            raise InvalidInput(name, values, f"must hold one value per task type ({types})")
        if not ((array >= 0) & (array <= 1)).all():
            raise InvalidInput(name, array.tolist(), "must be finite numbers within [0, 1]")
        arrays.append(array)
    return np.concatenate(arrays)


def _floats(values: object) -> list[float]:
    """The numbers of a vector as Python floats (a float array's ``tolist`` is the fast
    way)."""
    if type(values) is np.ndarray and values.dtype == np.float64:
        return values.tolist()
    return [float(v) for v in values]  # type: ignore[attr-defined]


def _with_slack(distance: float) -> float:
    """The distance below which another member ties with one at ``distance``: the same
    distance computed in another order of coordinates may differ in its last bits."""
    return distance + TIE_SLACK * (1 + distance)


@cache
def kd_tree_class() -> Any:
    """pykdtree's ``KDTree``, its OpenMP queries on one thread.

    A query is one participant: a second thread would add its wake-up to every query, and
    on a busy machine its wait at the region's barrier (measured: a 99th percentile of
    7 ms against 0.04 ms on one thread). pykdtree's OpenMP runtime reads
    ``OMP_NUM_THREADS`` when it loads, so the variable is set for that import alone.
    """
    previous = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        from pykdtree.kdtree import KDTree
    finally:
        if previous is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = previous
    return KDTree


class MemberIndex:
    """The members a participant may match under one filter, ready for queries.

    ``c, p [E, h, n]`` and ``most_capable [E]`` describe candidate teams, ``eligible`` says
    which of them the filter admits, and ``rows`` gives their pool rows (default: their
    positions). Only the admitted members are kept, with their teammates' coefficients.
    """

    def __init__(self, c: np.ndarray, p: np.ndarray, eligible: np.ndarray,
                 most_capable: np.ndarray, role: str, description: str, pool: str,
                 rows: np.ndarray | None = None,
                 reading: str = COMPARATIVE_ADVANTAGE) -> None:
        kept = np.flatnonzero(eligible)
        teams = kept if rows is None else np.asarray(rows)[kept]
        c, p = c[kept], p[kept]
        local = np.arange(len(kept))
        if role == "any":
            local, teams = np.repeat(local, 2), np.repeat(teams, 2)
            members = np.tile(np.array([0, 1]), len(kept))
        elif role == "most-capable":
            members = most_capable[kept].astype(np.intp)
        else:
            members = 1 - most_capable[kept].astype(np.intp)
        self.teams, self.members = teams, members
        self.types = c.shape[2]
        self.points = np.ascontiguousarray(np.concatenate([c[local, members],
                                                           p[local, members]], axis=1),
                                           dtype=np.float64)
        self.teammate_c = c[local, 1 - members]
        self.teammate_p = p[local, 1 - members]
        # For the live-team search (``study.pool.forming``): each teammate's correlation.
        self.teammate_positive = positively_correlated(self.teammate_c[:, None],
                                                       self.teammate_p[:, None])[:, 0]
        self.reading = reading
        self.description, self.pool = description, pool
        self.tree = kd_tree_class()(self.points) if len(teams) else None

    def __len__(self) -> int:
        return len(self.teams)

    def _nearest(self, point: np.ndarray) -> tuple[int, float]:
        """The member nearest to ``point`` and its distance; among members within a hair
        of the nearest distance, the lowest (lowest team, then lowest human)."""
        query = point[None]
        if len(self.teams) > 1:
            distances, members = self.tree.query(query, k=2)
            first, second = distances[0].tolist()
            if second > _with_slack(first):
                return int(members[0, 0]), first
            nearest = first
        else:
            nearest = float(self.tree.query(query)[0][0])
        near = self._within(query, _with_slack(nearest))
        distances = np.sqrt(((self.points[near] - point) ** 2).sum(axis=1))
        tied = np.flatnonzero(distances <= _with_slack(distances.min()))
        lowest = tied[np.argmin(near[tied])]
        return int(near[lowest]), float(distances[lowest])

    def _within(self, query: np.ndarray, radius: float) -> np.ndarray:
        """Every member closer than ``radius`` to the point ``query [1, 2n]``: the tree
        is asked for ever more neighbours until fewer than asked for are that close."""
        count = min(8, len(self))
        while True:
            distances, members = self.tree.query(query, k=count, distance_upper_bound=radius)
            found = members[0][np.isfinite(distances[0])].astype(np.intp)
            if len(found) < count or count == len(self):
                return found
            count = min(4 * count, len(self))

    def nearest(self, c: object, p: object) -> tuple[int, float]:
        """The position in this index of the member nearest to the participant (ties to
        the lowest team), and its distance ``d``."""
        if self.tree is None:
            raise NoEligibleTeam(self.description, self.pool)
        return self._nearest(participant_vector(c, p, self.types))

    def query(self, c: object, p: object) -> Match:
        """The nearest eligible member to the participant; ties to the lowest team."""
        best, distance = self.nearest(c, p)
        member = int(self.members[best])
        return Match(int(self.teams[best]), member, 1 - member, self.teammate_c[best].copy(),
                     self.teammate_p[best].copy(), distance, self.description)
