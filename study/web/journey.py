"""The participant's journey: steps, rounds and cookies, checked and stored event by event.

This is the server's authority over the study, independent of Flask and Socket.IO so it can
be driven by the socket handlers, the round scheduler and tests alike. A participant is a
code; every call reads the participant's place from SQLite, checks the message against it,
and commits its effect in one transaction, or refuses it (logged, nothing changed). The
clock is injected: deadlines are tested by calling ``tick(now)``.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from study.decorator import coefficient_from_speed
from study.protocol import TASK_NAMES, Protocol, preference_coefficient
from study.solver import Policy
from study.storage import Storage, to_json
from study.web import pages, rounds
from study.web.admission import Admission
from study.web.balance import balanced_order
from study.web.pages import ROUND_STEPS, STEPS, TERMINAL, session_number
from study.web.rejections import Rejected
from study.web.targets import matches
from study.web.teammate import TeammateSource, algorithm_for, live_team, policy_of, session_row

MSG_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
CODE = re.compile(r"^[A-Za-z0-9_-]{3,64}$")
EXTERNAL_ID_LIMIT = 512

Notify = Callable[[str, str, dict[str, Any]], None]


def _no_notify(code: str, event: str, payload: dict[str, Any]) -> None:
    """Default sink for pushes when nothing listens (tools, some tests)."""


class Journey:
    """One study run: its protocol, database, teammate source and clock."""

    def __init__(self, protocol: Protocol, storage: Storage, teammates: TeammateSource,
                 clock: Callable[[], float], notify: Notify = _no_notify) -> None:
        self.protocol = protocol
        self.storage = storage
        self.teammates = teammates
        self.clock = clock
        self.notify = notify
        self.lock = threading.RLock()
        self.policies: dict[int, Policy] = {}
        self.schedules: dict[int, list[float]] = {}
        self.pushes: list[tuple[str, str, dict[str, Any]]] = []
        self.admission = Admission(storage, clock)
        for condition in protocol.conditions:
            algorithm_for(condition, teammates.fea_bounds)  # fail at start, not mid-study

    # --- enrolment and joining ----------------------------------------------------------

    def enrol(self, code: str | None = None,
              external_ids: dict[str, str] | None = None) -> dict[str, Any]:
        """The participant with this code, created if new; recruitment ids are recorded."""
        if code is not None and not CODE.match(code):
            raise Rejected("bad-code", "codes are 3-64 letters, digits, '-' or '_'")
        ids = {k[:64]: str(v)[:EXTERNAL_ID_LIMIT] for k, v in (external_ids or {}).items()}
        with self.lock:
            code = code or self._new_code()
            existing = self.storage.participant(code)
            if existing is not None:
                self._add_external_ids(existing, ids)
                return self.storage.participant(code)  # type: ignore[return-value]
            now = self.clock()
            with self.storage.event() as db:
                pid = db["participants"].insert({
                    "code": code, "protocol": self.protocol.name, "created_at": now,
                    "step": "consent", "condition_order": to_json(self._condition_order()),
                    "external_ids": to_json(ids) if ids else None}).last_pk
                db["steps"].insert({"participant_id": pid, "step": "consent", "at": now})
            return self.storage.participant(code)  # type: ignore[return-value]

    def _new_code(self) -> str:
        while True:
            code = secrets.token_hex(5)
            if self.storage.participant(code) is None:
                return code

    def _condition_order(self) -> list[str]:
        """Counterbalancing: the order least held by participants who may still contribute
        (``study.web.balance``)."""
        return balanced_order(self.storage, self.protocol)

    def _add_external_ids(self, participant: dict[str, Any], ids: dict[str, str]) -> None:
        if not ids or participant["step"] in TERMINAL:
            return
        known = json.loads(participant["external_ids"] or "{}")
        if {**known, **ids} != known:
            self.storage.update("participants", participant["id"],
                                {"external_ids": to_json({**known, **ids})})

    def join(self, code: Any) -> dict[str, Any]:
        """Bind a connection to a participant: the reply is the state rebuilt from SQLite."""
        if not isinstance(code, str) or not CODE.match(code):
            return self._refuse(None, "join", None, Rejected("bad-code"), {"code": code})
        with self.lock:
            if self.storage.participant(code) is None:
                return self._refuse(None, "join", None,
                                    Rejected("unknown-participant", code), {"code": code})
            return {"ok": True, "state": self.state(code)}

    # --- messages -----------------------------------------------------------------------

    def handle(self, event: str, code: str | None, payload: Any) -> dict[str, Any]:
        """Check and apply one client message; the reply is the ack of the socket protocol."""
        handlers = {"submit": self._submit, "start_round": self._start_round,
                    "cookie": self._cookie, "withdraw": self._withdraw}
        with self.lock:
            participant = self.storage.participant(code) if code else None
            msg_id = payload.get("msg_id") if isinstance(payload, dict) else None
            try:
                if participant is None:
                    raise Rejected("not-joined", "send join with a participant code first")
                self.admission.check(participant, event, payload)  # size, rate, holds
                msg_id = self._check_message(participant, payload)
                now = self.clock()
                with self.storage.event() as db:
                    db["messages"].insert({"participant_id": participant["id"],
                                           "msg_id": msg_id, "event": event, "at": now})
                    handlers[event](participant, payload, now)
            except Rejected as rejection:
                reply = self._refuse(participant, event, msg_id, rejection, payload)
            else:
                reply = {"ok": True, "state": self.state(participant["code"])}
                self.pushes.append((participant["code"], "state", reply["state"]))
        self.flush()
        return reply

    def _check_message(self, participant: dict[str, Any], payload: Any) -> str:
        if not isinstance(payload, dict):
            raise Rejected("malformed", "the payload must be an object")
        msg_id = payload.get("msg_id")
        if not isinstance(msg_id, str) or not MSG_ID.match(msg_id):
            raise Rejected("missing-msg-id", "msg_id must be 8-64 of [A-Za-z0-9_-]")
        if participant["step"] in TERMINAL:
            raise Rejected("finished", f"the study has ended ({participant['step']})")
        if self.storage.one("SELECT 1 FROM messages WHERE participant_id = ? AND msg_id = ?",
                            (participant["id"], msg_id)):
            raise Rejected("duplicate", f"message {msg_id} was already accepted")
        return msg_id

    def _refuse(self, participant: dict[str, Any] | None, event: str, msg_id: Any,
                rejection: Rejected, payload: Any) -> dict[str, Any]:
        self.storage.reject(participant["id"] if participant else None, event,
                            msg_id if isinstance(msg_id, str) else None, rejection.reason,
                            rejection.detail, payload, self.clock())
        reply: dict[str, Any] = {"ok": False, "error": "rejected", "reason": rejection.reason,
                                 "detail": rejection.detail}
        if participant is not None and self.storage.participant(participant["code"]):
            reply["state"] = self.state(participant["code"])
        return reply

    def flush(self) -> None:
        """Send the pushes collected under the lock, outside it."""
        with self.lock:
            pushes, self.pushes = self.pushes, []
        for code, event, payload in pushes:
            self.notify(code, event, payload)

    # --- page steps ---------------------------------------------------------------------

    def _advance(self, participant_id: int, step: str, now: float) -> None:
        values: dict[str, Any] = {"step": step}
        if step == "done":
            values["finished_at"] = now
        self.storage.update("participants", participant_id, values)
        self.storage.insert("steps", {"participant_id": participant_id, "step": step, "at": now})

    def _submit(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        step, data = payload.get("step"), payload.get("data", {})
        if not isinstance(step, str) or not isinstance(data, dict):
            raise Rejected("malformed", "submit needs step (text) and data (object)")
        if step != participant["step"]:
            raise Rejected("out-of-order", f"the participant is at {participant['step']}, "
                                           f"not {step}")
        if step in ROUND_STEPS:
            raise Rejected("out-of-order", f"{step} is finished by its rounds, not by submit")
        pid = participant["id"]
        if step == "consent":
            self._consent(participant, data, now)
        elif step == "preferences":
            self._preferences(pid, data, now)
        elif step.startswith("questionnaire") or step == "post":
            self._answers(participant, step, data, now)
        elif step == "debrief":
            self._debrief(participant, data, now)
        else:
            self._advance(pid, STEPS[STEPS.index(step) + 1], now)

    def _consent(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        agree = data.get("agree")
        if not isinstance(agree, bool):
            raise Rejected("malformed", "data.agree must be true or false")
        if agree:
            self.storage.update("participants", participant["id"],
                                {"consent": "given", "consent_at": now})
            self._advance(participant["id"], "themes", now)
        else:
            self.storage.erase_participant(participant["id"], {
                "step": "declined", "consent": "declined", "consent_at": now})

    def _preferences(self, pid: int, data: dict[str, Any], now: float) -> None:
        ratings = pages.check_ratings(self.protocol, data)
        points = self.protocol.preference_scale.points
        for theme in self.protocol.themes:
            self.storage.insert("answers", {
                "participant_id": pid, "questionnaire": "preferences", "item": theme.id,
                "label": theme.name, "value_number": ratings[theme.id], "at": now})
        for cookie in self.protocol.cookies:
            rating = ratings[cookie.theme]
            self.storage.insert("measurements", {
                "participant_id": pid, "kind": "preference", "task_type": cookie.task_type,
                "task_name": cookie.name, "value": preference_coefficient(rating, points),
                "theme": cookie.theme, "rating": rating, "at": now})
        self.storage.insert("sessions", {"participant_id": pid, "number": 0, "kind": "practice",
                                         "rounds": len(self.protocol.practice),
                                         "created_at": now})
        self._advance(pid, "practice", now)

    def _answers(self, participant: dict[str, Any], step: str, data: dict[str, Any],
                 now: float) -> None:
        number = session_number(step)
        session = self._session(participant["id"], number) if number else None
        robot = session["robot"] if session else None
        for item, value_number, value_text in pages.check_answers(self.protocol, step, data,
                                                                   robot):
            self.storage.insert("answers", {
                "participant_id": participant["id"], "questionnaire": step.replace(
                    "questionnaire", "session"),
                "session_id": session["id"] if session else None,
                "condition": session["condition"] if session else None, "item": item.id,
                "label": item.label, "value_number": value_number, "value_text": value_text,
                "at": now})
        self._advance(participant["id"], STEPS[STEPS.index(step) + 1], now)

    def _debrief(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        consent = data.get("consent")
        if not isinstance(consent, bool):
            raise Rejected("malformed", "data.consent must be true or false")
        if not consent:
            self._withdraw(participant, data, now)
            return
        self.storage.update("participants", participant["id"], {"data_consent": "given"})
        self._advance(participant["id"], "done", now)

    def _withdraw(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        """Delete everything about the participant but the fact of the withdrawal."""
        if participant["consent"] != "given":
            raise Rejected("out-of-order", "nothing to withdraw before consent")
        self.storage.erase_participant(participant["id"], {
            "step": "withdrawn", "data_consent": "withdrawn", "withdrawn_at": now})

    # --- rounds -------------------------------------------------------------------------

    def _session(self, participant_id: int, number: int) -> dict[str, Any]:
        return self.storage.one("SELECT * FROM sessions WHERE participant_id = ? AND number = ?",
                                (participant_id, number))  # type: ignore[return-value]

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

    # --- the teammate -------------------------------------------------------------------

    def _measure_capabilities(self, participant_id: int, now: float) -> np.ndarray:
        """The second practice round of each type gives the capability coefficient."""
        practice = self._session(participant_id, 0)
        values = np.zeros(len(TASK_NAMES))
        for task_type, number in self.protocol.measured_practice_rounds().items():
            row = self.storage.one("SELECT * FROM rounds WHERE session_id = ? AND number = ?",
                                   (practice["id"], number))
            speed = row["participant_cookies"] / row["seconds"]  # type: ignore[index]
            reference = self.protocol.cookies[task_type].reference_speed
            values[task_type] = coefficient_from_speed(speed, reference)
            self.storage.insert("measurements", {
                "participant_id": participant_id, "kind": "capability", "task_type": task_type,
                "task_name": TASK_NAMES[task_type], "value": values[task_type],
                "round_id": row["id"], "cookies": row["participant_cookies"],  # type: ignore[index]
                "seconds": row["seconds"], "speed": speed,  # type: ignore[index]
                "reference_speed": reference, "at": now})
        return values

    def _choose_teammate(self, participant_id: int, now: float) -> None:
        """Match the participant in the pool, record ``d`` and solve both sessions."""
        from study.pool import NoEligibleTeam

        c = self._measure_capabilities(participant_id, now)
        rows = self.storage.all("SELECT task_type, value FROM measurements WHERE "
                                "participant_id = ? AND kind = 'preference' ORDER BY task_type",
                                (participant_id,))
        p = np.array([row["value"] for row in rows])
        try:
            match = self.teammates.match(c, p)
        except NoEligibleTeam:
            self._advance(participant_id, "unmatched", now)
            return
        self.storage.insert("teammates", {
            "participant_id": participant_id, "pool": self.teammates.name,
            "pool_team": int(match.team_index), "participant_human": int(match.participant_human),
            "distance": float(match.distance),
            **{f"c_{name}": float(match.teammate_c[j]) for j, name in enumerate(TASK_NAMES)},
            **{f"p_{name}": float(match.teammate_p[j]) for j, name in enumerate(TASK_NAMES)},
            "at": now})
        team = live_team(match, c, p)
        participant = self.storage.one("SELECT * FROM participants WHERE id = ?",
                                       (participant_id,))
        for number, condition_id in enumerate(json.loads(participant["condition_order"]), 1):  # type: ignore[index]
            condition = self.protocol.condition(condition_id)
            algorithm = algorithm_for(condition, self.teammates.fea_bounds)
            row, policy = session_row(self.protocol, condition, team,
                                      int(match.participant_human), algorithm)
            session_id = self.storage.insert("sessions", {
                **row, "participant_id": participant_id, "number": number, "created_at": now})
            self.policies[session_id] = policy
        self._advance(participant_id, "teammate", now)

    # --- the state the browser shows ----------------------------------------------------

    def state(self, code: str) -> dict[str, Any]:
        """Everything the participant's page needs, rebuilt from the database."""
        with self.lock:
            participant = self.storage.participant(code)
            step = participant["step"]  # type: ignore[index]
            number = ROUND_STEPS.get(step, session_number(step))
            session = self._session(participant["id"], number) if number else None  # type: ignore[index]
            robot = session["robot"] if session else None
            transparency = (self.protocol.condition(session["condition"]).transparency
                            if session and session["condition"] else "")
            state = {"code": code, "step": step, "now": self.clock(),
                     "progress": {"index": STEPS.index(step) if step in STEPS else len(STEPS),
                                  "total": len(STEPS)},
                     "page": pages.page(self.protocol, step, robot, transparency),
                     "robot": {"name": robot} if robot else None, "round": None,
                     "last_round": self._last_round_summary(participant["id"])}  # type: ignore[index]
            if step in ROUND_STEPS:
                state["round"] = self._round_state(self._session(participant["id"],  # type: ignore[index]
                                                                 ROUND_STEPS[step]))
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
        last = self._last_round(session["id"])
        running = last is not None and last["closed_at"] is None
        held = self.storage.all("SELECT task_type FROM allocations WHERE session_id = ?",
                                (session["id"],))
        remaining = list(self.protocol.kits)
        for row in held:
            remaining[row["task_type"]] -= 1
        state: dict[str, Any] = {
            "session": session["number"], "of": session["rounds"], "running": running,
            "next": None if running else (last["number"] + 1 if last else 1),
            "station": remaining if session["kind"] == "collaborative" else None}
        if running:
            state.update(self._running_round(last, session))  # type: ignore[arg-type]
        return state

    def _running_round(self, row: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
        state = {"id": row["id"], "number": row["number"], "started_at": row["started_at"],
                 "deadline": row["deadline"], "task_type": row["task_type"],
                 "task_name": row["task_name"], "cookies": row["participant_cookies"],
                 "target": rounds.target(self.protocol, row["task_type"]), "teammate": None}
        if row["teammate_task_type"] is not None:
            times = self._schedule({**row, "session_number": session["number"]})
            state["teammate"] = {"task_type": row["teammate_task_type"],
                                 "task_name": TASK_NAMES[row["teammate_task_type"]],
                                 "cookies": row["teammate_cookies"],
                                 "next_at": self._next_teammate_cookie(row, times)}
        return state
