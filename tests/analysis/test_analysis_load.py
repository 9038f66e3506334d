"""Loading a study database written through study.storage.database into tidy frames."""

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from support.analysis import make_database

from analysis import load, sessions
from study.allocation.model import all_metrics


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
