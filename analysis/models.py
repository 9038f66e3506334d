"""Models of the within-subject design: the participant is the unit.

Every participant meets every condition in a counterbalanced order, so each outcome is
modelled with the condition (a factor of as many levels as the study has conditions, two
to four) and the period (the session's place; the site too when studies are pooled) as
fixed effects and the participant as the unit:

- a linear mixed-effects model (``statsmodels`` MixedLM, REML, random intercept per
  participant) for cookies and the allocation outcomes;
- a cumulative-link (proportional-odds logit) model for each Likert item
  (``statsmodels`` OrderedModel) with standard errors clustered by participant, whose
  predicted mean rating per condition stays on the item's scale;
- every pair of conditions compared by a contrast of the fitted model, its p value also
  Holm-adjusted over the pairs of the outcome (``statsmodels.stats.multitest``); with
  more than two conditions a Wald test of the whole condition factor beside them;
- the order and carry-over check: outcome means by condition and order; for two periods
  Grizzle's test comparing the participants' two-period totals between the two orders
  (a carry-over effect shifts those totals; a condition effect does not), for more a
  mixed model with first-order carry-over terms (the condition of the session before),
  which the orders of ``study.protocol.orders`` balance.

With the handful of participants of a pilot these are estimates with wide intervals;
a model that cannot be fitted says why instead of failing the report.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Sequence
from functools import cache
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

LEVEL = 0.95
DRAWS = 400  # parameter draws for the intervals of predicted ratings
# The fewest participants the report runs a test of ratings on (the paper had 6 and 7 and
# ran none): below, its numbers are descriptive and it says so.
MIN_PARTICIPANTS = 10
MODEL_COLUMNS = ["outcome", "model", "term", "estimate", "ci_low", "ci_high", "p_value",
                 "p_holm", "effect_size", "effect_size_kind", "participants",
                 "observations", "note"]
ORDINAL_COLUMNS = [*MODEL_COLUMNS, "warning"]


def _z() -> float:
    return float(stats.norm.ppf(0.5 + LEVEL / 2))


def _empty_row(outcome: str, model: str, note: str) -> dict[str, object]:
    nan = float("nan")
    return {"outcome": outcome, "model": model, "term": "", "estimate": nan, "ci_low": nan,
            "ci_high": nan, "p_value": nan, "p_holm": nan, "effect_size": nan,
            "effect_size_kind": "", "participants": 0, "observations": 0, "note": note}


def _levels(frame: pd.DataFrame, reference: str) -> list[str]:
    """The conditions, the reference first and the others by name."""
    return [reference, *[c for c in sorted(frame["condition"].unique(), key=str)
                         if c != reference]]


def holm(p_values: Sequence[float]) -> np.ndarray:
    """The p values Holm-adjusted over their family (``statsmodels``' ``multipletests``).
    It collects every generation of the heap each call, 0.1 s with a report's objects
    alive, a seventh of a report; objects frozen meanwhile are not walked."""
    from statsmodels.stats.multitest import multipletests

    gc.freeze()
    try:
        return multipletests(np.asarray(p_values, dtype=float), method="holm")[1]
    finally:
        gc.unfreeze()


def contrasts(params: pd.Series, cov: pd.DataFrame, levels: Sequence[str],
              prefix: str = "condition") -> list[dict[str, float | str]]:
    """Every pair of ``levels`` (the first the reference, whose coefficient is 0): the
    difference ``b - a`` of their coefficients ``<prefix>[<level>]``, its Wald interval
    and p value, and the p value Holm-adjusted over the pairs. A pair whose level has no
    coefficient (left out as confounded) is not estimable and left out."""
    fitted = {f"{prefix}[{level}]" for level in levels[1:]} & set(params.index)
    terms = sorted(fitted)
    z = _z()
    rows = []
    for a, b in combinations(levels, 2):
        if any(f"{prefix}[{x}]" not in fitted for x in (a, b) if x != levels[0]):
            continue
        weights = pd.Series(0.0, index=terms)
        for level, sign in ((b, 1.0), (a, -1.0)):
            if level != levels[0]:
                weights[f"{prefix}[{level}]"] += sign
        estimate = float(weights @ params[terms])
        se = float(np.sqrt(weights @ cov.loc[terms, terms] @ weights))
        p_value = float(2 * stats.norm.sf(abs(estimate / se))) if se > 0 else float("nan")
        rows.append({"term": f"{b} - {a}", "estimate": estimate, "ci_low": estimate - z * se,
                     "ci_high": estimate + z * se, "p_value": p_value})
    tested = [row for row in rows if np.isfinite(row["p_value"])]
    if tested:
        adjusted = holm([row["p_value"] for row in tested])
        for row, p_holm in zip(tested, adjusted, strict=True):
            row["p_holm"] = float(p_holm)
    return [{"p_holm": float("nan"), **row} for row in rows]


def factor_test(params: pd.Series, cov: pd.DataFrame, terms: Sequence[str],
                name: str = "condition") -> str:
    """The Wald test that every coefficient of ``terms`` is 0, as a note (a factor of more
    than two levels: is there any difference at all); empty with fewer than two terms."""
    terms = [t for t in terms if t in params.index]
    if len(terms) < 2:
        return ""
    values = params[terms].to_numpy(dtype=float)
    try:
        statistic = float(values @ np.linalg.solve(cov.loc[terms, terms].to_numpy(float),
                                                   values))
    except np.linalg.LinAlgError:
        return f"{name}: Wald test not computable (singular covariance)"
    p_value = float(stats.chi2.sf(statistic, len(terms)))
    return f"{name}: Wald chi2({len(terms)}) = {statistic:.2f}, p = {p_value:.3g}"


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
    params, cov = result.fe_params, result.cov_params()
    terms = [t for t in exog.columns if t.startswith("condition[")]
    note = "; ".join(filter(None, [note, factor_test(params, cov, terms)]))
    rows = [{"outcome": outcome, "model": "mixed", **pair,
             "effect_size": pair["estimate"] / total_sd if total_sd > 0 else float("nan"),
             "effect_size_kind": "d (difference / total sd)",
             "participants": int(data["participant_id"].nunique()),
             "observations": len(data), "note": note}
            for pair in contrasts(params, cov, _levels(data, reference))]
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


@cache
def ordered_logit() -> type:
    """statsmodels' OrderedModel with the logistic distribution's cdf and pdf from
    ``expit``: the same model and estimates, without the argument checks of a
    ``scipy.stats`` distribution, which were two thirds of a fit (the likelihood's
    derivatives are numerical, so a fit evaluates the cdf thousands of times)."""
    from scipy.special import expit
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    class OrderedLogit(OrderedModel):
        def cdf(self, x: np.ndarray) -> np.ndarray:
            return expit(x)

        def pdf(self, x: np.ndarray) -> np.ndarray:
            probability = expit(x)
            return probability * (1 - probability)

    return OrderedLogit


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
    label = label or outcome
    data = frame.dropna(subset=[outcome, "condition"])
    reference = reference or (sorted(data["condition"].unique(), key=str) or [""])[0]
    empty = pd.DataFrame(columns=["outcome", "condition", "predicted_mean", "ci_low",
                                  "ci_high"])

    def unfitted(note: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        row = {**_empty_row(label, "ordinal", note), "warning": ""}
        return pd.DataFrame([row], columns=ORDINAL_COLUMNS), empty

    if (data["condition"].nunique() < 2 or data["participant_id"].nunique() < 3
            or data[outcome].nunique() < 2):
        return unfitted("too few participants, conditions or distinct answers")
    levels = sorted(data[outcome].unique())
    endog = pd.Series(pd.Categorical(data[outcome], categories=levels, ordered=True),
                      index=data.index)
    exog = _design(data, reference, _factors(data, factors))
    exog, confounded = _full_rank(exog.loc[:, exog.std() > 0])
    parameters = len(levels) - 1 + exog.shape[1]
    if len(data) <= parameters + 1:
        return unfitted(f"{len(data)} answers are too few for {parameters} parameters (a "
                        "threshold between each pair of answers used, and the effects)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = ordered_logit()(endog, exog, distr="logit")
            result = model.fit(method="bfgs", disp=False, maxiter=2000, cov_type="cluster",
                               cov_kwds={"groups": data["participant_id"].to_numpy()})
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError) as error:
            return unfitted(f"not fitted: {error}")
    converged = bool(result.mle_retvals.get("converged", True))
    params, cov = result.params, result.cov_params()
    terms = [t for t in exog.columns if t.startswith("condition[")]
    participants = int(data["participant_id"].nunique())
    warning = _too_few_warning(participants)
    note = "; ".join(filter(None, [confounded, _fit_note(converged, bool(caught)),
                                   "" if warning else factor_test(params, cov, terms)]))
    untested = {"p_value": float("nan"), "p_holm": float("nan")} if warning else {}
    rows = [{"outcome": label, "model": "ordinal (cluster-robust)", **pair, **untested,
             "effect_size": float(np.exp(pair["estimate"])),
             "effect_size_kind": "odds ratio of a higher rating",
             "participants": participants, "observations": len(data), "note": note,
             "warning": warning}
            for pair in contrasts(params, cov, _levels(data, reference))]
    predicted = _predicted_means(model, result, data, exog, np.asarray(levels, dtype=float),
                                 reference, seed)
    return pd.DataFrame(rows, columns=ORDINAL_COLUMNS), predicted.assign(outcome=label)[
        ["outcome", "condition", "predicted_mean", "ci_low", "ci_high"]]


def _too_few_warning(participants: int, answered: str = "the item",
                     model: str = "ordinal model") -> str:
    """A model's notice below ``MIN_PARTICIPANTS``, worded as the other tests'
    (``questionnaires.sample_warning``): a handful of people can separate the answers, and
    the odds ratio then runs to millions."""
    if participants >= MIN_PARTICIPANTS:
        return ""
    return (f"Only {participants} participants answered {answered}: too few for a test "
            f"(fewer than {MIN_PARTICIPANTS}); its {model}'s estimates are descriptive, "
            "with no p value.")


def slopes_model(frame: pd.DataFrame, outcome: str, covariates: Sequence[str],
                 label: str | None = None, reference: str | None = None,
                 factors: Sequence[str] = ("period", "site")) -> pd.DataFrame:
    """The slope of ``outcome`` on each numeric covariate in one linear mixed model with
    the condition as a factor and a random intercept per participant: answers given
    repeatedly by one person (between rounds, say) beside what they had just lived through.
    Each slope carries its Wald interval, its p value Holm-adjusted over the slopes, and as
    effect size the change in total sds of the outcome per sd of the covariate; every pair
    of conditions is a contrast as in ``mixed_model``. Below ``MIN_PARTICIPANTS`` the rows
    carry the too-few notice and no p value."""
    import statsmodels.api as sm

    label = label or outcome
    data = frame.dropna(subset=[outcome, "condition", *covariates])
    if data["participant_id"].nunique() < 3:
        return pd.DataFrame([{**_empty_row(label, "mixed", "too few participants to fit"),
                              "warning": ""}], columns=ORDINAL_COLUMNS)
    reference = reference or sorted(data["condition"].unique(), key=str)[0]
    slopes = data[list(covariates)].astype(float)
    exog, confounded = _full_rank(sm.add_constant(pd.concat(
        [slopes.loc[:, slopes.std() > 0], _design(data, reference, _factors(data, factors))],
        axis=1)))
    result, warned, error = _fit_mixed(_mixed(sm, data, data[outcome].astype(float), exog))
    if result is None:
        return pd.DataFrame([{**_empty_row(label, "mixed", f"not fitted: {error}"),
                              "warning": ""}], columns=ORDINAL_COLUMNS)
    params, cov = result.fe_params, result.cov_params()
    between = float(np.asarray(result.cov_re).ravel()[0]) + float(np.sum(result.vcomp))
    total_sd = float(np.sqrt(result.scale + between))
    z = _z()
    rows = []
    for term in [c for c in covariates if c in exog.columns]:
        se = float(np.sqrt(cov.loc[term, term]))
        estimate = float(params[term])
        rows.append({"term": term, "estimate": estimate, "ci_low": estimate - z * se,
                     "ci_high": estimate + z * se,
                     "p_value": float(2 * stats.norm.sf(abs(estimate / se))),
                     "effect_size": estimate * float(slopes[term].std()) / total_sd,
                     "effect_size_kind": "total sds of the outcome per sd of the term"})
    adjusted = holm([row["p_value"] for row in rows]) if rows else []
    for row, p_holm in zip(rows, adjusted, strict=True):
        row["p_holm"] = float(p_holm)
    rows += [{**pair, "effect_size": pair["estimate"] / total_sd,
              "effect_size_kind": "d (difference / total sd)"}
             for pair in contrasts(params, cov, _levels(data, reference))]
    participants = int(data["participant_id"].nunique())
    warning = _too_few_warning(participants, "the probe", "mixed model")
    untested = {"p_value": float("nan"), "p_holm": float("nan")} if warning else {}
    note = "; ".join(filter(None, [confounded, _fit_note(result.converged, warned)]))
    return pd.DataFrame([{"outcome": label, "model": "mixed", **row, **untested,
                          "participants": participants, "observations": len(data),
                          "note": note, "warning": warning} for row in rows],
                        columns=ORDINAL_COLUMNS)


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
    between the two orders (Welch's t). Needs two orders with two participants each.
    A study of more periods is tested by ``carryover_model``."""
    if frame["period"].nunique() > 2:
        return carryover_model(frame, outcome)
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


def carryover_model(frame: pd.DataFrame, outcome: str) -> dict[str, object]:
    """First-order carry-over in a study of more than two periods: a mixed model of the
    outcome with condition, period and the condition of the session before (none in the
    first period) as fixed effects, and the Wald test that every carry-over term is 0.
    The orders of ``study.protocol.orders`` (every order of three conditions, a Williams square of
    four) balance the condition before, so carry-over and condition are estimable apart."""
    import statsmodels.api as sm

    data = frame.dropna(subset=[outcome, "condition"]).sort_values(
        ["participant_id", "period"]).copy()
    before = data.groupby("participant_id")["condition"].shift(1)
    data["carry"] = before.where(data["period"].diff().eq(1) & before.notna(), "none")
    row: dict[str, object] = {"outcome": outcome, "orders": f"{data['order'].nunique()} orders",
                              "participants": int(data["participant_id"].nunique()),
                              "difference_of_totals": np.nan, "statistic": np.nan,
                              "p_value": np.nan, "note": ""}
    if data["participant_id"].nunique() < 3 or data["carry"].nunique() < 2:
        row["note"] = "too few participants or orders for the carry-over model"
        return row
    design = _design(data, sorted(data["condition"].unique(), key=str)[0],
                     _factors(data, ("period", "site")))
    carry = pd.DataFrame({f"carry[{c}]": (data["carry"] == c).astype(float)
                          for c in sorted(data["carry"].unique(), key=str) if c != "none"},
                         index=data.index)
    exog, confounded = _full_rank(sm.add_constant(pd.concat([design, carry], axis=1)))
    terms = [t for t in exog.columns if t.startswith("carry[")]
    result, warned, error = _fit_mixed(sm.MixedLM(data[outcome].astype(float), exog,
                                                  groups=data["participant_id"]))
    if result is None or not terms:
        row["note"] = f"not fitted: {error}" if result is None else (
            "carry-over confounded with condition and period")
        return row
    values = result.fe_params[terms].to_numpy(float)
    cov = result.cov_params().loc[terms, terms].to_numpy(float)
    statistic = float(values @ np.linalg.solve(cov, values))
    row.update(statistic=statistic, p_value=float(stats.chi2.sf(statistic, len(terms))),
               note="; ".join(filter(None, [
                   f"first-order carry-over: Wald chi2({len(terms)}) of the carry terms in a "
                   "mixed model with condition and period", confounded,
                   _fit_note(result.converged, warned)])))
    return row
