"""Questionnaires: Likert items described by condition and compared within participants.

Every participant meets every condition, so conditions are compared pairwise within
participants: the Wilcoxon signed-rank test (ordinal answers, no normality to assume)
with the matched-pairs rank-biserial correlation as its effect size. The paper had 6
and 7 participants and ran no tests; below ``MIN_PAIRS`` this module does not either and
says so in plain words, still reporting the descriptive numbers and the effect size.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

MIN_PAIRS = 10
# With 5 non-zero differences the smallest two-sided exact p is 2/32 = 0.0625.
MIN_NONZERO = 6
COMPARISON_COLUMNS = ["item", "condition_a", "condition_b", "n_pairs", "n_nonzero",
                      "mean_a", "mean_b", "median_difference", "statistic", "p_value",
                      "rank_biserial", "warning"]


def likert(answers: pd.DataFrame) -> pd.DataFrame:
    """The numeric answers only (free-text items drop out)."""
    values = pd.to_numeric(answers["value"], errors="coerce")
    return answers.assign(value=values).dropna(subset=["value"])


def describe(answers: pd.DataFrame) -> pd.DataFrame:
    """Per item and condition: n, mean, standard deviation (n - 1), median."""
    grouped = likert(answers).groupby(["item", "condition"], sort=True)["value"]
    table = grouped.agg(n="count", mean="mean", sd="std", median="median").reset_index()
    table["n"] = table["n"].astype(int)
    return table


def rank_biserial(differences: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation ``(W+ - W-) / (W+ + W-)``: ranks of the
    non-zero ``|differences|`` summed by sign; +1 when every pair favours the first
    condition, NaN when no pair differs."""
    differences = np.asarray(differences, dtype=float)
    differences = differences[differences != 0]
    if not len(differences):
        return float("nan")
    ranks = stats.rankdata(np.abs(differences))
    plus, minus = ranks[differences > 0].sum(), ranks[differences < 0].sum()
    return float((plus - minus) / (plus + minus))


def sample_warning(n_pairs: int, n_nonzero: int) -> str:
    """Why no test is run, in plain words; empty when the sample allows one."""
    if n_pairs < MIN_PAIRS:
        return (f"Only {n_pairs} participants answered in both conditions: too few for a "
                f"test (fewer than {MIN_PAIRS}); the numbers are descriptive.")
    if n_nonzero < MIN_NONZERO:
        return (f"Only {n_nonzero} participants rated the conditions differently: the "
                f"signed-rank test cannot reach p < .05 with fewer than {MIN_NONZERO}.")
    return ""


def compare_pair(a: np.ndarray, b: np.ndarray) -> dict[str, object]:
    """Wilcoxon signed-rank test and rank-biserial effect size of paired ``a - b``."""
    differences = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n_nonzero = int(np.count_nonzero(differences))
    warning = sample_warning(len(differences), n_nonzero)
    statistic = p_value = float("nan")
    if not warning:
        result = stats.wilcoxon(differences)
        statistic, p_value = float(result.statistic), float(result.pvalue)
    return {"n_pairs": len(differences), "n_nonzero": n_nonzero,
            "mean_a": float(np.mean(a)) if len(a) else float("nan"),
            "mean_b": float(np.mean(b)) if len(b) else float("nan"),
            "median_difference": float(np.median(differences)) if len(a) else float("nan"),
            "statistic": statistic, "p_value": p_value,
            "rank_biserial": rank_biserial(differences), "warning": warning}


def paired_comparisons(answers: pd.DataFrame) -> pd.DataFrame:
    """Every item asked in two or more conditions, each pair of its conditions compared
    within the participants who answered both."""
    wide = likert(answers).pivot_table(index=["item", "participant_id"], columns="condition",
                                       values="value", aggfunc="mean")
    rows = []
    for item, table in wide.groupby(level="item", sort=True):
        asked = [name for name in sorted(table.columns, key=str) if table[name].notna().any()]
        for condition_a, condition_b in combinations(asked, 2):
            pairs = table[[condition_a, condition_b]].dropna()
            rows.append({"item": item, "condition_a": condition_a,
                         "condition_b": condition_b,
                         **compare_pair(pairs[condition_a].to_numpy(),
                                        pairs[condition_b].to_numpy())})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def predicted_rating(reward: np.ndarray | float) -> np.ndarray:
    """MODEL.md's predicted fairness rating: a reward in [0, 1] on the 1-7 scale."""
    return 1 + 6 * np.asarray(reward, dtype=float)
