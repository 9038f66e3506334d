"""What the analysis tests build on: a study database written row by row, the report's
tables read back, and simulated participants taken through the journey in process."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve
from study.bots import AckLog, Bot, StudyFacts
from study.bots.participant import (
    BEHAVIOURS,
    ROUND_STEPS,
    TERMINAL_STEPS,
    Profile,
    _next_round,
    cookie_content,
    measured_round,
    partial_content,
    stop_point_reached,
)
from study.protocol.loader import load_protocol
from study.storage.database import Storage
from study.web.participant.agent_pool import PoolTeammates
from support.web import FakeClock, make_app

TASK_NAMES = ("squares", "letters")
LIKERT = (("cap_agree", "Cap-Agree"), ("cap_rating", "Cap-Rating"),
          ("pref_agree", "Pref-Agree"), ("pref_rating", "Pref-Rating"),
          ("fair_overall", "Fair-Overall"))


def add_participant(storage: Storage, code: str, seed: int, participant_human: int = 0,
                    conditions: tuple[str, ...] = ("efficient", "fair")) -> int:
    """One participant's whole journey, row by row as the app records it."""
    rng = np.random.default_rng(seed)
    now = 1_700_000_000.0 + seed * 1000
    pid = storage.insert("participants", {
        "code": code, "protocol": "study1", "created_at": now, "step": "done",
        "condition_order": json.dumps(list(conditions)), "external_ids": "{}",
        "consent": "given", "consent_at": now, "data_consent": "given",
        "finished_at": now + 900})
    own_c = rng.uniform(0.2, 0.9, 2)
    own_p = rng.uniform(0.1, 0.9, 2)
    practice = storage.insert("sessions", {"participant_id": pid, "number": 0,
                                           "kind": "practice", "rounds": 4, "created_at": now})
    for number, task in enumerate((0, 0, 1, 1), start=1):
        cookies = int(rng.integers(2, 10))
        round_id = storage.insert("rounds", {
            "session_id": practice, "participant_id": pid, "number": number,
            "task_type": task, "task_name": TASK_NAMES[task], "started_at": now,
            "deadline": now + 30, "seconds": 30.0, "closed_at": now + 30,
            "close_reason": "deadline", "participant_cookies": cookies, "teammate_cookies": 0})
        if number in (2, 4):
            storage.insert("measurements", {
                "participant_id": pid, "kind": "capability", "task_type": task,
                "task_name": TASK_NAMES[task], "value": own_c[task], "round_id": round_id,
                "cookies": cookies, "seconds": 30.0, "speed": cookies / 30,
                "reference_speed": 0.4, "at": now})
    for task in (0, 1):
        storage.insert("measurements", {
            "participant_id": pid, "kind": "preference", "task_type": task,
            "task_name": TASK_NAMES[task], "value": own_p[task], "theme": f"t{task}",
            "rating": 4, "at": now})
    mate_c, mate_p = rng.uniform(0.2, 0.9, 2), rng.uniform(0.1, 0.9, 2)
    storage.insert("teammates", {
        "participant_id": pid, "pool": "missing-pool.parquet", "pool_team": seed,
        "participant_human": participant_human, "distance": 0.05 * seed,
        "c_squares": mate_c[0], "c_letters": mate_c[1], "p_squares": mate_p[0],
        "p_letters": mate_p[1], "at": now})
    team_c = np.array([own_c, mate_c])[[participant_human, 1 - participant_human]]
    team_p = np.array([own_p, mate_p])[[participant_human, 1 - participant_human]]
    for number, condition in enumerate(conditions, start=1):
        add_session(storage, pid, number, condition, team_c, team_p, participant_human,
                    rng, now + 100 * number)
    storage.insert("answers", {"participant_id": pid, "questionnaire": "post", "item": "age",
                               "label": "Age", "value_number": 20 + seed, "at": now})
    storage.insert("answers", {"participant_id": pid, "questionnaire": "post",
                               "item": "gender", "label": "Gender",
                               "value_text": "Woman" if seed % 2 else "Man", "at": now})
    return pid


def add_session(storage: Storage, pid: int, number: int, condition: str, team_c: np.ndarray,
                team_p: np.ndarray, seat: int, rng: np.random.Generator, now: float) -> None:
    policy = solve(Team(team_c, team_p), Algorithm(condition))
    session = storage.insert("sessions", {
        "participant_id": pid, "number": number, "kind": "collaborative",
        "condition": condition, "algorithm": condition, "robot": condition.title(),
        "round_order": "default", "participant_human": seat,
        "team_c": json.dumps(team_c.tolist()), "team_p": json.dumps(team_p.tolist()),
        "goal": json.dumps(policy.goal_allocation.tolist()),
        "plan": json.dumps([list(types) for types in policy.plan]),
        "reward": policy.reward, "rounds": 8, "created_at": now, "finished_at": now + 240})
    for round_number, types in enumerate(policy.plan, start=1):
        mine, theirs = int(rng.integers(0, 6)), int(rng.integers(0, 6))
        round_id = storage.insert("rounds", {
            "session_id": session, "participant_id": pid, "number": round_number,
            "task_type": types[seat], "task_name": TASK_NAMES[types[seat]],
            "teammate_task_type": types[1 - seat], "started_at": now, "deadline": now + 30,
            "seconds": 30.0, "closed_at": now + 30, "close_reason": "deadline",
            "participant_cookies": mine, "teammate_cookies": theirs})
        for human, task in enumerate(types):
            storage.insert("allocations", {
                "round_id": round_id, "session_id": session, "participant_id": pid,
                "round": round_number, "human": human,
                "role": "participant" if human == seat else "teammate", "task_type": task,
                "task_name": TASK_NAMES[task], "held_before": "[[0,0],[0,0]]",
                "at": now})
        for actor, count in (("participant", mine), ("teammate", theirs)):
            for k in range(1, count + 1):
                storage.insert("cookies", {
                    "round_id": round_id, "participant_id": pid, "actor": actor, "number": k,
                    "task_type": types[seat if actor == "participant" else 1 - seat],
                    "task_name": "x", "finished_at": now + k, "seconds": float(k)})
    for item, label in LIKERT:
        storage.insert("answers", {
            "participant_id": pid, "questionnaire": f"session-{number}",
            "session_id": session, "condition": condition, "item": item, "label": label,
            "value_number": float(rng.integers(1, 8)), "at": now})
    storage.insert("answers", {
        "participant_id": pid, "questionnaire": f"session-{number}", "session_id": session,
        "condition": condition, "item": "fair_overall_why", "label": "Fair-Overall-Open",
        "value_text": "because", "at": now})


def add_probes(storage: Storage, pid: int, respond: Callable[[float], int | None],
               probe: str = "fair_round", seconds: float = 8.0) -> None:
    """A probe after every collaborative round of the participant, row by row as the app
    records it: ``respond`` answers from the participant's share of rounds so far on their
    most preferred type (None: missed, as when the probe's seconds ran out)."""
    own_p = [row["value"] for row in storage.all(
        "SELECT value FROM measurements WHERE participant_id = ? AND kind = 'preference' "
        "ORDER BY task_type", (pid,))]
    preferred = int(np.argmax(own_p))
    for session in storage.all("SELECT id, number FROM sessions WHERE participant_id = ? "
                               "AND kind = 'collaborative' ORDER BY number", (pid,)):
        held = 0
        for played in storage.all("SELECT id, number, task_type, closed_at FROM rounds "
                                  "WHERE session_id = ? ORDER BY number", (session["id"],)):
            held += played["task_type"] == preferred
            value = respond(held / played["number"])
            shown = played["closed_at"]
            storage.insert("probes", {
                "participant_id": pid, "session_id": session["id"], "round_id": played["id"],
                "session_number": session["number"], "round_number": played["number"],
                "probe": probe, "shown_at": shown, "deadline": shown + seconds,
                "answered_at": None if value is None else shown + 2.0, "value": value,
                "missed": int(value is None)})


def make_database(path):
    """Four participants who finished (one seated as human 1), one who withdrew at the
    debrief and one who declined consent."""
    storage = Storage(path)
    for seed in range(4):
        add_participant(storage, f"code{seed}", seed, participant_human=seed % 3 == 2)
    gone = add_participant(storage, "gone", 9)
    storage.erase_participant(gone, {"step": "withdrawn"})
    storage.insert("participants", {"code": "nope", "protocol": "study1",
                                    "created_at": 1.0, "step": "declined",
                                    "consent": "declined"})
    storage.close()
    return path


class Tables(HTMLParser):
    """Every ``<table>`` of a page as a list of rows of cell texts, keyed by the ``<h3>``
    caption before it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.caption = ""
        self.in_caption = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "h3":
            self.in_caption, self.caption = True, ""
        elif tag == "table":
            self.tables[self.caption] = []
        elif tag == "tr":
            self.tables[self.caption].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "h3":
            self.in_caption = False
        elif tag in ("td", "th") and self.cell is not None:
            self.tables[self.caption][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.in_caption:
            self.caption += data
        elif self.cell is not None:
            self.cell.append(data)


def read_report(out: Path) -> tuple[Tables, str]:
    """The tables of the report in ``out``, and its page."""
    page = (out / "report.html").read_text(encoding="utf-8")
    parser = Tables()
    parser.feed(page)
    return parser, page


def table(tables: Tables, caption: str) -> pd.DataFrame:
    header, *rows = tables.tables[caption]
    return pd.DataFrame(rows, columns=header)


PASSING = "A computer agent"  # the demo's manipulation check, passed


class InProcessBot:
    """A bot's decisions (``study.bots.Bot``: page answers, decorator pace, stop point)
    sent straight to the journey, the clock moved instead of waited for."""

    def __init__(self, journey: Any, clock: FakeClock, code: str, bot: Bot,
                 recover_measured: bool = False, check_answer: str | None = None) -> None:
        self.journey, self.clock, self.code, self.bot = journey, clock, code, bot
        self.recover_measured = recover_measured
        self.check_answer = check_answer
        self.ids = itertools.count()

    def send(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        reply = self.journey.handle(event, self.code,
                                    {"msg_id": f"{self.code}-{next(self.ids)}", **payload})
        assert reply["ok"], reply
        return reply

    def run(self) -> str:
        state = self.journey.join(self.code)["state"]
        while (state["step"] not in TERMINAL_STEPS
               and not stop_point_reached(self.bot.profile.stop_at, state)):
            self.answer_probes(state)
            if state["step"] in ROUND_STEPS:
                self.play(state)
            else:
                self.send("submit", {"step": state["step"], "data": self.page_data(state)})
            state = self.journey.state(self.code)
        return state["step"]

    def page_data(self, state: dict[str, Any]) -> dict[str, Any]:
        """The bot's answers; the protocol's manipulation check passed unless told
        otherwise."""
        data = self.bot.page_data(state)
        rules = self.journey.protocol.analysis
        if state["step"] == "post" and rules.manipulation_check_item:
            data["answers"][rules.manipulation_check_item] = (
                self.check_answer or rules.manipulation_check_pass[0])
        return data

    def play(self, state: dict[str, Any]) -> None:
        number = _next_round(state.get("round"))
        current = self.send("start_round", {"round": number})["state"]["round"]
        self.bot.kits.saw(current["session"], current["id"], current["task_type"])
        seconds = current["deadline"] - current["started_at"]
        last = 0.0
        for due in self.bot.decorator.fresh_times(current["task_type"], seconds, self.bot.rng):
            at = max(due, last + 0.55)
            if at >= seconds - 0.1:
                break
            self.clock.now = current["started_at"] + at
            if measured_round(current):
                self.send("progress", {"round_id": current["id"],
                                       "content": partial_content(current["target"], 0.5)})
            self.send("cookie", {"round_id": current["id"],
                                 "content": cookie_content(current["target"])})
            last = at
        self.report_unfinished(current, seconds - 0.2, last)
        self.clock.now = current["deadline"] + 0.01
        if self.recover_measured and state["step"] == "practice" and number == 4:
            self.journey.recover(alive_until=current["deadline"] - 1.0)
        else:
            self.journey.tick(self.clock.now)


    def answer_probes(self, state: dict[str, Any]) -> None:
        """The open probes answered by the bot's response model the moment they open
        (``Bot.answer_probes``); a missed one is left to its deadline."""
        for probe in state.get("probes") or []:
            value = self.bot.probe_answer(probe)
            if value is not None:
                self.send("probe", {"round_id": probe["round_id"], "probe": probe["id"],
                                    "value": value})

    def report_unfinished(self, current: dict[str, Any], at: float, last: float) -> None:
        """The cookie in progress just before the deadline, as ``Bot.report_unfinished``."""
        share = self.bot.decorator.unfinished(current["task_type"], at - last)
        content = partial_content(current["target"], share)
        if content is not None:
            self.clock.now = current["started_at"] + at
            self.send("progress", {"round_id": current["id"], "content": content})


def run_bots(directory: Path, profiles: Sequence[Profile], protocol: Path) -> tuple[Any, list[str]]:
    """Every profile through the journey in-process, a bot each: the journey and each bot's
    last step."""
    loaded = load_protocol(protocol)
    clock = FakeClock()
    app = make_app(directory, PoolTeammates.for_protocol(loaded, directory / "pools"), clock,
                   protocol=protocol)
    journey = app.extensions["study"]
    facts = StudyFacts.from_protocol(loaded)
    steps = []
    for profile in profiles:
        code = journey.enrol()["code"]
        steps.append(InProcessBot(journey, clock, code, Bot("http://in-process", code, profile,
                                                            AckLog(), facts=facts)).run())
    return journey, steps


def run_study(directory: Path, profiles: Sequence[tuple[Any, Any]], protocol: Path) -> Path:
    """Every profile (capabilities, preferences) through the journey in-process, a fast bot
    each; the database the study wrote."""
    journey, _ = run_bots(directory, [
        Profile(capabilities, preferences, BEHAVIOURS["fast"], seed=index)
        for index, (capabilities, preferences) in enumerate(profiles)], protocol)
    journey.storage.close()
    return directory / "study.sqlite"
