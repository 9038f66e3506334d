"""Likert items: descriptives, paired comparisons, effect sizes and the small-n warning."""

import numpy as np
import pandas as pd
import pytest

from analysis import questionnaires as q


def answers(values_a, values_b, item="fair_overall"):
    rows = []
    for k, (a, b) in enumerate(zip(values_a, values_b, strict=True)):
        rows += [{"participant_id": k, "condition": "efficient", "item": item, "value": a},
                 {"participant_id": k, "condition": "fair", "item": item, "value": b}]
    return pd.DataFrame(rows)


def test_describe_by_hand():
    frame = answers([1, 2, 3, 4], [7, 7, 6, 6])
    table = q.describe(frame).set_index("condition")
    assert table.loc["efficient", "n"] == 4
    assert table.loc["efficient", "mean"] == pytest.approx(2.5)
    assert table.loc["efficient", "sd"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert table.loc["fair", "median"] == pytest.approx(6.5)


def test_free_text_answers_are_left_out():
    frame = pd.concat([answers([3], [4]), pd.DataFrame([{
        "participant_id": 0, "condition": "fair", "item": "why", "value": "it was fine"}])])
    assert set(q.describe(frame)["item"]) == {"fair_overall"}


def test_rank_biserial_by_hand():
    # |d| = 2, 2, 1: ranks 2.5, 2.5, 1; W+ = 5, W- = 1.
    assert q.rank_biserial(np.array([2, 2, -1])) == pytest.approx(4 / 6)
    assert q.rank_biserial(np.array([1, 2, -3, 0])) == pytest.approx(0.0)
    assert q.rank_biserial(np.array([1, 1])) == 1.0
    assert np.isnan(q.rank_biserial(np.zeros(3)))


def test_ten_pairs_all_favouring_one_condition():
    table = q.paired_comparisons(answers(range(1, 11), [v + d for v, d in zip(
        range(1, 11), [0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5], strict=True)]))
    row = table.iloc[0]
    assert row["warning"] == ""
    assert row["n_pairs"] == 10 and row["n_nonzero"] == 10
    # Exact two-sided p of the most extreme of 2^10 sign patterns.
    assert row["p_value"] == pytest.approx(2 / 1024)
    assert row["statistic"] == 0
    assert row["rank_biserial"] == pytest.approx(-1.0)
    assert row["mean_a"] - row["mean_b"] == pytest.approx(-2.75)


def test_paper_sized_samples_get_a_plain_warning_and_no_test():
    row = q.paired_comparisons(answers([5, 6, 4, 6, 5, 7], [3, 4, 4, 2, 5, 3])).iloc[0]
    assert "Only 6 participants" in row["warning"]
    assert np.isnan(row["p_value"])
    assert row["rank_biserial"] == pytest.approx(1.0)


def test_too_few_differing_pairs_are_warned_about():
    row = q.paired_comparisons(answers([4] * 12, [4] * 7 + [5] * 5)).iloc[0]
    assert "Only 5 participants rated the conditions differently" in row["warning"]
    assert np.isnan(row["p_value"])


def test_items_asked_once_are_not_compared():
    frame = pd.DataFrame([{"participant_id": 1, "condition": "post", "item": "which",
                           "value": 3}])
    assert q.paired_comparisons(frame).empty


def test_predicted_rating_scales_rewards_to_likert():
    assert q.predicted_rating([0.0, 0.5, 1.0]).tolist() == [1.0, 4.0, 7.0]
