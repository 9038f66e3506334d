"""How a participant's study ended, and the link or code its end page gives
(``[recruitment.outcomes]``, docs/recruitment.md): each way out may send the participant
back to the platform with its own completion code, so a lab pays waiting, dropped and
unmatched people as their end deserves."""

from __future__ import annotations

from typing import Any

from study.protocol.loader import Protocol
from study.storage.database import Storage

# The steps that end a study by themselves; ``unmatched`` depends on where it happened.
STEP_OUTCOMES = {"done": "finished", "declined": "declined", "withdrawn": "withdrawn",
                 "dropped": "dropped"}
# A lobby wait that ended without a team: its timer ran out, or the person left after the
# wait (``study.web.participant.real_teams.lobby``).
LOBBY_ENDS = ("timeout", "left")


def outcome(storage: Storage, participant: dict[str, Any], hold: str | None) -> str | None:
    """The participant's way out of the study, or None while they are still in it."""
    step = participant["step"]
    if step in STEP_OUTCOMES:
        return STEP_OUTCOMES[step]
    if step == "unmatched":
        wait = storage.one("SELECT outcome FROM lobby WHERE participant_id = ?",
                           (participant["id"],))
        return "lobby_timeout" if wait and wait["outcome"] in LOBBY_ENDS else "unmatched"
    return "aborted" if hold == "aborted" else None


def end_of(protocol: Protocol, storage: Storage, participant: dict[str, Any],
           hold: str | None) -> dict[str, Any] | None:
    """What the end page offers: the outcome, its address (``{id}`` filled in with the
    recruitment id, which a declined consent keeps only as a hash and a withdrawal
    deletes) and its code."""
    name = outcome(storage, participant, hold)
    if name is None:
        return None
    link = protocol.recruitment.end(name)
    recruitment_id = None if name == "declined" else participant["recruitment_id"]
    return {"outcome": name, "url": link.address(recruitment_id), "code": link.code}
