"""Questionnaires: Likert items described by condition and compared within participants,
and the post-study items about every robot (a rank, a pairwise comparison).

Every participant meets every condition, so conditions are compared pairwise within
participants: the Wilcoxon signed-rank test (ordinal answers, no normality to assume)
with the matched-pairs rank-biserial correlation as its effect size. The paper had 6
and 7 participants and ran no tests; below ``MIN_PAIRS`` this module does not either and
says so in plain words, still reporting the descriptive numbers and the effect size.

A rank item orders every robot a participant met (stored as condition ids, first to
last); a pairwise item says, for every two robots, which was better or that neither was
(``a>b`` or ``a=b``, docs/protocol.md). Both become, per pair of robots, how many
participants put one above the other: a sign test on those who did not tie, Holm-adjusted
over the item's pairs; a rank of three or more robots also gets Friedman's test.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.models import MIN_PARTICIPANTS, holm

MIN_PAIRS = MIN_PARTICIPANTS
# With 5 non-zero differences the smallest two-sided exact p is 2/32 = 0.0625.
MIN_NONZERO = 6
COMPARISON_COLUMNS = ["item", "condition_a", "condition_b", "n_pairs", "n_nonzero",
                      "mean_a", "mean_b", "median_difference", "statistic", "p_value",
                      "p_holm", "rank_biserial", "warning"]


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
    within the participants who answered both; with three or more conditions the p values
    are also Holm-adjusted over the item's pairs (``p_holm``; with two, the one p)."""
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
    return _holm(pd.DataFrame(rows, columns=COMPARISON_COLUMNS))


def _holm(table: pd.DataFrame) -> pd.DataFrame:
    """``p_holm``: each item's tested p values Holm-adjusted over its pairs."""
    table["p_holm"] = np.nan
    for _, part in table.groupby("item"):
        tested = part[part["p_value"].notna()]
        if len(tested):
            table.loc[tested.index, "p_holm"] = holm(tested["p_value"])
    return table


def predicted_rating(reward: np.ndarray | float) -> np.ndarray:
    """MODEL.md's predicted fairness rating: a reward in [0, 1] on the 1-7 scale."""
    return 1 + 6 * np.asarray(reward, dtype=float)


# --- items about every robot: rank and pairwise -------------------------------------------

PAIR_COLUMNS = ["item", "label", "condition_a", "condition_b", "participants", "a_above_b",
                "b_above_a", "ties", "share_a", "p_value", "p_holm", "warning"]
TIE = "="


def _robot_answers(answers: pd.DataFrame, items: Iterable[str]) -> pd.DataFrame:
    wanted = set(items)
    chosen = answers[(answers["questionnaire"] == "post") & answers["item"].isin(wanted)
                     & answers["value_text"].notna()]
    return chosen[["participant_id", "item", "label", "value_text"]]


def rankings(answers: pd.DataFrame, items: Iterable[str]) -> pd.DataFrame:
    """One row per participant, rank item and robot: its ``place`` (1 is first), read
    from the stored order of condition ids."""
    rows = [{"participant_id": row.participant_id, "item": row.item, "label": row.label,
             "condition": condition, "place": place}
            for row in _robot_answers(answers, items).itertuples()
            for place, condition in enumerate(str(row.value_text).split(","), start=1)]
    return pd.DataFrame(rows, columns=["participant_id", "item", "label", "condition",
                                       "place"])


def pairwise_choices(answers: pd.DataFrame, items: Iterable[str]) -> pd.DataFrame:
    """One row per participant, pairwise item and pair of robots (named in alphabetical
    order, whichever the participant met first): the robot chosen, or ``=`` for the tie."""
    rows = []
    for row in _robot_answers(answers, items).itertuples():
        for token in str(row.value_text).split(";"):
            tied = TIE in token
            first, second = token.split(TIE if tied else ">")
            a, b = sorted((first, second))
            rows.append({"participant_id": row.participant_id, "item": row.item,
                         "label": row.label, "condition_a": a, "condition_b": b,
                         "chosen": TIE if tied else first})
    return pd.DataFrame(rows, columns=["participant_id", "item", "label", "condition_a",
                                       "condition_b", "chosen"])


def ranked_pairs(ranked: pd.DataFrame) -> pd.DataFrame:
    """A rank as the pairwise choices it implies: of every two robots, the one placed
    higher (no ties)."""
    rows = []
    for (participant, item, label), part in ranked.groupby(
            ["participant_id", "item", "label"], sort=False):
        place = dict(zip(part["condition"], part["place"], strict=True))
        for a, b in combinations(sorted(place), 2):
            rows.append({"participant_id": participant, "item": item, "label": label,
                         "condition_a": a, "condition_b": b,
                         "chosen": a if place[a] < place[b] else b})
    return pd.DataFrame(rows, columns=["participant_id", "item", "label", "condition_a",
                                       "condition_b", "chosen"])


def pair_tests(choices: pd.DataFrame) -> pd.DataFrame:
    """Per item and pair of robots: how many participants put a above b, b above a, or
    tied; the share choosing a among those who did not tie, a two-sided sign test of it
    (binomial, 1/2) and its p value Holm-adjusted over the item's pairs. No test below
    ``MIN_PAIRS`` participants or ``MIN_NONZERO`` who did not tie."""
    rows = []
    for (item, label, a, b), part in choices.groupby(
            ["item", "label", "condition_a", "condition_b"], sort=True):
        above = int((part["chosen"] == a).sum())
        below = int((part["chosen"] == b).sum())
        decided = above + below
        warning = _sign_warning(len(part), decided)
        p_value = float("nan") if warning else float(
            stats.binomtest(above, decided, 0.5).pvalue)
        rows.append({"item": item, "label": label, "condition_a": a, "condition_b": b,
                     "participants": len(part), "a_above_b": above, "b_above_a": below,
                     "ties": len(part) - decided,
                     "share_a": above / decided if decided else float("nan"),
                     "p_value": p_value, "p_holm": float("nan"), "warning": warning})
    return _holm(pd.DataFrame(rows, columns=PAIR_COLUMNS))


def _sign_warning(participants: int, decided: int) -> str:
    """Why a pair gets no sign test, in plain words; empty when it gets one."""
    if participants < MIN_PAIRS:
        return (f"Only {participants} participants compared these robots: too few for a "
                f"test (fewer than {MIN_PAIRS}); the counts are descriptive.")
    if decided < MIN_NONZERO:
        return (f"Only {decided} participants put one of these robots above the other: the "
                f"sign test cannot reach p < .05 with fewer than {MIN_NONZERO}.")
    return ""


def rank_summary(ranked: pd.DataFrame) -> pd.DataFrame:
    """Per rank item and robot: participants, mean place, and how often it came first and
    last."""
    if ranked.empty:
        return pd.DataFrame(columns=["item", "label", "condition", "participants",
                                     "mean_place", "first", "last"])
    last = ranked.groupby(["participant_id", "item"])["place"].transform("max")
    return (ranked.assign(first=ranked["place"].eq(1), last=ranked["place"].eq(last))
            .groupby(["item", "label", "condition"], sort=True)
            .agg(participants=("place", "size"), mean_place=("place", "mean"),
                 first=("first", "sum"), last=("last", "sum")).reset_index())


def friedman(ranked: pd.DataFrame) -> pd.DataFrame:
    """Per rank item of three or more robots: Friedman's test that every robot is placed
    alike, over the participants who ranked them all (no test below ``MIN_PAIRS``)."""
    rows = []
    for (item, label), part in ranked.groupby(["item", "label"], sort=False):
        wide = part.pivot_table(index="participant_id", columns="condition",
                                values="place").dropna()
        if wide.shape[1] < 3:
            continue
        warning = (f"Only {len(wide)} participants ranked every robot: too few for a test "
                   f"(fewer than {MIN_PAIRS}); the places are descriptive."
                   if len(wide) < MIN_PAIRS else "")
        statistic = p_value = float("nan")
        if not warning:
            result = stats.friedmanchisquare(*[wide[c] for c in wide.columns])
            statistic, p_value = float(result.statistic), float(result.pvalue)
        rows.append({"item": item, "label": label, "robots": wide.shape[1],
                     "participants": len(wide), "statistic": statistic, "p_value": p_value,
                     "warning": warning})
    return pd.DataFrame(rows, columns=["item", "label", "robots", "participants",
                                       "statistic", "p_value", "warning"])
