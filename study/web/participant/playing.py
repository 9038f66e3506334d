"""Rounds being played: starting them, checking cookies and placed elements, and the clock
that closes them.

Deadlines live in the database, so ``tick(now)`` brings every running round up to ``now``
whoever calls it: the scheduler, a restarted server (``recover``), or a test's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from study.protocol.loader import TASK_NAMES, Protocol
from study.storage.database import Storage, to_json
from study.storage.health import StorageUnavailable
from study.task.cookies import matches, target
from study.web.participant import rounds
from study.web.participant.agent_pool import Policies
from study.web.participant.agent_team import AgentTeam
from study.web.participant.inputs import whole
from study.web.participant.outbox import Outbox
from study.web.participant.pages import ROUND_STEPS
from study.web.participant.probes import Probes
from study.web.participant.progress import placement
from study.web.participant.real_teams import RealTeams
from study.web.participant.records import Records
from study.web.participant.rejections import Rejected
from study.web.participant.station_pushes import STATION
from study.web.serving.shares import EVERYONE, Share

log = logging.getLogger(__name__)

ROUNDS_A_TURN = 12  # overdue rounds closed in one transaction of a tick


class TeammateTimes:
    """When the agent teammate finishes each cookie of a round: seeded by the round, so
    computed once per process and the same after a restart."""

    def __init__(self, protocol: Protocol, storage: Storage) -> None:
        self.protocol = protocol
        self.storage = storage
        self.times: dict[int, list[float]] = {}

    def of(self, row: dict[str, Any]) -> list[float]:
        """Seconds into the round (a row with its ``session_number``) of each cookie."""
        if row["id"] not in self.times:
            teammate = self.storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                                        (row["participant_id"],))
            self.times[row["id"]] = rounds.teammate_times(
                self.protocol, teammate, row, row["session_number"])  # type: ignore[arg-type]
        return self.times[row["id"]]

    def forget(self, round_id: int) -> None:
        """The round closed: its cookies are stored."""
        self.times.pop(round_id, None)


def next_teammate_cookie(row: dict[str, Any], times: list[float], now: float) -> float | None:
    """When the teammate finishes its next cookie after ``now``, if within the round."""
    upcoming = [row["started_at"] + t for t in times if row["started_at"] + t > now]
    return upcoming[0] if upcoming else None


class Rounds:
    """The rounds of one journey: the ``start_round``, ``cookie`` and ``progress`` messages,
    and the clock that closes rounds and asks for the team after practice."""

    def __init__(self, protocol: Protocol, storage: Storage, clock: Callable[[], float],
                 records: Records, teams: RealTeams, policies: Policies,
                 teammate_times: TeammateTimes, agent_team: AgentTeam, outbox: Outbox,
                 probes: Probes) -> None:
        self.protocol = protocol
        self.storage = storage
        self.clock = clock
        self.records = records
        self.teams = teams
        self.policies = policies
        self.teammate_times = teammate_times
        self.agent_team = agent_team
        self.outbox = outbox
        self.probes = probes

    def start_round(self, participant: dict[str, Any], payload: dict[str, Any],
                    now: float) -> None:
        step = participant["step"]
        number = whole(payload.get("round"), "round")
        if step not in ROUND_STEPS:
            raise Rejected("out-of-order", f"no rounds at step {step}")
        session = self.records.session(participant["id"], ROUND_STEPS[step])
        if session["team_id"] is not None:
            raise Rejected("out-of-order", "a team's rounds start by themselves")
        last = self.records.last_round(session["id"])
        if last is not None and last["closed_at"] is None:
            raise Rejected("out-of-order", f"round {last['number']} is still running")
        expected = last["number"] + 1 if last else 1
        if number != expected:
            raise Rejected("out-of-order", f"the next round is {expected}, not {number}")
        if session["kind"] == "practice":
            task, teammate_task = self.protocol.practice[number - 1], None
            seconds = self.protocol.practice_seconds
        else:
            kits, held = self._next_kits(session)
            human = session["participant_human"]
            task, teammate_task = kits[human], kits[1 - human]
            seconds = self.protocol.round_seconds
        themes = rounds.themes_of(self.protocol, participant)
        round_id = self.storage.insert("rounds", {
            "session_id": session["id"], "participant_id": participant["id"], "number": number,
            "task_type": task, "task_name": TASK_NAMES[task], "teammate_task_type": teammate_task,
            "theme": themes[task],
            "teammate_theme": None if teammate_task is None else themes[teammate_task],
            "started_at": now, "deadline": now + seconds, "seconds": seconds,
            "participant_cookies": 0, "teammate_cookies": 0})
        if session["kind"] == "collaborative":
            self._record_allocation(session, round_id, number, kits, held, now)

    def _next_kits(self, session: dict[str, Any]) -> tuple[tuple[int, ...], np.ndarray]:
        """The robot's kits for the next round, from the allocations stored so far."""
        rows = self.storage.all("SELECT human, task_type FROM allocations WHERE session_id = ?",
                                (session["id"],))
        held = rounds.held_before(rows, 2, len(self.protocol.kits))
        return rounds.next_kits(self.policies.of(session), held), held

    def _record_allocation(self, session: dict[str, Any], round_id: int, number: int,
                           kits: tuple[int, ...], held: np.ndarray, now: float) -> None:
        for human, task in enumerate(kits):
            role = "participant" if human == session["participant_human"] else "teammate"
            self.storage.insert("allocations", {
                "round_id": round_id, "session_id": session["id"],
                "participant_id": session["participant_id"], "round": number, "human": human,
                "role": role, "task_type": task, "task_name": TASK_NAMES[task],
                "held_before": to_json(held.tolist()), "at": now})

    def _running_round_of(self, participant: dict[str, Any], payload: dict[str, Any],
                          now: float, event: str) -> tuple[dict[str, Any], Any]:
        """The participant's running round a cookie or a placed element is for, and the
        content sent: refused unless the round is theirs and still running at ``now``. A
        message for their round that ends a stage, arriving once it closed and moved them
        on, is late for its round like any other, not out of order."""
        round_id, content = whole(payload.get("round_id"), "round_id"), payload.get("content")
        if content is None:
            raise Rejected("malformed", f"{event} needs round_id (whole number) and content")
        row = self.storage.one("SELECT * FROM rounds WHERE id = ? AND participant_id = ?",
                               (round_id, participant["id"]))
        if row is None:
            raise Rejected("out-of-order", f"round {round_id} is not this participant's")
        if row["closed_at"] is not None or now > row["deadline"]:
            raise Rejected("round-closed", f"round {round_id} ended at {row['deadline']:.3f}")
        if participant["step"] not in ROUND_STEPS:
            raise Rejected("out-of-order", f"no rounds at step {participant['step']}")
        return row, content

    def cookie(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        row, content = self._running_round_of(participant, payload, now, "cookie")
        round_id = row["id"]
        previous = self.storage.one(
            "SELECT max(finished_at) AS at FROM cookies WHERE round_id = ? AND actor = ?",
            (round_id, "participant"))
        since = now - (previous["at"] or row["started_at"])  # type: ignore[index]
        if since < self.protocol.min_cookie_seconds:
            raise Rejected("too-fast", f"{since:.3f} s after the previous cookie")
        if not matches(target(self.protocol, row["task_type"], row["theme"]), content):
            raise Rejected("wrong-cookie", "the cookie does not match its target")
        count = row["participant_cookies"] + 1
        self.storage.insert("cookies", {
            "round_id": round_id, "participant_id": participant["id"], "actor": "participant",
            "number": count, "task_type": row["task_type"], "task_name": row["task_name"],
            "finished_at": now, "seconds": now - row["started_at"], "content": to_json(content),
            "msg_id": payload["msg_id"]})
        self.storage.update("rounds", round_id, {"participant_cookies": count})
        self._tell_team(row, count, 0)

    def progress(self, participant: dict[str, Any], payload: dict[str, Any],
                 now: float) -> None:
        """Store one placed element: the cookie as now decorated, checked on the server,
        with its elements, so a page opened again redraws the unfinished cookie
        (``study.web.participant.progress``)."""
        row, content = self._running_round_of(participant, payload, now, "progress")
        round_id = row["id"]
        placed = placement(target(self.protocol, row["task_type"], row["theme"]), content)
        self.storage.insert("progress", {
            "round_id": round_id, "participant_id": participant["id"],
            "cookie": row["participant_cookies"] + 1, "at": now, "placed": placed.placed,
            "correct": placed.correct, "fraction": placed.fraction,
            "msg_id": payload["msg_id"], "content": to_json(content)})
        self._tell_team(row, row["participant_cookies"], placed.placed)

    def _tell_team(self, row: dict[str, Any], cookies: int, placed: int) -> None:
        """A team member's station changed (``cookies`` finished, ``placed`` elements on
        the next): push it to the others (``station``)."""
        if row["team_round_id"] is None:
            return
        codes, station = self.teams.station_push(row, cookies, placed)
        for code in codes:
            self.outbox.queue(code, STATION, station)

    # --- the clock ----------------------------------------------------------------------

    def next_deadline(self, share: Share = EVERYONE) -> float | None:
        """The earliest deadline of a running round of ``share`` (the index of open
        rounds' deadlines), or what its teams wait for: when to tick next."""
        mine, params = share.of_code("p.code")
        row = self.storage.one(
            "SELECT r.deadline AS at FROM rounds r JOIN participants p ON p.id = "
            f"r.participant_id WHERE r.closed_at IS NULL AND {mine} ORDER BY r.deadline "
            "LIMIT 1", params)
        times = [row["at"] if row else None, self.teams.next_due(self.clock(), share)]
        return min((t for t in times if t is not None), default=None)

    def tick(self, now: float | None = None, reason: str = "deadline",
             alive_until: float | None = None, share: Share = EVERYONE) -> int:
        """Close every running round of ``share`` whose deadline has passed by ``now``;
        returns how many.

        Overdue rounds come from an index on the open rounds' deadlines, so a tick with
        nothing due costs one lookup however many rounds run. ``alive_until`` is the
        study's last sign of life before a crash (recovery): the agent teammate does not
        decorate while the server was down.
        """
        now = self.clock() if now is None else now
        with self.storage.durable_together():
            closed = self._close_overdue(now, reason, alive_until, share)
            changed = self.teams.tick(now, reason, share)  # timers, presence and rounds
            self.probes.mark_missed(now)
        for row in closed:
            self.teammate_times.forget(row["id"])
            changed.add(row["participant_id"])
            if row["number"] == row["session_rounds"] and row["session_number"] == 0:
                self.agent_team.form_team(row["participant_id"])
        self.outbox.push_states(changed)
        return len(closed)

    def _close_overdue(self, now: float, reason: str, alive_until: float | None,
                       share: Share) -> list[dict[str, Any]]:
        """Close the overdue rounds ``ROUNDS_A_TURN`` to a transaction: the members of
        teams formed together share a deadline, and closing dozens in one commit held
        every message back meanwhile. A round that failed to close is not tried again in
        this tick."""
        closed: list[dict[str, Any]] = []
        failed: list[int] = []
        while True:
            with self.storage.event():
                overdue = self._overdue(now, failed, share)
                for row in overdue:
                    if self._close_or_log(row, now, reason, alive_until):
                        closed.append(row)
                    else:
                        failed.append(row["id"])
            if len(overdue) < ROUNDS_A_TURN:
                return closed

    def _overdue(self, now: float, failed: list[int], share: Share) -> list[dict[str, Any]]:
        """The first ``ROUNDS_A_TURN`` open rounds of ``share`` whose deadline passed, but
        ``failed``."""
        mine, params = share.of_code("p.code")
        return self.storage.all(
            "SELECT r.*, s.number AS session_number, p.code FROM rounds r "
            "JOIN sessions s ON s.id = r.session_id "
            "JOIN participants p ON p.id = r.participant_id "
            "WHERE r.closed_at IS NULL AND r.deadline <= ? AND r.id NOT IN "
            f"({', '.join('?' * len(failed))}) AND {mine} ORDER BY r.deadline LIMIT ?",
            (now, *failed, *params, ROUNDS_A_TURN))

    def recover(self, alive_until: float | None) -> int:
        """At start, when no other server process is alive: close the rounds whose deadline
        passed while the study was down (``alive_until``: its last sign of life)."""
        return self.tick(self.clock(), reason="recovery", alive_until=alive_until)

    def _teammate_cookies(self, row: dict[str, Any], until: float) -> None:
        """Store the teammate's cookies finished by ``until``: its schedule is seeded by the
        round, so the cookies are written once, when the round closes."""
        times = [t for t in self.teammate_times.of(row) if row["started_at"] + t <= until]
        self.storage.insert_all("cookies", [{
            "round_id": row["id"], "participant_id": row["participant_id"],
            "actor": "teammate", "number": number, "task_type": row["teammate_task_type"],
            "task_name": TASK_NAMES[row["teammate_task_type"]],
            "finished_at": row["started_at"] + seconds, "seconds": seconds}
            for number, seconds in enumerate(times, 1)])
        row["teammate_cookies"] = len(times)

    def _close_or_log(self, row: dict[str, Any], now: float, reason: str,
                      alive_until: float | None) -> bool:
        """Close one round in its own savepoint: a round that fails to close is logged and
        left open (tried again at the next tick), without holding back the others."""
        try:
            return self._close_round(row, now, reason, alive_until)
        except StorageUnavailable:  # no round can close: the tick fails as a whole
            raise
        except Exception:
            log.exception("closing round %s failed", row["id"])
            return False

    def _still_at(self, row: dict[str, Any]) -> bool:
        """Whether the round's participant is still at its session (a team member whose
        seat an agent took over has left it)."""
        step = self.storage.one("SELECT step FROM participants WHERE id = ?",
                                (row["participant_id"],))
        return step is not None and step["step"] == f"session-{row['session_number']}"

    def _close_round(self, row: dict[str, Any], now: float, reason: str,
                     alive_until: float | None) -> bool:
        """Close one round, only if it is still open (another process may have closed it);
        the teammate's cookies and the session's end go with it. Its state is pushed and
        the teammate chosen after practice once the tick has committed (``tick``). A round
        the scheduler closes more than ``rounds.LATE_SECONDS`` after its deadline is
        ``late``; every round keeps how late it closed (``close_delay``)."""
        cut = alive_until is not None and alive_until < row["deadline"]
        delay = max(0.0, now - row["deadline"])
        reason = rounds.close_reason(reason, delay)
        with self.storage.event():
            still_open = self.storage.one("SELECT closed_at FROM rounds WHERE id = ?",
                                          (row["id"],))
            if still_open is None or still_open["closed_at"] is not None:
                return False
            if row["teammate_task_type"] is not None:
                self._teammate_cookies(row, min(row["deadline"], alive_until or row["deadline"]))
            self.storage.update("rounds", row["id"], {
                "closed_at": now, "close_reason": reason, "close_delay": delay,
                "teammate_cookies": row["teammate_cookies"],
                "alive_until": alive_until if cut else None})
            self.probes.open_after(row, now)
            session = self.storage.one("SELECT * FROM sessions WHERE id = ?", (row["session_id"],))
            row["session_rounds"] = session["rounds"]  # type: ignore[index]
            if row["number"] == session["rounds"]:  # type: ignore[index]
                self.storage.update("sessions", row["session_id"], {"finished_at": now})
                if row["session_number"] > 0 and self._still_at(row):
                    self.records.advance(row["participant_id"],
                                         f"questionnaire-{row['session_number']}", now)
        return True
