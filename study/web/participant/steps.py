"""Page steps: consent, preferences, questionnaires, debrief and withdrawal.

``submit`` and ``withdraw`` run inside the journey's event transaction for one accepted
message of that name; a refusal raises ``Rejected`` and nothing is written. The other
withdrawals come from outside a participant's page: the private link of the final page
(``withdraw_with_link``) and the experimenter's console (``withdraw_by_console``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from typing import Any

from study.protocol.loader import Protocol, preference_coefficient
from study.storage.database import Storage
from study.web.console import holds
from study.web.console.balance import balanced_order
from study.web.participant import pages, withdrawal
from study.web.participant.outbox import Outbox
from study.web.participant.pages import ROUND_STEPS, next_step, session_number, steps_of
from study.web.participant.real_teams import RealTeams
from study.web.participant.records import Records
from study.web.participant.rejections import Rejected


def declined_mark(recruitment_id: str | None) -> str | None:
    """What a declined consent keeps of the recruitment id: its hash, so the same id finds
    the declined participant again (docs/recruitment.md) and the id itself is gone."""
    if recruitment_id is None:
        return None
    return "sha256:" + hashlib.sha256(f"declined:{recruitment_id}".encode()).hexdigest()


class Steps:
    """The page steps of one journey: the ``submit`` and ``withdraw`` messages, and the
    withdrawals from outside a participant's page."""

    def __init__(self, protocol: Protocol, storage: Storage, clock: Callable[[], float],
                 records: Records, teams: RealTeams, outbox: Outbox) -> None:
        self.protocol = protocol
        self.storage = storage
        self.clock = clock
        self.records = records
        self.teams = teams
        self.outbox = outbox

    def submit(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        step, data = payload.get("step"), payload.get("data", {})
        if not isinstance(step, str) or not isinstance(data, dict):
            raise Rejected("malformed", "submit needs step (text) and data (object)")
        if step != participant["step"]:
            raise Rejected("out-of-order", f"the participant is at {participant['step']}, "
                                           f"not {step}")
        if step in ROUND_STEPS:
            raise Rejected("out-of-order", f"{step} is finished by its rounds, not by submit")
        pid = participant["id"]
        if step == "consent":
            self._consent(participant, data, now)
        elif step == "preferences":
            self._preferences(pid, data, now)
        elif step.startswith("questionnaire") or step == "post":
            self._answers(participant, step, data, now)
        elif step == "debrief":
            self._debrief(participant, data, now)
        elif step == "lobby" and self.teams.enabled:
            self.outbox.queue_states(self.teams.leave_lobby(participant, data, now))
        else:
            self.records.advance(pid, next_step(self.protocol, step), now)

    def _consent(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        agree = data.get("agree")
        if not isinstance(agree, bool):
            raise Rejected("malformed", "data.agree must be true or false")
        if agree:  # the condition order is counterbalanced among those who consented
            self.storage.update("participants", participant["id"], {
                "consent": "given", "consent_at": now,
                "condition_order": json.dumps(balanced_order(self.storage, self.protocol))})
            self.records.advance(participant["id"], "themes", now)
        else:
            self.storage.erase_participant(participant["id"], {
                "step": "declined", "consent": "declined", "consent_at": now,
                "recruitment_id": declined_mark(participant["recruitment_id"])})

    def _preferences(self, pid: int, data: dict[str, Any], now: float) -> None:
        ratings = pages.check_ratings(self.protocol, data)
        points = self.protocol.preference_scale.points
        for theme in self.protocol.themes:
            self.storage.insert("answers", {
                "participant_id": pid, "questionnaire": "preferences", "item": theme.id,
                "label": theme.name, "value_number": ratings[theme.id], "at": now})
        themes, rule = self.protocol.assign_themes(ratings)
        self.storage.update("participants", pid, {"themes": json.dumps(themes),
                                                  "themes_rule": rule,
                                                  "tie_preferred": self._tie_draw(ratings,
                                                                                  themes)})
        for cookie in self.protocol.cookies:
            theme = themes[cookie.task_type]
            self.storage.insert("measurements", {
                "participant_id": pid, "kind": "preference", "task_type": cookie.task_type,
                "task_name": cookie.name,
                "value": preference_coefficient(ratings[theme], points),
                "theme": theme, "rating": ratings[theme], "at": now})
        self.storage.insert("sessions", {"participant_id": pid, "number": 0, "kind": "practice",
                                         "rounds": len(self.protocol.practice),
                                         "created_at": now})
        self.records.advance(pid, "practice", now)

    def _tie_draw(self, ratings: dict[str, int], themes: tuple[str, ...]) -> int | None:
        """Under ``tied_ratings = "random"``, for equal ratings of the cookies' themes: the
        task type drawn to count as preferred, so no fixed rule gives tied people a role."""
        if self.protocol.tied_ratings != "random" or len({ratings[t] for t in themes}) > 1:
            return None
        return secrets.randbelow(len(themes))

    def _answers(self, participant: dict[str, Any], step: str, data: dict[str, Any],
                 now: float) -> None:
        number = session_number(step)
        session = self.records.session(participant["id"], number) if number else None
        robot = session["robot"] if session else None
        robots = pages.robots_met(self.storage, participant["id"]) if step == "post" else None
        for item, value_number, value_text in pages.check_answers(self.protocol, step, data,
                                                                   robot, robots):
            self.storage.insert("answers", {
                "participant_id": participant["id"], "questionnaire": step.replace(
                    "questionnaire", "session"),
                "session_id": session["id"] if session else None,
                "condition": session["condition"] if session else None, "item": item.id,
                "label": item.label, "value_number": value_number, "value_text": value_text,
                "at": now})
        self.records.advance(participant["id"], next_step(self.protocol, step), now)

    def _debrief(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        consent = data.get("consent")
        if not isinstance(consent, bool):
            raise Rejected("malformed", "data.consent must be true or false")
        if not consent:
            self.withdraw(participant, data, now)
            return
        self.storage.update("participants", participant["id"], {"data_consent": "given"})
        self.records.advance(participant["id"], "done", now)

    def withdraw(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        """Delete everything about the participant but the fact of the withdrawal."""
        if participant["consent"] != "given":
            raise Rejected("out-of-order", "nothing to withdraw before consent")
        # the seat goes to an agent, the teammates are told; then the person's rows go
        others = self.teams.drop(participant["id"], "withdrawn", now) - {participant["id"]}
        furthest = self._furthest_step(participant["id"])
        self.storage.erase_participant(participant["id"], {
            "step": "withdrawn", "data_consent": "withdrawn", "withdrawn_at": now,
            "withdrawn_from": furthest})
        self.outbox.queue_states(others)

    def _furthest_step(self, participant_id: int) -> str | None:
        """The furthest journey step the step log shows the participant entered: kept when
        the log is erased, so the report's flow places a withdrawal where it happened."""
        entered = {row["step"] for row in self.storage.all(
            "SELECT DISTINCT step FROM steps WHERE participant_id = ?", (participant_id,))}
        reached = [step for step in steps_of(self.protocol) if step in entered]
        return reached[-1] if reached else None

    def withdraw_with_link(self, token: str) -> bool:
        """Withdraw the participant whose final page gave this token; False when the token
        is unknown (never issued, or already used: it is erased with the data)."""
        with self.storage.event():
            participant = withdrawal.participant_of(self.storage, token)
            if participant is None or participant["consent"] != "given":
                return False
            self.withdraw(participant, {}, self.clock())
        self.outbox.announce(participant["code"])
        return True

    def withdraw_by_console(self, code: str, reason: str, remote_addr: str | None) -> None:
        """The experimenter withdraws a participant (e.g. asked to by email): the data is
        erased as for the participant's own withdrawal, and the console's log keeps the
        code, the reason and when, but no link to the participant's (now empty) rows."""
        if not reason.strip():
            raise Rejected("invalid-answer", "a withdrawal needs a reason")
        holds.ensure_tables(self.storage)
        with self.storage.event() as db:
            participant = self.storage.participant(code)
            if participant is None:
                raise Rejected("unknown-participant", code)
            now = self.clock()
            self.withdraw(participant, {}, now)
            db["console_actions"].insert({
                "at": now, "action": "withdraw", "participant_id": None, "code": code,
                "note": reason[:holds.NOTE_LIMIT], "detail": json.dumps({}),
                "remote_addr": remote_addr})
        self.outbox.announce(code)
