"""Page steps: consent, preferences, questionnaires, debrief and withdrawal.

Each method runs inside the journey's event transaction for one accepted ``submit`` or
``withdraw`` message; a refusal raises ``Rejected`` and nothing is written.
"""

from __future__ import annotations

from typing import Any

from study.protocol import Protocol, preference_coefficient
from study.storage import Storage
from study.web import pages
from study.web.pages import ROUND_STEPS, STEPS, session_number
from study.web.rejections import Rejected


class Steps:
    """The page steps of ``Journey`` (a mixin: it shares the journey's protocol and database)."""

    protocol: Protocol
    storage: Storage

    def _session(self, participant_id: int, number: int) -> dict[str, Any]:
        return self.storage.one("SELECT * FROM sessions WHERE participant_id = ? AND number = ?",
                                (participant_id, number))  # type: ignore[return-value]

    def _advance(self, participant_id: int, step: str, now: float) -> None:
        values: dict[str, Any] = {"step": step}
        if step == "done":
            values["finished_at"] = now
        self.storage.update("participants", participant_id, values)
        self.storage.insert("steps", {"participant_id": participant_id, "step": step, "at": now})

    def _submit(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
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
        else:
            self._advance(pid, STEPS[STEPS.index(step) + 1], now)

    def _consent(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        agree = data.get("agree")
        if not isinstance(agree, bool):
            raise Rejected("malformed", "data.agree must be true or false")
        if agree:
            self.storage.update("participants", participant["id"],
                                {"consent": "given", "consent_at": now})
            self._advance(participant["id"], "themes", now)
        else:
            self.storage.erase_participant(participant["id"], {
                "step": "declined", "consent": "declined", "consent_at": now})

    def _preferences(self, pid: int, data: dict[str, Any], now: float) -> None:
        ratings = pages.check_ratings(self.protocol, data)
        points = self.protocol.preference_scale.points
        for theme in self.protocol.themes:
            self.storage.insert("answers", {
                "participant_id": pid, "questionnaire": "preferences", "item": theme.id,
                "label": theme.name, "value_number": ratings[theme.id], "at": now})
        for cookie in self.protocol.cookies:
            rating = ratings[cookie.theme]
            self.storage.insert("measurements", {
                "participant_id": pid, "kind": "preference", "task_type": cookie.task_type,
                "task_name": cookie.name, "value": preference_coefficient(rating, points),
                "theme": cookie.theme, "rating": rating, "at": now})
        self.storage.insert("sessions", {"participant_id": pid, "number": 0, "kind": "practice",
                                         "rounds": len(self.protocol.practice),
                                         "created_at": now})
        self._advance(pid, "practice", now)

    def _answers(self, participant: dict[str, Any], step: str, data: dict[str, Any],
                 now: float) -> None:
        number = session_number(step)
        session = self._session(participant["id"], number) if number else None
        robot = session["robot"] if session else None
        for item, value_number, value_text in pages.check_answers(self.protocol, step, data,
                                                                   robot):
            self.storage.insert("answers", {
                "participant_id": participant["id"], "questionnaire": step.replace(
                    "questionnaire", "session"),
                "session_id": session["id"] if session else None,
                "condition": session["condition"] if session else None, "item": item.id,
                "label": item.label, "value_number": value_number, "value_text": value_text,
                "at": now})
        self._advance(participant["id"], STEPS[STEPS.index(step) + 1], now)

    def _debrief(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        consent = data.get("consent")
        if not isinstance(consent, bool):
            raise Rejected("malformed", "data.consent must be true or false")
        if not consent:
            self._withdraw(participant, data, now)
            return
        self.storage.update("participants", participant["id"], {"data_consent": "given"})
        self._advance(participant["id"], "done", now)

    def _withdraw(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        """Delete everything about the participant but the fact of the withdrawal."""
        if participant["consent"] != "given":
            raise Rejected("out-of-order", "nothing to withdraw before consent")
        self.storage.erase_participant(participant["id"], {
            "step": "withdrawn", "data_consent": "withdrawn", "withdrawn_at": now})
