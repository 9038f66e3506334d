"""Participants with tied ratings, and the confirmatory result without them.

A participant who rates both themes equally has equal preference coefficients: nothing
they said tells which type they prefer, so whether they are positively or negatively
correlated, and so the role and the team type they are studied in, comes from a rule
(the protocol's ``tied_ratings``: the lowest index of MODEL.md, or a recorded random
draw), not from them. The report therefore gives the within-subject models' condition
effects (the mixed model of each outcome, the ordinal model of each Likert item) over the
analysis set and over the analysis set without the tied participants, side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from analysis import models

COLUMNS = ["outcome", "model", "term", "participants_all", "estimate_all", "ci_low_all",
           "ci_high_all", "p_value_all", "participants_without_tied",
           "estimate_without_tied", "ci_low_without_tied", "ci_high_without_tied",
           "p_value_without_tied", "change"]
_FITTED = ["participants", "estimate", "ci_low", "ci_high", "p_value"]


def tied_ids(participants: pd.DataFrame) -> set[int]:
    """Participants whose preference coefficients tie at the top (equal ratings)."""
    columns = [c for c in participants.columns if c.startswith("p_")]
    if len(columns) < 2:
        return set()
    values = participants[columns]
    rated = values.notna().all(axis=1)
    tops = values.eq(values.max(axis=1), axis=0).sum(axis=1)
    return set(participants.loc[rated & tops.gt(1), "participant_id"])


def _side_by_side(every: pd.DataFrame, without: pd.DataFrame) -> pd.DataFrame:
    """One row per model term: the fit with everyone beside the fit without the tied."""
    keys = ["outcome", "model", "term"]
    left = every[keys + _FITTED].rename(columns={c: f"{c}_all" for c in _FITTED})
    right = without[keys + _FITTED].rename(columns={c: f"{c}_without_tied" for c in _FITTED})
    table = left.merge(right, on=keys, how="outer")
    table["change"] = table["estimate_without_tied"] - table["estimate_all"]
    return table


def _fits(fit: Callable[[pd.DataFrame], pd.DataFrame], frame: pd.DataFrame,
          tied: set[int]) -> pd.DataFrame:
    return _side_by_side(fit(frame), fit(frame[~frame["participant_id"].isin(tied)]))


def with_and_without(outcomes: pd.DataFrame, rated: pd.DataFrame,
                     measures: Sequence[str], tied: set[int], points: int = 7,
                     seed: int = 0) -> pd.DataFrame:
    """The condition effects of the mixed model of each outcome in ``measures`` (columns
    of ``outcomes``) and of the ordinal model of each Likert item in ``rated`` (``item``,
    ``label``, ``value``), with every analysed participant and without ``tied``."""
    parts = [_fits(lambda frame, name=name: models.mixed_model(frame, name), outcomes, tied)
             for name in measures if name in outcomes]
    for (_, label), part in rated.groupby(["item", "label"], sort=False):
        parts.append(_fits(lambda frame, label=label: models.ordinal_model(
            frame, label=str(label), points=points, seed=seed)[0], part, tied))
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return table.reindex(columns=COLUMNS)
