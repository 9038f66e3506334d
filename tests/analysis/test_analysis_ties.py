"""Participants with tied ratings in the report: who they are, the condition effects of
the within-subject models with and without them, and the attainment table under
``tied_ratings = "unmatched"`` (analysis/ties.py, docs/analysis.md)."""

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.analysis import Tables, read_report, run_study, table
from support.once import built_once
from support.web import DEMO

from analysis import cli, teams, ties
from study.protocol.loader import load_protocol

# (capabilities, preferences): the last three rate both themes equally.
PROFILES = (((0.3, 0.95), (0.9, 0.1)), ((0.3, 0.95), (0.1, 0.9)), ((0.2, 0.15), (0.17, 0.99)),
            ((0.9, 0.3), (0.9, 0.1)), ((0.5, 0.6), (0.7, 0.3)), ((0.6, 0.4), (0.2, 0.8)),
            ((0.55, 0.35), (0.2, 0.8)), ((0.3, 0.8), (0.5, 0.5)), ((0.7, 0.2), (0.83, 0.83)),
            ((0.25, 0.45), (0.17, 0.17)))
TIED = 3


def test_tied_participants_are_those_whose_preferences_tie_at_the_top():
    people = pd.DataFrame({"participant_id": [1, 2, 3, 4],
                           "p_squares": [0.5, 0.5, 0.99, np.nan],
                           "p_letters": [0.5, 0.67, 0.99, np.nan]})
    assert ties.tied_ids(people) == {1, 3}
    assert ties.tied_ids(people.drop(columns="p_letters")) == set()


def crossover(tied_difference: float) -> pd.DataFrame:
    """12 participants in a balanced two-period crossover (each order within the tied and
    the untied alike); fair minus efficient is 1 for the untied, ``tied_difference`` for
    the four tied (ids 9-12), plus noise, on top of a person's own level."""
    rng = np.random.default_rng(11)
    rows = []
    for pid in range(1, 13):
        level = rng.normal(10, 2)
        difference = (tied_difference if pid > 8 else 1.0) + rng.normal(0, 0.3)
        order = ("efficient", "fair") if pid % 2 else ("fair", "efficient")
        for period, condition in enumerate(order, 1):
            rows.append({"participant_id": pid, "condition": condition, "period": period,
                         "cookies_team": level + (difference if condition == "fair" else 0)
                         + rng.normal(0, 0.05)})
    return pd.DataFrame(rows)


def test_the_effects_without_the_tied_are_the_paired_differences_without_them():
    """On a balanced paired design the mixed model's condition effect is the mean paired
    difference (tests/test_analysis_models.py): with everyone, and without the tied."""
    frame = crossover(tied_difference=-3.0)
    wide = frame.pivot(index="participant_id", columns="condition", values="cookies_team")
    paired = wide["fair"] - wide["efficient"]
    result = ties.with_and_without(frame, pd.DataFrame(columns=["item", "label", "value"]),
                                   ["cookies_team"], {9, 10, 11, 12})
    row = result.iloc[0]
    assert list(result.columns) == ties.COLUMNS and len(result) == 1
    assert (row["outcome"], row["model"], row["term"]) == ("cookies_team", "mixed",
                                                           "fair - efficient")
    assert (row["participants_all"], row["participants_without_tied"]) == (12, 8)
    assert row["estimate_all"] == pytest.approx(paired.mean(), abs=1e-6)
    assert row["estimate_without_tied"] == pytest.approx(paired.loc[:8].mean(), abs=1e-6)
    assert row["change"] == pytest.approx(paired.loc[:8].mean() - paired.mean(), abs=1e-6)
    assert row["estimate_all"] < 0 < row["estimate_without_tied"], "the tied reverse it"


def test_likert_items_get_their_ordinal_model_with_and_without_the_tied():
    frame = crossover(tied_difference=1.0)
    rng = np.random.default_rng(3)
    rated = frame.assign(item="fair", label="The robot was fair",
                         value=np.clip(np.round(4 + (frame["condition"] == "fair")
                                                + rng.normal(0, 1, len(frame))), 1, 7))
    result = ties.with_and_without(frame, rated, [], {9, 10, 11, 12})
    assert [model.split()[0] for model in result["model"]] == ["ordinal"]
    assert result.iloc[0]["term"] == "fair - efficient"
    assert (result.iloc[0]["participants_all"], result.iloc[0]["participants_without_tied"]
            ) == (12, 8)


# --- the report ------------------------------------------------------------------------------


def protocol_copy(directory: Path, rule: str) -> Path:
    """The demo protocol with ``[study] tied_ratings = rule``."""
    text = DEMO.read_text()
    text = re.sub(r"(?m)^\[study\]\n", f'[study]\ntied_ratings = "{rule}"\n', text, count=1)
    path = directory / f"ties-{rule}.toml"
    path.write_text(text)
    assert load_protocol(path).tied_ratings == rule
    return path


def report(database: Path, out: Path) -> tuple[Tables, str]:
    assert cli.main(["report", str(database), "--out", str(out)]) == 0
    return read_report(out)


def tied_in_sql(database: Path, where: str = "") -> int:
    with sqlite3.connect(database) as connection:
        return connection.execute(f"""
            SELECT COUNT(*) FROM participants p
            JOIN measurements s ON s.participant_id = p.id AND s.kind = 'preference'
                 AND s.task_type = 0
            JOIN measurements l ON l.participant_id = p.id AND l.kind = 'preference'
                 AND l.task_type = 1
            WHERE s.value = l.value {where}""").fetchone()[0]


def run_lowest_index(root: Path) -> None:
    """A study that breaks tied ratings by the lowest index, and its report."""
    report(run_study(root, PROFILES, protocol_copy(root, "lowest-index")), root / "out")


@pytest.fixture(scope="module")
def lowest_index(tmp_path_factory):
    root = built_once(tmp_path_factory, "ties-lowest-index", run_lowest_index)
    return root / "study.sqlite", read_report(root / "out")


@pytest.mark.slow
@pytest.mark.minutes(0.35)
def test_the_report_gives_each_effect_with_and_without_the_tied(lowest_index):
    database, (tables, page) = lowest_index
    assert tied_in_sql(database, "AND p.step = 'done'") == TIED
    title = f"Condition effects with and without the {TIED} participants with tied ratings"
    compared = table(tables, title)
    assert f"{TIED} analysed participants rated both themes equally" in page
    assert "tied_ratings: lowest-index" in page
    mixed = table(tables, "Mixed models").set_index("outcome")
    rows = compared[compared["model"] == "mixed"].set_index("outcome")
    assert set(rows.index) == set(mixed.index)
    for outcome, row in rows.iterrows():
        if row["estimate_all"] != "nan":
            assert float(row["estimate_all"]) == pytest.approx(
                float(mixed.loc[outcome, "estimate"]), abs=2e-3)
        assert int(row["participants_all"]) - int(row["participants_without_tied"]) == TIED
    assert {model.split()[0] for model in compared["model"]} == {"mixed", "ordinal"}


@pytest.mark.slow
def test_under_unmatched_the_tied_meet_the_unmatched_page_and_are_counted_apart(
        tmp_path_factory):
    root = tmp_path_factory.mktemp("ties-unmatched")
    database = run_study(root, PROFILES, protocol_copy(root, "unmatched"))
    assert tied_in_sql(database, "AND p.step = 'unmatched'") == TIED
    assert tied_in_sql(database, "AND p.step != 'unmatched'") == 0
    tables, page = report(database, root / "out")
    attained = table(tables, "Target attainment").set_index("placement")["participants"]
    assert int(attained[teams.UNMATCHED_TIED]) == TIED
    assert int(attained[teams.UNMATCHED]) == 0
    assert "No analysed participant rated both themes equally" in page
