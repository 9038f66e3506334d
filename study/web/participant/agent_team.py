"""Forming the team after practice: the participant's capabilities, the teammate, the
robots' policies for every session (one per condition)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from study.pool.placing import Placed, clipped, place, tied
from study.protocol.loader import TASK_NAMES, Protocol
from study.storage.database import Storage
from study.task.cookies import target
from study.task.decorator import HIGHEST, LOWEST, coefficient_from_speed
from study.web.participant import rounds
from study.web.participant.agent_pool import (
    Policies,
    TeammateSource,
    algorithm_for,
    session_row,
)
from study.web.participant.outbox import Outbox
from study.web.participant.progress import RoundSpeed, not_a_person, round_speed
from study.web.participant.real_teams import RealTeams
from study.web.participant.records import Records

# A measured round that downtime cut to less than this share of its length is pooled
# with the earlier practice round of its cookie type (each over the time the server was up).
MIN_MEASURED_SHARE = 0.5


class AgentTeam:
    """Forming the team of a participant whose practice ended: the measured capabilities,
    then the agent teammate and the robots' policies (or, under ``[team]``, the lobby of
    ``real_teams``).

    The round scheduler only closes the last practice round; the team is formed afterwards
    in a transaction of its own (``form_team``), so matching and solving never delay other
    participants' deadlines. A crash in between leaves a finished practice session and no
    teammate, which ``form_pending_teams`` completes at the next start.
    """

    def __init__(self, protocol: Protocol, storage: Storage, clock: Callable[[], float],
                 teammates: TeammateSource, records: Records, teams: RealTeams,
                 policies: Policies, outbox: Outbox,
                 background: Callable[[Callable[[], None]], Any]) -> None:
        self.protocol = protocol
        self.storage = storage
        self.clock = clock
        self.teammates = teammates
        self.records = records
        self.teams = teams
        self.policies = policies
        self.outbox = outbox
        self.background = background

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
            now = self.clock()
            c, measured = self._measure_capabilities(participant_id, now)
            if self._unmatched_for_clip(c, measured) or self._unmatched_for_tie(participant_id):
                self.records.advance(participant_id, "unmatched", now)  # measured, no team
                changed = {participant_id}
            elif self.protocol.team is not None:  # measured, they wait for their team
                changed = self.teams.enter_lobby(participant_id, now)
            else:
                self._choose_teammate(participant_id, c, now)
                changed = {participant_id}
        self.outbox.push_states(changed)

    def form_pending_teams(self) -> int:
        """Form the teams that a crash left unformed; returns how many."""
        waiting = self.storage.all(
            "SELECT p.id FROM participants p JOIN sessions s ON s.participant_id = p.id "
            "AND s.number = 0 WHERE p.step = 'practice' AND s.finished_at IS NOT NULL")
        for row in waiting:
            self._form_team_now(row["id"])
        return len(waiting)

    def _preference_values(self, participant_id: int) -> np.ndarray:
        rows = self.storage.all("SELECT task_type, value FROM measurements WHERE "
                                "participant_id = ? AND kind = 'preference' ORDER BY task_type",
                                (participant_id,))
        return np.array([row["value"] for row in rows])

    def _unmatched_for_clip(self, c: np.ndarray, measured: bool) -> bool:
        """``clipped_capability = "unmatched"``: a clipped capability, or a practice no
        person's page could have sent (not ``measured``), is not the participant's, so no
        team (agent teammate or real team) is formed on it."""
        return self.protocol.clipped_capability == "unmatched" and (
            clipped(c) or not measured)

    def _unmatched_for_tie(self, participant_id: int) -> bool:
        """``tied_ratings = "unmatched"``: equal ratings say nothing of the preference a
        role needs, so no team is formed on them."""
        return self.protocol.tied_ratings == "unmatched" and tied(
            self._preference_values(participant_id))

    def _measure_capabilities(self, participant_id: int,
                              now: float) -> tuple[np.ndarray, bool]:
        """The second practice round of each type gives the capability coefficient: its
        speed, the unfinished cookie counted by its correct fraction (``progress``). A round
        no person's page could have sent (``progress.not_a_person``) is flagged instead of
        measured: no speed, ``clipped`` as a value that is not the participant's, its value
        the clipped claim, kept as a clipped one is. Returns the values and whether every
        round was measured."""
        practice = self.records.session(participant_id, 0)
        values = np.zeros(len(TASK_NAMES))
        every_round_measured = True
        for task_type, number in self.protocol.measured_practice_rounds().items():
            row = self._practice_round(practice["id"], number)
            measured = self._measured_speed(practice["id"], task_type, row)
            implausible = not_a_person(measured, target(self.protocol, task_type, row["theme"]))
            reference = self.protocol.cookies[task_type].reference_speed
            # in the protocol's own cookies per second, whichever theme the round carried
            scale = rounds.theme_scale(self.protocol, task_type, row["theme"])
            speed = measured.speed * scale
            values[task_type] = coefficient_from_speed(speed, reference)
            every_round_measured = every_round_measured and implausible is None
            self.storage.insert("measurements", {
                "participant_id": participant_id, "kind": "capability", "task_type": task_type,
                "task_name": TASK_NAMES[task_type], "value": values[task_type],
                "round_id": row["id"], "cookies": measured.cookies,
                "fraction": measured.fraction, "seconds": measured.seconds,
                "speed": None if implausible else speed, "theme_scale": scale,
                "reference_speed": reference, "implausible": implausible,
                "clipped": int(implausible is not None
                               or not LOWEST < speed / reference < HIGHEST),
                "cut_by_downtime": int(measured.cut_by_downtime), "at": now})
        return values, every_round_measured

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

    def _choose_teammate(self, participant_id: int, c: np.ndarray, now: float) -> None:
        """Place the participant, measured at ``c``, by the protocol's teammate rule, record
        the placement and solve every session (``docs/pool.md``, "Forming the team under
        study")."""
        from study.pool import NoEligibleTeam

        p = self._preference_values(participant_id)
        participant = self.storage.one("SELECT * FROM participants WHERE id = ?",
                                       (participant_id,))
        conditions = [self.protocol.condition(condition_id) for condition_id
                      in json.loads(participant["condition_order"])]  # type: ignore[index]
        try:
            placed = place(self.teammates, c, p, conditions, self.protocol.kits,
                           participant["tie_preferred"])  # type: ignore[index]
        except NoEligibleTeam:
            placed = None
        if placed is None:
            self.records.advance(participant_id, "unmatched", now)
            return
        self._record_placement(participant_id, placed, now)
        human = int(placed.chosen.match.participant_human)
        for number, (condition, policy) in enumerate(zip(conditions, placed.policies,
                                                         strict=True), 1):
            row, _ = session_row(self.protocol, condition, placed.team, human,
                                 algorithm_for(condition, self.teammates.fea_bounds), policy)
            session_id = self.storage.insert("sessions", {
                **row, "participant_id": participant_id, "number": number, "created_at": now})
            self.policies.keep(session_id, policy)
        # Two robots with the same plan leave nothing to compare: flagged for the console
        # and the export (the study's manipulation failed for this participant).
        self.storage.update("participants", participant_id,
                            {"robots_identical": int(not placed.plans_differ)})
        self.records.advance(participant_id, "teammate", now)

    def _record_placement(self, participant_id: int, placed: Placed, now: float) -> None:
        chosen, nearest = placed.chosen, placed.nearest
        match = chosen.match
        self.storage.insert("teammates", {
            "participant_id": participant_id, "pool": self.teammates.name,
            "pool_team": int(match.team_index), "participant_human": int(match.participant_human),
            "distance": float(match.distance), "rule": placed.rule,
            "nearest_team": int(nearest.match.team_index),
            "nearest_human": int(nearest.match.participant_human),
            "nearest_distance": float(nearest.match.distance),
            "passed_over": chosen.rank, "passed_same_plan": placed.same_plan,
            "passed_off_target": chosen.rank - placed.same_plan,
            "live_type": chosen.live_type, "participant_role": chosen.participant_role,
            "target_met": int(chosen.meets_target),
            **{f"c_{name}": float(match.teammate_c[j]) for j, name in enumerate(TASK_NAMES)},
            **{f"p_{name}": float(match.teammate_p[j]) for j, name in enumerate(TASK_NAMES)},
            "at": now})
