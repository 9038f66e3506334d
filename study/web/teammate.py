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


class TeammateSource(Interface):
    """Where teammates come from: a pool, or anything answering the same questions."""

    name: str

    def match(self, c: np.ndarray, p: np.ndarray) -> TeammateMatch: ...

    def ranked(self, c: np.ndarray, p: np.ndarray) -> Iterator[TeammateMatch]: ...

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

    def match(self, c: np.ndarray, p: np.ndarray) -> TeammateMatch:
        return self.pool.match(c, p)

    def prepare(self) -> None:
        """Index the admitted members now (a fifth of a second on a 500,000-team pool), at
        start, rather than inside the first teammate choice's write transaction (the app
        calls this on a source that has it)."""
        _ = self._members

    @cached_property
    def _members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pool rows, member (human index) and ``[c..., p...]`` of every member the
        protocol's teammate filter admits."""
        role = self.pool.spec.teammate.role
        teams = np.flatnonzero(self.pool.eligible())
        if role == "any":
            teams, members = np.repeat(teams, 2), np.tile(np.array([0, 1]), len(teams))
        else:
            top = self.pool.column("most_capable_human")[teams].astype(np.intp)
            members = top if role == "most-capable" else 1 - top
        c, p = self.pool.coefficients
        return teams, members, np.concatenate([c[teams, members], p[teams, members]], axis=1)

    def ranked(self, c: np.ndarray, p: np.ndarray) -> Iterator[TeammateMatch]:
        """Every admitted member, nearest to the participant first (ties to the lowest
        team, then the lowest human): the candidates after the nearest one."""
        teams, members, vectors = self._members
        distances = np.sqrt(((vectors - np.concatenate([c, p])) ** 2).sum(axis=1))
        pool_c, pool_p = self.pool.coefficients
        for k in np.lexsort((members, teams, distances)):
            team, other = int(teams[k]), 1 - int(members[k])
            yield RankedMatch(team, int(members[k]), pool_c[team, other].copy(),
                              pool_p[team, other].copy(), float(distances[k]))

    @property
    def fea_bounds(self) -> tuple[float, float] | None:
        return self.pool.fea_bounds


@dataclass(frozen=True)
class RankedMatch:
    """One candidate teammate (``TeammateMatch``) from ``PoolTeammates.ranked``."""

    team_index: int
    participant_human: int
    teammate_c: np.ndarray
    teammate_p: np.ndarray
    distance: float


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
