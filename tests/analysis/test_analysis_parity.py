"""Group differences with bootstrap intervals."""

import numpy as np
import pandas as pd
import pytest

from analysis import parity


def test_difference_of_means_by_hand():
    frame = pd.DataFrame({"group": ["a", "a", "a", "b", "b"], "y": [1.0, 2.0, 3.0, 4.0, 5.0]})
    row = parity.group_differences(frame, "y", "group").iloc[0]
    assert (row["group_a"], row["group_b"], row["n_a"], row["n_b"]) == ("a", "b", 3, 2)
    assert row["difference"] == pytest.approx(2.0 - 4.5)
    # Every resample's difference lies between the extreme possible differences.
    assert -4.0 <= row["ci_low"] <= -2.5 <= row["ci_high"] <= -1.0


def test_interval_width_matches_the_normal_approximation():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"group": np.repeat(["x", "y"], 400),
                          "y": np.concatenate([rng.normal(0, 1, 400), rng.normal(1, 1, 400)])})
    row = parity.group_differences(frame, "y", "group", resamples=4000).iloc[0]
    assert row["ci_high"] - row["ci_low"] == pytest.approx(2 * 1.96 * np.sqrt(2 / 400),
                                                           rel=0.1)
    assert row["ci_low"] < -0.8 and row["ci_high"] > -1.2


def test_paired_differences_use_units_with_both_groups():
    frame = pd.DataFrame({"session": [1, 1, 2, 2, 3, 4, 4],
                          "role": ["p", "t", "p", "t", "p", "p", "t"],
                          "y": [5.0, 3.0, 6.0, 6.0, 9.0, 4.0, 1.0]})
    row = parity.group_differences(frame, "y", "role", pair_by="session").iloc[0]
    assert row["paired"] and row["n_a"] == 3
    assert row["difference"] == pytest.approx((2 + 0 + 3) / 3)
    assert 0 <= row["ci_low"] <= row["ci_high"] <= 3


def test_three_groups_give_three_pairs_and_tiny_groups_no_interval():
    frame = pd.DataFrame({"g": ["a", "b", "b", "c", "c"], "y": [1.0, 2, 3, 4, 5]})
    table = parity.group_differences(frame, "y", "g")
    assert list(zip(table["group_a"], table["group_b"], strict=True)) == [
        ("a", "b"), ("a", "c"), ("b", "c")]
    assert np.isnan(table["ci_low"].iloc[0])
    assert not np.isnan(table["ci_low"].iloc[2])
