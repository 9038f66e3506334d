"""What the experimenter did to participants: pause, resume, abort, flag, with a note.

Statuses live in the study database next to the data they affect, so a restarted server
keeps a paused participant paused, and every action is logged in ``console_actions`` (an
audit trail exported with the data). The journey asks ``check_hold`` before applying a
participant's message; withdrawing is always allowed, as consent requires.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from study.web.participant.rejections import Rejected

STATUSES = ("active", "paused", "aborted")
ACTIONS = ("pause", "resume", "abort", "flag", "unflag", "note")
# Events a paused participant may still send: decorating and finishing a running round
# (its page stays on the round; the measure leaves the hold out), withdrawing.
ALLOWED_WHEN_PAUSED = ("cookie", "progress", "withdraw")
# The console actions that start and end a hold: time held is not decorating time.
HOLDING, RELEASING = ("pause", "abort"), ("resume",)
ALLOWED_WHEN_ABORTED = ("withdraw",)
NOTE_LIMIT = 2000

STATUS_COLUMNS = {"participant_id": int, "status": str, "flagged": int, "note": str,
                  "at": float}
ACTION_COLUMNS = {"id": int, "at": float, "action": str, "participant_id": int, "code": str,
                  "note": str, "detail": str, "remote_addr": str}


def ensure_tables(storage: Any) -> None:
    """Create the console's two tables if this database does not have them yet."""
    with storage.event() as db:
        db["console_status"].create(STATUS_COLUMNS, pk="participant_id",
                                    foreign_keys=[("participant_id", "participants")],
                                    not_null={"status", "flagged", "at"}, if_not_exists=True)
        db["console_actions"].create(ACTION_COLUMNS, pk="id",
                                     not_null={"at", "action"}, if_not_exists=True)


def status_of(storage: Any, participant_id: int) -> dict[str, Any]:
    """The participant's status row (active and unflagged when none was ever set, or in a
    database the console never opened). Asked for every message, so the table is queried
    rather than looked up first."""
    try:
        row = storage.one("SELECT * FROM console_status WHERE participant_id = ?",
                          (participant_id,))
    except sqlite3.OperationalError as error:
        if "no such table" not in str(error):
            raise
        row = None
    return row or {"status": "active", "flagged": 0, "note": None}


def held_intervals(storage: Any, participant_id: int, start: float,
                   end: float) -> list[tuple[float, float]]:
    """The parts of ``[start, end]`` the experimenter held the participant (paused, or
    aborted), from the console's log, in time order; none in a database the console never
    opened."""
    try:
        actions = storage.all(
            "SELECT at, action FROM console_actions WHERE participant_id = ? AND action IN "
            "('pause', 'resume', 'abort') ORDER BY at, id", (participant_id,))
    except sqlite3.OperationalError as error:
        if "no such table" not in str(error):
            raise
        return []
    held, since = [], None
    for row in actions:
        if row["action"] in RELEASING and since is not None:
            held.append((since, row["at"]))
            since = None
        elif row["action"] in HOLDING and since is None:
            since = row["at"]
    if since is not None:
        held.append((since, end))
    return [(max(begin, start), min(stop, end)) for begin, stop in held
            if stop > start and begin < end]


def check_hold(storage: Any, participant: dict[str, Any], event: str) -> None:
    """Refuse a participant's message while the experimenter holds them (the journey calls
    this before applying a message; the refusal is logged like any other)."""
    status = status_of(storage, participant["id"])["status"]
    if status == "paused" and event not in ALLOWED_WHEN_PAUSED:
        raise Rejected("paused", "the experimenter paused this participant")
    if status == "aborted" and event not in ALLOWED_WHEN_ABORTED:
        raise Rejected("aborted", "the experimenter ended this participant's session")


def apply_action(storage: Any, participant: dict[str, Any], action: str, note: str,
                 remote_addr: str | None, now: float) -> dict[str, Any]:
    """Change a participant's status or flag and log it, in one transaction."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    note = note[:NOTE_LIMIT]
    current = status_of(storage, participant["id"])
    if current["status"] == "aborted" and action in ("pause", "resume", "abort"):
        raise ValueError("an aborted participant stays aborted")
    status = {"pause": "paused", "resume": "active", "abort": "aborted"}.get(
        action, current["status"])
    flagged = {"flag": 1, "unflag": 0}.get(action, current["flagged"])
    row = {"participant_id": participant["id"], "status": status, "flagged": flagged,
           "note": note or current.get("note"), "at": now}
    with storage.event() as db:
        db["console_status"].upsert(row, pk="participant_id")
        db["console_actions"].insert(_action_row(action, participant, note, remote_addr, now,
                                                 {"status": status, "flagged": flagged}))
    return row


def log_action(storage: Any, action: str, note: str, remote_addr: str | None, now: float,
               detail: dict[str, Any] | None = None) -> None:
    """Log an experimenter action that concerns no single participant (links, exports)."""
    storage.insert("console_actions", _action_row(action, None, note, remote_addr, now,
                                                  detail or {}))


def _action_row(action: str, participant: dict[str, Any] | None, note: str,
                remote_addr: str | None, now: float, detail: dict[str, Any]) -> dict[str, Any]:
    return {"at": now, "action": action,
            "participant_id": participant["id"] if participant else None,
            "code": participant["code"] if participant else None, "note": note[:NOTE_LIMIT],
            "detail": json.dumps(detail, sort_keys=True), "remote_addr": remote_addr}
