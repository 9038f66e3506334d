"""People of the console's live fairness: participants with an agent teammate enrolled
through a recruitment link and played some rounds on the injected clock, probe answers
where a study has them, and the running metrics worked out again from the stored rows."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from study.allocation.model import all_metrics
from support.journey import Browser, through_preferences
from support.recruitment import code_of, pid
from support.web import FakeClock, journey, rows


def agent_participant(app: Any, clock: FakeClock, name: str, rounds: int) -> str:
    """A participant enrolled by their Prolific id (``pid(name)``), through practice and
    into session 1 with its first ``rounds`` rounds handed out (the last one left
    running); their code."""
    reply = app.test_client().get(f"/start?PROLIFIC_PID={pid(name)}")
    you = Browser(app, code_of(reply))
    through_preferences(you)
    for number in range(1, 5):
        _play(app, clock, you, number, journey(app).protocol.practice_seconds)
    you.submit("teammate")
    you.submit("intro-1")
    for number in range(1, rounds + 1):
        _play(app, clock, you, number, journey(app).protocol.round_seconds,
              close=number < rounds)
    return you.code


def _play(app: Any, clock: FakeClock, you: Browser, number: int, seconds: float,
          close: bool = True) -> None:
    """A round with two cookies, closed at its deadline unless told otherwise (a round
    left running closes when the clock passes its deadline for someone else)."""
    round_state = you.start(number)
    for _ in range(2):
        clock.advance(1.0)
        assert you.cookie(round_state)["ok"]
    if close:
        clock.advance(seconds)
        journey(app).tick(clock.now)


def session_of(app: Any, code: str, number: int = 1) -> dict[str, Any]:
    (session,) = rows(app, "SELECT s.* FROM sessions s JOIN participants p ON "
                           "p.id = s.participant_id WHERE p.code = ? AND s.number = ?",
                      code, number)
    return session


def held(kits: list[tuple[int, int, int]], humans: int, types: int) -> np.ndarray:
    """``[R, h, n]`` kits held after each round from ``(round, human, type)``."""
    rounds = max(kit[0] for kit in kits)
    after = np.zeros((rounds, humans, types))
    for number, human, task in kits:
        after[number - 1:, human, task] += 1
    return after


def running(c: Any, p: Any, kits: np.ndarray, first: int) -> dict[str, list[float]]:
    """Running ``F`` and ``FE`` from ``study.allocation.model``, signed towards human
    ``first`` (two humans: the other one's sign turned)."""
    metrics = all_metrics(np.array(c)[None], np.array(p)[None], kits)
    sign = 1 if first == 0 or len(c) > 2 else -1
    return {name: [sign * float(v) for v in metrics[name]] for name in ("F", "FE")}


def expected(session: dict[str, Any], kits: list[tuple[int, int, int]],
             first: int) -> dict[str, list[float]]:
    """The session's running metrics of the kits handed out and of its stored plan."""
    c, p = json.loads(session["team_c"]), json.loads(session["team_p"])
    humans, types = len(c), len(c[0])
    plan = [(number, human, task) for number, kits_of in
            enumerate(json.loads(session["plan"]), 1) for human, task in enumerate(kits_of)]
    actual = running(c, p, held(kits, humans, types), first)
    planned = running(c, p, held(plan, humans, types), first)
    return {**actual, "planned_F": planned["F"], "planned_FE": planned["FE"]}


def answer(app: Any, participant_id: int, session: dict[str, Any], number: int, probe: str,
           value: int | None, missed: bool) -> None:
    """A probe of the round as the page leaves it: answered ``value``, missed, or
    neither (shown, still open)."""
    storage = journey(app).storage
    (round_row,) = rows(app, "SELECT id, closed_at FROM rounds WHERE session_id = ? AND "
                             "number = ?", session["id"], number)
    with storage.event():
        storage.write("DELETE FROM probes WHERE round_id = ? AND probe = ?",
                      (round_row["id"], probe))
        storage.write("INSERT INTO probes (participant_id, session_id, round_id, "
                      "session_number, round_number, probe, deadline, answered_at, value, "
                      "missed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (participant_id, session["id"], round_row["id"], session["number"],
                       number, probe, 1.0 + number, None if value is None else 1.0 + number,
                       value, int(missed)))


def off_plan(app: Any, session: dict[str, Any]) -> None:
    """The stored plan with the first round's kits turned: the session no longer follows it."""
    plan = json.loads(session["plan"])
    plan[0] = [1 - task for task in plan[0]]
    storage = app.extensions["study"].storage
    with storage.event():
        storage.write("UPDATE sessions SET plan = ? WHERE id = ?",
                      (json.dumps(plan), session["id"]))
