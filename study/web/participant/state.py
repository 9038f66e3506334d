"""The state the participant's page shows, rebuilt from the database."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from study.protocol.loader import TASK_NAMES, Protocol
from study.storage.database import Storage
from study.task.cookies import target
from study.web.participant import ends, pages
from study.web.participant.pages import ROUND_STEPS, session_number
from study.web.participant.playing import TeammateTimes, next_teammate_cookie
from study.web.participant.probes import Probes
from study.web.participant.progress import report_seconds
from study.web.participant.real_teams import RealTeams
from study.web.participant.records import Records


def route(code: str, team: dict[str, Any] | None) -> str:
    """Which worker process the page's connection asks for (``study serve --workers``):
    its team's once it has one, so teammates' pushes stay on one process; else its own."""
    return f"team-{team['id']}" if team else code


class PageState:
    """``Journey.state``: what a participant's page shows, from the database and the clock."""

    def __init__(self, protocol: Protocol, storage: Storage, clock: Callable[[], float],
                 records: Records, teams: RealTeams, teammate_times: TeammateTimes,
                 probes: Probes) -> None:
        self.protocol = protocol
        self.storage = storage
        self.clock = clock
        self.records = records
        self.teams = teams
        self.teammate_times = teammate_times
        self.probes = probes

    def state(self, code: str) -> dict[str, Any]:
        """Everything the participant's page needs, rebuilt from the database."""
        participant = self.storage.participant(code)
        pid, step = participant["id"], participant["step"]  # type: ignore[index]
        number = ROUND_STEPS.get(step, session_number(step))
        session = self.records.session(pid, number) if number else None
        robot = session["robot"] if session else None
        transparency = (self.protocol.condition(session["condition"]).transparency
                        if session and session["condition"] else "")
        robots = pages.robots_met(self.storage, pid) if step == "post" else None
        # the team page's version says who is in the person's team
        team_page = self.teams.team_page(pid) if step == "teammate" else "team"
        now = self.clock()
        state = {"code": code, "step": step, "now": now,
                 "progress": pages.progress(self.protocol, step),
                 "session": pages.session_label(self.protocol, step),
                 "page": pages.page(self.protocol, step, robot, transparency,
                                    team_page, robots),
                 "robot": {"name": robot} if robot else None, "round": None,
                 "agent_teammate": self.protocol.agent_teammate,
                 "last_round": self._last_round_summary(pid),
                 "probes": self.probes.open_for(pid, now)}
        state.update(pages.status(self.protocol, self.storage, participant))  # type: ignore[arg-type]
        state["end"] = ends.end_of(self.protocol, self.storage, participant,  # type: ignore[arg-type]
                                   state["hold"])
        if step in ROUND_STEPS:
            state["round"] = self._round_state(self.records.session(pid, ROUND_STEPS[step]))
        state.update(self.teams.page_state(pid, step))
        state["route"] = route(code, state.get("team"))
        return state

    def _last_round_summary(self, participant_id: int) -> dict[str, Any] | None:
        row = self.storage.one(
            "SELECT r.*, s.number AS session_number FROM rounds r JOIN sessions s ON "
            "s.id = r.session_id WHERE r.participant_id = ? AND r.closed_at IS NOT NULL "
            "ORDER BY r.closed_at DESC, r.id DESC LIMIT 1", (participant_id,))
        if row is None:
            return None
        return {"session": row["session_number"], "number": row["number"],
                "task_name": row["task_name"], "cookies": row["participant_cookies"],
                "teammate_cookies": row["teammate_cookies"] if row["teammate_task_type"]
                is not None else None}

    def _round_state(self, session: dict[str, Any]) -> dict[str, Any]:
        last = self.records.last_round(session["id"])
        running = last is not None and last["closed_at"] is None
        held = self.storage.all("SELECT task_type FROM allocations WHERE session_id = ?",
                                (session["id"],))
        remaining = list(self.protocol.kits)
        for row in held:
            remaining[row["task_type"]] -= 1
        state: dict[str, Any] = {
            "session": session["number"], "of": session["rounds"], "running": running,
            "next": None if running or (last and last["number"] >= session["rounds"])
            or session["team_id"] is not None else (last["number"] + 1 if last else 1),
            "station": remaining if session["kind"] == "collaborative" else None}
        if running:
            state.update(self._running_round(last, session))  # type: ignore[arg-type]
        if session["team_id"] is not None:
            state.update(self.teams.round_state(session, last if running else None,
                                                self.clock()))
        return state

    def _on_cookie(self, row: dict[str, Any]) -> Any:
        """The elements on the participant's unfinished cookie, as last stored (letters in
        order, or filled boxes): a page opened again mid-round redraws them, so a refresh
        loses nothing that reached the server."""
        latest = self.storage.one(
            "SELECT content FROM progress WHERE round_id = ? AND cookie = ? "
            "ORDER BY id DESC LIMIT 1", (row["id"], row["participant_cookies"] + 1))
        empty: Any = "" if TASK_NAMES[row["task_type"]] == "letters" else []
        if latest is None or latest["content"] is None:  # nothing placed, or stored before
            return empty                                   # the elements were kept
        return json.loads(latest["content"])

    def _running_round(self, row: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
        state = {"id": row["id"], "number": row["number"], "started_at": row["started_at"],
                 "deadline": row["deadline"], "task_type": row["task_type"],
                 "task_name": row["task_name"], "cookies": row["participant_cookies"],
                 "target": target(self.protocol, row["task_type"], row["theme"]),
                 "on_cookie": self._on_cookie(row),
                 "progress_seconds": report_seconds(session["number"]), "teammate": None}
        if row["teammate_task_type"] is not None:
            now = self.clock()
            times = self.teammate_times.of({**row, "session_number": session["number"]})
            state["teammate"] = {"task_type": row["teammate_task_type"],
                                 "task_name": TASK_NAMES[row["teammate_task_type"]],
                                 "cookies": sum(row["started_at"] + t <= now for t in times),
                                 "next_at": next_teammate_cookie(row, times, now),
                                 "times": [row["started_at"] + t for t in times]}
            state["teammate"].update(pages.teammate_station(self.protocol, self.storage, row))
        return state

