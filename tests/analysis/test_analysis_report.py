"""The report and export commands on a database written through study.storage.database and a pool
built by study.pool; the report's numbers are checked against the database directly."""

import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from support.analysis import make_database, read_report, table
from support.once import built_once

from analysis import cli
from study.pool import PoolSpec, build_pool


def run_report(root: Path) -> None:
    """A database, a pool and the report on both, in ``root``."""
    database = make_database(root / "study.sqlite")
    spec = PoolSpec.from_dict({"teams": 3000, "seed": 5, "fea": {
        "w": 0.7, "bounds": [0.0, 1.5], "bounds_source": "test"}}, name="small")
    pool = build_pool(spec, root / "pool.parquet", progress=False)
    out = root / "out"
    assert cli.main(["report", str(database), "--pool", str(pool), "--out", str(out),
                     "--sweep-teams", "1500", "--order-sample", "15",
                     "--weights", "0,0.7,1"]) == 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = built_once(tmp_path_factory, "report", run_report)
    return root / "study.sqlite", root / "out", read_report(root / "out")[0]


def query(database, sql):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


@pytest.mark.minutes(0.4)
def test_report_is_self_contained_with_every_figure_in_png_and_svg(built):
    _, out, _ = built
    page = (out / "report.html").read_text()
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(source.startswith("data:image/png;base64,") for source in sources)
    pngs = sorted(path.stem for path in (out / "figures").glob("*.png"))
    assert pngs == sorted(path.stem for path in (out / "figures").glob("*.svg"))
    assert len(sources) == len(pngs) >= 10
    assert {"ratings", "allocations_pool", "tradeoff", "pool_running_F",
            "sessions_running_F", "pool_gaps", "parity_study"} <= set(pngs)


def test_report_cookies_match_the_database(built):
    database, _, tables = built
    rows = table(tables, "One row per participant and condition")
    assert len(rows) == query(database, "SELECT COUNT(*) FROM sessions s JOIN participants p "
                                        "ON p.id = s.participant_id WHERE kind = "
                                        "'collaborative' AND p.step = 'done'")[0][0]
    for row in rows.itertuples():
        team, mine = query(database, f"""
            SELECT SUM(participant_cookies + teammate_cookies), SUM(participant_cookies)
            FROM rounds r JOIN sessions s ON s.id = r.session_id
            WHERE s.participant_id = {row.participant_id} AND s.condition = '{row.condition}'
            """)[0]
        assert int(row.cookies_team) == team
        assert int(row.cookies_participant) == mine


def test_report_ratings_match_the_database(built):
    database, _, tables = built
    described = table(tables, "Likert items by condition")
    for row in described.itertuples():
        values = [v for (v,) in query(database, f"""
            SELECT value_number FROM answers a JOIN participants p ON p.id = a.participant_id
            WHERE item = '{row.item}' AND condition = '{row.condition}' AND p.step = 'done'""")]
        assert int(row.n) == len(values) == 4
        assert float(row.mean) == pytest.approx(sum(values) / len(values), abs=5e-4)
    compared = table(tables, "Within-participant comparisons")
    assert (compared["warning"].str.startswith("Only 4 participants")).all()


def test_report_goal_metrics_match_the_database(built):
    database, _, tables = built
    conditions = table(tables, "Per condition").set_index("condition")
    for condition in ("efficient", "fair"):
        (reward,) = query(database, f"SELECT AVG(reward) FROM sessions s JOIN participants p "
                                    f"ON p.id = s.participant_id WHERE condition = "
                                    f"'{condition}' AND p.step = 'done'")[0]
        assert float(conditions.loc[condition, "reward"]) == pytest.approx(reward, abs=5e-4)
        assert int(conditions.loc[condition, "sessions"]) == 4


def test_report_pool_sections(built):
    _, out, tables = built
    table3 = table(tables, "Table 3")
    assert list(table3["bin"])[:3] == ["[0.60, 0.70)", "[0.70, 0.80)", "[0.80, 0.90]"]
    price = table(tables, "Price of fairness")
    assert set(price["algorithm"]) == {"fair", "fea"}
    assert (pd.to_numeric(price["price_of_fairness"]) >= 0).all()
    assert any(path.name.endswith("_price_of_fairness.csv")
               for path in (out / "tables").iterdir())


def test_report_without_pool_and_export(tmp_path):
    database = make_database(tmp_path / "study.sqlite")
    assert cli.main(["report", str(database), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Team pool" not in page and "Questionnaires" in page
    assert cli.main(["export", str(database), "--out", str(tmp_path / "csv")]) == 0
    participants = pd.read_csv(tmp_path / "csv" / "participants.csv")
    assert sorted(participants["code"]) == ["code0", "code1", "code2", "code3"]
    outcomes = pd.read_csv(tmp_path / "csv" / "session_outcomes.csv")
    total = query(database, "SELECT SUM(participant_cookies + teammate_cookies) FROM rounds r "
                            "JOIN sessions s ON s.id = r.session_id WHERE s.kind = "
                            "'collaborative'")[0][0]
    assert outcomes["cookies_team"].sum() == total
    assert (tmp_path / "csv" / "metadata.json").exists()
    flow = pd.read_csv(tmp_path / "csv" / "participant_flow.csv").set_index("stage")
    assert flow.loc["links created", "reached"] == query(
        database, "SELECT COUNT(*) FROM participants")[0][0]
    chosen = pd.read_csv(tmp_path / "csv" / "analysis_set.csv")
    assert chosen["included"].all() and len(chosen) == 4


def test_missing_database_is_a_clean_error(tmp_path, capsys):
    assert cli.main(["export", str(tmp_path / "nothing.sqlite"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
