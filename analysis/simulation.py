"""Simulation comparisons over a team pool: the paper's Table 3, the gap distributions,
the Study #2 allocation figure, and fairness over time per policy and round order.

A pool is a pandas frame with one row per team, as ``pandas.read_parquet`` reads a pool
file: coefficients ``c_<i>_<j>``, ``p_<i>_<j>``, ``team_type``, ``most_capable_human``,
per algorithm ``<alg>_goal_<i>_<j>``, ``<alg>_reward`` and ``<alg>_rounds_capable_<i>`` /
``<alg>_rounds_preferred_<i>``, and the gaps ``fair_gap`` and ``efficiency_gap``. The
paper's tables come from the pool's own ``study.pool.summary``; this module shapes them
into frames and adds what the pool does not compute.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis import fairness_time
from study.allocation.model import Algorithm
from study.pool.summary import study1_table, study2_table
from study.pool.teamtypes import TEAM_TYPES

COLUMN = re.compile(r"^(?P<name>.+)_(?P<human>\d+)_(?P<type>\d+)$")
# Table 3 of the paper: Study #1 teams with a fair gap above 0.60.
PAPER_FAIR_GAP_TEAMS = {"[0.60, 0.70)": 5302, "[0.70, 0.80)": 1566, "[0.80, 0.90]": 204}
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


def table3(pool: pd.DataFrame) -> pd.DataFrame:
    """Teams with a fair gap above 0.60 by fair-gap and efficiency-gap bin (the pool's own
    ``study1_table``), with the paper's counts beside: 7,072 of 500,000 uniform teams,
    none above 0.90."""
    table = study1_table(pool["fair_gap"].to_numpy(), pool["efficiency_gap"].to_numpy())
    parts = [pd.DataFrame(table[f"{key}_bins"]).assign(measure=measure)
             for key, measure in (("fair_gap", "fair gap"),
                                  ("efficiency_gap", "efficiency gap"))]
    frame = pd.concat(parts, ignore_index=True)
    frame["share"] = frame.pop("percent") / 100
    frame["paper_teams"] = frame["bin"].map(PAPER_FAIR_GAP_TEAMS).where(
        frame["measure"] == "fair gap")
    frame["paper_share"] = frame["paper_teams"] / sum(PAPER_FAIR_GAP_TEAMS.values())
    return frame[["measure", "bin", "teams", "share", "paper_teams", "paper_share"]]


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
    """The Study #2 allocation figure as a table (the pool's own ``study2_table``): per
    team type, algorithm and role (the most capable human or the other), the mean rounds
    on the most capable and on the most preferred task type."""
    names = team_type_names(pool)
    columns = {name: pool[name].to_numpy() for name in pool.columns
               if name.startswith(tuple(f"{a}_rounds_" for a in algorithms))}
    columns["most_capable_human"] = pool["most_capable_human"].to_numpy()
    columns["team_type"] = names.map({name: code for code, name in
                                      enumerate(TEAM_TYPES)}).to_numpy()
    humans = per_human_rounds(pool, f"{algorithms[0]}_rounds_capable").shape[1]
    nested = study2_table(columns, tuple(algorithms), humans)
    rows = []
    for team_type, entry in nested.items():
        for algorithm in algorithms:
            for role, key in zip(HUMAN_ROLES, ("most_capable", "other"), strict=True):
                rounds = entry[algorithm][key]
                rows.append({"team_type": team_type, "algorithm": algorithm, "human": role,
                             "teams": entry["teams"], "capable_rounds": rounds["capable"],
                             "preferred_rounds": rounds["preferred"]})
    return pd.DataFrame(rows)


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
                     kits: tuple[int, ...] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fairness over time of each policy and round order, on a sample of teams per team
    type: the temporal summaries (one row per team, algorithm and order, with
    ``fairness_time.summary``'s columns) and the running metrics (one row per round too).

    The goal is the same in every order, so only the path metrics (anytime, average,
    periodic, lead) can differ: this is where the round order shows.
    """
    rng = np.random.default_rng(seed)
    names = team_type_names(pool).to_numpy()
    rows = np.concatenate([rng.permutation(np.flatnonzero(names == name))[:sample]
                           for name in sorted(set(names))])
    c, p = coefficients(pool.iloc[rows])
    summaries, per_round = [], []
    for algorithm in algorithms:
        for order in orders:
            trajectories = fairness_time.policy_trajectories(c, p, algorithm, kits, order)
            label = {"algorithm": algorithm.name, "order": order}
            summaries.append(fairness_time.summary(c, p, trajectories).assign(
                **label, team_type=names[rows]))
            running = fairness_time.rounds_frame(c, p, trajectories)
            per_round.append(running.assign(**label, team_type=names[rows][running["unit"]]))
    return pd.concat(summaries, ignore_index=True), pd.concat(per_round, ignore_index=True)
