"""A study of three (and four) robots, one session each: the pages say which session of
how many, the session questionnaire follows every session, the post questionnaire ranks
and compares every robot met, and bots over HTTP and Socket.IO finish the whole study."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.protocols import THREE, four_robots
from support.web import FakeClock, LiveServer, make_app, small_pool

from study.bots import BEHAVIOURS, Profile, StudyFacts, bot_codes, run_swarm
from study.bots.servers import quick_protocol
from study.protocol.loader import load_protocol
from study.web import create_app
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.pages import steps_of

SESSION_ANSWERS = {"cap_agree": 6, "cap_rating": 5, "pref_agree": 4, "pref_rating": 3,
                   "fair_overall": 2, "fair_overall_why": "It gave me the cookies I do best."}
POST = {"next_time_why": "", "teammate_believed": "I was not sure", "age": 40,
        "gender": "Prefer not to say"}


class Person:
    """One participant's messages straight to the journey, on the test's clock."""

    def __init__(self, app: Any, clock: FakeClock, code: str) -> None:
        self.journey, self.clock, self.code = app.extensions["study"], clock, code
        self.ids = itertools.count()
        self.journey.enrol(code)

    def send(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.journey.handle(event, self.code,
                                   {"msg_id": f"{self.code}-{next(self.ids):04d}", **payload})

    def submit(self, step: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.send("submit", {"step": step, "data": data or {}})
        assert reply["ok"], reply
        return reply["state"]

    def state(self) -> dict[str, Any]:
        return self.journey.state(self.code)

    def play(self, rounds: int) -> None:
        """Start each round, finish one cookie (its first element reported as the page
        reports it), let the clock close it."""
        for number in range(1, rounds + 1):
            reply = self.send("start_round", {"round": number})
            assert reply["ok"], reply
            current = reply["state"]["round"]
            self.clock.advance(1.0)
            target = current["target"]
            content = target["text"] if target["kind"] == "letters" else target["cells"]
            assert self.send("progress", {"round_id": current["id"],
                                          "content": content[:1]})["ok"]
            assert self.send("cookie", {"round_id": current["id"], "content": content})["ok"]
            self.clock.now = current["deadline"] + 0.01
            self.journey.tick(self.clock.now)


@pytest.fixture(scope="module")
def teammates(tmp_path_factory):
    """A small pool whose rule never leaves anyone unmatched: with four robots, members
    with which every two robots differ are rare on two-round sessions."""
    return small_pool(tmp_path_factory.mktemp("pools"), teammate={"unplaced": "continue"})


def to_post(tmp_path: Path, teammates: Any, protocol: Path = THREE,
            ) -> tuple[Any, Person, list[dict[str, Any]]]:
    """A participant of ``protocol`` walked to the post questionnaire; the pages' states
    of the sessions' steps on the way."""
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, protocol)
    person = Person(app, clock, "walker")
    person.submit("consent", {"agree": True})
    person.submit("themes")
    person.submit("preferences", {"ratings": {"ravens": 7, "steelers": 2}})
    person.play(4)
    assert person.state()["step"] == "teammate"
    person.submit("teammate")
    seen = []
    sessions = app.extensions["study"].protocol.sessions
    for number in range(1, sessions + 1):
        seen.append(person.state())
        person.submit(f"intro-{number}")
        seen.append(person.state())
        person.play(2)
        seen.append(person.state())
        person.submit(f"questionnaire-{number}", {"answers": SESSION_ANSWERS})
    return app, person, seen


def test_every_session_has_its_intro_rounds_and_questionnaire_and_says_which_it_is(
        tmp_path, teammates):
    app, person, seen = to_post(tmp_path, teammates)
    protocol = app.extensions["study"].protocol
    steps = steps_of(protocol)
    assert [s["step"] for s in seen] == [f"{part}-{n}" for n in (1, 2, 3)
                                         for part in ("intro", "session", "questionnaire")]
    assert [s["session"] for s in seen] == [{"number": n, "of": 3} for n in (1, 2, 3)
                                            for _ in range(3)]
    assert all(s["progress"] == {"index": steps.index(s["step"]), "total": len(steps)}
               for s in seen)
    order = json.loads(app.extensions["study"].storage.participant("walker")[
        "condition_order"])
    robots = {c.id: c.robot for c in protocol.conditions}
    intros = [s for s in seen if s["step"].startswith("intro")]
    assert [s["page"]["robot"] for s in intros] == [robots[c] for c in order]
    assert [s["page"]["title"] for s in seen if s["step"].startswith("questionnaire")] == [
        f"About Robot {robots[c]}" for c in order]
    post = person.state()
    assert post["step"] == "post" and post["session"] is None
    items = {item["id"]: item for item in post["page"]["items"]}
    met = [{"id": c, "name": robots[c]} for c in order]
    assert items["next_time_rank"]["robots"] == met
    assert [(p["a"], p["b"]) for p in items["fairer"]["pairs"]] == [
        (met[0], met[1]), (met[0], met[2]), (met[1], met[2])]
    assert items["fairer"]["tie"] == "No difference"


def test_rank_and_pairwise_answers_are_checked_and_stored_one_row_each(tmp_path, teammates):
    app, person, _ = to_post(tmp_path, teammates)
    storage = app.extensions["study"].storage
    order = json.loads(storage.participant("walker")["condition_order"])
    keys = [f"{a}|{b}" for a, b in itertools.combinations(order, 2)]
    good_pairs = {keys[0]: order[1], keys[1]: "=", keys[2]: order[1]}
    wrong = [{"next_time_rank": order[:2], "fairer": good_pairs},  # a robot left out
             {"next_time_rank": [order[0], order[0], order[1]], "fairer": good_pairs},
             {"next_time_rank": [*order[:2], "maximin"], "fairer": good_pairs},
             {"next_time_rank": "fair,fea,efficient", "fairer": good_pairs},
             {"next_time_rank": order, "fairer": {**good_pairs, keys[1]: "nobody"}},
             {"next_time_rank": order, "fairer": {keys[0]: order[0]}},  # pairs left out
             {"next_time_rank": order}]  # a required item not answered
    for answers in wrong:
        reply = person.send("submit", {"step": "post", "data": {"answers": {**POST,
                                                                            **answers}}})
        assert not reply["ok"] and reply["reason"] == "invalid-answer", answers
    assert storage.one("SELECT count(*) AS n FROM answers WHERE questionnaire = 'post'")[
        "n"] == 0
    ranked = order[::-1]
    person.submit("post", {"answers": {**POST, "next_time_rank": ranked,
                                       "fairer": good_pairs}})
    stored = {row["item"]: row for row in storage.all(
        "SELECT * FROM answers WHERE questionnaire = 'post'")}
    assert stored["next_time_rank"]["value_text"] == ",".join(ranked)
    assert stored["fairer"]["value_text"] == (f"{order[1]}>{order[0]};{order[0]}={order[2]};"
                                              f"{order[1]}>{order[2]}")
    assert stored["fairer"]["label"] == "Fairer" and stored["fairer"]["condition"] is None
    questionnaires = storage.all("SELECT questionnaire, condition, count(*) AS n FROM answers "
                                 "WHERE questionnaire LIKE 'session-%' GROUP BY questionnaire "
                                 "ORDER BY questionnaire")
    assert [(q["questionnaire"], q["condition"], q["n"]) for q in questionnaires] == [
        (f"session-{n}", order[n - 1], len(SESSION_ANSWERS)) for n in (1, 2, 3)]
    assert person.state()["step"] == "debrief"


def test_a_pairwise_item_without_a_tie_takes_only_one_of_the_two(tmp_path, teammates):
    protocol = tmp_path / "no-tie.toml"
    protocol.write_text(THREE.read_text(encoding="utf-8").replace('tie = "No difference"\n',
                                                                  ""), encoding="utf-8")
    app, person, _ = to_post(tmp_path, teammates, protocol)
    order = json.loads(app.extensions["study"].storage.participant("walker")[
        "condition_order"])
    pairs = {f"{a}|{b}": a for a, b in itertools.combinations(order, 2)}
    tied = {**pairs, f"{order[0]}|{order[1]}": "="}
    reply = person.send("submit", {"step": "post", "data": {"answers": {
        **POST, "next_time_rank": order, "fairer": tied}}})
    assert reply["reason"] == "invalid-answer"
    assert person.state()["page"]["items"][1]["tie"] is None
    person.submit("post", {"answers": {**POST, "next_time_rank": order, "fairer": pairs}})


def test_four_robots_make_four_sessions_in_a_williams_order(tmp_path, teammates):
    app, person, seen = to_post(tmp_path, teammates, four_robots(tmp_path))
    assert [s["session"]["number"] for s in seen if s["step"].startswith("intro")] == [
        1, 2, 3, 4]
    pairs = next(item for item in person.state()["page"]["items"] if item["id"] == "fairer")
    assert len(pairs["pairs"]) == 6
    sessions = app.extensions["study"].storage.all(
        "SELECT number, condition FROM sessions WHERE number > 0 ORDER BY number")
    assert [s["condition"] for s in sessions] == ["efficient", "fair", "fea", "maximin"]
    declared = json.loads(app.extensions["study"].storage.one(
        "SELECT * FROM sessions WHERE condition = 'maximin'")["algorithm_declaration"])
    assert declared["terms"] == {"egalitarian_c": 0.5, "efficiency": 0.5}


# --- bots over HTTP and Socket.IO --------------------------------------------------------


def rows(db: Path, sql: str, *params: Any) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, params).fetchall()


def served(root: Path, source: Path) -> tuple[LiveServer, Path, StudyFacts]:
    protocol = quick_protocol(source, root / "quick.toml", round_seconds=2.5,
                              practice_seconds=1.5)
    loaded = load_protocol(protocol)
    app = create_app({"PROTOCOL": protocol, "DATABASE": root / "study.sqlite",
                      "TEAMMATES": PoolTeammates.for_protocol(loaded, root / "pools")})
    return LiveServer(app), root / "study.sqlite", StudyFacts.from_protocol(loaded)


@pytest.mark.parametrize(("robots", "bots"), [(3, 3), (4, 4)])
@pytest.mark.minutes(0.5)
def test_bots_finish_a_study_of_several_robots(tmp_path, robots, bots):
    source = THREE if robots == 3 else four_robots(tmp_path)
    server, db, facts = served(tmp_path, source)
    profiles = [Profile((0.8, 0.4), (0.7, 0.3), BEHAVIOURS["fast"], seed=k) for k in range(bots)]
    codes = bot_codes(bots)
    with server:
        result = run_swarm(server.url, codes, profiles, facts=facts, max_seconds=120)
    assert [o.error for o in result.outcomes] == [None] * bots, result.summary()
    assert {o.final_step for o in result.outcomes} == {"done"}
    conditions = [c.id for c in load_protocol(source).conditions]
    orders = []
    for code in codes:
        (order,), = rows(db, "SELECT condition_order FROM participants WHERE code = ?", code)
        orders.append(tuple(json.loads(order)))
        sessions = rows(db, "SELECT s.number, s.condition, count(r.id) FROM sessions s JOIN "
                            "participants p ON p.id = s.participant_id LEFT JOIN rounds r ON "
                            "r.session_id = s.id WHERE p.code = ? AND s.number > 0 "
                            "GROUP BY s.id ORDER BY s.number", code)
        assert sessions == [(n, c, 2) for n, c in enumerate(json.loads(order), 1)]
        questionnaires = rows(db, "SELECT a.questionnaire, a.condition, count(*) FROM answers "
                                  "a JOIN participants p ON p.id = a.participant_id WHERE "
                                  "p.code = ? AND a.questionnaire LIKE 'session-%' "
                                  "GROUP BY a.questionnaire ORDER BY a.questionnaire", code)
        assert questionnaires == [(f"session-{n}", c, len(SESSION_ANSWERS))
                                  for n, c in enumerate(json.loads(order), 1)]
        post = dict(rows(db, "SELECT a.item, a.value_text FROM answers a JOIN participants p "
                             "ON p.id = a.participant_id WHERE p.code = ? AND "
                             "a.questionnaire = 'post'", code))
        assert sorted(post["next_time_rank"].split(",")) == sorted(conditions)
        assert len(post["fairer"].split(";")) == robots * (robots - 1) // 2
        steps = [s for (s,) in rows(db, "SELECT st.step FROM steps st JOIN participants p ON "
                                        "p.id = st.participant_id WHERE p.code = ? ORDER BY "
                                        "st.id", code)]
        assert steps[steps.index("teammate") + 1:steps.index("post")] == [
            f"{part}-{n}" for n in range(1, robots + 1)
            for part in ("intro", "session", "questionnaire")]
    assert len(set(orders)) == bots  # the first orders of the rotation, each once


def test_the_exports_hold_every_session_and_the_answers_about_every_robot(tmp_path,
                                                                          teammates):
    from analysis import cli as analysis_cli
    from study.cli import main as study_main

    app, person, _ = to_post(tmp_path, teammates)
    storage = app.extensions["study"].storage
    order = json.loads(storage.participant("walker")["condition_order"])
    pairs = {f"{a}|{b}": b for a, b in itertools.combinations(order, 2)}
    person.submit("post", {"answers": {**POST, "next_time_rank": order[::-1],
                                       "fairer": pairs}})
    person.submit("debrief", {"consent": True})
    database = Path(storage.path)
    storage.close()
    assert study_main(["export", str(database), "--out", str(tmp_path / "raw")]) == 0
    answers = pd.read_csv(tmp_path / "raw" / "answers.csv")
    assert sorted(answers["questionnaire"].unique()) == [
        "post", "preferences", "session-1", "session-2", "session-3"]
    post = answers[answers["questionnaire"] == "post"].set_index("item")["value_text"]
    assert post["next_time_rank"] == ",".join(order[::-1])
    assert post["fairer"] == ";".join(f"{b}>{a}" for a, b in itertools.combinations(order, 2))
    codebook = pd.read_csv(tmp_path / "raw" / "codebook.csv")
    meaning = codebook[(codebook["table"] == "answers") & (codebook["column"] == "value_text")]
    assert "rank item" in meaning["meaning"].iloc[0]
    sessions = pd.read_csv(tmp_path / "raw" / "sessions.csv")
    assert sorted(sessions["number"]) == [0, 1, 2, 3]
    assert analysis_cli.main(["export", str(database), "--out", str(tmp_path / "tidy")]) == 0
    ranks = pd.read_csv(tmp_path / "tidy" / "robot_ranks.csv")
    assert dict(zip(ranks["condition"], ranks["place"], strict=True)) == {
        robot: place for place, robot in enumerate(order[::-1], 1)}
    chosen = pd.read_csv(tmp_path / "tidy" / "robot_pairs.csv")
    assert len(chosen) == 3 and set(chosen["chosen"]) <= set(order)
    flow = pd.read_csv(tmp_path / "tidy" / "participant_flow.csv")
    assert "session 3" in set(flow["stage"])
