"""Founding a team: its seats, its condition order, and every member's sessions."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.allocation.model import Team
from study.allocation.solver import Policy
from study.pool.placing import session_policies
from study.protocol.loader import TASK_NAMES, Protocol
from study.protocol.orders import counterbalanced
from study.storage.database import Storage, to_json
from study.web.participant.agent_pool import algorithm_for, session_row
from study.web.participant.real_teams.agents import SeatFill, live_type


@dataclass(frozen=True)
class Person:
    """A measured person waiting in the lobby."""

    participant_id: int
    c: tuple[float, ...]
    p: tuple[float, ...]


class Founding:
    """Writes a new team, in the caller's transaction."""

    def __init__(self, protocol: Protocol, storage: Storage, fea_bounds: Callable[[], Any],
                 advance: Callable[[int, str, float], None]) -> None:
        self.protocol = protocol
        self.storage = storage
        self.fea_bounds = fea_bounds
        self.advance = advance

    def person(self, participant_id: int) -> Person:
        rows = self.storage.all("SELECT kind, task_type, value FROM measurements WHERE "
                                "participant_id = ? ORDER BY task_type", (participant_id,))
        c = tuple(r["value"] for r in rows if r["kind"] == "capability")
        p = tuple(r["value"] for r in rows if r["kind"] == "preference")
        return Person(participant_id, c, p)

    def found(self, people: list[Person], fill: SeatFill | None, formed_by: str,
              now: float) -> int:
        """The team of ``people`` (in arrival order, seat by seat unless ``fill`` places
        them beside its agents): seats, sessions, and every member on to the team page."""
        design = self.protocol.team
        assert design is not None
        if fill is None:
            c = np.array([person.c for person in people])
            p = np.array([person.p for person in people])
            seat_of = tuple(range(len(people)))
        else:
            c, p, seat_of = fill.c, fill.p, fill.seat_of
        order = self._condition_order()
        team_id = self.storage.insert("teams", {
            "protocol": self.protocol.name, "humans": design.humans, "persons": len(people),
            "formation": design.formation, "formed_at": now, "formed_by": formed_by,
            "condition_order": json.dumps(order), "live_type": live_type(
                c, p, self.protocol.pool.most_capable_reading),
            "team_c": to_json(c.tolist()), "team_p": to_json(p.tolist()), "session": 0})
        person_in = dict(zip(seat_of, people, strict=True))
        for seat in range(design.humans):
            person = person_in.get(seat)
            self.storage.insert("seats", {
                "team_id": team_id, "seat": seat, "kind": "person" if person else "agent",
                "participant_id": person.participant_id if person else None,
                **{f"c_{name}": float(c[seat][j]) for j, name in enumerate(TASK_NAMES)},
                **{f"p_{name}": float(p[seat][j]) for j, name in enumerate(TASK_NAMES)},
                "pool_team": fill.pool_team if fill is not None and person is None else None,
                "joined_at": now})
        sessions = self._sessions(Team(c, p), order)
        for seat, person in person_in.items():
            self._enrol(person.participant_id, team_id, seat, order, sessions, now)
        return team_id

    def _condition_order(self) -> list[str]:
        """Counterbalanced over teams: the order fewest teams hold (the listed one first)."""
        orders = counterbalanced([condition.id for condition in self.protocol.conditions],
                                 self.protocol.condition_order)
        held = {row["condition_order"]: row["n"] for row in self.storage.all(
            "SELECT condition_order, count(*) AS n FROM teams WHERE protocol = ? "
            "GROUP BY condition_order", (self.protocol.name,))}
        return min(orders, key=lambda order: held.get(json.dumps(order), 0))

    def _sessions(self, team: Team, order: list[str]) -> list[tuple[dict[str, Any], Policy]]:
        """Each condition's policy, solved once for the whole team, in session order (an
        algorithm with memory counts the kits of the sessions before it)."""
        conditions = [self.protocol.condition(condition_id) for condition_id in order]
        policies = session_policies(team, conditions, self.fea_bounds(), self.protocol.kits)
        return [session_row(self.protocol, condition, team, 0,
                            algorithm_for(condition, self.fea_bounds()), policy)
                for condition, policy in zip(conditions, policies, strict=True)]

    def _enrol(self, participant_id: int, team_id: int, seat: int, order: list[str],
               sessions: list[tuple[dict[str, Any], Policy]], now: float) -> None:
        for number, (row, _) in enumerate(sessions, 1):
            self.storage.insert("sessions", {
                **row, "participant_human": seat, "participant_id": participant_id,
                "number": number, "created_at": now, "team_id": team_id})
        plans = {row["plan"] for row, _ in sessions}
        self.storage.update("participants", participant_id, {
            "condition_order": json.dumps(order), "robots_identical": int(len(plans) < 2)})
        self.storage.write("UPDATE lobby SET outcome = 'team', team_id = ?, left_at = ? "
                           "WHERE participant_id = ?", (team_id, now, participant_id))
        self.advance(participant_id, "teammate", now)
