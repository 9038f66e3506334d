"""Real teams in the console (docs/teams.md): teams as rows, the lobby, per-team holds.

Read from the team tables the journey writes; a study without ``[team]`` has none, and its
console shows nothing of this.
"""

from __future__ import annotations

import json
from typing import Any

from study.web.console import fairness, holds

PLAYING = "(SELECT id FROM teams WHERE finished_at IS NULL)"


def teams_view(storage: Any) -> list[dict[str, Any]]:
    """Every team still playing, newest first: how it formed, its seats and where it is
    (finished teams are counted, ``finished_teams``: a live view sized by the study now)."""
    seats: dict[int, list[dict[str, Any]]] = {}
    for row in storage.all("SELECT s.*, p.code, p.step FROM seats s LEFT JOIN participants p "
                           f"ON p.id = s.participant_id WHERE s.team_id IN {PLAYING} "
                           "ORDER BY s.team_id, s.seat"):
        seats.setdefault(row["team_id"], []).append(
            {**_seat_view(row), "participant_id": row["participant_id"]})
    live = _live_fairness(storage, seats)
    rounds = {row["team_id"]: row for row in storage.all(
        "SELECT team_id, session, number, deadline, closed_at FROM team_rounds t WHERE "
        f"team_id IN {PLAYING} AND id = "
        "(SELECT max(id) FROM team_rounds u WHERE u.team_id = t.team_id)")}
    return [{"id": team["id"], "formed_by": team["formed_by"], "formed_at": team["formed_at"],
             "live_type": team["live_type"], "conditions": json.loads(team["condition_order"]),
             "session": team["session"], "next_round_at": team["next_round_at"],
             "round": _round_view(rounds.get(team["id"])), "seats": seats.get(team["id"], []),
             "fairness": live.get(team["id"])}
            for team in storage.all("SELECT * FROM teams WHERE finished_at IS NULL "
                                    "ORDER BY id DESC")]


def _live_fairness(storage: Any,
                   seats: dict[int, list[dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Per team playing, the live fairness of its latest session with kits handed out
    (its plan as stored in its people's sessions), each seat's person's last probes,
    and how many people play it (``people_playing``: the per-condition means count each
    of them)."""
    kits: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in storage.all("SELECT team_id, session, round, seat AS human, task_type FROM "
                           f"team_allocations WHERE team_id IN {PLAYING}"):
        kits.setdefault((row["team_id"], row["session"]), []).append(row)
    latest: dict[int, int] = {}
    for team_id, number in kits:
        latest[team_id] = max(number, latest.get(team_id, 0))
    plans = {(row["team_id"], row["number"]): row for row in storage.all(
        "SELECT team_id, number, condition, robot, team_c, team_p, plan FROM sessions "
        f"WHERE id IN (SELECT min(id) FROM sessions WHERE team_id IN {PLAYING} "
        "GROUP BY team_id, number)")}
    judged: dict[int, fairness.SessionKits] = {}
    for team_id, number in latest.items():
        session = plans.get((team_id, number))
        if session is None:
            continue
        humans = len(json.loads(session["team_c"]))
        one = fairness.stored_session(session, kits[team_id, number], list(range(humans)),
                                      tuple(f"seat {h + 1}" for h in range(humans)))
        if one is not None:
            judged[team_id] = one
    people = {team_id: [s for s in seats.get(team_id, []) if s["kind"] == "person"
                        and not s["dropped"] and s["participant_id"] is not None]
              for team_id in judged}
    probes = fairness.last_probes(storage, [s["participant_id"] for persons in
                                            people.values() for s in persons])
    views = fairness.views(list(judged.values()))
    return {team_id: {**view, "people_playing": len(people[team_id]),
                      "probes": {f"seat {s['seat'] + 1}": probes.get(s["participant_id"], {})
                                 for s in people[team_id]}}
            for team_id, view in zip(judged, views, strict=True)}


def finished_teams(storage: Any) -> int:
    """How many teams played to their end."""
    return storage.one("SELECT count(*) AS n FROM teams WHERE finished_at IS NOT NULL")["n"]


def _seat_view(row: dict[str, Any]) -> dict[str, Any]:
    if row["kind"] == "agent":
        state = "agent"
    elif row["dropped_at"] is not None:
        state = (f"{row['drop_reason']}: agent from session {row['agent_from_session']} "
                 f"round {row['agent_from_round']}")
    elif row["away_since"] is not None:
        state = "away"
    else:
        state = "playing"
    return {"seat": row["seat"], "kind": row["kind"], "code": row["code"], "step": row["step"],
            "state": state, "away_since": row["away_since"], "dropped": row["dropped_at"]
            is not None}


def _round_view(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"session": row["session"], "number": row["number"], "deadline": row["deadline"],
            "running": row["closed_at"] is None}


def lobby_view(storage: Any, shared_seconds: float | None) -> dict[str, Any]:
    """Who waits, since when, and when each timer runs out."""
    waiting = storage.all(
        "SELECT l.*, p.code FROM lobby l JOIN participants p ON p.id = l.participant_id "
        "WHERE l.outcome IS NULL AND p.step = 'lobby' ORDER BY l.entered_at, l.id")
    outcomes = {row["outcome"]: row["n"] for row in storage.all(
        "SELECT outcome, count(*) AS n FROM lobby WHERE outcome IS NOT NULL GROUP BY outcome")}
    return {"waiting": [{"code": row["code"], "entered_at": row["entered_at"],
                         "individual_deadline": row["individual_deadline"]}
                        for row in waiting],
            "shared_deadline": (waiting[0]["entered_at"] + shared_seconds
                                if waiting and shared_seconds else None),
            "outcomes": outcomes}


def members(storage: Any, team_id: int) -> list[dict[str, Any]]:
    """The people still in the team's seats (their participants rows)."""
    return storage.all("SELECT p.* FROM seats s JOIN participants p ON p.id = s.participant_id "
                       "WHERE s.team_id = ? AND s.dropped_at IS NULL ORDER BY s.seat",
                       (team_id,))


def hold_team(storage: Any, team_id: int, action: str, note: str, remote_addr: str | None,
              now: float) -> list[dict[str, Any]]:
    """The hold for every person of the team, one logged action each (the team named in
    the note); returns those people."""
    people = members(storage, team_id)
    for person in people:
        holds.apply_action(storage, person, action, f"team {team_id}: {note}".strip(),
                           remote_addr, now)
    return people
