"""Choosing the agent teammate and solving the robot's policies for the live team.

The live team is the participant's measured coefficients and the agent teammate's, placed
in the roles the matched pool team had (the participant takes the matched member's human
index), so the policies the robot follows are those the pool's simulation studied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from typing import Protocol as Interface

import numpy as np

from study.model import Algorithm, Team
from study.protocol import Condition, Protocol
from study.solver import Policy, solve


class TeammateMatch(Interface):
    """What the web app reads from a pool match (``study.pool.Match``)."""

    team_index: int
    participant_human: int
    teammate_c: np.ndarray
    teammate_p: np.ndarray
    distance: float


class Placement(Interface):
    """A pool member as the participant's match and the live team it makes
    (``study.pool.forming.Candidate``)."""

    match: TeammateMatch
    rank: int
    live_type: str
    participant_role: str
    meets_target: bool


class TeammateSource(Interface):
    """Where teammates come from: a pool, or anything answering the same questions."""

    name: str
    rule: str
    unplaced: str

    def nearest(self, c: np.ndarray, p: np.ndarray) -> Placement: ...

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str) -> Iterator[Placement]: ...

    @property
    def fea_bounds(self) -> tuple[float, float] | None: ...


@dataclass
class PoolTeammates:
    """A loaded ``study.pool.Pool`` and the file it came from."""

    pool: Any
    name: str

    @classmethod
    def for_protocol(cls, protocol: Protocol, directory: Path) -> PoolTeammates:
        """Build the protocol's pool on first use (cached under ``directory``) and load it."""
        from study.pool import Pool, ensure_pool

        path = ensure_pool(protocol.pool_spec(), directory)
        return cls(Pool.load(path), str(path))

    @property
    def rule(self) -> str:
        return self.pool.spec.teammate.rule

    @property
    def unplaced(self) -> str:
        return self.pool.spec.teammate.unplaced

    def prepare(self) -> None:
        """Index the admitted members now (a fifth of a second on a 500,000-team pool), at
        start, rather than inside the first teammate choice's write transaction (the app
        calls this on a source that has it). A pool of larger teams serves a [team]'s
        agent seats, matched by ``study.web.participant.team.agents`` instead."""
        _ = self._index if self.pool.spec.humans == 2 else self.pool.coefficients

    @cached_property
    def _index(self) -> Any:
        return self.pool.index(self.pool.spec.teammate)

    def nearest(self, c: np.ndarray, p: np.ndarray) -> Placement:
        """The paper's Eq. 6 member and the live team it makes."""
        from study.pool.forming import candidate

        position, distance = self._index.nearest(c, p)
        return candidate(self.pool.spec, self.pool.spec.teammate, self._index, position,
                         distance, 0, c, p)

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str) -> Iterator[Placement]:
        """``typed``: the members whose live team meets the target, nearest first;
        ``distinct``: every member, nearest first (``CANDIDATES`` of them at most)."""
        from study.pool.forming import nearest_first, targets

        if rule == "typed":
            yield from targets(self.pool.spec, self.pool.spec.teammate, self._index, c, p)
            return
        from study.pool.forming import candidate
        from study.pool.match import participant_vector

        index = self._index
        point = participant_vector(c, p, index.types)
        positions, distances = nearest_first(index, point, min(len(index), CANDIDATES + 1))
        for rank, (position, distance) in enumerate(zip(positions, distances, strict=True)):
            yield candidate(self.pool.spec, self.pool.spec.teammate, index, int(position),
                            float(distance), rank, c, p)

    @property
    def fea_bounds(self) -> tuple[float, float] | None:
        return self.pool.fea_bounds


# Pool members tried, nearest first, for one whose live team the two robots treat differently.
CANDIDATES = 500


def live_team(match: TeammateMatch, c: np.ndarray, p: np.ndarray) -> Team:
    """The participant in the matched member's role, the agent teammate in the other."""
    human = match.participant_human
    team_c, team_p = np.zeros((2, len(c))), np.zeros((2, len(c)))
    team_c[human], team_p[human] = c, p
    team_c[1 - human], team_p[1 - human] = match.teammate_c, match.teammate_p
    return Team(team_c, team_p)


def algorithm_for(condition: Condition, pool_bounds: tuple[float, float] | None) -> Algorithm:
    """The condition's objective; FEA takes the protocol's bounds or else the pool's."""
    if condition.algorithm != "fea":
        return Algorithm(condition.algorithm)
    bounds = condition.fea_bounds or pool_bounds
    if bounds is None:
        raise ValueError(f"condition {condition.id}: the pool has no FEA bounds; give "
                         "fea_bounds = [lo, hi] in the protocol")
    return Algorithm("fea", w=condition.w, lo=bounds[0], hi=bounds[1])


def session_row(protocol: Protocol, condition: Condition, team: Team, human: int,
                algorithm: Algorithm) -> tuple[dict[str, Any], Policy]:
    """Solve the condition's policy for the live team; the session row records it."""
    policy = solve(team, algorithm, protocol.kits, condition.round_order)
    is_fea = algorithm.name == "fea"
    row = {"kind": "collaborative", "condition": condition.id,
           "algorithm": algorithm.name, "robot": condition.robot,
           "w": algorithm.w if is_fea else None,
           "fea_lo": algorithm.lo if is_fea else None,
           "fea_hi": algorithm.hi if is_fea else None,
           "round_order": condition.round_order, "participant_human": human,
           "team_c": json.dumps(team.c.tolist()), "team_p": json.dumps(team.p.tolist()),
           "goal": json.dumps(policy.goal_allocation.tolist()),
           "plan": json.dumps([list(types) for types in policy.plan]),
           "reward": policy.reward, "rounds": protocol.rounds}
    return row, policy


def policy_of(protocol: Protocol, session: dict[str, Any]) -> Policy:
    """Solve a stored session's policy again (after a restart): same inputs, same policy."""
    team = Team(np.array(json.loads(session["team_c"])), np.array(json.loads(session["team_p"])))
    if session["algorithm"] == "fea":
        algorithm = Algorithm("fea", w=session["w"], lo=session["fea_lo"], hi=session["fea_hi"])
    else:
        algorithm = Algorithm(session["algorithm"])
    return solve(team, algorithm, protocol.kits, session["round_order"])
