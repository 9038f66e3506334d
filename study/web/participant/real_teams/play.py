"""A team's rounds on one server clock, its seats' presence, and agents taking over.

The server starts every round of a team session: a session's first round once every
member still in their seat reached it (or ``start_seconds`` after the first did), each
later round ``break_seconds`` after the previous closed. A round writes the team's rows
and, for each person in their seat, a round of their own that their cookies are checked
against as in an individual study. Everything is read back from the database, so a
restarted server goes on where the team was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from study.allocation.model import Team
from study.allocation.solver import Policy, solve
from study.protocol.loader import TASK_NAMES, Protocol, TeamDesign
from study.protocol.schema import team_page
from study.storage.database import Storage, to_json
from study.task.cookies import cookie_elements, target
from study.web.participant import rounds
from study.web.participant.agent_pool import algorithm_for
from study.web.participant.pages import journey_steps
from study.web.participant.real_teams.agents import agent, agent_times
from study.web.serving.shares import EVERYONE, Share


def playing_steps(sessions: int) -> tuple[str, ...]:
    """The steps during which a person holds up their team: from the team page to the end
    of the last session. Away longer than ``grace_seconds`` there, they are dropped."""
    steps = journey_steps(sessions)
    return steps[steps.index("teammate"):steps.index(f"session-{sessions}") + 1]


def plays_agent(seat: dict[str, Any], session: int, number: int) -> bool:
    """Whether an agent plays this seat in round ``number`` of ``session``."""
    if seat["kind"] == "agent":
        return True
    if seat["agent_from_session"] is None:
        return False
    return (session, number) >= (seat["agent_from_session"], seat["agent_from_round"])


PRESENCE_SECONDS = 1.0  # how often presence is looked at: a grace is many seconds
TEAMS_A_TURN = 4  # teams whose round closes or starts in one transaction of a tick


class TeamPlay:
    """Rounds, presence and drops of the teams of one protocol."""

    def __init__(self, protocol: Protocol, storage: Storage,
                 advance: Callable[[int, str, float], None], fea_bounds: Callable[[], Any],
                 session_of: Callable[[int, int], dict[str, Any]]) -> None:
        self.protocol = protocol
        self.design: TeamDesign = protocol.team  # type: ignore[assignment]
        self.storage = storage
        self.advance = advance
        self.fea_bounds = fea_bounds
        self.session_of = session_of
        self.policies: dict[tuple[int, int], Policy] = {}
        self.sessions = protocol.sessions
        self.playing_steps = playing_steps(protocol.sessions)
        self.presence_at: float | None = None  # when presence was last looked at

    # --- the clock ----------------------------------------------------------------------

    def tick(self, now: float, reason: str = "deadline",
             first: Callable[[], set[int]] = set, share: Share = EVERYONE) -> set[int]:
        """Bring the teams of ``share`` up to ``now``; returns the participants whose page
        changed.
        Runs at every deadline and at least once a second while teams play, in write
        transactions every message waits for: so indexes pick the rounds to close and
        the rounds to start, and SQL the seats whose presence changed. What waits on people
        rather than on the clock (presence, a team between sessions waiting for its
        members) is looked at once a second at most by a tick at a deadline: scanning it
        at every deadline held every message up for nothing. Where many rounds fall due
        at once (teams that became ready together, a restart), each transaction closes or
        starts the rounds of ``TEAMS_A_TURN`` teams, and the messages that arrive
        meanwhile go in between. ``first`` runs in the first transaction (the lobby's
        timers); ``reason`` is how overdue rounds close, as their people's rounds do.
        Presence and the teams between sessions are the lease holder's (``Share.lease``)."""
        looks = share.lease and self._presence_due(now, reason)
        changed: set[int] = set()
        opening, done = True, False
        while not done:
            with self.storage.event():
                if opening:
                    changed |= first() | (self._presence(now) if looks else set())
                    opening = False
                left = TEAMS_A_TURN
                for due in self._rounds_to_close(now, left, share):
                    changed |= self._close(due, now, reason)
                    left -= 1
                for team in self._rounds_due(now, left, share) if left else []:
                    changed |= self._start_round(team, now)
                    left -= 1
                done = left > 0
                for team in self._between_sessions() if done and looks else []:
                    changed |= self._start_session_if_ready(team, now)
        return changed

    def _presence_due(self, now: float, reason: str) -> bool:
        last = self.presence_at
        if reason == "deadline" and last is not None and last <= now < last + PRESENCE_SECONDS:
            return False
        self.presence_at = now
        return True

    def next_due(self, share: Share = EVERYONE) -> float | None:
        """When a round of a team of ``share`` next starts or closes (the indexes of the
        teams playing and of the open team rounds)."""
        starts, start_params = share.of_team("t.id")
        closes, close_params = share.of_team("r.team_id")
        times = [self.storage.one(
            "SELECT t.next_round_at AS at FROM teams t WHERE t.finished_at IS NULL AND "
            f"t.next_round_at IS NOT NULL AND {starts} ORDER BY t.next_round_at LIMIT 1",
            start_params), self.storage.one(
            "SELECT r.deadline AS at FROM team_rounds r WHERE r.closed_at IS NULL AND "
            f"{closes} ORDER BY r.deadline LIMIT 1", close_params)]
        return min((row["at"] for row in times if row is not None), default=None)

    def active(self) -> bool:
        return self.storage.one("SELECT 1 FROM teams WHERE finished_at IS NULL") is not None

    def _rounds_to_close(self, now: float, limit: int, share: Share) -> list[dict[str, Any]]:
        """The first ``limit`` open team rounds of ``share`` whose deadline passed (a
        partial index)."""
        mine, params = share.of_team("r.team_id")
        return self.storage.all(
            "SELECT r.* FROM team_rounds r WHERE r.closed_at IS NULL AND r.deadline <= ? "
            f"AND {mine} ORDER BY r.deadline LIMIT ?", (now, *params, limit))

    def _rounds_due(self, now: float, limit: int, share: Share) -> list[dict[str, Any]]:
        """The first ``limit`` playing teams of ``share`` whose next round is due (the
        index of the teams playing)."""
        mine, params = share.of_team("t.id")
        return self.storage.all(
            "SELECT t.* FROM teams t WHERE t.finished_at IS NULL AND t.next_round_at <= ? "
            f"AND t.protocol = ? AND {mine} ORDER BY t.next_round_at LIMIT ?",
            (now, self.protocol.name, *params, limit))

    def _between_sessions(self) -> list[dict[str, Any]]:
        """The teams between sessions with a member at the next session's step (the
        others are at no start yet)."""
        return self.storage.all(
            "SELECT * FROM teams t WHERE t.finished_at IS NULL AND t.next_round_at IS NULL "
            "AND t.protocol = ? AND t.session < ? AND NOT EXISTS (SELECT 1 FROM team_rounds "
            "r WHERE r.team_id = t.id AND r.closed_at IS NULL) AND EXISTS (SELECT 1 FROM "
            "seats s JOIN steps st ON st.participant_id = s.participant_id WHERE "
            "s.team_id = t.id AND s.kind = 'person' AND s.dropped_at IS NULL AND "
            "st.step = 'session-' || (t.session + 1)) ORDER BY t.id",
            (self.protocol.name, self.sessions))

    def _team(self, team_id: int) -> dict[str, Any]:
        return self.storage.one("SELECT * FROM teams WHERE id = ?", (team_id,))  # type: ignore[return-value]

    def seats(self, team_id: int) -> list[dict[str, Any]]:
        return self.storage.all(
            "SELECT s.*, p.code, p.step FROM seats s LEFT JOIN participants p "
            "ON p.id = s.participant_id WHERE s.team_id = ? ORDER BY s.seat", (team_id,))

    def _present(self, team_id: int) -> list[dict[str, Any]]:
        """The people still in their seats."""
        return [seat for seat in self.seats(team_id)
                if seat["kind"] == "person" and seat["dropped_at"] is None
                and seat["participant_id"] is not None]

    # --- presence and drops -------------------------------------------------------------

    def _presence(self, now: float) -> set[int]:
        """Mark who has no open page since when; drop whoever is away past the grace.
        Only the seats whose state changes come back from the query."""
        changed: set[int] = set()
        steps = ", ".join("?" * len(self.playing_steps))
        for seat in self.storage.all(
                "SELECT * FROM (SELECT s.id, s.participant_id, s.away_since, EXISTS "
                "(SELECT 1 FROM connections c WHERE c.code = p.code) AS online FROM seats s "
                "JOIN teams t ON t.id = s.team_id JOIN participants p "
                "ON p.id = s.participant_id WHERE t.finished_at IS NULL AND t.protocol = ? "
                f"AND s.kind = 'person' AND s.dropped_at IS NULL AND p.step IN ({steps})) "
                "WHERE (online AND away_since IS NOT NULL) OR (NOT online AND "
                "(away_since IS NULL OR ? - away_since > ?))",
                (self.protocol.name, *self.playing_steps, now, self.design.grace_seconds)):
            if seat["online"]:
                self.storage.update("seats", seat["id"], {"away_since": None})
            elif seat["away_since"] is None:
                self.storage.update("seats", seat["id"], {"away_since": now})
            else:
                changed |= self.drop(seat["participant_id"], "away", now)
        return changed

    def drop(self, participant_id: int, reason: str, now: float) -> set[int]:
        """An agent with the person's measured coefficients plays their seat from the next
        round on; ``away`` and ``late`` send the person to the ``dropped`` page. Returns
        the participants whose page changed (none for someone not in a playing team)."""
        seat = self.storage.one("SELECT * FROM seats WHERE participant_id = ? AND "
                                "dropped_at IS NULL AND kind = 'person'", (participant_id,))
        if seat is None:
            return set()
        team = self._team(seat["team_id"])
        if team["finished_at"] is not None:
            return set()
        session, number = self._next_round(team)
        self.storage.update("seats", seat["id"], {
            "dropped_at": now, "drop_reason": reason, "agent_from_session": session,
            "agent_from_round": number})
        if reason in ("away", "late"):
            self.advance(participant_id, "dropped", now)
        present = self._present(team["id"])
        if not present:  # nobody left to play for
            self.storage.update("teams", team["id"], {"finished_at": now,
                                                      "next_round_at": None})
        return {participant_id} | {s["participant_id"] for s in present}

    def _next_round(self, team: dict[str, Any]) -> tuple[int, int]:
        """The first round an agent taking a seat now would play."""
        last = self._last_round(team["id"])
        if last is None:
            return 1, 1
        if last["number"] >= self.protocol.rounds:
            return last["session"] + 1, 1
        return last["session"], last["number"] + 1

    def _last_round(self, team_id: int) -> dict[str, Any] | None:
        return self.storage.one("SELECT * FROM team_rounds WHERE team_id = ? "
                                "ORDER BY session DESC, number DESC LIMIT 1", (team_id,))

    # --- rounds -------------------------------------------------------------------------

    def _close(self, due: dict[str, Any], now: float, reason: str) -> set[int]:
        """Close a team round whose deadline passed: the agents' cookies, and when the
        next round starts (or that the session, or the team, is done)."""
        team = self._team(due["team_id"])
        seats = self.seats(team["id"])
        allocated = {row["seat"]: row["task_type"] for row in self.storage.all(
            "SELECT seat, task_type FROM team_allocations WHERE team_round_id = ?",
            (due["id"],))}
        for seat in seats:
            if plays_agent(seat, due["session"], due["number"]):
                self._agent_cookies(seat, due, allocated[seat["seat"]])
        self.storage.update("team_rounds", due["id"], {
            "closed_at": now,
            "close_reason": rounds.close_reason(reason, max(0.0, now - due["deadline"]))})
        last_of_session = due["number"] >= self.protocol.rounds
        values: dict[str, Any] = {"next_round_at": None if last_of_session
                                  else self._after_break(due["deadline"], now)}
        if last_of_session and due["session"] == self.sessions:
            values["finished_at"] = now
        self.storage.update("teams", team["id"], values)
        return {seat["participant_id"] for seat in self._present(team["id"])}

    def _agent_cookies(self, seat: dict[str, Any], team_round: dict[str, Any],
                       task_type: int) -> None:
        times = agent_times(self.protocol, seat, team_round, task_type)
        self.storage.insert_all("seat_cookies", [{
            "team_round_id": team_round["id"], "team_id": team_round["team_id"],
            "seat": seat["seat"], "number": number, "task_type": task_type,
            "finished_at": team_round["started_at"] + seconds, "seconds": seconds}
            for number, seconds in enumerate(times, 1)])

    def _start_session_if_ready(self, team: dict[str, Any], now: float) -> set[int]:
        """Open the next session once everyone still in a seat is at its step, or once the
        first of them has waited ``start_seconds`` (the others are dropped)."""
        number = team["session"] + 1
        if number > self.sessions:
            return set()
        step = f"session-{number}"
        present = self._present(team["id"])
        arrived = self.storage.all(
            "SELECT participant_id, min(at) AS at FROM steps WHERE step = ? AND "
            f"participant_id IN ({', '.join('?' * len(present))}) GROUP BY participant_id",
            (step, *[seat["participant_id"] for seat in present]))
        if not arrived:
            return set()
        changed: set[int] = set()
        here = {row["participant_id"] for row in arrived}
        if len(here) == len(present):
            ready_at = max(row["at"] for row in arrived)
        else:
            ready_at = min(row["at"] for row in arrived) + self.design.start_seconds
            if now < ready_at:
                return set()
            for seat in present:
                if seat["participant_id"] not in here:
                    changed |= self.drop(seat["participant_id"], "late", now)
        self.storage.update("teams", team["id"], {
            "session": number, "session_started_at": now,
            "next_round_at": self._after_break(ready_at, now)})
        return changed | here

    def _after_break(self, since: float, now: float) -> float:
        """When a team's next round starts: ``break_seconds`` after the moment it became
        due (its last member arrived, its round's deadline), not after the tick that saw
        it, so teams keep clocks of their own. Ticks come once a second for the teams
        between sessions and late under load: timed from the tick, every team that became
        ready within a second started on one clock, and a late tick joined clocks for
        good, until dozens of rounds fell due together. A tick later than half the break
        (a restart, a stalled disk) still leaves the team half of it."""
        return max(since, now - self.design.break_seconds / 2) + self.design.break_seconds

    def _start_round(self, team: dict[str, Any], now: float) -> set[int]:
        session = team["session"]
        last = self._last_round(team["id"])
        number = last["number"] + 1 if last and last["session"] == session else 1
        order = json.loads(team["condition_order"])
        kits, held = self._kits(team, session)
        seconds = self.protocol.round_seconds
        team_round_id = self.storage.insert("team_rounds", {
            "team_id": team["id"], "session": session, "number": number,
            "condition": order[session - 1], "started_at": now, "deadline": now + seconds,
            "seconds": seconds})
        self.storage.insert_all("team_allocations", [{
            "team_round_id": team_round_id, "team_id": team["id"], "session": session,
            "round": number, "seat": seat, "task_type": task, "task_name": TASK_NAMES[task],
            "held_before": to_json(held.tolist()), "at": now}
            for seat, task in enumerate(kits)])
        players = [seat for seat in self._present(team["id"])
                   if not plays_agent(seat, session, number)]
        for seat in players:
            self._person_round(seat, team_round_id, session, number, kits, held, now)
        self.storage.update("teams", team["id"], {"next_round_at": None})
        return {seat["participant_id"] for seat in players}

    def _kits(self, team: dict[str, Any], session: int) -> tuple[tuple[int, ...], np.ndarray]:
        rows = self.storage.all("SELECT seat AS human, task_type FROM team_allocations "
                                "WHERE team_id = ? AND session = ?", (team["id"], session))
        held = rounds.held_before(rows, team["humans"], len(self.protocol.kits))
        return rounds.next_kits(self._policy(team, session), held), held

    def _policy(self, team: dict[str, Any], session: int) -> Policy:
        key = (team["id"], session)
        if key not in self.policies:
            condition = self.protocol.condition(json.loads(team["condition_order"])[session - 1])
            live = Team(np.array(json.loads(team["team_c"])), np.array(json.loads(team["team_p"])))
            algorithm = algorithm_for(condition, self.fea_bounds())
            history = self._earlier_kits(team, session) if algorithm.memory else None
            self.policies[key] = solve(live, algorithm, self.protocol.kits,
                                       condition.round_order, history=history)
        return self.policies[key]

    def _earlier_kits(self, team: dict[str, Any], session: int) -> np.ndarray | None:
        """``[h, n]`` the kits each seat was handed in the team's earlier sessions (what
        an algorithm with memory over the study counts); None before the first."""
        if session == 1:
            return None
        rows = self.storage.all("SELECT seat AS human, task_type FROM team_allocations "
                                "WHERE team_id = ? AND session < ?", (team["id"], session))
        return rounds.held_before(rows, team["humans"], len(self.protocol.kits)).astype(float)

    def _person_round(self, seat: dict[str, Any], team_round_id: int, session: int,
                      number: int, kits: tuple[int, ...], held: np.ndarray, now: float) -> None:
        """The person's own round of a team round, and the allocation as they saw it."""
        own = self.session_of(seat["participant_id"], session)
        participant = self.storage.one("SELECT * FROM participants WHERE id = ?",
                                       (seat["participant_id"],))
        themes = rounds.themes_of(self.protocol, participant)  # type: ignore[arg-type]
        task = kits[seat["seat"]]
        seconds = self.protocol.round_seconds
        round_id = self.storage.insert("rounds", {
            "session_id": own["id"], "participant_id": seat["participant_id"],
            "number": number, "task_type": task, "task_name": TASK_NAMES[task],
            "theme": themes[task], "started_at": now, "deadline": now + seconds,
            "seconds": seconds, "participant_cookies": 0, "teammate_cookies": 0,
            "team_round_id": team_round_id})
        self.storage.insert_all("allocations", [{
            "round_id": round_id, "session_id": own["id"],
            "participant_id": seat["participant_id"], "round": number, "human": human,
            "role": "participant" if human == seat["seat"] else "teammate",
            "task_type": kit, "task_name": TASK_NAMES[kit],
            "held_before": to_json(held.tolist()), "at": now}
            for human, kit in enumerate(kits)])

    # --- what the pages show --------------------------------------------------------------

    def team_page(self, participant_id: int) -> str:
        """Which team page tells the person who is in their team: all people, people and
        agents, or they alone with agents (seats as the team was formed)."""
        seats = self.storage.all("SELECT s.kind FROM seats s JOIN seats mine ON "
                                 "mine.team_id = s.team_id WHERE mine.participant_id = ?",
                                 (participant_id,))
        return team_page(sum(seat["kind"] == "person" for seat in seats), len(seats))

    def member(self, participant_id: int) -> dict[str, Any] | None:
        """``state.team``: the person's team and its seats."""
        seat = self.storage.one("SELECT * FROM seats WHERE participant_id = ?",
                                (participant_id,))
        if seat is None:
            return None
        return {"id": seat["team_id"], "seat": seat["seat"],
                "humans": self.design.humans,
                "seats": [{"seat": s["seat"], "kind": s["kind"],
                           "you": s["seat"] == seat["seat"],
                           "dropped": s["dropped_at"] is not None}
                          for s in self.seats(seat["team_id"])]}

    def round_state(self, session: dict[str, Any], running: dict[str, Any] | None,
                    now: float) -> dict[str, Any]:
        """``state.round``'s team keys: when the next round starts, whom the session still
        waits for, and, while a round runs, every other seat's station."""
        team = self._team(session["team_id"])
        waiting_for = 0
        if team["session"] < session["number"]:
            waiting_for = sum(seat["step"] != f"session-{session['number']}"
                              for seat in self._present(team["id"]))
        state: dict[str, Any] = {"team": {"next_at": team["next_round_at"],
                                          "waiting_for": waiting_for}}
        if running is not None and running["team_round_id"] is not None:
            state["stations"] = self._stations(running, session["participant_human"], now)
        return state

    def _stations(self, own_round: dict[str, Any], own_seat: int,
                  now: float) -> list[dict[str, Any]]:
        team_round = self.storage.one("SELECT * FROM team_rounds WHERE id = ?",
                                      (own_round["team_round_id"],))
        allocated = {row["seat"]: row["task_type"] for row in self.storage.all(
            "SELECT seat, task_type FROM team_allocations WHERE team_round_id = ?",
            (team_round["id"],))}  # type: ignore[index]
        return [self._station(seat, team_round, allocated[seat["seat"]], now)  # type: ignore[arg-type]
                for seat in self.seats(team_round["team_id"])  # type: ignore[index]
                if seat["seat"] != own_seat]

    def _station(self, seat: dict[str, Any], team_round: dict[str, Any], task: int,
                 now: float) -> dict[str, Any]:
        station: dict[str, Any] = {"seat": seat["seat"], "team_round": team_round["id"],
                                   "task_type": task,
                                   "task_name": TASK_NAMES[task],
                                   "taken_over": seat["kind"] == "person"
                                   and seat["dropped_at"] is not None}
        if plays_agent(seat, team_round["session"], team_round["number"]):
            times = [team_round["started_at"] + t
                     for t in agent_times(self.protocol, seat, team_round, task)]
            theme = self.protocol.cookies[task].theme
            return {**station, "kind": "agent", "times": times,
                    "cookies": sum(t <= now for t in times),
                    "cookie_seconds": 1.0 / agent(self.protocol, seat).speed(task),
                    "target": target(self.protocol, task, theme)}
        row = self.storage.one("SELECT * FROM rounds WHERE team_round_id = ? AND "
                               "participant_id = ?", (team_round["id"], seat["participant_id"]))
        return {**station, "kind": "person", **self._work(row, task)}

    def _work(self, row: dict[str, Any] | None, task: int) -> dict[str, Any]:
        """A person's station: their cookie, how many they finished, how far the current
        one is."""
        theme = row["theme"] if row else self.protocol.cookies[task].theme
        work = {"target": target(self.protocol, task, theme), "cookies": 0, "placed": 0,
                "elements": cookie_elements(self.protocol, task, theme)}
        if row is None:
            return work
        latest = self.storage.one("SELECT placed FROM progress WHERE round_id = ? AND "
                                  "cookie = ? ORDER BY id DESC LIMIT 1",
                                  (row["id"], row["participant_cookies"] + 1))
        return {**work, "cookies": row["participant_cookies"],
                "placed": latest["placed"] if latest else 0}

    def station_push(self, row: dict[str, Any], cookies: int,
                     placed: int) -> tuple[list[str], dict[str, Any]]:
        """After a person's cookie or placed element (``cookies`` finished, ``placed``
        elements on the current one): whom to tell, and what. One query: it runs inside
        the write transaction of most messages."""
        seats = self.storage.all(
            "SELECT s.seat, s.kind, s.participant_id, s.dropped_at, p.code FROM team_rounds r "
            "JOIN seats s ON s.team_id = r.team_id LEFT JOIN participants p "
            "ON p.id = s.participant_id WHERE r.id = ?", (row["team_round_id"],))
        own = next(s["seat"] for s in seats if s["participant_id"] == row["participant_id"])
        others = [s["code"] for s in seats if s["kind"] == "person" and s["dropped_at"] is None
                  and s["code"] is not None and s["participant_id"] != row["participant_id"]]
        return others, {"team_round": row["team_round_id"], "seat": own, "cookies": cookies,
                        "placed": placed,
                        "elements": cookie_elements(self.protocol, row["task_type"],
                                                    row["theme"])}
