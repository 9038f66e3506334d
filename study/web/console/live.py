"""The experimenter's live view: every participant's place in the study, read from SQLite.

One snapshot is a handful of queries over the whole study (not per participant), cheap
enough to rebuild several times a second for a hundred participants; the console pushes it
only when it changed, and less often as the study grows (``views.CONSOLE_SHARE``). Between
its queries, and every ``ROWS_AT_ONCE`` participants, it lets the server's other work go
first: a study of thousands takes a good part of a second to read, and participants'
messages must not wait for all of it. Time left is sent as the deadline plus the server
clock, so browsers count down without new snapshots.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from study.calibration.pilot import OFF_SHARE
from study.task.decorator import HIGHEST, LOWEST

Range = tuple[float, float]
ROWS_AT_ONCE = 250  # participants' rows built between two chances for other work


def _give_way() -> None:
    """Let the process's other work run (a greenlet switch under gevent)."""
    time.sleep(0)


def snapshot(storage: Any, now: float, connected: Callable[[str], int],
             ranges: Mapping[int, Range] | None = None,
             clipped_capability: str = "continue") -> dict[str, Any]:
    """``{"now", "participants": [...], "target", "calibration"}`` with one entry per
    participant, newest last; ``ranges`` are the target ranges per cookie type and
    ``clipped_capability`` what the protocol declares follows a clipped capability."""
    participants = storage.all("SELECT * FROM participants ORDER BY id")
    _give_way()
    sessions = _sessions_by_participant(storage)
    _give_way()
    rounds = _rounds_by_session(storage)
    _give_way()
    allocations = _kits_by_round(storage)
    _give_way()
    statuses = _statuses(storage)
    teams = {row["participant_id"]: row for row in storage.all(
        "SELECT participant_id, live_type, participant_role, target_met FROM teammates")}
    rows = []
    for index, participant in enumerate(participants, 1):
        if index % ROWS_AT_ONCE == 0:
            _give_way()
        status = statuses.get(participant["id"], DEFAULT_STATUS)
        rows.append({
            "code": participant["code"], "step": participant["step"],
            "can_withdraw": participant["consent"] == "given",
            "created_at": participant["created_at"],
            "condition_order": json.loads(participant["condition_order"] or "null"),
            "status": status["status"], "flagged": bool(status["flagged"]),
            "note": status.get("note"), "connections": connected(participant["code"]),
            "robots_identical": participant.get("robots_identical") == 1,
            "team": _team_view(teams.get(participant["id"])),
            "sessions": [_session_view(s, rounds.get(s["id"], []), allocations)
                         for s in sessions.get(participant["id"], [])],
        })
    for row in rows:
        row["current"] = _current_round(row["sessions"])
    _give_way()
    measured = storage.all("SELECT * FROM measurements WHERE kind = 'capability' "
                           "ORDER BY task_type, value")
    calibration = _calibration(measured, ranges or {})
    clipped = _clipped_people(measured, {row["id"]: row["step"] for row in participants},
                              clipped_capability)
    calibration["clipped_people"] = clipped
    return {"now": now, "participants": rows,
            "target": {**_target_counts(rows), "unmatched_clipped": clipped["unmatched"]},
            "calibration": calibration}


def _team_view(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The live team a participant was placed in (None before the teammate is chosen)."""
    if row is None or row["live_type"] is None:
        return None
    return {"type": row["live_type"], "role": row["participant_role"],
            "target_met": row["target_met"] == 1}


def _target_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many participants so far are in the team under study, off it, or unplaced."""
    teams = [row["team"] for row in rows if row["team"] is not None]
    return {"in_target": sum(team["target_met"] for team in teams),
            "off_target": sum(not team["target_met"] for team in teams),
            "unmatched": sum(row["step"] == "unmatched" for row in rows)}


def _calibration(rows: list[dict[str, Any]], ranges: Mapping[int, Range]) -> dict[str, Any]:
    """Each cookie type's measured capabilities so far against its target range: a clipped
    value is not a measurement, and many clipped or outside values say the reference
    speed does not fit the people (docs/pilot-to-study.md); ``amber`` when any type has
    more than ``OFF_SHARE`` of them."""
    measured: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        measured[row["task_type"]].append(row)
    types = [_calibration_type(task_type, rows, ranges.get(task_type))
             for task_type, rows in sorted(measured.items())]
    return {"types": types, "off_share": OFF_SHARE,
            "amber": any(entry["amber"] for entry in types)}


def _clipped_people(rows: list[dict[str, Any]], steps: Mapping[int, str],
                    consequence: str) -> dict[str, Any]:
    """How many participants have a clipped capability and what followed, as the protocol
    declares it: they continued (the analysis leaves them out, rule clipped-capability) or
    met the unmatched page."""
    people = {row["participant_id"] for row in rows if _clipped(row)}
    unmatched = sum(steps.get(pid) == "unmatched" for pid in people)
    return {"consequence": consequence, "people": len(people),
            "continued": len(people) - unmatched, "unmatched": unmatched}


def _clipped(row: dict[str, Any]) -> bool:
    """The stored flag where the database has it, else read off the value."""
    if row.get("clipped") is not None:
        return bool(row["clipped"])
    return row["value"] <= LOWEST or row["value"] >= HIGHEST


def _calibration_type(task_type: int, rows: list[dict[str, Any]],
                      target: Range | None) -> dict[str, Any]:
    values = [row["value"] for row in rows]
    clipped = [_clipped(row) for row in rows]
    outside = [target is not None and not target[0] <= value <= target[1] for value in values]
    off = sum(c or o for c, o in zip(clipped, outside, strict=True))
    return {"task_type": task_type, "name": rows[0]["task_name"],
            "target": list(target) if target is not None else None,
            "measured": len(rows), "clipped": sum(clipped), "outside": sum(outside),
            "off": off, "amber": off > OFF_SHARE * len(rows),
            "values": [{"value": round(value, 3), "off": c or o}
                       for value, c, o in zip(values, clipped, outside, strict=True)]}


DEFAULT_STATUS = {"status": "active", "flagged": 0, "note": None}


def _statuses(storage: Any) -> dict[int, dict[str, Any]]:
    if "console_status" not in storage.db.table_names():
        return {}
    return {row["participant_id"]: row for row in storage.all("SELECT * FROM console_status")}


def _sessions_by_participant(storage: Any) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in storage.all("SELECT id, participant_id, number, kind, condition, robot, "
                           "rounds FROM sessions ORDER BY participant_id, number"):
        grouped[row["participant_id"]].append(row)
    return grouped


def _rounds_by_session(storage: Any) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in storage.all("SELECT id, session_id, number, task_name, teammate_task_type, "
                           "started_at, deadline, closed_at, close_reason, "
                           "participant_cookies, teammate_cookies FROM rounds "
                           "ORDER BY session_id, number"):
        grouped[row["session_id"]].append(row)
    return grouped


def _kits_by_round(storage: Any) -> dict[int, dict[str, str]]:
    """Round id -> {role: kit name} the robot handed out."""
    kits: dict[int, dict[str, str]] = defaultdict(dict)
    for row in storage.all("SELECT round_id, role, task_name FROM allocations"):
        kits[row["round_id"]][row["role"]] = row["task_name"]
    return kits


def _session_view(session: dict[str, Any], rounds: list[dict[str, Any]],
                  kits: dict[int, dict[str, str]]) -> dict[str, Any]:
    return {
        "number": session["number"], "kind": session["kind"],
        "condition": session["condition"], "robot": session["robot"],
        "of": session["rounds"],
        "rounds": [{
            "number": r["number"], "running": r["closed_at"] is None,
            "started_at": r["started_at"], "deadline": r["deadline"],
            "close_reason": r["close_reason"],
            "kit": r["task_name"], "teammate_kit": kits.get(r["id"], {}).get("teammate"),
            "cookies": r["participant_cookies"],
            "teammate_cookies": (r["teammate_cookies"] if r["teammate_task_type"] is not None
                                 else None),
        } for r in rounds],
    }


def _current_round(sessions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The running round, if any, with its session number."""
    for session in sessions:
        for row in session["rounds"]:
            if row["running"]:
                return {"session": session["number"], "of": session["of"], **row}
    return None
