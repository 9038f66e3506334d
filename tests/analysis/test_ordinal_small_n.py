"""The ordinal models at a pilot's few participants: below the report's floor for a test
they carry the notice the other tests of ratings carry, with no p value (three people who
all rated one robot higher gave an odds ratio of millions, unannounced), and an item whose
model could not be fitted says so in the figure, where its dots would be, instead of losing
them without a word."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.analysis import make_database, read_report, table

from analysis import cli, figures, models, questionnaires

FLOOR_WORDS = f"too few for a test (fewer than {models.MIN_PARTICIPANTS})"
UNFITTED = "too few participants, conditions or distinct answers"


def ratings(people: int, seed: int = 0, shift: float = 3.0) -> pd.DataFrame:
    """One answer per participant and condition, condition b rated higher by ``shift``."""
    rng = np.random.default_rng(seed)
    rows = []
    for person in range(people):
        base = rng.integers(1, 4)
        for condition, move in (("a", 0.0), ("b", shift)):
            value = np.clip(base + move + rng.integers(0, 2), 1, 7)
            rows.append({"participant_id": person, "condition": condition,
                         "value": float(value)})
    return pd.DataFrame(rows)


def test_three_participants_get_the_too_few_notice_and_no_p_value():
    frame = pd.DataFrame({"participant_id": [1, 1, 2, 2, 3, 3],
                          "condition": ["a", "b"] * 3, "value": [2.0, 5, 3, 6, 2, 6]})
    effects, predicted = models.ordinal_model(frame, reference="a")
    row = effects.iloc[0]
    assert row["effect_size"] > 1e3, "every b above every a: the odds ratio runs away"
    assert row["warning"].startswith("Only 3 participants answered the item")
    assert FLOOR_WORDS in row["warning"]
    assert FLOOR_WORDS in questionnaires.sample_warning(3, 3), "the other tests' words"
    assert np.isnan(row["p_value"]) and np.isnan(row["p_holm"])
    assert "Wald" not in row["note"]
    assert set(predicted["condition"]) == {"a", "b"}, "the model means stay, descriptive"


def test_at_the_floor_the_model_is_a_test():
    effects, _ = models.ordinal_model(ratings(models.MIN_PARTICIPANTS, shift=1.0),
                                      reference="a")
    row = effects.iloc[0]
    assert row["warning"] == "" and 0 < row["p_value"] < 1


def test_an_unfitted_model_keeps_the_warning_column_and_says_why():
    effects, predicted = models.ordinal_model(ratings(4).assign(value=3.0))
    assert list(effects.columns) == models.ORDINAL_COLUMNS
    assert effects.iloc[0]["note"] == UNFITTED and predicted.empty


def test_a_model_that_failed_says_so_where_its_dots_would_be():
    predicted = pd.DataFrame({"outcome": "Fair", "condition": ["a", "b"],
                              "predicted_mean": [3.0, 5.0], "ci_low": [2.0, 4.0],
                              "ci_high": [4.0, 6.0]})
    observed = pd.DataFrame({"outcome": ["Agree", "Agree", "Fair", "Fair"],
                             "condition": ["a", "b"] * 2, "mean": [4.0, 4.0, 3.0, 5.0]})
    figure = figures.intervals_figure(predicted, observed, unfitted={"Agree": UNFITTED})
    axis = figure.axes[0]
    rows = dict(zip([label.get_text() for label in axis.get_yticklabels()],
                    axis.get_yticks(), strict=True))
    said = [text for text in axis.texts if text.get_text().startswith("model not fitted")]
    assert [text.get_text() for text in said] == [f"model not fitted: {UNFITTED}"]
    x, y = said[0].get_position()
    assert y == rows["Agree"] and axis.get_xlim()[0] < x < axis.get_xlim()[1]
    figures.plt.close(figure)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, str, Path]:
    """Four participants (make_database); everyone rated Cap-Agree 4, so its model cannot
    be fitted, while the other items' models fit on four people."""
    directory = tmp_path_factory.mktemp("ordinal-small-n")
    database = make_database(directory / "study.sqlite")
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE answers SET value_number = 4 WHERE item = 'cap_agree'")
    out = directory / "out"
    assert cli.main(["report", str(database), "--out", str(out)]) == 0
    return (*read_report(out), out)


def section(page: str, title: str) -> str:
    return next(part for part in page.split("<h2>") if part.startswith(title))


def test_the_report_marks_every_ordinal_estimate_of_four_people(report):
    tables, page, _ = report
    fitted = table(tables, "Ordinal models per item").set_index("outcome")
    assert fitted.loc["Cap-Agree", "note"] == UNFITTED
    assert fitted.loc["Cap-Agree", "estimate"] == ""
    others = fitted.drop(index="Cap-Agree")
    assert len(others) == 4 and (others["estimate"] != "").all()
    assert others["warning"].str.startswith("Only 4 participants answered the item").all()
    assert (others["p_value"] == "").all()
    for title in ("Questionnaires", "Conditions: the goal state and the ratings"):
        warnings = re.findall(r'<p class="warning">(.*?)</p>', section(page, title))
        assert any("Only 4 participants answered the item" in w for w in warnings), title


def test_the_ratings_figure_says_which_model_failed_and_that_the_rest_are_few(report):
    _, _, out = report
    drawn = (out / "figures" / "ratings.svg").read_text(encoding="utf-8")  # text as comments
    assert f"model not fitted: {UNFITTED}" in drawn
    assert f"Fewer than {models.MIN_PARTICIPANTS} participants: too few for a test" in drawn
