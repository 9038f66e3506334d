"""The rows every part of the journey reads or writes alike: a participant's session, a
session's last round, and a step entered (with its entry in the step log)."""

from __future__ import annotations

from typing import Any

from study.storage.database import Storage
from study.web.participant import withdrawal


class Records:
    """A participant's sessions, rounds and steps in the study's database."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def session(self, participant_id: int, number: int) -> dict[str, Any]:
        """The participant's session ``number`` (0 is practice)."""
        return self.storage.one("SELECT * FROM sessions WHERE participant_id = ? AND number = ?",
                                (participant_id, number))  # type: ignore[return-value]

    def last_round(self, session_id: int) -> dict[str, Any] | None:
        """The session's latest round, running or closed; None before its first."""
        return self.storage.one("SELECT * FROM rounds WHERE session_id = ? "
                                "ORDER BY number DESC LIMIT 1", (session_id,))

    def advance(self, participant_id: int, step: str, now: float) -> None:
        """Move the participant to ``step`` and log it; reaching ``done`` issues the
        private withdrawal link of the final page."""
        values: dict[str, Any] = {"step": step}
        if step == "done":
            values["finished_at"] = now
            with self.storage.event() as db:
                withdrawal.issue(db, participant_id, now)
        self.storage.update("participants", participant_id, values)
        self.storage.insert("steps", {"participant_id": participant_id, "step": step, "at": now})
