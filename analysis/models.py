"""Models of the within-subject design: the participant is the unit.

Every participant meets every condition in a counterbalanced order, so each outcome is
modelled with the condition and the period (first or second session; the site too when
studies are pooled) as fixed effects and the participant as the unit:

- a linear mixed-effects model (``statsmodels`` MixedLM, REML, random intercept per
  participant) for cookies and the allocation outcomes;
- a cumulative-link (proportional-odds logit) model for each Likert item
  (``statsmodels`` OrderedModel) with standard errors clustered by participant, whose
  predicted mean rating per condition stays on the item's scale;
- the order and carry-over check of a two-period crossover: outcome means by condition
  and order, and Grizzle's test comparing the participants' two-period totals between
  the two orders (a carry-over effect shifts those totals; a condition effect does not).

With the handful of participants of a pilot these are estimates with wide intervals;
a model that cannot be fitted says why instead of failing the report.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
DRAWS = 400  # parameter draws for the intervals of predicted ratings
MODEL_COLUMNS = ["outcome", "model", "term", "estimate", "ci_low", "ci_high", "p_value",
                 "effect_size", "effect_size_kind", "participants", "observations", "note"]


def _z() -> float:
    return float(stats.norm.ppf(0.5 + LEVEL / 2))


def _empty_row(outcome: str, model: str, note: str) -> dict[str, object]:
    nan = float("nan")
    return {"outcome": outcome, "model": model, "term": "", "estimate": nan, "ci_low": nan,
            "ci_high": nan, "p_value": nan, "effect_size": nan, "effect_size_kind": "",
            "participants": 0, "observations": 0, "note": note}


def _design(frame: pd.DataFrame, reference: str, extra: Sequence[str]) -> pd.DataFrame:
    """Fixed-effect dummies: each condition against ``reference``, then the extra factors
    (period, site) against their first level."""
    conditions = [c for c in sorted(frame["condition"].unique(), key=str) if c != reference]
    columns = {f"condition[{c}]": (frame["condition"] == c).astype(float) for c in conditions}
    for factor in extra:
        levels = sorted(frame[factor].unique(), key=str)
        if len(levels) > 1:
            columns.update({f"{factor}[{level}]": (frame[factor] == level).astype(float)
                            for level in levels[1:]})
    return pd.DataFrame(columns, index=frame.index)


def _full_rank(exog: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The columns of ``exog`` in order, each kept only if it is not a combination of the
    ones before (condition first): a period confounded with the condition (every
    participant in the same order) is dropped and said so."""
    kept: list[str] = []
    for column in exog.columns:
        trial = exog[[*kept, column]].to_numpy(dtype=float)
        if np.linalg.matrix_rank(trial) == len(kept) + 1:
            kept.append(column)
    dropped = [c for c in exog.columns if c not in kept]
    note = f"confounded, left out: {', '.join(dropped)}" if dropped else ""
    return exog[kept], note


def _factors(frame: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    return [f for f in factors if f in frame and frame[f].nunique() > 1]


def mixed_model(frame: pd.DataFrame, outcome: str, reference: str | None = None,
                factors: Sequence[str] = ("period", "site")) -> pd.DataFrame:
    """Condition effects on ``outcome`` from a linear mixed model with a random intercept
    per participant: the difference from ``reference`` with its Wald interval, and as
    effect size that difference over the total standard deviation (a standardised mean
    difference, d)."""
    import statsmodels.api as sm

    data = frame.dropna(subset=[outcome, "condition"])
    reference = reference or (sorted(data["condition"].unique(), key=str) or [""])[0]
    if data["condition"].nunique() < 2 or data["participant_id"].nunique() < 3:
        return pd.DataFrame([_empty_row(outcome, "mixed", "too few participants or "
                                                          "conditions to fit")])
    exog, confounded = _full_rank(sm.add_constant(_design(data, reference,
                                                          _factors(data, factors))))
    model = _mixed(sm, data, data[outcome].astype(float), exog)
    result, warned, error = _fit_mixed(model)
    if result is None:
        return pd.DataFrame([_empty_row(outcome, "mixed", f"not fitted: {error}")])
    between = float(np.asarray(result.cov_re).ravel()[0]) + float(np.sum(result.vcomp))
    note = "; ".join(filter(None, [confounded, _fit_note(result.converged, warned),
                                   "participant variance estimated at 0" if between < 1e-8
                                   else ""]))
    total_sd = float(np.sqrt(result.scale + between))
    intervals = result.conf_int(alpha=1 - LEVEL)
    rows = []
    for term in [t for t in exog.columns if t.startswith("condition[")]:
        estimate = float(result.params[term])
        rows.append({"outcome": outcome, "model": "mixed",
                     "term": f"{term[10:-1]} - {reference}", "estimate": estimate,
                     "ci_low": float(intervals.loc[term, 0]),
                     "ci_high": float(intervals.loc[term, 1]),
                     "p_value": float(result.pvalues[term]),
                     "effect_size": estimate / total_sd if total_sd > 0 else float("nan"),
                     "effect_size_kind": "d (difference / total sd)",
                     "participants": int(data["participant_id"].nunique()),
                     "observations": len(data), "note": note})
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)


def _mixed(sm, data: pd.DataFrame, endog: pd.Series, exog: pd.DataFrame):
    """A random intercept per participant; where participants played in real teams
    (docs/teams.md), per team, with the participants a variance component nested in it
    (a person alone is a team of one)."""
    if "team_id" not in data or data["team_id"].isna().all():
        return sm.MixedLM(endog, exog, groups=data["participant_id"])
    from statsmodels.regression.mixed_linear_model import VCSpec

    teams = data["team_id"].fillna(-data["participant_id"]).astype(int)
    rows = data.groupby(teams).groups  # sorted, as MixedLM orders its groups
    people = [pd.get_dummies(data.loc[rows[team], "participant_id"]) for team in rows]
    nested = VCSpec(["participant"], [[list(map(str, m.columns)) for m in people]],
                    [[m.to_numpy(float) for m in people]])
    return sm.MixedLM(endog, exog, groups=teams, exog_re=np.ones((len(data), 1)),
                      exog_vc=nested)


# statsmodels' default optimiser stalls when the participant variance sits at its boundary
# (0); the derivative-free ones then converge to it.
MIXED_OPTIMISERS = (None, "powell", "nm")


def _fit_mixed(model) -> tuple[object | None, bool, str]:
    """The first REML fit that converges (the last one that ran, if none does), whether an
    optimiser had to be retried, and the last error."""
    fitted, error = None, ""
    for k, method in enumerate(MIXED_OPTIMISERS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = model.fit(reml=True, **({"method": method} if method else {}))
            except (np.linalg.LinAlgError, ValueError, ZeroDivisionError) as failure:
                error = str(failure)
                continue
        fitted = result
        if result.converged:
            return result, k > 0, error
    return fitted, True, error


def _fit_note(converged: bool, warned: bool) -> str:
    """The optimiser's story in a few words (its warnings are long and repetitive)."""
    if not converged:
        return "did not converge: estimates unreliable"
    return "converged after a retry with another optimiser" if warned else ""


def ordinal_model(frame: pd.DataFrame, outcome: str = "value", label: str | None = None,
                  reference: str | None = None, factors: Sequence[str] = ("period", "site"),
                  points: int = 7, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A proportional-odds (cumulative logit) model of one Likert item with standard
    errors clustered by participant.

    Returns the condition effects (log odds ratio of a higher rating, its interval, and
    the odds ratio as effect size) and the predicted mean rating per condition (averaged
    over the observed periods) with an interval from parameter draws: a mean of
    probabilities over 1..points, so it never leaves the scale.
    """
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    label = label or outcome
    data = frame.dropna(subset=[outcome, "condition"])
    reference = reference or (sorted(data["condition"].unique(), key=str) or [""])[0]
    empty = pd.DataFrame(columns=["outcome", "condition", "predicted_mean", "ci_low",
                                  "ci_high"])
    if (data["condition"].nunique() < 2 or data["participant_id"].nunique() < 3
            or data[outcome].nunique() < 2):
        return pd.DataFrame([_empty_row(label, "ordinal", "too few participants, "
                                                          "conditions or distinct answers")]), empty
    levels = sorted(data[outcome].unique())
    endog = pd.Series(pd.Categorical(data[outcome], categories=levels, ordered=True),
                      index=data.index)
    exog = _design(data, reference, _factors(data, factors))
    exog, confounded = _full_rank(exog.loc[:, exog.std() > 0])
    parameters = len(levels) - 1 + exog.shape[1]
    if len(data) <= parameters + 1:
        return pd.DataFrame([_empty_row(label, "ordinal", (
            f"{len(data)} answers are too few for {parameters} parameters (a threshold "
            "between each pair of answers used, and the effects)"))]), empty
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = OrderedModel(endog, exog, distr="logit")
            result = model.fit(method="bfgs", disp=False, maxiter=2000, cov_type="cluster",
                               cov_kwds={"groups": data["participant_id"].to_numpy()})
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError) as error:
            return pd.DataFrame([_empty_row(label, "ordinal", f"not fitted: {error}")]), empty
    converged = bool(result.mle_retvals.get("converged", True))
    note = "; ".join(filter(None, [confounded, _fit_note(converged, bool(caught))]))
    z = _z()
    rows = []
    for term in [t for t in exog.columns if t.startswith("condition[")]:
        estimate, se = float(result.params[term]), float(result.bse[term])
        rows.append({"outcome": label, "model": "ordinal (cluster-robust)",
                     "term": f"{term[10:-1]} - {reference}", "estimate": estimate,
                     "ci_low": estimate - z * se, "ci_high": estimate + z * se,
                     "p_value": float(result.pvalues[term]),
                     "effect_size": float(np.exp(estimate)),
                     "effect_size_kind": "odds ratio of a higher rating",
                     "participants": int(data["participant_id"].nunique()),
                     "observations": len(data), "note": note})
    predicted = _predicted_means(model, result, data, exog, np.asarray(levels, dtype=float),
                                 reference, seed)
    return pd.DataFrame(rows, columns=MODEL_COLUMNS), predicted.assign(outcome=label)[
        ["outcome", "condition", "predicted_mean", "ci_low", "ci_high"]]


def _predicted_means(model, result, data: pd.DataFrame, exog: pd.DataFrame,
                     levels: np.ndarray, reference: str, seed: int) -> pd.DataFrame:
    """Mean rating per condition, every observed row set to that condition, with the
    central interval of the same mean under parameter draws from the fit's covariance."""
    rng = np.random.default_rng(seed)
    params = np.asarray(result.params, dtype=float)
    cov = np.asarray(result.cov_params(), dtype=float)
    with warnings.catch_warnings():
        # a cluster-robust covariance of few clusters can be singular; eigh still draws
        warnings.simplefilter("ignore", RuntimeWarning)
        draws = rng.multivariate_normal(params, cov, size=DRAWS, method="eigh")
    rows = []
    for condition in sorted(data["condition"].unique(), key=str):
        design = exog.copy()
        for column in [c for c in design.columns if c.startswith("condition[")]:
            design[column] = float(column == f"condition[{condition}]")
        x = design.to_numpy(dtype=float)

        def mean_rating(theta: np.ndarray, x: np.ndarray = x) -> float:
            with np.errstate(over="ignore"):  # a far threshold draw: probability 0 or 1
                return float((model.predict(theta, exog=x) @ levels).mean())

        sampled = np.array([mean_rating(theta) for theta in draws])
        low, high = np.quantile(sampled, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
        rows.append({"condition": condition, "predicted_mean": mean_rating(params),
                     "ci_low": float(low), "ci_high": float(high)})
    return pd.DataFrame(rows)


def condition_by_order(frame: pd.DataFrame, outcomes: Sequence[str]) -> pd.DataFrame:
    """Mean of each outcome by condition and order (the sequence of conditions met), with
    the number of participants: the crossover's cells."""
    present = [o for o in outcomes if o in frame]
    table = frame.groupby(["order", "condition"])[present].mean()
    table.insert(0, "participants", frame.groupby(["order", "condition"])[
        "participant_id"].nunique())
    return table.reset_index()


def carryover_test(frame: pd.DataFrame, outcome: str) -> dict[str, object]:
    """Grizzle's carry-over test: the participants' totals over both periods compared
    between the two orders (Welch's t). Needs two orders with two participants each."""
    both = frame.dropna(subset=[outcome]).groupby("participant_id").filter(
        lambda rows: rows["period"].nunique() == 2)
    totals = both.groupby("participant_id").agg(order=("order", "first"),
                                                total=(outcome, "sum"))
    orders = sorted(totals["order"].unique(), key=str)
    row: dict[str, object] = {"outcome": outcome, "orders": " vs ".join(map(str, orders)),
                              "participants": len(totals), "difference_of_totals": np.nan,
                              "statistic": np.nan, "p_value": np.nan, "note": ""}
    groups = [totals.loc[totals["order"] == o, "total"].to_numpy(float) for o in orders]
    if len(orders) != 2 or min(len(g) for g in groups) < 2:
        row["note"] = "needs two orders with at least two complete participants each"
        return row
    result = stats.ttest_ind(groups[0], groups[1], equal_var=False)
    row.update(difference_of_totals=float(groups[0].mean() - groups[1].mean()),
               statistic=float(result.statistic), p_value=float(result.pvalue))
    return row
