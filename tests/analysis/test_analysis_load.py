"""Loading a study database written through study.storage.database into tidy frames."""

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from analysis import load, sessions
from study.allocation.model import Algorithm, Team, all_metrics
from study.allocation.solver import solve
from study.storage.database import Storage

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


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return make_database(tmp_path_factory.mktemp("db") / "study.sqlite")


@pytest.fixture(scope="module")
def data(database):
    return load.load(database)


def raw(database, sql):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


def test_withdrawn_and_declined_participants_are_never_included(data, database):
    assert sorted(data.participants["code"]) == ["code0", "code1", "code2", "code3"]
    kept = set(data.participants["participant_id"])
    for name, frame in data.frames().items():
        assert set(frame["participant_id"]) <= kept, name
        assert (frame["protocol"] == "study1").all(), name
    assert raw(database, "SELECT COUNT(*) FROM participants")[0][0] == 6


def test_one_row_per_observation(data, database):
    def count(sql):
        return raw(database, sql)[0][0]

    assert len(data.sessions) == count("SELECT COUNT(*) FROM sessions")
    assert len(data.rounds) == count("SELECT COUNT(*) FROM rounds")
    assert len(data.allocations) == count("SELECT COUNT(*) FROM allocations")
    assert len(data.cookies) == count("SELECT COUNT(*) FROM cookies")
    assert len(data.answers) == count("SELECT COUNT(*) FROM answers")
    assert len(data.practice) == 16
    assert data.practice["measured"].sum() == 8
    assert len(data.teammates) == 4


def test_coefficients_and_attributes_are_attached(data, database):
    row = data.participants.set_index("code").loc["code1"]
    stored = dict(raw(database, "SELECT task_name, value FROM measurements m JOIN participants "
                                "p ON p.id = m.participant_id WHERE p.code = 'code1' AND "
                                "kind = 'capability'"))
    assert row["c_squares"] == pytest.approx(stored["squares"])
    assert row["c_letters"] == pytest.approx(stored["letters"])
    assert row["attr_age"] == 21 and row["attr_gender"] == "Woman"


def test_session_json_columns_are_expanded(data, database):
    session = data.sessions[data.sessions["kind"] == "collaborative"].iloc[0]
    team_c = json.loads(raw(database, f"SELECT team_c FROM sessions WHERE id = "
                                      f"{session['session_id']}")[0][0])
    assert session["c_1_0"] == pytest.approx(team_c[1][0])
    assert {"goal_0_0", "p_1_1"} <= set(data.sessions.columns)
    assert np.isnan(data.sessions[data.sessions["kind"] == "practice"]["c_0_0"]).all()


def test_session_outcomes_against_the_database(data, database):
    outcomes = sessions.session_outcomes(data)
    assert len(outcomes) == 8
    for _, row in outcomes.iterrows():
        sid = row["session_id"]
        assert row["cookies_participant"] == raw(
            database, f"SELECT COUNT(*) FROM cookies c JOIN rounds r ON r.id = c.round_id "
                      f"WHERE r.session_id = {sid} AND actor = 'participant'")[0][0]
        assert row["cookies_team"] == raw(
            database, f"SELECT SUM(participant_cookies + teammate_cookies) FROM rounds "
                      f"WHERE session_id = {sid}")[0][0]
        team_c, team_p, goal, seat = raw(
            database, f"SELECT team_c, team_p, goal, participant_human FROM sessions "
                      f"WHERE id = {sid}")[0]
        c, p, goal = (np.array(json.loads(x)) for x in (team_c, team_p, goal))
        metrics = all_metrics(c, p, goal)
        sign = 1 if seat == 0 else -1
        assert row["E"] == pytest.approx(metrics["E"])
        assert row["F"] == pytest.approx(sign * metrics["F"])
        assert row["FE"] == pytest.approx(sign * metrics["FE"])
        assert row["predicted_rating_fair"] == pytest.approx(1 + 6 * (1 - abs(metrics["F"])))
        assert row["rounds_capable_participant"] == goal[seat, np.argmax(c[seat])]
        assert row["rounds_preferred_teammate"] == goal[1 - seat, np.argmax(p[1 - seat])]
        assert row["c_participant_1"] == c[seat, 1]


def test_condition_summary_sets_predictions_beside_ratings(data):
    outcomes = sessions.session_outcomes(data)
    table = sessions.condition_summary(outcomes, data.answers).set_index("condition")
    assert table.loc["fair", "sessions"] == 4
    fair = data.answers[(data.answers["condition"] == "fair")
                        & (data.answers["item"] == "fair_overall")]
    assert table.loc["fair", "rating Fair-Overall"] == pytest.approx(fair["value"].mean())
    assert table.loc["efficient", "reward"] == pytest.approx(
        outcomes[outcomes["condition"] == "efficient"]["reward"].mean())


def test_fairness_over_time_per_session(data):
    summary, per_round = sessions.session_fairness_over_time(data)
    assert len(summary) == 8 and len(per_round) == 64
    outcomes = sessions.session_outcomes(data)
    assert summary["F_long_term"].to_numpy() == pytest.approx(outcomes["F"].abs().to_numpy())
    last = per_round[per_round["round"] == 8]
    assert last["F"].to_numpy() == pytest.approx(outcomes["F"].to_numpy())


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load.load(tmp_path / "absent.sqlite")


def test_frames_are_tidy_frames(data):
    assert all(isinstance(frame, pd.DataFrame) for frame in data.frames().values())
    assert data.metadata["protocols"] == ["study1"]
