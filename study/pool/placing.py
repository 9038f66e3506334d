"""Placing a participant: the teammate rule's choice of pool member and the robots'
policies for the live team it makes (MODEL.md, "Forming the team under study").

The live study places each participant when their practice ends; ``study calibrate``
places a pilot's people again, offline, under a calibrated protocol. Both use ``place``,
so a pilot's live teams are formed by the very rule the study will run. A teammate source
is anything with ``PoolMembers``' questions (the web app's tests give it small fakes).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any
from typing import Protocol as Interface

import numpy as np

from study.allocation.algorithms import declared_algorithm
from study.allocation.model import ALGORITHMS, Algorithm, InvalidInput, Team
from study.allocation.solver import Policy, solve
from study.allocation.terms import DeclaredAlgorithm
from study.task.decorator import HIGHEST, LOWEST

if TYPE_CHECKING:
    from study.protocol.loader import Protocol

# Pool members tried, nearest first, for one whose live team every two robots treat
# differently.
CANDIDATES = 500


class Member(Interface):
    """A pool member as the participant's match (``study.pool.Match``)."""

    team_index: int
    participant_human: int
    teammate_c: np.ndarray
    teammate_p: np.ndarray
    distance: float


class Placement(Interface):
    """A pool member as the participant's match and the live team it makes
    (``study.pool.forming.Candidate``)."""

    match: Member
    rank: int
    live_type: str
    participant_role: str
    meets_target: bool


class Robot(Interface):
    """What a condition's robot solves with (``study.protocol.loader.Condition``): a preset by
    name, or the ``[[algorithms]]`` table it runs (``declared``)."""

    id: str
    algorithm: str
    w: float
    fea_bounds: tuple[float, float] | None
    round_order: str
    declared: DeclaredAlgorithm | None


class TeammateSource(Interface):
    """Where teammates come from: a pool, or anything answering the same questions.
    ``preferred``: the task type a participant with tied preferences counts as preferring
    (``tied_ratings = "random"``); None reads ties by the lowest index."""

    name: str
    rule: str
    unplaced: str

    def nearest(self, c: np.ndarray, p: np.ndarray,
                preferred: int | None = None) -> Placement: ...

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str,
                   preferred: int | None = None) -> Iterator[Placement]: ...

    @property
    def fea_bounds(self) -> tuple[float, float] | None: ...


@dataclass
class PoolMembers:
    """A loaded ``study.pool.Pool`` as a teammate source, and the file it came from."""

    pool: Any
    name: str

    @property
    def rule(self) -> str:
        return self.pool.spec.teammate.rule

    @property
    def unplaced(self) -> str:
        return self.pool.spec.teammate.unplaced

    @cached_property
    def _index(self) -> Any:
        return self.pool.index(self.pool.spec.teammate)

    def nearest(self, c: np.ndarray, p: np.ndarray,
                preferred: int | None = None) -> Placement:
        """The paper's Eq. 6 member and the live team it makes."""
        from study.pool.forming import candidate

        position, distance = self._index.nearest(c, p)
        return candidate(self.pool.spec, self.pool.spec.teammate, self._index, position,
                         distance, 0, c, p, preferred)

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str,
                   preferred: int | None = None) -> Iterator[Placement]:
        """``typed``: the members whose live team meets the target, nearest first;
        ``distinct``: every member, nearest first (``CANDIDATES`` of them at most)."""
        from study.pool.forming import candidate, nearest_first, targets
        from study.pool.match import participant_vector

        spec, index = self.pool.spec, self._index
        if rule == "typed":
            yield from targets(spec, spec.teammate, index, c, p, preferred)
            return
        point = participant_vector(c, p, index.types)
        positions, distances = nearest_first(index, point, min(len(index), CANDIDATES + 1))
        for rank, (position, distance) in enumerate(zip(positions, distances, strict=True)):
            yield candidate(spec, spec.teammate, index, int(position), float(distance), rank,
                            c, p, preferred)

    @property
    def fea_bounds(self) -> tuple[float, float] | None:
        return self.pool.fea_bounds


def live_team(match: Member, c: np.ndarray, p: np.ndarray) -> Team:
    """The participant in the matched member's role, the agent teammate in the other."""
    human = match.participant_human
    team_c, team_p = np.zeros((2, len(c))), np.zeros((2, len(c)))
    team_c[human], team_p[human] = c, p
    team_c[1 - human], team_p[1 - human] = match.teammate_c, match.teammate_p
    return Team(team_c, team_p)


def algorithm_for(condition: Robot, pool_bounds: tuple[float, float] | None) -> Algorithm:
    """The condition's objective: its declared algorithm, or a preset; FEA (and a declared
    fair_equity term) takes the protocol's bounds or else the pool's."""
    if condition.declared is not None:
        return declared_algorithm(condition.declared, pool_bounds)
    if condition.algorithm != "fea":
        return Algorithm(condition.algorithm)
    bounds = condition.fea_bounds or pool_bounds
    if bounds is None:
        raise ValueError(f"condition {condition.id}: the pool has no FEA bounds; give "
                         "fea_bounds = [lo, hi] in the protocol")
    return Algorithm("fea", w=condition.w, lo=bounds[0], hi=bounds[1])


@dataclass(frozen=True)
class Placed:
    """The rule's choice, the Eq. 6 nearest member, how many candidates the rule passed
    over because two robots would follow one plan, the live team and each condition's
    policy for it (in the order the conditions were given)."""

    rule: str
    chosen: Placement
    nearest: Placement
    same_plan: int
    team: Team
    policies: list[Policy]

    @property
    def plans_differ(self) -> bool:
        return plans_differ(self.policies)


def plans_differ(policies: Sequence[Policy]) -> bool:
    """Whether every two robots follow different plans (a study compares each pair)."""
    return len({tuple(map(tuple, policy.plan)) for policy in policies}) == len(policies)


def session_policies(team: Team, conditions: Sequence[Robot],
                     pool_bounds: tuple[float, float] | None,
                     kits: tuple[int, ...]) -> list[Policy]:
    """Each condition's policy for the team, the conditions in the order their sessions
    run: an algorithm with memory over the study counts the kits the earlier sessions hand
    out (MODEL.md, memory). Every round hands out the kits the policy asks for, so those
    are the earlier policies' goals."""
    policies: list[Policy] = []
    held: np.ndarray | None = None
    for condition in conditions:
        algorithm = algorithm_for(condition, pool_bounds)
        history = held if algorithm.memory else None
        policy = solve(team, algorithm, kits, condition.round_order, history=history)
        policies.append(policy)
        goal = policy.goal_allocation
        held = goal.astype(float) if held is None else held + goal
    return policies


def tied(p: np.ndarray) -> bool:
    """Whether a participant's preferences tie at the top (equal ratings): then no rating
    of theirs says which type they prefer, only a rule (``tied_ratings``)."""
    values = np.asarray(p, dtype=float)
    return int((values == values.max()).sum()) > 1


def clipped(c: np.ndarray) -> bool:
    """Whether a measured capability sits at a clip bound, 0.01 or 0.99: a speed the
    reference speed cannot measure, so not the participant's value (MODEL.md); what
    follows is the protocol's ``clipped_capability``."""
    values = np.asarray(c, dtype=float)
    return bool(((values <= LOWEST) | (values >= HIGHEST)).any())


def place(source: TeammateSource, c: np.ndarray, p: np.ndarray, conditions: Sequence[Robot],
          kits: tuple[int, ...], preferred: int | None = None) -> Placed | None:
    """The teammate by the source's rule: ``nearest`` (Eq. 6), ``distinct`` (the nearest
    member with which the robots differ, else the nearest) or ``typed`` (the nearest
    member whose live team meets the target and with which the robots differ; if none,
    what ``unplaced`` says: None for the unmatched page, or the ``distinct`` choice,
    recorded as off target)."""
    rule = source.rule
    nearest = source.nearest(c, p, preferred)
    if rule == "nearest":
        return _placed(rule, nearest, nearest, 0, source, c, p, conditions, kits)
    found = _first_distinct(source, c, p, conditions, kits, rule, preferred)
    if found is None and rule == "typed":
        if source.unplaced == "unmatched":
            return None
        found = _first_distinct(source, c, p, conditions, kits, "distinct", preferred)
    if found is not None:
        return replace(found, rule=rule, nearest=nearest)
    return _placed(rule, nearest, nearest, 0, source, c, p, conditions, kits)


def _placed(rule: str, chosen: Placement, nearest: Placement, same_plan: int,
            source: TeammateSource, c: np.ndarray, p: np.ndarray,
            conditions: Sequence[Robot], kits: tuple[int, ...]) -> Placed:
    team = live_team(chosen.match, c, p)
    policies = session_policies(team, conditions, source.fea_bounds, kits)
    return Placed(rule, chosen, nearest, same_plan, team, policies)


def _first_distinct(source: TeammateSource, c: np.ndarray, p: np.ndarray,
                    conditions: Sequence[Robot], kits: tuple[int, ...], rule: str,
                    preferred: int | None) -> Placed | None:
    """The first of the rule's candidates (at most ``CANDIDATES``) with which the robots
    follow different plans, with how many were passed over for one plan (the Eq. 6
    nearest member is filled in by ``place``)."""
    ranked = itertools.islice(source.candidates(c, p, rule, preferred), CANDIDATES)
    for same_plan, candidate in enumerate(ranked):
        placed = _placed(rule, candidate, candidate, same_plan, source, c, p, conditions,
                         kits)
        if placed.plans_differ:
            return placed
    return None


def protocol_algorithm(protocol: Protocol, name: str) -> Algorithm:
    """The algorithm a protocol runs by ``name``: the id of an ``[[algorithms]]`` table, or
    a preset; FEA with the weight and bounds of the first condition running it, else of
    ``[pool.fea]``."""
    pool_fea = protocol.pool_spec().fea
    declared = protocol.declared(name)
    if declared is not None:
        return declared_algorithm(declared, None if pool_fea is None else (pool_fea.lo,
                                                                            pool_fea.hi),
                                  protocol.path.parent)
    if name not in ALGORITHMS:
        names = ", ".join([*ALGORITHMS, *(a.id for a in protocol.algorithms)])
        raise InvalidInput("--algorithm", name, f"must be one of {names} (the presets and "
                                                f"the algorithms {protocol.path} declares)")
    if name != "fea":
        return Algorithm(name)
    pool_bounds = None if pool_fea is None else (pool_fea.lo, pool_fea.hi)
    condition = next((c for c in protocol.conditions if c.algorithm == "fea"), None)
    w, bounds = ((condition.w, condition.fea_bounds or pool_bounds) if condition is not None
                 else (None if pool_fea is None else pool_fea.w, pool_bounds))
    if w is None or bounds is None:
        raise InvalidInput("--algorithm", name, f"{protocol.path} gives FEA no bounds: no "
                                                "condition runs it and [pool.fea] is absent")
    return Algorithm("fea", w=w, lo=bounds[0], hi=bounds[1])
