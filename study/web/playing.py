"""Rounds being played: starting them, checking cookies, and the clock that closes them.

Deadlines live in the database, so ``tick(now)`` brings every running round up to ``now``
whoever calls it: the scheduler, a restarted server (``recover``), or a test's clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from study.protocol import TASK_NAMES, Protocol
from study.solver import Policy
from study.storage import Storage, to_json
from study.web import rounds
from study.web.pages import ROUND_STEPS
from study.web.rejections import Rejected
from study.web.targets import matches
from study.web.teammate import policy_of


class Rounds:
    """The rounds of ``Journey`` (a mixin: it shares the journey's protocol, database, clock,
    solved policies and teammate schedules)."""

    protocol: Protocol
    storage: Storage
    lock: threading.RLock
    clock: Callable[[], float]
    policies: dict[int, Policy]
    schedules: dict[int, list[float]]
    pushes: list[tuple[str, str, dict[str, Any]]]

    def _last_round(self, session_id: int) -> dict[str, Any] | None:
        return self.storage.one("SELECT * FROM rounds WHERE session_id = ? "
                                "ORDER BY number DESC LIMIT 1", (session_id,))

    def _policy(self, session: dict[str, Any]) -> Policy:
        if session["id"] not in self.policies:
            self.policies[session["id"]] = policy_of(self.protocol, session)
        return self.policies[session["id"]]

    def _start_round(self, participant: dict[str, Any], payload: dict[str, Any],
                     now: float) -> None:
        step = participant["step"]
        number = payload.get("round")
        if not isinstance(number, int) or isinstance(number, bool):
            raise Rejected("malformed", "round must be a whole number")
        if step not in ROUND_STEPS:
            raise Rejected("out-of-order", f"no rounds at step {step}")
        session = self._session(participant["id"], ROUND_STEPS[step])
        last = self._last_round(session["id"])
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
        round_id = self.storage.insert("rounds", {
            "session_id": session["id"], "participant_id": participant["id"], "number": number,
            "task_type": task, "task_name": TASK_NAMES[task], "teammate_task_type": teammate_task,
            "started_at": now, "deadline": now + seconds, "seconds": seconds,
            "participant_cookies": 0, "teammate_cookies": 0})
        if session["kind"] == "collaborative":
            self._record_allocation(session, round_id, number, kits, held, now)

    def _next_kits(self, session: dict[str, Any]) -> tuple[tuple[int, ...], np.ndarray]:
        """The robot's kits for the next round, from the allocations stored so far."""
        rows = self.storage.all("SELECT human, task_type FROM allocations WHERE session_id = ?",
                                (session["id"],))
        held = rounds.held_before(rows, 2, len(self.protocol.kits))
        return rounds.next_kits(self._policy(session), held), held

    def _record_allocation(self, session: dict[str, Any], round_id: int, number: int,
                           kits: tuple[int, ...], held: np.ndarray, now: float) -> None:
        for human, task in enumerate(kits):
            role = "participant" if human == session["participant_human"] else "teammate"
            self.storage.insert("allocations", {
                "round_id": round_id, "session_id": session["id"],
                "participant_id": session["participant_id"], "round": number, "human": human,
                "role": role, "task_type": task, "task_name": TASK_NAMES[task],
                "held_before": to_json(held.tolist()), "at": now})

    def _cookie(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        round_id, content = payload.get("round_id"), payload.get("content")
        if not isinstance(round_id, int) or isinstance(round_id, bool) or content is None:
            raise Rejected("malformed", "cookie needs round_id (whole number) and content")
        row = self.storage.one("SELECT * FROM rounds WHERE id = ? AND participant_id = ?",
                               (round_id, participant["id"]))
        if row is None or participant["step"] not in ROUND_STEPS:
            raise Rejected("out-of-order", f"round {round_id} is not this participant's")
        if row["closed_at"] is not None or now > row["deadline"]:
            raise Rejected("round-closed", f"round {round_id} ended at {row['deadline']:.3f}")
        previous = self.storage.one(
            "SELECT max(finished_at) AS at FROM cookies WHERE round_id = ? AND actor = ?",
            (round_id, "participant"))
        since = now - (previous["at"] or row["started_at"])  # type: ignore[index]
        if since < self.protocol.min_cookie_seconds:
            raise Rejected("too-fast", f"{since:.3f} s after the previous cookie")
        if not matches(rounds.target(self.protocol, row["task_type"]), content):
            raise Rejected("wrong-cookie", "the cookie does not match its target")
        count = row["participant_cookies"] + 1
        self.storage.insert("cookies", {
            "round_id": round_id, "participant_id": participant["id"], "actor": "participant",
            "number": count, "task_type": row["task_type"], "task_name": row["task_name"],
            "finished_at": now, "seconds": now - row["started_at"], "content": to_json(content),
            "msg_id": payload["msg_id"]})
        self.storage.update("rounds", round_id, {"participant_cookies": count})

    # --- the clock ----------------------------------------------------------------------

    def tick(self, now: float | None = None, reason: str = "deadline") -> int:
        """Bring every running round up to ``now``: the teammate's cookies that fell due,
        and the rounds whose deadline passed closed. Returns how many rounds closed."""
        now = self.clock() if now is None else now
        closed = 0
        with self.lock:
            running = self.storage.all(
                "SELECT r.*, s.number AS session_number, p.code FROM rounds r "
                "JOIN sessions s ON s.id = r.session_id "
                "JOIN participants p ON p.id = r.participant_id WHERE r.closed_at IS NULL")
            for row in running:
                if row["teammate_task_type"] is not None:
                    self._teammate_progress(row, min(now, row["deadline"]))
                if now >= row["deadline"]:
                    self._close_round(row, now, reason)
                    closed += 1
        self.flush()
        return closed

    def recover(self) -> int:
        """At server start: close the rounds whose deadline passed while it was down."""
        return self.tick(self.clock(), reason="recovery")

    def _schedule(self, row: dict[str, Any]) -> list[float]:
        if row["id"] not in self.schedules:
            teammate = self.storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                                        (row["participant_id"],))
            self.schedules[row["id"]] = rounds.teammate_times(
                self.protocol, teammate, row, row["session_number"])  # type: ignore[arg-type]
        return self.schedules[row["id"]]

    def _teammate_progress(self, row: dict[str, Any], until: float) -> None:
        times = self._schedule(row)
        due = sum(1 for t in times if row["started_at"] + t <= until)
        for number in range(row["teammate_cookies"] + 1, due + 1):
            seconds = times[number - 1]
            with self.storage.event() as db:
                db["cookies"].insert({
                    "round_id": row["id"], "participant_id": row["participant_id"],
                    "actor": "teammate", "number": number,
                    "task_type": row["teammate_task_type"],
                    "task_name": TASK_NAMES[row["teammate_task_type"]],
                    "finished_at": row["started_at"] + seconds, "seconds": seconds})
                db["rounds"].update(row["id"], {"teammate_cookies": number})
        if due > row["teammate_cookies"]:
            row["teammate_cookies"] = due
            self.pushes.append((row["code"], "teammate", {
                "round_id": row["id"], "cookies": due,
                "next_at": self._next_teammate_cookie(row, times)}))

    @staticmethod
    def _next_teammate_cookie(row: dict[str, Any], times: list[float]) -> float | None:
        done = row["teammate_cookies"]
        return row["started_at"] + times[done] if done < len(times) else None

    def _close_round(self, row: dict[str, Any], now: float, reason: str) -> None:
        with self.storage.event():
            self.storage.update("rounds", row["id"], {"closed_at": now, "close_reason": reason})
            session = self.storage.one("SELECT * FROM sessions WHERE id = ?", (row["session_id"],))
            if row["number"] == session["rounds"]:  # type: ignore[index]
                self.storage.update("sessions", row["session_id"], {"finished_at": now})
                self._after_session(row["participant_id"], row["session_number"], now)
        self.schedules.pop(row["id"], None)
        self.pushes.append((row["code"], "state", self.state(row["code"])))

    def _after_session(self, participant_id: int, number: int, now: float) -> None:
        if number == 0:
            self._choose_teammate(participant_id, now)
        else:
            self._advance(participant_id, f"questionnaire-{number}", now)
