"""Forming the team after practice: the participant's capabilities, the teammate, the
robots' policies for both sessions."""

from __future__ import annotations

import json

import numpy as np

from study.decorator import coefficient_from_speed
from study.protocol import TASK_NAMES, Protocol
from study.solver import Policy
from study.storage import Storage
from study.web.teammate import TeammateSource, algorithm_for, live_team, session_row


class TeamFormation:
    """Teammate choice of ``Journey`` (a mixin: it shares the journey's protocol, database,
    teammate source and solved policies)."""

    protocol: Protocol
    storage: Storage
    teammates: TeammateSource
    policies: dict[int, Policy]

    def _measure_capabilities(self, participant_id: int, now: float) -> np.ndarray:
        """The second practice round of each type gives the capability coefficient."""
        practice = self._session(participant_id, 0)
        values = np.zeros(len(TASK_NAMES))
        for task_type, number in self.protocol.measured_practice_rounds().items():
            row = self.storage.one("SELECT * FROM rounds WHERE session_id = ? AND number = ?",
                                   (practice["id"], number))
            speed = row["participant_cookies"] / row["seconds"]  # type: ignore[index]
            reference = self.protocol.cookies[task_type].reference_speed
            values[task_type] = coefficient_from_speed(speed, reference)
            self.storage.insert("measurements", {
                "participant_id": participant_id, "kind": "capability", "task_type": task_type,
                "task_name": TASK_NAMES[task_type], "value": values[task_type],
                "round_id": row["id"], "cookies": row["participant_cookies"],  # type: ignore[index]
                "seconds": row["seconds"], "speed": speed,  # type: ignore[index]
                "reference_speed": reference, "at": now})
        return values

    def _choose_teammate(self, participant_id: int, now: float) -> None:
        """Match the participant in the pool, record ``d`` and solve both sessions."""
        from study.pool import NoEligibleTeam

        c = self._measure_capabilities(participant_id, now)
        rows = self.storage.all("SELECT task_type, value FROM measurements WHERE "
                                "participant_id = ? AND kind = 'preference' ORDER BY task_type",
                                (participant_id,))
        p = np.array([row["value"] for row in rows])
        try:
            match = self.teammates.match(c, p)
        except NoEligibleTeam:
            self._advance(participant_id, "unmatched", now)
            return
        self.storage.insert("teammates", {
            "participant_id": participant_id, "pool": self.teammates.name,
            "pool_team": int(match.team_index), "participant_human": int(match.participant_human),
            "distance": float(match.distance),
            **{f"c_{name}": float(match.teammate_c[j]) for j, name in enumerate(TASK_NAMES)},
            **{f"p_{name}": float(match.teammate_p[j]) for j, name in enumerate(TASK_NAMES)},
            "at": now})
        team = live_team(match, c, p)
        participant = self.storage.one("SELECT * FROM participants WHERE id = ?",
                                       (participant_id,))
        for number, condition_id in enumerate(json.loads(participant["condition_order"]), 1):  # type: ignore[index]
            condition = self.protocol.condition(condition_id)
            algorithm = algorithm_for(condition, self.teammates.fea_bounds)
            row, policy = session_row(self.protocol, condition, team,
                                      int(match.participant_human), algorithm)
            session_id = self.storage.insert("sessions", {
                **row, "participant_id": participant_id, "number": number, "created_at": now})
            self.policies[session_id] = policy
        self._advance(participant_id, "teammate", now)
