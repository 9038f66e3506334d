"""Parity across groups: differences in an outcome between groups, with bootstrap CIs.

Groups are team types, roles (participant or agent teammate, most capable or not) or any
recorded participant attribute. With a handful of participants per study these numbers
are descriptive, so every difference carries a percentile bootstrap interval rather than
a test; with ``pair_by`` the groups are compared within units (e.g. the participant and
the agent of one session): a paired comparison. It is not La Malfa et al.'s matched
demographic parity, which pairs members equal in every other attribute; the participant
and the agent of a session differ in capability and preference.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

DEFAULT_RESAMPLES = 2000


def _resampled_means(values: np.ndarray, rng: np.random.Generator,
                     resamples: int) -> np.ndarray:
    return values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1)


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_mean_ci(values: np.ndarray, rng: np.random.Generator,
                      resamples: int = DEFAULT_RESAMPLES,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (NaN below two values)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float("nan"), float("nan")
    return _percentiles(_resampled_means(values, rng, resamples), level)


def _independent_difference(a: np.ndarray, b: np.ndarray, rng: np.random.Generator,
                            resamples: int, level: float) -> tuple[float, float]:
    """Bootstrap interval of ``mean(a) - mean(b)``, each group resampled on its own."""
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    draws = _resampled_means(a, rng, resamples) - _resampled_means(b, rng, resamples)
    return _percentiles(draws, level)


def group_differences(frame: pd.DataFrame, outcome: str, by: str,
                      pair_by: str | None = None, resamples: int = DEFAULT_RESAMPLES,
                      level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Every pair of groups of ``by``: sizes, means, ``difference = mean_a - mean_b`` and
    its bootstrap interval.

    With ``pair_by`` only units present in both groups count, each unit's outcomes are
    averaged per group, and units are resampled together.
    """
    rng = np.random.default_rng(seed)
    data = frame[[outcome, by] + ([pair_by] if pair_by else [])].dropna(subset=[outcome, by])
    rows = []
    for group_a, group_b in combinations(sorted(data[by].unique(), key=str), 2):
        if pair_by:
            wide = (data[data[by].isin([group_a, group_b])]
                    .groupby([pair_by, by])[outcome].mean().unstack(by).dropna())
            a, b = wide[group_a].to_numpy(), wide[group_b].to_numpy()
            low, high = bootstrap_mean_ci(a - b, rng, resamples, level)
        else:
            a = data.loc[data[by] == group_a, outcome].to_numpy(dtype=float)
            b = data.loc[data[by] == group_b, outcome].to_numpy(dtype=float)
            low, high = _independent_difference(a, b, rng, resamples, level)
        rows.append({"outcome": outcome, "by": by, "group_a": group_a, "group_b": group_b,
                     "n_a": len(a), "n_b": len(b), "mean_a": _mean(a), "mean_b": _mean(b),
                     "difference": _mean(a) - _mean(b), "ci_low": low, "ci_high": high,
                     "paired": bool(pair_by)})
    return pd.DataFrame(rows, columns=["outcome", "by", "group_a", "group_b", "n_a", "n_b",
                                       "mean_a", "mean_b", "difference", "ci_low",
                                       "ci_high", "paired"])


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else float("nan")
