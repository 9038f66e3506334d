"""Forming the team after practice: the participant's capabilities, the teammate, the
robots' policies for both sessions."""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from study.decorator import coefficient_from_speed
from study.protocol import TASK_NAMES, Condition, Protocol
from study.solver import Policy
from study.storage import Storage
from study.web.progress import PartialCookies, RoundSpeed, round_speed
from study.web.teammate import (
    TeammateMatch,
    TeammateSource,
    algorithm_for,
    live_team,
    session_row,
)

# Pool members tried, nearest first, for one whose live team the two robots treat differently.
CANDIDATES = 500
# A measured round that downtime cut to less than this share of its length is pooled
# with the earlier practice round of its cookie type (each over the time the server was up).
MIN_MEASURED_SHARE = 0.5


class TeamFormation(PartialCookies):
    """Teammate choice of ``Journey`` (a mixin: it shares the journey's protocol, database,
    teammate source and solved policies).

    The round scheduler only closes the last practice round; the team is formed afterwards
    in a transaction of its own (``form_team``), so matching and solving never delay other
    participants' deadlines. A crash in between leaves a finished practice session and no
    teammate, which ``form_pending_teams`` completes at the next start.
    """

    protocol: Protocol
    storage: Storage
    teammates: TeammateSource
    policies: dict[int, Policy]
    pushes: deque[tuple[str, str, dict[str, Any]]]
    clock: Callable[[], float]
    background: Callable[[Callable[[], None]], Any]

    def form_team(self, participant_id: int) -> None:
        """Ask for the team of a participant whose practice just ended, off the clock."""
        self.background(lambda: self._form_team_now(participant_id))

    def _form_team_now(self, participant_id: int) -> None:
        with self.storage.event():
            waiting = self.storage.one(
                "SELECT p.code FROM participants p JOIN sessions s ON s.participant_id = p.id "
                "AND s.number = 0 WHERE p.id = ? AND p.step = 'practice' "
                "AND s.finished_at IS NOT NULL", (participant_id,))
            if waiting is None:  # formed already, or the participant left
                return
            self._choose_teammate(participant_id, self.clock())
        self.pushes.append((waiting["code"], "state", self.state(waiting["code"])))
        self.flush()

    def form_pending_teams(self) -> int:
        """Form the teams that a crash left unformed; returns how many."""
        waiting = self.storage.all(
            "SELECT p.id FROM participants p JOIN sessions s ON s.participant_id = p.id "
            "AND s.number = 0 WHERE p.step = 'practice' AND s.finished_at IS NOT NULL")
        for row in waiting:
            self._form_team_now(row["id"])
        return len(waiting)

    def _measure_capabilities(self, participant_id: int, now: float) -> np.ndarray:
        """The second practice round of each type gives the capability coefficient: its
        speed, the unfinished cookie counted by its correct fraction (``progress``)."""
        practice = self._session(participant_id, 0)
        values = np.zeros(len(TASK_NAMES))
        for task_type, number in self.protocol.measured_practice_rounds().items():
            row = self._practice_round(practice["id"], number)
            measured = self._measured_speed(practice["id"], task_type, row)
            reference = self.protocol.cookies[task_type].reference_speed
            values[task_type] = coefficient_from_speed(measured.speed, reference)
            self.storage.insert("measurements", {
                "participant_id": participant_id, "kind": "capability", "task_type": task_type,
                "task_name": TASK_NAMES[task_type], "value": values[task_type],
                "round_id": row["id"], "cookies": measured.cookies,
                "fraction": measured.fraction, "seconds": measured.seconds,
                "speed": measured.speed, "reference_speed": reference,
                "cut_by_downtime": int(measured.cut_by_downtime), "at": now})
        return values

    def _practice_round(self, practice_id: int, number: int) -> dict[str, Any]:
        return self.storage.one("SELECT * FROM rounds WHERE session_id = ? AND number = ?",
                                (practice_id, number))  # type: ignore[return-value]

    def _measured_speed(self, practice_id: int, task_type: int,
                        row: dict[str, Any]) -> RoundSpeed:
        """The measured round's speed over the time the server was up; if downtime left
        less than ``MIN_MEASURED_SHARE`` of it, the first round of the type is added."""
        measured = round_speed(self.storage, row)
        if measured.seconds >= MIN_MEASURED_SHARE * row["seconds"]:
            return measured
        first = self.protocol.practice.index(task_type) + 1
        return round_speed(self.storage, self._practice_round(practice_id, first)) + measured

    def _choose_teammate(self, participant_id: int, now: float) -> None:
        """Match the participant in the pool, record ``d`` and solve both sessions: the
        nearest member whose live team gives the two robots different plans
        (``_distinct_robots``)."""
        from study.pool import NoEligibleTeam

        c = self._measure_capabilities(participant_id, now)
        rows = self.storage.all("SELECT task_type, value FROM measurements WHERE "
                                "participant_id = ? AND kind = 'preference' ORDER BY task_type",
                                (participant_id,))
        p = np.array([row["value"] for row in rows])
        participant = self.storage.one("SELECT * FROM participants WHERE id = ?",
                                       (participant_id,))
        conditions = [self.protocol.condition(condition_id) for condition_id
                      in json.loads(participant["condition_order"])]  # type: ignore[index]
        try:
            match, skipped, sessions = self._distinct_robots(c, p, conditions)
        except NoEligibleTeam:
            self._advance(participant_id, "unmatched", now)
            return
        self.storage.insert("teammates", {
            "participant_id": participant_id, "pool": self.teammates.name,
            "pool_team": int(match.team_index), "participant_human": int(match.participant_human),
            "distance": float(match.distance), "skipped": skipped,
            **{f"c_{name}": float(match.teammate_c[j]) for j, name in enumerate(TASK_NAMES)},
            **{f"p_{name}": float(match.teammate_p[j]) for j, name in enumerate(TASK_NAMES)},
            "at": now})
        for number, (row, policy) in enumerate(sessions, 1):
            session_id = self.storage.insert("sessions", {
                **row, "participant_id": participant_id, "number": number, "created_at": now})
            self.policies[session_id] = policy
        # Two robots with the same plan leave nothing to compare: flagged for the console
        # and the export (the study's manipulation failed for this participant).
        self.storage.update("participants", participant_id,
                            {"robots_identical": int(not _plans_differ(sessions))})
        self._advance(participant_id, "teammate", now)

    def _distinct_robots(self, c: np.ndarray, p: np.ndarray, conditions: list[Condition],
                         ) -> tuple[TeammateMatch, int, list[tuple[dict[str, Any], Policy]]]:
        """The nearest pool member (MODEL.md) unless the two robots would follow the same
        plan with it; then the nearest of the next ``CANDIDATES`` members with which they
        differ, if any. Returns the match, how many nearer members were skipped, and the
        sessions' rows and policies."""
        nearest = self.teammates.match(c, p)
        sessions = self._live_sessions(nearest, c, p, conditions)
        if _plans_differ(sessions):
            return nearest, 0, sessions
        ranked = itertools.islice(self.teammates.ranked(c, p), CANDIDATES)
        for skipped, candidate in enumerate(ranked):
            if (candidate.team_index, candidate.participant_human) == (
                    nearest.team_index, nearest.participant_human):
                continue
            tried = self._live_sessions(candidate, c, p, conditions)
            if _plans_differ(tried):
                return candidate, skipped, tried
        return nearest, 0, sessions

    def _live_sessions(self, match: TeammateMatch, c: np.ndarray, p: np.ndarray,
                       conditions: list[Condition]) -> list[tuple[dict[str, Any], Policy]]:
        team = live_team(match, c, p)
        return [session_row(self.protocol, condition, team, int(match.participant_human),
                            algorithm_for(condition, self.teammates.fea_bounds))
                for condition in conditions]


def _plans_differ(sessions: list[tuple[dict[str, Any], Policy]]) -> bool:
    return len({row["plan"] for row, _ in sessions}) > 1
