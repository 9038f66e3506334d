"""End to end: bot participants through the real app and server, then the report built from
that database, its numbers checked against the database directly."""

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_analysis_report import Tables, table
from web_support import DEMO, LiveServer

from analysis import cli
from study.bots import StudyFacts, bot_codes, profile_for, run_swarm
from study.protocol import load_protocol
from study.web import create_app

BOTS = 4
pytestmark = pytest.mark.slow


def fast_demo(directory: Path) -> Path:
    """The demo protocol with rounds short enough for CI."""
    text = DEMO.read_text()
    text = re.sub(r"(?m)^round_seconds = \d+", "round_seconds = 3", text)
    text = re.sub(r"(?m)^practice_seconds = \d+", "practice_seconds = 2", text)
    path = directory / "fastdemo.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    protocol = fast_demo(root)
    database = root / "study.sqlite"
    app = create_app({"PROTOCOL": protocol, "DATABASE": database, "POOL_DIR": root / "pools",
                      "SCHEDULER": True})
    with LiveServer(app) as live:
        result = run_swarm(live.url, bot_codes(BOTS),
                           [profile_for(i, "fast", seed=7) for i in range(BOTS)],
                           facts=StudyFacts.from_protocol(load_protocol(protocol)),
                           max_seconds=120)
    app.extensions["study"].storage.close()
    assert [o.final_step for o in result.outcomes] == ["done"] * BOTS, result.summary()
    (pool,) = {row[0] for row in query(database, "SELECT pool FROM teammates")}
    out = root / "out"
    assert cli.main(["report", str(database), "--pool", pool, "--out", str(out),
                     "--sweep-teams", "2000", "--order-sample", "10"]) == 0
    parser = Tables()
    parser.feed((out / "report.html").read_text())
    return database, parser


def query(database, sql):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


def test_every_bot_is_a_participant_of_the_report(study):
    database, tables = study
    people = table(tables, "Participants and their measured coefficients")
    assert sorted(people["code"]) == sorted(code for (code,) in query(
        database, "SELECT code FROM participants WHERE step = 'done'"))
    for row in people.itertuples():
        (distance,) = query(database, f"SELECT distance FROM teammates t JOIN participants p "
                                      f"ON p.id = t.participant_id WHERE code = '{row.code}'")[0]
        assert float(row.distance) == pytest.approx(distance, abs=5e-4)


def test_cookies_and_allocations_match_the_database(study):
    database, tables = study
    rows = table(tables, "One row per participant and condition")
    assert len(rows) == 2 * BOTS
    for row in rows.itertuples():
        session_id, seat, team_c, team_p = query(database, f"""
            SELECT id, participant_human, team_c, team_p FROM sessions
            WHERE participant_id = {row.participant_id} AND condition = '{row.condition}'""")[0]
        finished = dict(query(database, f"""
            SELECT actor, COUNT(*) FROM cookies c JOIN rounds r ON r.id = c.round_id
            WHERE r.session_id = {session_id} GROUP BY actor"""))
        assert int(row.cookies_participant) == finished.get("participant", 0)
        assert int(row.cookies_teammate) == finished.get("teammate", 0)
        c, p = np.array(json.loads(team_c)), np.array(json.loads(team_p))
        for role, human in (("participant", seat), ("teammate", 1 - seat)):
            kits = [t for (t,) in query(database, f"SELECT task_type FROM allocations WHERE "
                                                  f"session_id = {session_id} AND role = "
                                                  f"'{role}'")]
            assert int(getattr(row, f"rounds_capable_{role}")) == kits.count(
                int(np.argmax(c[human])))
            assert int(getattr(row, f"rounds_preferred_{role}")) == kits.count(
                int(np.argmax(p[human])))


def test_ratings_and_rewards_match_the_database(study):
    database, tables = study
    described = table(tables, "Likert items by condition")
    assert len(described) == 10
    for row in described.itertuples():
        (mean, count), = query(database, f"SELECT AVG(value_number), COUNT(*) FROM answers "
                                         f"WHERE item = '{row.item}' AND condition = "
                                         f"'{row.condition}'")
        assert int(row.n) == count == BOTS
        assert float(row.mean) == pytest.approx(mean, abs=5e-4)
    conditions = table(tables, "Per condition").set_index("condition")
    for condition, reward in query(database, "SELECT condition, AVG(reward) FROM sessions "
                                             "WHERE kind = 'collaborative' GROUP BY condition"):
        assert float(conditions.loc[condition, "reward"]) == pytest.approx(reward, abs=5e-4)


def test_fairness_over_time_ends_at_the_goal_state(study):
    database, tables = study
    per_session = table(tables, "Per session")
    for row in per_session.itertuples():
        team_c, team_p, goal = query(database, f"SELECT team_c, team_p, goal FROM sessions "
                                               f"WHERE id = {row.session_id}")[0]
        c, p, goal = (np.array(json.loads(x)) for x in (team_c, team_p, goal))
        f = ((c * goal).sum(1) + (p * goal).sum(1)) / (goal.sum() / 2)
        assert float(row.F_long_term) == pytest.approx(abs(f[0] - f[1]) / 2, abs=5e-4)


def test_the_pool_sections_come_from_the_pool_the_teammates_came_from(study):
    _, tables = study
    spec = table(tables, "Pool specification").set_index("setting")["value"]
    assert json.loads(spec["kits"]) == [2, 2]
    assert not pd.isna(table(tables, "Table 3")["teams"]).any()
