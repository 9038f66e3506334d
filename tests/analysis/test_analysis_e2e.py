"""End to end: simulated participants (the bots' page answers, decorating pace and stop
points) taken through the real journey in-process on an injected clock, some of them
leaving at chosen steps, one aborted by the experimenter, one whose measured practice
round was closed on recovery after a crash, links never opened and one consent declined;
then the report built from that database, its flow checked against the database and its
per-condition numbers against an independent SQL computation over the analysis set the
protocol declares."""

import json
import re
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.analysis import PASSING, InProcessBot, read_report, table
from support.once import built_once
from support.web import DEMO, FakeClock, make_app, small_pool

from analysis import cli
from study.bots import AckLog, Bot, StudyFacts, profile_for
from study.protocol.loader import load_protocol
from study.web.console.holds import apply_action

# Where each participant leaves the study (None: to the end).
STOPS = (None, None, None, None, None, "session-2", "session-1:1", "practice:2", "session-2:1")
ABORTED = 8  # the participant the experimenter aborts (it left session 2 after one round)
RECOVERED = 1  # whose second letters practice round (measured) is closed on recovery
FLAGGED = 0
FAILED_CHECK = 2  # answers that they did not take in that the teammate was an agent
NEVER_OPENED = 2
RULES = """[analysis]
exclude = ["aborted", "failed-manipulation-check", "recovered-capability", "incomplete"]
keep_completed_sessions_of_incomplete = true
manipulation_check_item = "teammate_understood"
manipulation_check_pass = ["A computer agent"]
"""


def fast_demo(directory: Path) -> Path:
    """The demo protocol with the rules under test, a clipped capability analysed out."""
    text = re.sub(r"(?ms)^\[analysis\]\n.*?\n\n", RULES + "\n", DEMO.read_text())
    assert RULES in text and 'clipped_capability = "keep"' in text
    text = text.replace('clipped_capability = "keep"', 'clipped_capability = "continue"')
    path = directory / "fastdemo.toml"
    path.write_text(text)
    return path


def run_demo(root: Path) -> None:
    """The study in-process, its database and its report in ``root``."""
    protocol = fast_demo(root)
    clock = FakeClock()
    app = make_app(root, small_pool(root / "pools"), clock, protocol=protocol)
    journey = app.extensions["study"]
    facts = StudyFacts.from_protocol(load_protocol(protocol))
    finals = []
    for index, stop in enumerate(STOPS):
        code = journey.enrol()["code"]
        profile = replace(profile_for(index, "fast", seed=7), stop_at=stop)
        bot = Bot("http://in-process", code, profile, AckLog(), facts=facts)
        answer = "Another participant" if index == FAILED_CHECK else PASSING
        finals.append(InProcessBot(journey, clock, code, bot, index == RECOVERED,
                                   answer).run())
        if index == ABORTED:
            apply_action(journey.storage, journey.storage.participant(code), "abort", "left",
                         None, clock())
        if index == FLAGGED:
            apply_action(journey.storage, journey.storage.participant(code), "flag", "noisy",
                         None, clock())
    for _ in range(NEVER_OPENED):
        journey.enrol()
    declined = journey.enrol()["code"]
    InProcessBot(journey, clock, declined, None).send(
        "submit", {"step": "consent", "data": {"agree": False}})
    journey.storage.close()
    assert finals == ["done"] * 5 + ["session-2", "session-1", "practice", "session-2"]
    database = root / "study.sqlite"
    (pool,) = {row[0] for row in query(database, "SELECT pool FROM teammates")}
    out = root / "out"
    assert cli.main(["report", str(database), "--pool", pool, "--out", str(out),
                     "--sweep-teams", "2000", "--order-sample", "10"]) == 0


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = built_once(tmp_path_factory, "e2e", run_demo)
    return root / "study.sqlite", read_report(root / "out")[0]


def query(database, sql):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


# The analysis set in SQL, written from the rules above without the analysis package:
# sessions played to their last round, of participants who neither withdrew nor declined,
# were not aborted, did not fail the manipulation check and measured no clipped capability
# (the demo's clipped_capability = "continue" analyses them out); incomplete participants
# keep their completed sessions.
KEPT_SESSIONS = f"""
    SELECT s.id FROM sessions s JOIN participants p ON p.id = s.participant_id
    WHERE s.kind = 'collaborative'
      AND s.rounds = (SELECT COUNT(*) FROM rounds r
                      WHERE r.session_id = s.id AND r.closed_at IS NOT NULL)
      AND p.step NOT IN ('withdrawn', 'declined')
      AND p.id NOT IN (SELECT participant_id FROM console_status WHERE status = 'aborted')
      AND p.id NOT IN (SELECT participant_id FROM answers
                       WHERE item = 'teammate_understood' AND value_text != '{PASSING}')
      AND p.id NOT IN (SELECT m.participant_id FROM measurements m
                       JOIN rounds r ON r.id = m.round_id WHERE r.close_reason = 'recovery')
      AND p.id NOT IN (SELECT participant_id FROM measurements WHERE clipped = 1)"""


def test_flow_counts_equal_the_database(study):
    database, tables = study
    flow = table(tables, "Participant flow").set_index("stage")
    reached = {int(v) for v in flow["reached"]}
    assert reached  # every count below is checked against its own query

    def count(sql):
        return query(database, sql)[0][0]

    def reached_step(step):
        return count(f"SELECT COUNT(DISTINCT participant_id) FROM steps WHERE step = '{step}'")

    expected = {
        "links created": count("SELECT COUNT(*) FROM participants"),
        "opened": count("SELECT COUNT(*) FROM participants WHERE consent IS NOT NULL"),
        "consented": count("SELECT COUNT(*) FROM participants WHERE consent = 'given'"),
        "practised": reached_step("teammate"),
        "session 1": reached_step("session-1"),
        "session 2": reached_step("session-2"),
        "done": count("SELECT COUNT(*) FROM participants WHERE step = 'done'"),
    }
    assert {stage: int(flow.loc[stage, "reached"]) for stage in expected} == expected
    assert expected == {"links created": len(STOPS) + NEVER_OPENED + 1,
                        "opened": len(STOPS) + 1, "consented": len(STOPS),
                        "practised": len(STOPS) - 1, "session 1": len(STOPS) - 1,
                        "session 2": len(STOPS) - 2, "done": STOPS.count(None)}
    assert int(flow.loc["opened", "declined"]) == 1
    assert int(flow.loc["session 2", "aborted"]) == 1
    assert int(flow.loc["links created", "not opened"]) == NEVER_OPENED
    assert flow[["not opened", "declined", "withdrawn", "aborted", "unmatched", "left"]
                ].astype(int).sum().sum() == expected["links created"] - expected["done"]


def test_exclusions_state_the_rules_and_their_counts(study):
    database, tables = study
    exclusions = table(tables, "Exclusions").set_index("rule")
    assert list(exclusions.index[exclusions["applied"] == "True"]) == [
        "aborted", "failed-manipulation-check", "recovered-capability", "incomplete",
        "clipped-capability"]  # the consequence of clipped_capability = "continue"
    assert exclusions.loc["flagged", "applied"] == "False"
    assert int(exclusions.loc["flagged", "matched"]) == 1
    assert int(exclusions.loc["flagged", "removed"]) == 0
    assert int(exclusions.loc["aborted", "removed"]) == 1
    assert int(exclusions.loc["recovered-capability", "matched"]) == query(
        database, "SELECT COUNT(DISTINCT m.participant_id) FROM measurements m JOIN rounds r "
                  "ON r.id = m.round_id WHERE r.close_reason = 'recovery'")[0][0] == 1
    failed = query(database, f"SELECT COUNT(*) FROM answers WHERE item = 'teammate_understood' "
                             f"AND value_text != '{PASSING}'")[0][0]
    assert int(exclusions.loc["failed-manipulation-check", "matched"]) == failed == 1
    check = table(tables, "Manipulation check (Manipulation-Check-Teammate)")
    assert check["participants"].astype(int).sum() == query(
        database, "SELECT COUNT(*) FROM answers WHERE item = 'teammate_understood'")[0][0]


def test_a_never_played_session_is_never_a_zero(study):
    database, tables = study
    rows = table(tables, "One row per participant and condition")
    kept = {session for (session,) in query(database, KEPT_SESSIONS)}
    shown = set()
    for row in rows.itertuples():
        (session,) = query(database, f"SELECT id FROM sessions WHERE participant_id = "
                                     f"{row.participant_id} AND condition = "
                                     f"'{row.condition}'")[0]
        shown.add(session)
    assert shown == kept
    unplayed = query(database, "SELECT s.id FROM sessions s WHERE s.kind = 'collaborative' "
                               "AND NOT EXISTS (SELECT 1 FROM rounds r WHERE "
                               "r.session_id = s.id)")
    assert unplayed and not {s for (s,) in unplayed} & shown


def test_per_condition_numbers_equal_sql_over_the_analysis_set(study):
    database, tables = study
    conditions = table(tables, "Per condition").set_index("condition")
    sql = f"""
        SELECT s.condition, COUNT(*), AVG(s.reward),
               AVG((SELECT SUM(participant_cookies + teammate_cookies) FROM rounds r
                    WHERE r.session_id = s.id)),
               AVG((SELECT SUM(participant_cookies) FROM rounds r WHERE r.session_id = s.id))
        FROM sessions s WHERE s.id IN ({KEPT_SESSIONS}) GROUP BY s.condition"""
    results = query(database, sql)
    assert {condition for condition, *_ in results} == set(conditions.index)
    for condition, sessions, reward, team, participant in results:
        row = conditions.loc[condition]
        assert int(row["sessions"]) == sessions
        assert float(row["reward"]) == pytest.approx(reward, abs=5e-4)
        assert float(row["cookies_team"]) == pytest.approx(team, abs=5e-4)
        assert float(row["cookies_participant"]) == pytest.approx(participant, abs=5e-4)


def test_likert_means_equal_sql_over_the_analysis_set(study):
    database, tables = study
    described = table(tables, "Likert items by condition")
    expected = query(database, f"""
        SELECT item, condition, COUNT(*), AVG(value_number) FROM answers
        WHERE session_id IN ({KEPT_SESSIONS}) AND value_number IS NOT NULL
        GROUP BY item, condition""")
    assert len(described) == len(expected) == 10
    rows = described.set_index(["item", "condition"])
    for item, condition, count, mean in expected:
        assert int(rows.loc[(item, condition), "n"]) == count
        assert float(rows.loc[(item, condition), "mean"]) == pytest.approx(mean, abs=5e-4)


def test_cookies_and_allocations_match_the_database(study):
    database, tables = study
    rows = table(tables, "One row per participant and condition")
    assert len(rows)
    for row in rows.itertuples():
        session_id, seat, team_c = query(database, f"""
            SELECT id, participant_human, team_c FROM sessions
            WHERE participant_id = {row.participant_id} AND condition = '{row.condition}'""")[0]
        finished = dict(query(database, f"""
            SELECT actor, COUNT(*) FROM cookies c JOIN rounds r ON r.id = c.round_id
            WHERE r.session_id = {session_id} GROUP BY actor"""))
        assert int(row.cookies_participant) == finished.get("participant", 0)
        assert int(row.cookies_teammate) == finished.get("teammate", 0)
        c = np.array(json.loads(team_c))
        kits = [t for (t,) in query(database, f"SELECT task_type FROM allocations WHERE "
                                              f"session_id = {session_id} AND role = "
                                              f"'participant'")]
        assert int(row.rounds_capable_participant) == kits.count(int(np.argmax(c[seat])))


def test_fairness_over_time_ends_at_the_goal_state(study):
    database, tables = study
    per_session = table(tables, "Per session")
    assert len(per_session)
    for row in per_session.itertuples():
        team_c, team_p, goal = query(database, f"SELECT team_c, team_p, goal FROM sessions "
                                               f"WHERE id = {row.session_id}")[0]
        c, p, goal = (np.array(json.loads(x)) for x in (team_c, team_p, goal))
        f = ((c * goal).sum(1) + (p * goal).sum(1)) / (goal.sum() / 2)
        assert float(row.F_long_term) == pytest.approx(abs(f[0] - f[1]) / 2, abs=5e-4)


def test_the_design_sections_and_the_pool_sections_are_there(study):
    _, tables = study
    spec = table(tables, "Pool specification").set_index("setting")["value"]
    assert json.loads(spec["kits"]) == [2, 2]
    assert not pd.isna(table(tables, "Table 3")["teams"]).any()
    assert len(table(tables, "Mixed models")) >= 7
    assert set(table(tables, "Carry-over")["outcome"]) >= {"cookies_team", "F"}
    assert int(table(tables, "Participants needed")["target_power"].astype(float).eq(
        0.8).sum()) == 2
