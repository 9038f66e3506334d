"""Choosing the agent teammate and solving the robot's policies for the live team.

The live team is the participant's measured coefficients and the agent teammate's, placed
in the roles the matched pool team had (the participant takes the matched member's human
index), so the policies the robot follows are those the pool's simulation studied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from study.allocation.algorithms import declaration, from_declaration
from study.allocation.model import Algorithm, Team
from study.allocation.solver import Policy, solve
from study.pool.placing import (
    CANDIDATES,
    Member,
    Placement,
    PoolMembers,
    TeammateSource,
    algorithm_for,
    live_team,
)
from study.protocol.loader import Condition, Protocol

__all__ = ["CANDIDATES", "Placement", "Policies", "PoolTeammates", "TeammateMatch",
           "TeammateSource", "algorithm_for", "live_team", "policy_of", "session_row"]


# The pure part (the pool as a teammate source, the live team, each condition's
# objective) lives in ``study.pool.placing``, shared with ``study calibrate``.
TeammateMatch = Member


@dataclass
class PoolTeammates(PoolMembers):
    """A loaded ``study.pool.Pool`` and the file it came from, built for a protocol."""

    @classmethod
    def for_protocol(cls, protocol: Protocol, directory: Path) -> PoolTeammates:
        """Build the protocol's pool on first use (cached under ``directory``) and load it."""
        from study.pool import Pool, ensure_pool

        path = ensure_pool(protocol.pool_spec(), directory)
        return cls(Pool.load(path), str(path))

    def prepare(self, seats_agents: bool = False) -> None:
        """Index the admitted members now (a fifth of a second on a 500,000-team pool), at
        start, rather than inside the first teammate choice's write transaction (the app
        calls this on a source that has it). A lobby that seats agents (``seats_agents``),
        and every pool of larger teams, takes them from the admitted teams
        (``study.web.participant.real_teams.agents``): those are gathered now too."""
        if self.pool.spec.humans == 2:
            _ = self._index
        if seats_agents or self.pool.spec.humans != 2:
            _ = self.pool.admitted


def session_row(protocol: Protocol, condition: Condition, team: Team, human: int,
                algorithm: Algorithm, policy: Policy | None = None,
                ) -> tuple[dict[str, Any], Policy]:
    """The condition's policy for the live team (solved unless given, as a first session);
    the session row records it, with the algorithm as data and, for one with memory, the
    kits of the earlier sessions it counted."""
    if policy is None:
        policy = solve(team, algorithm, protocol.kits, condition.round_order)
    bounded = algorithm.uses_bounds
    history = policy.history if algorithm.memory else None
    row = {"kind": "collaborative", "condition": condition.id,
           "algorithm": algorithm.name, "robot": condition.robot,
           "w": algorithm.w if algorithm.name == "fea" else None,
           "fea_lo": algorithm.lo if bounded else None,
           "fea_hi": algorithm.hi if bounded else None,
           "algorithm_declaration": json.dumps(declaration(algorithm), sort_keys=True),
           "history": None if history is None else json.dumps(history.astype(int).tolist()),
           "round_order": condition.round_order, "participant_human": human,
           "team_c": json.dumps(team.c.tolist()), "team_p": json.dumps(team.p.tolist()),
           "goal": json.dumps(policy.goal_allocation.tolist()),
           "plan": json.dumps([list(types) for types in policy.plan]),
           "reward": policy.reward, "rounds": protocol.rounds}
    return row, policy


def policy_of(protocol: Protocol, session: dict[str, Any]) -> Policy:
    """Solve a stored session's policy again (after a restart): same inputs (the algorithm
    as recorded, the earlier sessions' kits it counted), same policy."""
    team = Team(np.array(json.loads(session["team_c"])), np.array(json.loads(session["team_p"])))
    if session.get("algorithm_declaration"):
        algorithm = from_declaration(json.loads(session["algorithm_declaration"]),
                                     protocol.path.parent)
    elif session["algorithm"] == "fea":
        algorithm = Algorithm("fea", w=session["w"], lo=session["fea_lo"], hi=session["fea_hi"])
    else:
        algorithm = Algorithm(session["algorithm"])
    history = session.get("history")
    return solve(team, algorithm, protocol.kits, session["round_order"],
                 history=None if not history else np.array(json.loads(history), dtype=float))


class Policies:
    """The robot's policy of each session: kept as solved when the team is formed, solved
    again from the stored session after a restart (``policy_of``)."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.solved: dict[int, Policy] = {}

    def of(self, session: dict[str, Any]) -> Policy:
        """The session's policy, solved once per process."""
        if session["id"] not in self.solved:
            self.solved[session["id"]] = policy_of(self.protocol, session)
        return self.solved[session["id"]]

    def keep(self, session_id: int, policy: Policy) -> None:
        """The policy the team's formation solved for the session."""
        self.solved[session_id] = policy
