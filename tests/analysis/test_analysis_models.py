"""The within-subject models against constructed examples whose answer is known."""

import gc

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import models


def paired_frame(n: int, effect: float, seed: int = 0) -> pd.DataFrame:
    """``n`` participants in both conditions, half in each order, with a participant
    effect (random intercept) and noise."""
    rng = np.random.default_rng(seed)
    person = rng.normal(0, 2, n)
    rows = []
    for k in range(n):
        order = ("a", "b") if k % 2 == 0 else ("b", "a")
        for period, condition in enumerate(order, start=1):
            value = 10 + person[k] + effect * (condition == "b") + rng.normal(0, 1)
            rows.append({"participant_id": k, "condition": condition, "period": period,
                         "order": "-".join(order), "y": value})
    return pd.DataFrame(rows)


def test_mixed_model_of_a_balanced_paired_design_is_the_paired_mean_difference():
    frame = paired_frame(40, effect=1.5)
    wide = frame.pivot(index="participant_id", columns="condition", values="y")
    differences = (wide["b"] - wide["a"]).to_numpy()
    row = models.mixed_model(frame, "y", reference="a", factors=()).iloc[0]
    assert row["term"] == "b - a"
    assert row["estimate"] == pytest.approx(differences.mean(), rel=1e-6)
    half_width = stats.norm.ppf(0.975) * differences.std(ddof=1) / np.sqrt(len(differences))
    assert row["ci_high"] - row["estimate"] == pytest.approx(half_width, rel=1e-3)
    assert row["participants"] == 40 and row["observations"] == 80


def test_mixed_model_with_period_averages_the_two_orders():
    frame = paired_frame(30, effect=1.0, seed=3)
    frame.loc[frame["period"] == 2, "y"] += 5.0  # a large period effect
    wide = frame.pivot(index="participant_id", columns="condition", values="y")
    order = frame.groupby("participant_id")["order"].first()
    by_order = (wide["b"] - wide["a"]).groupby(order).mean()
    row = models.mixed_model(frame, "y", reference="a").iloc[0]
    assert row["estimate"] == pytest.approx(by_order.mean(), rel=1e-6)
    assert row["ci_low"] < 1.0 < row["ci_high"]


def test_ordinal_model_of_a_binary_answer_is_the_log_odds_ratio_of_the_table():
    a, b, c, d = 30, 10, 15, 25  # condition x: 30 high, 10 low; reference r: 15 high, 25 low
    values = np.r_[np.full(a, 2), np.full(b, 1), np.full(c, 2), np.full(d, 1)]
    condition = ["x"] * (a + b) + ["r"] * (c + d)
    frame = pd.DataFrame({"participant_id": np.arange(len(values)), "condition": condition,
                          "value": values.astype(float)})
    effects, predicted = models.ordinal_model(frame, reference="r")
    row = effects.iloc[0]
    assert row["estimate"] == pytest.approx(np.log(a * d / (b * c)), abs=1e-4)
    assert row["effect_size"] == pytest.approx(a * d / (b * c), rel=1e-3)
    means = predicted.set_index("condition")["predicted_mean"]
    assert means["x"] == pytest.approx(1 + a / (a + b), abs=1e-4)
    assert means["r"] == pytest.approx(1 + c / (c + d), abs=1e-4)


def test_ordinal_model_recovers_a_latent_shift_and_stays_on_the_scale():
    rng = np.random.default_rng(1)
    n, shift = 400, 1.0
    person = np.repeat(rng.normal(0, 0.5, n), 2)
    condition = np.tile(["a", "b"], n)
    latent = shift * (condition == "b") + person + rng.logistic(size=2 * n)
    values = np.digitize(latent, [-2, -1, 0, 1, 2, 3]) + 1
    frame = pd.DataFrame({"participant_id": np.repeat(np.arange(n), 2),
                          "condition": condition, "value": values.astype(float)})
    effects, predicted = models.ordinal_model(frame, reference="a")
    row = effects.iloc[0]
    # the participant effect attenuates the marginal log odds ratio a little, never up
    assert 0.7 * shift < row["estimate"] < shift + 0.05
    assert row["ci_low"] < row["estimate"] < row["ci_high"]
    assert ((predicted["ci_low"] >= 1) & (predicted["ci_high"] <= 7)).all()
    observed = frame.groupby("condition")["value"].mean()
    for item in predicted.itertuples():
        assert item.ci_low <= observed[item.condition] <= item.ci_high


def test_the_ordered_logit_fits_what_statsmodels_own_logit_model_fits():
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    rng = np.random.default_rng(5)
    n = 60
    condition = np.repeat(["a", "b", "c"], n)
    latent = 0.8 * (condition == "b") - 0.5 * (condition == "c") + rng.logistic(size=3 * n)
    endog = pd.Series(pd.Categorical(np.digitize(latent, [-1.5, -0.5, 0.5, 1.5]) + 1,
                                     ordered=True))
    exog = pd.DataFrame({"b": (condition == "b") * 1.0, "c": (condition == "c") * 1.0})
    ours, theirs = (model(endog, exog, distr="logit").fit(method="bfgs", disp=False)
                    for model in (models.ordered_logit(), OrderedModel))
    assert ours.params.to_numpy() == pytest.approx(theirs.params.to_numpy(), abs=1e-9)
    assert ours.bse.to_numpy() == pytest.approx(theirs.bse.to_numpy(), rel=1e-6)
    far = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])  # a threshold drawn far away
    fitted = ours.model
    assert fitted.cdf(far) == pytest.approx(stats.logistic.cdf(far), abs=1e-15)
    assert fitted.pdf(far) == pytest.approx(stats.logistic.pdf(far), abs=1e-15)


def test_models_say_why_when_they_cannot_fit():
    frame = paired_frame(2, effect=1.0)
    assert "too few" in models.mixed_model(frame, "y").iloc[0]["note"]
    effects, predicted = models.ordinal_model(frame.assign(value=3.0))
    assert "too few" in effects.iloc[0]["note"] and predicted.empty


def test_carryover_test_compares_the_totals_of_the_two_orders():
    frame = paired_frame(20, effect=0.0, seed=5)
    frame.loc[frame["order"] == "b-a", "y"] += 2.0  # both periods of one order shifted
    totals = frame.groupby("participant_id").agg(order=("order", "first"), y=("y", "sum"))
    expected = stats.ttest_ind(totals.loc[totals["order"] == "a-b", "y"],
                               totals.loc[totals["order"] == "b-a", "y"], equal_var=False)
    row = models.carryover_test(frame, "y")
    assert row["statistic"] == pytest.approx(expected.statistic)
    assert row["p_value"] == pytest.approx(expected.pvalue)
    assert row["difference_of_totals"] == pytest.approx(
        totals.groupby("order")["y"].mean().diff().iloc[-1] * -1)
    table = models.condition_by_order(frame, ["y"])
    assert set(table["participants"]) == {10}


def test_mixed_model_without_a_participant_effect_converges_at_zero_variance():
    rng = np.random.default_rng(8)
    n = 30
    frame = pd.DataFrame({"participant_id": np.repeat(np.arange(n), 2),
                          "condition": np.tile(["a", "b"], n),
                          "y": np.tile([0.0, 1.0], n) + rng.integers(0, 2, 2 * n)})
    row = models.mixed_model(frame, "y", reference="a", factors=()).iloc[0]
    means = frame.groupby("condition")["y"].mean()
    assert row["estimate"] == pytest.approx(means["b"] - means["a"], abs=1e-4)
    assert "did not converge" not in row["note"]


def test_holm_adjusts_as_statsmodels_and_leaves_the_heap_as_it_found_it():
    from statsmodels.stats.multitest import multipletests

    p_values = [0.01, 0.04, 0.03, 0.005, 0.5]
    frozen_while_collecting = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            frozen_while_collecting.append(gc.get_freeze_count())

    gc.callbacks.append(watch)
    try:
        adjusted = models.holm(p_values)
    finally:
        gc.callbacks.remove(watch)
    assert adjusted == pytest.approx(multipletests(p_values, method="holm")[1])
    # statsmodels collects every generation; what was alive before sat it out, frozen
    assert frozen_while_collecting and min(frozen_while_collecting) > 1000
    assert gc.get_freeze_count() == 0
