"""Declared algorithms served: the teammate choice keeps every two robots apart, a
participant's and a real team's sessions follow the declared policy on the live team, an
algorithm with memory over the study plans a later session on the kits of the earlier
ones, and the export records each condition's algorithm as data."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.journey import (
    SESSION_ANSWERS,
    Browser,
    play_practice,
    play_session,
    through_preferences,
)
from support.people import Person, play_round, practise, running, tick_until, to_session
from support.protocols import SECOND_CONDITION
from support.teams import team_protocol
from support.web import DEMO, FakeClock, make_app, small_pool

from study.allocation.algorithms import declaration
from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve
from study.exports.tables import build_export
from study.pool.placing import algorithm_for, place, plans_differ, session_policies
from study.protocol.loader import load_protocol
from study.web.participant.agent_pool import policy_of

# A robot that balances the whole study: equality of capability and preference over the
# kits of every session so far (it makes up in the second session for the first), and a
# robot that lifts the humans' Nash welfare of time on what they prefer.
DECLARED = '''[[algorithms]]
id = "balance"
terms = { fairness = 0.7, efficiency = 0.3 }
memory = "study"

[[algorithms]]
id = "nash"
terms = { nash_p = 0.6, efficiency = 0.4 }

[[conditions]]
id = "fair"
algorithm = "balance"'''
BALANCE = Algorithm("balance", terms={"fairness": 0.7, "efficiency": 0.3}, memory=True)
NASH = Algorithm("nash", terms={"nash_p": 0.6, "efficiency": 0.4})
MAXIMIN = Algorithm("maximin", terms={"egalitarian_c": 0.5, "efficiency": 0.5})
MAXIMIN_P = Algorithm("maximin_p", terms={"egalitarian_p": 1.0})
POST_ANSWERS = {"better_consideration": "Robot Pat", "next_time": "Robot Chris", "age": 31,
                "teammate_understood": "I was not sure", "gender": "Prefer not to say"}


def declared_protocol(path: Path, text: str | None = None) -> Path:
    """The demo study (or ``text``) with its second robot running ``balance``."""
    text = DEMO.read_text(encoding="utf-8") if text is None else text
    assert SECOND_CONDITION in text
    path.write_text(text.replace(SECOND_CONDITION, DECLARED, 1), encoding="utf-8")
    return path


def rows(app: Any, sql: str, *params: Any) -> list[dict[str, Any]]:
    return app.extensions["study"].storage.all(sql, params)


def held(allocations: list[dict[str, Any]], humans: int = 2) -> np.ndarray:
    kits = np.zeros((humans, 2), dtype=int)
    for row in allocations:
        kits[row["human"], row["task_type"]] += 1
    return kits


def plan_of(allocations: list[dict[str, Any]]) -> list[list[int]]:
    rounds = sorted({row["round"] for row in allocations})
    return [[row["task_type"] for row in sorted(allocations, key=lambda r: r["human"])
             if row["round"] == number] for number in rounds]


# --- placing -------------------------------------------------------------------------------


def declared_conditions(tmp_path: Path, other: Algorithm) -> tuple[Any, list[Any]]:
    """The declared protocol and three robots: Nash welfare, ``other`` and Efficient."""
    protocol = load_protocol(declared_protocol(tmp_path / "declared.toml"))
    nash = replace(protocol.condition("fair"), id="nash", robot="Sam", algorithm="nash",
                   declared=protocol.declared("nash"))
    second = replace(nash, id=other.name, robot="Kim", algorithm=other.name,
                     declared=replace(protocol.declared("nash"), id=other.name,
                                      terms=tuple(other.terms)))
    return protocol, [nash, second, protocol.condition("efficient")]


def placed_apart(teammates: Any, conditions: list[Any], expected: list[Algorithm],
                 kits: tuple[int, ...]) -> int:
    """Place a dozen participants; every robot follows its own algorithm's plan for the
    live team and no two the same. Returns the members passed over for one plan."""
    rng = np.random.default_rng(5)
    passed_over = 0
    for _ in range(12):
        c, p = rng.uniform(0.05, 0.95, 2), rng.uniform(0.05, 0.95, 2)
        placed = place(teammates, c, p, conditions, kits)
        assert placed is not None and placed.plans_differ
        plans = {tuple(map(tuple, policy.plan)) for policy in placed.policies}
        assert len(plans) == len(conditions)
        for policy, algorithm in zip(placed.policies, expected, strict=True):
            assert policy.algorithm == algorithm
            assert policy.plan == solve(placed.team, algorithm, kits).plan
        passed_over += placed.same_plan
    return passed_over


def test_placing_with_two_declared_robots_gives_them_different_plans(tmp_path, teammates):
    protocol, conditions = declared_conditions(tmp_path, MAXIMIN)
    passed_over = placed_apart(teammates, conditions[:2], [NASH, MAXIMIN], protocol.kits)
    assert passed_over > 0, "no member was passed over: the rule was never tried"


def test_placing_keeps_every_two_of_three_robots_apart(tmp_path, tmp_path_factory):
    pool = small_pool(tmp_path_factory.mktemp("pool8"), kits=(8, 8))
    _, conditions = declared_conditions(tmp_path, MAXIMIN_P)
    passed_over = placed_apart(pool, conditions, [NASH, MAXIMIN_P, Algorithm("efficient")],
                               (8, 8))
    assert passed_over > 0, "no member was passed over: the rule was never tried"


def test_plans_differ_means_every_pair_differs():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    efficient, fair = solve(team, Algorithm("efficient")), solve(team, Algorithm("fair"))
    assert plans_differ([efficient, fair])
    assert not plans_differ([efficient, fair, solve(team, Algorithm("efficient"))])


def test_a_later_session_with_memory_counts_the_earlier_sessions_kits(tmp_path):
    protocol = load_protocol(declared_protocol(tmp_path / "declared.toml"))
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    conditions = [protocol.condition("efficient"), protocol.condition("fair")]
    first, second = session_policies(team, conditions, None, (8, 8))
    assert first.goal_allocation.tolist() == [[0, 8], [8, 0]]
    assert second.history.tolist() == [[0, 8], [8, 0]]
    assert second.plan == solve(team, BALANCE, (8, 8), history=[[0, 8], [8, 0]]).plan
    alone = session_policies(team, conditions[::-1], None, (8, 8))[0]
    assert alone.history is None and alone.plan == solve(team, BALANCE, (8, 8)).plan
    assert second.goal_allocation.tolist() != alone.goal_allocation.tolist()


# --- a participant with an agent teammate ---------------------------------------------------


def test_a_served_study_runs_a_declared_robot_with_memory_to_the_end(tmp_path, teammates):
    clock = FakeClock()
    path = declared_protocol(tmp_path / "declared.toml")
    app = make_app(tmp_path, teammates, clock, protocol=path)
    protocol = app.extensions["study"].protocol
    for code, order in (("walker-1", ["efficient", "fair"]), ("walker-2", ["fair", "efficient"])):
        you = Browser(app, code)
        through_preferences(you)
        play_practice(you, clock, app)
        (participant,) = rows(app, "SELECT * FROM participants WHERE code = ?", code)
        assert json.loads(participant["condition_order"]) == order
        you.submit("teammate")
        for number in (1, 2):
            play_session(you, clock, app, number)
            you.submit(f"questionnaire-{number}", {"answers": SESSION_ANSWERS})
        you.submit("post", {"answers": POST_ANSWERS})
        assert you.submit("debrief", {"consent": True})["step"] == "done"
        sessions = rows(app, "SELECT * FROM sessions WHERE participant_id = ? AND number > 0 "
                             "ORDER BY number", participant["id"])
        team = Team(np.array(json.loads(sessions[0]["team_c"])),
                    np.array(json.loads(sessions[0]["team_p"])))
        earlier = np.zeros((2, 2), dtype=int)
        for session in sessions:
            given = rows(app, "SELECT round, human, task_type FROM allocations WHERE "
                              "session_id = ? ORDER BY round, human", session["id"])
            memory = session["condition"] == "fair"
            algorithm = BALANCE if memory else Algorithm("efficient")
            history = earlier if memory and session["number"] > 1 else None
            expected = solve(team, algorithm, protocol.kits, history=history)
            assert plan_of(given) == [list(types) for types in expected.plan], session["number"]
            assert json.loads(session["plan"]) == plan_of(given)
            assert json.loads(session["algorithm_declaration"]) == json.loads(
                json.dumps(declaration(algorithm)))
            recorded = None if session["history"] is None else json.loads(session["history"])
            assert recorded == (None if history is None else earlier.tolist())
            assert policy_of(protocol, session).plan == expected.plan  # after a restart
            earlier = earlier + held(given)


# --- a real team --------------------------------------------------------------------------


def test_a_real_team_plays_a_declared_robot_with_memory_on_its_earlier_kits(tmp_path,
                                                                           teammates):
    clock = FakeClock()
    base = team_protocol(tmp_path)
    path = declared_protocol(tmp_path / "team-declared.toml", base.read_text(encoding="utf-8"))
    app = make_app(tmp_path, teammates, clock, path)
    ada, bo = Person(app, "ada-1"), Person(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    (team,) = rows(app, "SELECT * FROM teams")
    order = json.loads(team["condition_order"])
    assert order == ["efficient", "fair"]
    live = Team(np.array(json.loads(team["team_c"])), np.array(json.loads(team["team_p"])))
    for number in (1, 2):
        if number == 2:
            for person in (ada, bo):
                person.submit("questionnaire-1", {"answers": SESSION_ANSWERS})
        to_session(app, clock, [ada, bo], number)
        for _ in range(2):
            tick_until(app, clock, lambda: running(ada) is not None)
            play_round(app, clock, [ada, bo])
    kits = {number: rows(app, "SELECT round, seat AS human, task_type FROM team_allocations "
                              "WHERE session = ? ORDER BY round, seat", number)
            for number in (1, 2)}
    kits_1 = held(kits[1])
    assert plan_of(kits[1]) == [list(t) for t in solve(live, Algorithm("efficient"),
                                                        (2, 2)).plan]
    with_memory = solve(live, BALANCE, (2, 2), history=kits_1)
    assert plan_of(kits[2]) == [list(t) for t in with_memory.plan]
    assert with_memory.plan != solve(live, BALANCE, (2, 2)).plan  # the memory mattered
    for session in rows(app, "SELECT * FROM sessions WHERE number = 2"):
        assert json.loads(session["history"]) == kits_1.tolist()
        assert json.loads(session["plan"]) == plan_of(kits[2])
        assert session["algorithm"] == "balance"


# --- the export --------------------------------------------------------------------------------


def test_the_export_records_each_conditions_algorithm_as_data(tmp_path, teammates):
    clock = FakeClock()
    path = declared_protocol(tmp_path / "declared.toml")
    app = make_app(tmp_path, teammates, clock, protocol=path)
    you = Browser(app, "walker-1")
    through_preferences(you)
    play_practice(you, clock, app)
    export = build_export(Path(app.extensions["study"].storage.path))
    (name,) = [name for name in export.files if name.startswith("metadata/algorithms-")]
    recorded = json.loads(export.files[name])["conditions"]
    assert recorded["fair"] == {"robot": "Pat", "algorithm": "balance", "preset": False,
                                "terms": {"fairness": 0.7, "efficiency": 0.3},
                                "memory": "study", "python": None, "fea_bounds": None,
                                "fea_bounds_from": None}
    assert recorded["efficient"]["terms"] == {"efficiency": 1.0}
    sessions = export.files["sessions.csv"].decode()
    assert "algorithm_declaration" in sessions and '""memory"": ""study""' in sessions
    codebook = export.files["codebook.csv"].decode()
    assert "sessions,algorithm_declaration" in codebook and "sessions,history" in codebook
    with zipfile.ZipFile(tmp_path / "check.zip", "w") as bundle:  # the files zip as shipped
        for file_name, content in export.files.items():
            bundle.writestr(file_name, content)
    assert export.undocumented == []


@pytest.mark.parametrize("bounds", ["[0.1, 1.5]", '"pool"'])
def test_the_export_names_where_a_fair_equity_terms_bounds_came_from(tmp_path, bounds):
    from study.exports.tables import condition_algorithms

    text = DEMO.read_text(encoding="utf-8").replace(SECOND_CONDITION, f'''[[algorithms]]
id = "equity"
terms = {{ efficiency = 0.6, fair_equity = 0.4 }}
fea_bounds = {bounds}

[[conditions]]
id = "fair"
algorithm = "equity"''', 1)
    text = text.replace('algorithms = ["efficient", "fair"]',
                        'algorithms = ["efficient", "fair", "fea"]').replace(
        "[pool.teammate]", "[pool.fea]\nw = 0.7\nbounds = [0.0, 2.5]\n"
                           'bounds_source = "fixed"\nbounds_fixed = true\n\n[pool.teammate]')
    entry = condition_algorithms(text)["conditions"]["fair"]
    expected = ([0.1, 1.5], "the protocol") if bounds.startswith("[") else ([0.0, 2.5],
                                                                             "[pool.fea]")
    assert (entry["fea_bounds"], entry["fea_bounds_from"]) == expected


def test_a_session_of_a_goal_reward_given_as_code_is_recorded_and_solved_again(tmp_path):
    from study.web.participant.agent_pool import session_row

    text = DEMO.read_text(encoding="utf-8").replace(SECOND_CONDITION, '''[[algorithms]]
id = "slowest"
python = "goal_rewards_example:slowest_first"

[[conditions]]
id = "fair"
algorithm = "slowest"''', 1)
    path = tmp_path / "coded.toml"
    path.write_text(text, encoding="utf-8")
    protocol = load_protocol(path)
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    condition = protocol.condition("fair")
    algorithm = algorithm_for(condition, None)
    row, policy = session_row(protocol, condition, team, 0, algorithm)
    recorded = json.loads(row["algorithm_declaration"])
    assert recorded["python"] == "goal_rewards_example:slowest_first"
    assert len(recorded["python_sha256"]) == 64 and recorded["terms"] is None
    assert row["history"] is None and row["algorithm"] == "slowest"
    again = policy_of(protocol, {**row, "round_order": "default"})
    assert again.algorithm == algorithm and again.plan == policy.plan
    assert again.rewards == solve(team, algorithm, protocol.kits).rewards
