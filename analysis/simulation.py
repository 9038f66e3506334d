"""Simulation comparisons over a team pool: the paper's Table 3, the gap distributions,
the Study #2 allocation figure, and fairness over time per policy and round order.

A pool is a pandas frame with one row per team: coefficients ``c_<i>_<j>``, ``p_<i>_<j>``,
``team_type``, ``most_capable_human``, per algorithm ``<alg>_goal_<i>_<j>`` and
``<alg>_reward``, and the gaps ``fair_gap`` and ``efficiency_gap`` (docs/pool.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis import fairness_time
from study.model import Algorithm
from study.pool.teamtypes import TEAM_TYPES

COLUMN = re.compile(r"^(?P<name>.+)_(?P<human>\d+)_(?P<type>\d+)$")
# Table 3 of the paper: Study #1 teams with a fair gap above 0.60.
FAIR_GAP_BINS = ((0.60, 0.70, "[0.60, 0.70)"), (0.70, 0.80, "[0.70, 0.80)"),
                 (0.80, 0.90, "[0.80, 0.90]"), (0.90, 1.00, "(0.90, 1.00]"))
PAPER_FAIR_GAP_TEAMS = {"[0.60, 0.70)": 5302, "[0.70, 0.80)": 1566, "[0.80, 0.90]": 204}
EFFICIENCY_GAP_BINS = ((-0.10, 0.00, "[-0.10, 0.00]"), (-0.50, -0.10, "[-0.50, -0.10)"),
                       (-1.00, -0.50, "[-1.00, -0.50)"))
HUMAN_ROLES = ("most capable human", "other human")


def per_human_array(frame: pd.DataFrame, name: str) -> np.ndarray:
    """``[B, h, n]`` from the columns ``<name>_<i>_<j>`` of a frame."""
    cells = {}
    for column in frame.columns:
        match = COLUMN.match(column)
        if match and match["name"] == name:
            cells[int(match["human"]), int(match["type"])] = column
    if not cells:
        raise KeyError(f"the pool has no columns {name}_<human>_<type>")
    humans = 1 + max(i for i, _ in cells)
    types = 1 + max(j for _, j in cells)
    columns = [cells[i, j] for i in range(humans) for j in range(types)]
    return frame[columns].to_numpy(dtype=float).reshape(len(frame), humans, types)


def coefficients(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Capabilities and preferences ``[B, h, n]`` of the pool's teams."""
    return per_human_array(frame, "c"), per_human_array(frame, "p")


def _binned(values: pd.Series, bins: Sequence[tuple[float, float, str]]) -> pd.Series:
    """Counts per bin; a bin is closed on the side its label says."""
    counts = {}
    for low, high, label in bins:
        above = values >= low if label.startswith("[") else values > low
        below = values <= high if label.endswith("]") else values < high
        counts[label] = int((above & below).sum())
    return pd.Series(counts)


def table3(pool: pd.DataFrame, threshold: float = 0.60) -> pd.DataFrame:
    """Teams with a fair gap above ``threshold``, by fair-gap and efficiency-gap bin, with
    the paper's counts beside (it reported 7,072 of 500,000 teams, none above 0.90)."""
    kept = pool[pool["fair_gap"] > threshold]
    parts = []
    for measure, column, bins in (("fair gap", "fair_gap", FAIR_GAP_BINS),
                                  ("efficiency gap", "efficiency_gap", EFFICIENCY_GAP_BINS)):
        counts = _binned(kept[column], bins)
        parts.append(pd.DataFrame({"measure": measure, "bin": counts.index,
                                   "teams": counts.to_numpy(),
                                   "share": counts.to_numpy() / max(len(kept), 1)}))
    table = pd.concat(parts, ignore_index=True)
    paper_total = sum(PAPER_FAIR_GAP_TEAMS.values())
    table["paper_teams"] = table["bin"].map(PAPER_FAIR_GAP_TEAMS).where(
        table["measure"] == "fair gap")
    table["paper_share"] = table["paper_teams"] / paper_total
    return table


def gap_summary(pool: pd.DataFrame, columns: Sequence[str] = ("fair_gap",
                                                                "efficiency_gap")
                ) -> pd.DataFrame:
    """Distribution of each gap per team type: teams, mean, sd and quartiles."""
    present = [column for column in columns if column in pool]
    long = pool.assign(team_type=team_type_names(pool)).melt(
        id_vars="team_type", value_vars=present, var_name="gap")
    grouped = long.groupby(["gap", "team_type"])["value"]
    return grouped.describe()[["count", "mean", "std", "min", "25%", "50%", "75%",
                               "max"]].reset_index()


def team_type_names(pool: pd.DataFrame) -> pd.Series:
    """The pool's team types as names (a pool may store them as codes into
    ``TEAM_TYPES``)."""
    types = pool["team_type"]
    if pd.api.types.is_integer_dtype(types):
        return types.map(dict(enumerate(TEAM_TYPES)))
    return types.astype(str)


def allocation_summary(pool: pd.DataFrame, algorithms: Sequence[str]) -> pd.DataFrame:
    """The Study #2 allocation figure as a table: per team type, algorithm and role (the
    most capable human or the other), the mean rounds on the most capable and on the
    most preferred task type, from the pool's ``<alg>_rounds_capable_<i>`` and
    ``<alg>_rounds_preferred_<i>`` columns. Two humans."""
    top = pool["most_capable_human"].to_numpy(dtype=int)
    rows = np.arange(len(pool))
    parts = []
    for algorithm in algorithms:
        capable = per_human_rounds(pool, f"{algorithm}_rounds_capable")
        preferred = per_human_rounds(pool, f"{algorithm}_rounds_preferred")
        for role, human in zip(HUMAN_ROLES, (top, 1 - top), strict=True):
            parts.append(pd.DataFrame({
                "team_type": team_type_names(pool).to_numpy(), "algorithm": algorithm,
                "human": role, "capable_rounds": capable[rows, human],
                "preferred_rounds": preferred[rows, human]}))
    frame = pd.concat(parts, ignore_index=True)
    table = frame.groupby(["team_type", "algorithm", "human"], sort=False).agg(
        teams=("capable_rounds", "size"), capable_rounds=("capable_rounds", "mean"),
        preferred_rounds=("preferred_rounds", "mean"))
    return table.reset_index()


def per_human_rounds(pool: pd.DataFrame, prefix: str) -> np.ndarray:
    """``[B, h]`` from the columns ``<prefix>_<i>``."""
    humans = sorted(int(column.rsplit("_", 1)[1]) for column in pool.columns
                    if column.rsplit("_", 1)[0] == prefix)
    if not humans:
        raise KeyError(f"the pool has no columns {prefix}_<human>")
    return pool[[f"{prefix}_{i}" for i in humans]].to_numpy(dtype=float)


def order_comparison(pool: pd.DataFrame, algorithms: Sequence[Algorithm],
                     orders: Sequence[str] = ("default", "anytime-fair"),
                     sample: int = 300, seed: int = 0,
                     kits: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Fairness over time of each policy and round order, on a sample of teams per team
    type: one row per team, algorithm and order with ``fairness_time.summary``'s columns.

    The goal is the same in every order, so only the path metrics (anytime, average,
    periodic, lead) can differ: this is where the round order shows.
    """
    rng = np.random.default_rng(seed)
    names = team_type_names(pool)
    picked = pool.assign(team_type=names).groupby("team_type", group_keys=False).apply(
        lambda part: part.iloc[rng.permutation(len(part))[:sample]])
    c, p = coefficients(picked)
    parts = []
    for algorithm in algorithms:
        for order in orders:
            trajectories = fairness_time.policy_trajectories(c, p, algorithm, kits, order)
            summary = fairness_time.summary(c, p, trajectories)
            summary.insert(0, "order", order)
            summary.insert(0, "algorithm", algorithm.name)
            summary.insert(0, "team_type", picked["team_type"].to_numpy())
            parts.append(summary)
    return pd.concat(parts, ignore_index=True)
