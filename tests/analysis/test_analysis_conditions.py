"""The within-subject models of a study of three and four conditions, on simulated data
whose effects are known: the condition a factor of k levels, every pair compared with a
Holm-adjusted p value, the factor's Wald test, and carry-over over more than two periods."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from analysis import cli, models, plan, questionnaires
from study.protocol.orders import counterbalanced

THREE = Path(__file__).resolve().parents[1] / "three_robots.toml"

EFFECTS = {"efficient": 0.0, "fair": 2.0, "fea": 2.0, "nash": -1.0}


def crossover(conditions: list[str], n: int, seed: int = 0, carry: float = 0.0,
              period_step: float = 0.5, noise: float = 1.0) -> pd.DataFrame:
    """``n`` participants, each in every condition in the rotation's orders (every order
    of three, a Williams square of four), with a participant effect, a period effect, the
    conditions' ``EFFECTS`` and, when asked, ``carry`` added after the first condition."""
    rng = np.random.default_rng(seed)
    orders = counterbalanced(conditions, "alternate")
    rows = []
    for person in range(n):
        order = orders[person % len(orders)]
        level = rng.normal(0, 2)
        for period, condition in enumerate(order, start=1):
            after_first = carry if period > 1 and order[period - 2] == conditions[0] else 0.0
            value = (10 + level + EFFECTS[condition] + period_step * period + after_first
                     + rng.normal(0, noise))
            rows.append({"participant_id": person, "condition": condition, "period": period,
                         "order": " > ".join(order), "y": value})
    return pd.DataFrame(rows)


def test_three_conditions_give_every_pair_with_holm_adjusted_p_values():
    frame = crossover(["efficient", "fair", "fea"], 60)
    table = models.mixed_model(frame, "y", reference="efficient").set_index("term")
    assert list(table.index) == ["fair - efficient", "fea - efficient", "fea - fair"]
    truth = {"fair - efficient": 2.0, "fea - efficient": 2.0, "fea - fair": 0.0}
    for term, difference in truth.items():
        assert table.loc[term, "ci_low"] < difference < table.loc[term, "ci_high"]
    assert multipletests(table["p_value"], method="holm")[1] == pytest.approx(
        table["p_holm"].to_numpy())
    assert (table["p_holm"] >= table["p_value"]).all()
    assert table.loc["fair - efficient", "p_holm"] < 1e-6
    assert table.loc["fea - fair", "p_holm"] > 0.05  # the pair with no difference
    assert "condition: Wald chi2(2)" in table["note"].iloc[0]


def test_a_contrast_between_two_levels_is_their_difference_and_its_standard_error():
    """fea - fair from the fit equals the difference of the two coefficients against the
    reference, its variance var(a) + var(b) - 2 cov(a, b)."""
    frame = crossover(["efficient", "fair", "fea"], 36, seed=4)
    table = models.mixed_model(frame, "y", reference="efficient").set_index("term")
    fair, fea = table.loc["fair - efficient"], table.loc["fea - efficient"]
    assert table.loc["fea - fair", "estimate"] == pytest.approx(
        fea["estimate"] - fair["estimate"])
    wide = frame.pivot(index="participant_id", columns="condition", values="y")
    # a balanced design: each difference estimate is the paired mean difference
    assert table.loc["fea - fair", "estimate"] == pytest.approx(
        (wide["fea"] - wide["fair"]).mean(), abs=1e-6)


def test_four_conditions_in_a_williams_square_recover_every_difference():
    conditions = ["efficient", "fair", "fea", "nash"]
    frame = crossover(conditions, 80, seed=2)
    table = models.mixed_model(frame, "y", reference="efficient").set_index("term")
    assert len(table) == 6
    for a, b in combinations(["efficient", *sorted(conditions[1:])], 2):
        row = table.loc[f"{b} - {a}"]
        assert row["ci_low"] < EFFECTS[b] - EFFECTS[a] < row["ci_high"]
    assert multipletests(table["p_value"], method="holm")[1] == pytest.approx(
        table["p_holm"].to_numpy())
    assert "Wald chi2(3)" in table["note"].iloc[0]


def test_two_conditions_keep_their_one_row_with_p_holm_equal_to_p():
    frame = crossover(["efficient", "fair"], 30, seed=1)
    table = models.mixed_model(frame, "y")
    assert list(table["term"]) == ["fair - efficient"]
    assert table["p_holm"].iloc[0] == table["p_value"].iloc[0]
    assert "Wald" not in table["note"].iloc[0]


def test_the_ordinal_model_compares_every_pair_of_three_conditions():
    rng = np.random.default_rng(5)
    shift = {"a": 0.0, "b": 1.2, "c": 1.2}
    rows = []
    for person in range(300):
        level = rng.normal(0, 0.5)
        for condition, move in shift.items():
            latent = move + level + rng.logistic()
            rows.append({"participant_id": person, "condition": condition,
                         "value": float(np.digitize(latent, [-2, -1, 0, 1, 2, 3]) + 1)})
    effects, predicted = models.ordinal_model(pd.DataFrame(rows), reference="a")
    table = effects.set_index("term")
    assert list(table.index) == ["b - a", "c - a", "c - b"]
    assert table.loc["b - a", "p_holm"] < 1e-4 and table.loc["c - a", "p_holm"] < 1e-4
    assert table.loc["c - b", "ci_low"] < 0 < table.loc["c - b", "ci_high"]
    assert table.loc["c - b", "estimate"] == pytest.approx(
        table.loc["c - a", "estimate"] - table.loc["b - a", "estimate"])
    assert set(predicted["condition"]) == {"a", "b", "c"}
    assert "condition: Wald chi2(2)" in table["note"].iloc[0]


def test_carry_over_over_three_periods_is_found_when_there_and_not_when_not():
    conditions = ["efficient", "fair", "fea"]
    clean = models.carryover_test(crossover(conditions, 60, seed=7), "y")
    carried = models.carryover_test(crossover(conditions, 60, seed=7, carry=3.0), "y")
    assert "first-order carry-over: Wald chi2(" in carried["note"]
    assert carried["p_value"] < 1e-6
    assert clean["p_value"] > 0.01
    assert carried["participants"] == clean["participants"] == 60


# --- the questionnaires of several robots --------------------------------------------------


def test_likert_items_in_three_conditions_are_compared_pairwise_with_holm():
    rng = np.random.default_rng(9)
    rows = [{"participant_id": person, "item": "fair", "condition": condition,
             "value": float(np.clip(round(4 + shift + rng.normal(0, 1)), 1, 7))}
            for person in range(40) for condition, shift in (("a", 0), ("b", 1.5), ("c", 0))]
    table = questionnaires.paired_comparisons(pd.DataFrame(rows)).set_index(
        ["condition_a", "condition_b"])
    assert list(table.index) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert table["p_holm"].to_numpy() == pytest.approx(
        multipletests(table["p_value"], method="holm")[1])
    assert table.loc[("a", "b"), "p_holm"] < 0.001 and table.loc[("a", "c"), "p_holm"] > 0.05


def answers_of(item: str, texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"participant_id": range(len(texts)), "questionnaire": "post",
                         "item": item, "label": item.title(), "value_text": texts})


def test_ranks_become_places_and_every_two_robots_a_sign_test():
    texts = ["fair,fea,efficient"] * 9 + ["fea,fair,efficient"] * 3
    ranked = questionnaires.rankings(answers_of("rank", texts), ["rank"])
    summary = questionnaires.rank_summary(ranked).set_index("condition")
    assert summary["mean_place"].to_dict() == {"efficient": 3.0, "fair": 1.25, "fea": 1.75}
    assert summary["first"].to_dict() == {"efficient": 0, "fair": 9, "fea": 3}
    assert summary["last"].to_dict() == {"efficient": 12, "fair": 0, "fea": 0}
    tests = questionnaires.pair_tests(questionnaires.ranked_pairs(ranked)).set_index(
        ["condition_a", "condition_b"])
    assert tests.loc[("efficient", "fair"), ["a_above_b", "b_above_a", "ties"]].tolist() == [
        0, 12, 0]
    assert tests.loc[("fair", "fea"), ["a_above_b", "b_above_a"]].tolist() == [9, 3]
    p = [stats.binomtest(k, 12).pvalue for k in (0, 0, 9)]
    assert tests["p_value"].to_numpy() == pytest.approx(p)
    assert tests["p_holm"].to_numpy() == pytest.approx(multipletests(p, method="holm")[1])
    friedman = questionnaires.friedman(ranked).iloc[0]
    places = ranked.pivot(index="participant_id", columns="condition", values="place")
    assert friedman["statistic"] == pytest.approx(
        stats.friedmanchisquare(*[places[c] for c in places.columns]).statistic)


def test_pairwise_answers_count_ties_apart_and_name_pairs_alike_whatever_the_order_met():
    texts = (["efficient>fair;fea>efficient;fair=fea"] * 6
             + ["fair>efficient;efficient>fea;fea>fair"] * 4)
    chosen = questionnaires.pairwise_choices(answers_of("fairer", texts), ["fairer"])
    tests = questionnaires.pair_tests(chosen).set_index(["condition_a", "condition_b"])
    assert tests.loc[("efficient", "fair"), ["a_above_b", "b_above_a", "ties"]].tolist() == [
        6, 4, 0]
    assert tests.loc[("efficient", "fea"), ["a_above_b", "b_above_a", "ties"]].tolist() == [
        4, 6, 0]
    assert tests.loc[("fair", "fea"), ["a_above_b", "b_above_a", "ties"]].tolist() == [
        0, 4, 6]
    assert tests.loc[("fair", "fea"), "warning"].startswith("Only 4 participants put one")
    assert np.isnan(tests.loc[("fair", "fea"), "p_value"])
    few = questionnaires.pair_tests(chosen[chosen["participant_id"] < 5])
    assert few["warning"].str.contains("too few for a test").all()


# --- planning a study of several conditions ------------------------------------------------


def test_holm_rejections_are_statsmodels_holm_study_by_study():
    p_values = np.random.default_rng(3).uniform(0, 0.1, (40, 3))
    expected = np.array([multipletests(row, alpha=0.05, method="holm")[0]
                         for row in p_values])
    assert (plan.holm_rejections(p_values, 0.05) == expected).all()
    assert expected.any() and not expected.all()


def test_a_pair_under_holm_has_power_between_bonferronis_and_the_unadjusted_test():
    effects = np.array([0.5, 0.0, 0.0])

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(effects, 1.0, (n, 3))

    curve = plan.power_curve(draw, (30,), "t", 0.05, 3000, np.random.default_rng(4),
                             pairs=("effect", "null 1", "null 2")).set_index("pair")
    bonferroni, unadjusted = plan.paired_t_power(30, 0.5, 0.05 / 3), plan.paired_t_power(
        30, 0.5, 0.05)
    assert curve.loc["effect", "ci_high"] >= bonferroni
    assert curve.loc["effect", "ci_low"] <= unadjusted
    assert bonferroni < unadjusted - 0.1  # the adjustment costs power here
    for null in ("null 1", "null 2"):
        assert curve.loc[null, "ci_low"] <= 0.05 / 2  # each null pair held near alpha / 2


@pytest.fixture(scope="module")
def three_pool(tmp_path_factory):
    from study.pool import ensure_pool
    from study.protocol.loader import load_protocol

    return ensure_pool(load_protocol(THREE).pool_spec(), tmp_path_factory.mktemp("pool"))


def test_analysis_plan_plans_for_every_pair_of_three_robots(tmp_path, three_pool, capsys):
    args = ["plan", str(THREE), "--pool", str(three_pool), "--simulations", "30",
            "--participants", "6,12", "--out"]
    assert cli.main([*args, str(tmp_path / "all")]) == 0
    curves = pd.read_csv(tmp_path / "all" / "plan.csv")
    cookies = sorted(o for o in curves["outcome"].unique() if o.startswith("team cookies"))
    assert [o.split(" (")[1].split(",")[0] for o in cookies] == [
        "fair - efficient", "fea - efficient", "fea - fair"]
    assert all("Holm over 3 pairs" in o for o in cookies)
    likert = {o.split(", ")[1] for o in curves["outcome"] if o.startswith("Likert")}
    assert likert == {"fair - efficient", "fea - fair"}
    assert cli.main([*args, str(tmp_path / "two"), "--conditions", "efficient,fea"]) == 0
    two = pd.read_csv(tmp_path / "two" / "plan.csv")
    assert sorted(two["outcome"].str.split(" \\(").str[0].unique()) == ["Likert item",
                                                                         "team cookies"]
    assert not two["outcome"].str.contains("Holm").any()
    capsys.readouterr()
    assert cli.main([*args, str(tmp_path / "bad"), "--conditions", "efficient,nash"]) == 2
    assert "nash" in capsys.readouterr().err
