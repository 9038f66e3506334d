"""The experimenter's live view: every participant's place in the study, read from SQLite.

One snapshot is a handful of queries for the participants taking part now (not one per
participant); those whose study ended are counts, their rows read a page at a time when
the experimenter asks (``finished_page``), so a snapshot costs what the people in the
study now cost, however many it has had. The console pushes it only when it changed, and
less often as it grows (``views.CONSOLE_SHARE``). Between its queries, and every
``ROWS_AT_ONCE`` participants, it lets the server's other work go first. Time left is
sent as the deadline plus the server clock, so browsers count down without new snapshots.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from study.calibration.pilot import OFF_SHARE
from study.task.decorator import HIGHEST, LOWEST
from study.web.console import fairness
from study.web.participant.pages import TERMINAL

Range = tuple[float, float]
ROWS_AT_ONCE = 250  # participants' rows built between two chances for other work
PAGE = 200  # participants whose study ended, sent at a time
LAST_ID = 2**62  # above every participant id, within SQLite's integers
# A participant still in the study: not at a step that ends it.
TAKING_PART = "step NOT IN ({})".format(", ".join(f"'{step}'" for step in TERMINAL))
# What the participants with a clipped capability who continued went on to, as the
# protocol's clipped_capability declares it (under "unmatched" nobody continues).
CONTINUED_AS = {"continue": "continued, left out of the analysis (clipped-capability)",
                "keep": "continued, kept in the analysis and reported with and without them"}
# The participants of a JSON array of ids (one parameter, however many).
AMONG = "(SELECT value FROM json_each(?))"


def _give_way() -> None:
    """Let the process's other work run (a greenlet switch under gevent)."""
    time.sleep(0)


def snapshot(storage: Any, now: float, connected: Callable[[str], int],
             ranges: Mapping[int, Range] | None = None,
             clipped_capability: str = "continue") -> dict[str, Any]:
    """``{"now", "participants": [...], "finished", "target", "calibration"}``: one entry
    per participant taking part now, newest last, and those whose study ended as counts
    by step (their rows come a page at a time from ``finished_page``), so a snapshot's
    size follows the people in the study now, not all it has had; ``ranges`` are the
    target ranges per cookie type and ``clipped_capability`` what the protocol declares
    follows a clipped capability."""
    participants = storage.all(f"SELECT * FROM participants WHERE {TAKING_PART} ORDER BY id")
    rows = participant_rows(storage, participants, connected)
    _give_way()
    measured = storage.all("SELECT * FROM measurements WHERE kind = 'capability' "
                           "ORDER BY task_type, value")
    calibration = _calibration(measured, ranges or {})
    unmatched = {row["id"] for row in storage.all(
        "SELECT id FROM participants WHERE step = 'unmatched'")}
    clipped = _clipped_people(measured, unmatched, clipped_capability)
    calibration["clipped_people"] = clipped
    return {"now": now, "participants": rows, "finished": _finished_counts(storage),
            "target": {**_target_counts(storage, len(unmatched)),
                       "unmatched_clipped": clipped["unmatched"]},
            "calibration": calibration}


# When a participant's study ended: the latest time on record of them, their last step's
# (a declined consent or a withdrawal erases the steps and keeps its own time).
ENDED = ("max(coalesce((SELECT max(at) FROM steps WHERE participant_id = participants.id), 0), "
         "coalesce(withdrawn_at, 0), coalesce(consent_at, 0), created_at)")


def finished_page(storage: Any, connected: Callable[[str], int],
                  before: int | None = None) -> dict[str, Any]:
    """Participants whose study ended, the latest to end first (who just finished is on
    top, whenever they began), ``PAGE`` at a time after the participant ``before``:
    ``{"participants": [...], "more": bool}``. An id that names no participant whose
    study ended continues nothing: its page is empty."""
    ended = f"SELECT *, {ENDED} AS ended_at FROM participants WHERE NOT ({TAKING_PART})"
    if before is None:
        participants = storage.all(f"{ended} ORDER BY ended_at DESC, id DESC LIMIT ?",
                                   (PAGE + 1,))
    else:
        participants = storage.all(
            f"WITH ended AS ({ended}) SELECT * FROM ended WHERE (ended_at, id) < "
            "(SELECT ended_at, id FROM ended WHERE id = ?) "
            "ORDER BY ended_at DESC, id DESC LIMIT ?", (before, PAGE + 1))
    return {"participants": participant_rows(storage, participants[:PAGE], connected),
            "more": len(participants) > PAGE}


def participant_rows(storage: Any, participants: list[dict[str, Any]],
                     connected: Callable[[str], int]) -> list[dict[str, Any]]:
    """The console's row of each participant (their sessions, rounds and kits read for
    these participants only), in the order given."""
    ids = json.dumps([participant["id"] for participant in participants])
    _give_way()
    sessions = _sessions_by_participant(storage, ids)
    _give_way()
    rounds = _rounds_by_session(storage, ids)
    _give_way()
    given = storage.all("SELECT round_id, session_id, round, human, role, task_type, task_name "
                        f"FROM allocations WHERE participant_id IN {AMONG}", (ids,))
    allocations = _kits_by_round(given)
    live = _live_fairness(sessions, given)
    probes = fairness.last_probes(storage, list(live))
    _give_way()
    statuses = _statuses(storage, ids)
    probe_counts = _probe_counts(storage, ids)
    teams = {row["participant_id"]: row for row in storage.all(
        "SELECT participant_id, live_type, participant_role, target_met FROM teammates "
        f"WHERE participant_id IN {AMONG}", (ids,))}
    rows = []
    for index, participant in enumerate(participants, 1):
        if index % ROWS_AT_ONCE == 0:
            _give_way()
        status = statuses.get(participant["id"], DEFAULT_STATUS)
        sessions_seen = [_session_view(s, rounds.get(s["id"], []), allocations)
                         for s in sessions.get(participant["id"], [])]
        rows.append({
            "id": participant["id"], "code": participant["code"], "step": participant["step"],
            "can_withdraw": participant["consent"] == "given",
            "created_at": participant["created_at"],
            "condition_order": json.loads(participant["condition_order"] or "null"),
            "status": status["status"], "flagged": bool(status["flagged"]),
            "note": status.get("note"), "connections": connected(participant["code"]),
            "robots_identical": participant.get("robots_identical") == 1,
            "team": _team_view(teams.get(participant["id"])),
            "probes": probe_counts.get(participant["id"]),
            "sessions": sessions_seen, "current": _current_round(sessions_seen),
            "fairness": _with_probes(live.get(participant["id"]),
                                     probes.get(participant["id"], {})),
        })
    return rows


def _live_fairness(sessions: dict[int, list[dict[str, Any]]],
                   given: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per participant with an agent teammate, the live fairness of their latest session
    with kits handed out (a real team's is its row's, ``teams.teams_view``)."""
    kits: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in given:
        kits[row["session_id"]].append(row)
    latest = {participant_id: judged for participant_id, own in sessions.items()
              if (judged := _latest_with_kits(own, kits)) is not None}
    return dict(zip(latest, fairness.views(list(latest.values())), strict=True))


def _latest_with_kits(own: list[dict[str, Any]], kits: dict[int, list[dict[str, Any]]]
                      ) -> fairness.SessionKits | None:
    """A participant's latest session with an agent teammate and kits handed out."""
    for session in reversed(own):
        if (session["kind"] == "collaborative" and session["team_id"] is None
                and session["id"] in kits):
            humans = len(json.loads(session["team_c"]))
            return fairness.stored_session(
                session, kits[session["id"]],
                fairness.first_as(session["participant_human"], humans),
                fairness.with_agents(humans))
    return None


def _with_probes(view: dict[str, Any] | None,
                 probes: dict[str, Any]) -> dict[str, Any] | None:
    """The participant's last probe answers beside their session's fairness, by person as
    a team's are."""
    return None if view is None else {**view, "probes": {"participant": probes}}


def _finished_counts(storage: Any) -> dict[str, Any]:
    """How many participants' studies ended, by the step they ended at."""
    steps = {row["step"]: row["n"] for row in storage.all(
        f"SELECT step, count(*) AS n FROM participants WHERE NOT ({TAKING_PART}) "
        "GROUP BY step")}
    return {"count": sum(steps.values()), "steps": steps}


def _team_view(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The live team a participant was placed in (None before the teammate is chosen)."""
    if row is None or row["live_type"] is None:
        return None
    return {"type": row["live_type"], "role": row["participant_role"],
            "target_met": row["target_met"] == 1}


def _target_counts(storage: Any, unmatched: int) -> dict[str, int]:
    """How many participants so far are in the team under study, off it, or unplaced."""
    placed = {row["target_met"]: row["n"] for row in storage.all(
        "SELECT t.target_met, count(*) AS n FROM teammates t JOIN participants p "
        "ON p.id = t.participant_id WHERE t.live_type IS NOT NULL GROUP BY t.target_met")}
    return {"in_target": placed.get(1, 0), "off_target": placed.get(0, 0),
            "unmatched": unmatched}


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


def _clipped_people(rows: list[dict[str, Any]], unmatched_ids: set[int],
                    consequence: str) -> dict[str, Any]:
    """How many participants have a clipped capability and what followed, as the protocol
    declares it: they continued (the analysis leaves them out, rule clipped-capability, or
    under ``keep`` keeps them and reports without them too) or met the unmatched page."""
    people = {row["participant_id"] for row in rows if _clipped(row)}
    unmatched = len(people & unmatched_ids)
    return {"consequence": consequence, "people": len(people),
            "continued": len(people) - unmatched,
            "continued_as": CONTINUED_AS.get(consequence, CONTINUED_AS["continue"]),
            "unmatched": unmatched}


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
            "values": _dots(values, [c or o for c, o in zip(clipped, outside, strict=True)])}


def _dots(values: list[float], off: list[bool]) -> list[dict[str, Any]]:
    """The strip's dots: one per value to three decimals (finer than a screen draws) with
    how many participants sit there, so the panel stays the same size as a study grows."""
    dots = Counter((round(value, 3), o) for value, o in zip(values, off, strict=True))
    return [{"value": value, "off": o, "n": n} for (value, o), n in dots.items()]


DEFAULT_STATUS = {"status": "active", "flagged": 0, "note": None}


def _statuses(storage: Any, ids: str) -> dict[int, dict[str, Any]]:
    if "console_status" not in storage.db.table_names():
        return {}
    return {row["participant_id"]: row for row in storage.all(
        f"SELECT * FROM console_status WHERE participant_id IN {AMONG}", (ids,))}


def _probe_counts(storage: Any, ids: str) -> dict[int, dict[str, int]]:
    """Round probes answered and missed so far, per participant who was asked any: the
    experimenter sees who skips them while the study runs."""
    return {row["participant_id"]: {"answered": row["answered"], "missed": row["missed"]}
            for row in storage.all(
                "SELECT participant_id, count(answered_at) AS answered, sum(missed) AS "
                f"missed FROM probes WHERE participant_id IN {AMONG} GROUP BY participant_id",
                (ids,))}


def _sessions_by_participant(storage: Any, ids: str) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in storage.all("SELECT id, participant_id, number, kind, condition, robot, "
                           "rounds, team_id, participant_human, team_c, team_p, plan "
                           f"FROM sessions WHERE participant_id IN {AMONG} "
                           "ORDER BY participant_id, number", (ids,)):
        grouped[row["participant_id"]].append(row)
    return grouped


def _rounds_by_session(storage: Any, ids: str) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in storage.all("SELECT id, session_id, number, task_name, teammate_task_type, "
                           "started_at, deadline, closed_at, close_reason, "
                           "participant_cookies, teammate_cookies FROM rounds "
                           f"WHERE participant_id IN {AMONG} ORDER BY session_id, number",
                           (ids,)):
        grouped[row["session_id"]].append(row)
    return grouped


def _kits_by_round(given: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """Round id -> {role: kit name} the robot handed out."""
    kits: dict[int, dict[str, str]] = defaultdict(dict)
    for row in given:
        kits[row["round_id"]][row["role"]] = row["task_name"]
    return kits


def _session_view(session: dict[str, Any], rounds: list[dict[str, Any]],
                  kits: dict[int, dict[str, str]]) -> dict[str, Any]:
    return {
        "number": session["number"], "kind": session["kind"],
        "condition": session["condition"], "robot": session["robot"],
        "of": session["rounds"], "rounds": [_round_view(r, kits) for r in rounds],
    }


def _round_view(row: dict[str, Any], kits: dict[int, dict[str, str]]) -> dict[str, Any]:
    """A round as the console shows it; its times only while it runs (a closed round's
    are in the export, and a view of a thousand people's rounds is sent every few
    seconds)."""
    view = {"number": row["number"], "running": row["closed_at"] is None,
            "close_reason": row["close_reason"], "kit": row["task_name"],
            "teammate_kit": kits.get(row["id"], {}).get("teammate"),
            "cookies": row["participant_cookies"],
            "teammate_cookies": (row["teammate_cookies"]
                                 if row["teammate_task_type"] is not None else None)}
    if view["running"]:
        view |= {"started_at": row["started_at"], "deadline": row["deadline"]}
    return view


def _current_round(sessions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The running round, if any, with its session number."""
    for session in sessions:
        for row in session["rounds"]:
            if row["running"]:
                return {"session": session["number"], "of": session["of"], **row}
    return None
