"""The fairness-efficiency trade-off: FEA's weight and bounds swept over a set of teams.

One FEA setting is one point on a curve; the paper's "does not hurt efficiency too much"
needs the whole curve, with Efficient and Fair as its ends, and the FE' bounds reported
beside every point because they decide what FEA does (MODEL.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from itertools import product

import numpy as np
import pandas as pd
from tqdm import tqdm

from study.allocation.model import Algorithm, all_metrics
from study.allocation.solver import solve_batch

DEFAULT_WEIGHTS = tuple(round(k / 10, 1) for k in range(11))
ALL_TEAMS = "all"


def goal_outcomes(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
                  kits: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Per team, the goal state's efficiency, fair reward ``1 - |F|`` and ``|FE|``."""
    goals = solve_batch(c, p, algorithm, kits).goal_allocations
    metrics = all_metrics(c, p, goals)
    return pd.DataFrame({"E": metrics["E"], "fair_reward": 1 - np.abs(metrics["F"]),
                         "abs_FE": np.abs(metrics["FE"])})


def _summarise(outcomes: pd.DataFrame, best_efficiency: np.ndarray, groups: np.ndarray,
               label: dict[str, object]) -> list[dict[str, object]]:
    """Mean outcomes per group (and over all teams), with the price of fairness: the
    share of the best achievable efficiency given up, ``(E* - E) / E*``, per team."""
    frame = outcomes.assign(price_of_fairness=(best_efficiency - outcomes["E"])
                            / best_efficiency, group=groups)
    rows = []
    for name, part in [(ALL_TEAMS, frame), *frame.groupby("group", sort=True)]:
        means = part.drop(columns="group").mean()
        rows.append({**label, "group": name, "teams": len(part), **means.to_dict()})
    return rows


def sweep(c: np.ndarray, p: np.ndarray, groups: Sequence[str] | np.ndarray,
          weights: Sequence[float] = DEFAULT_WEIGHTS,
          bounds: Sequence[tuple[float, float]] = ((0.0, 1.0),),
          kits: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Efficient, Fair and FEA at every weight and bounds pair, per group of teams.

    Returns one row per algorithm setting and group (``"all"`` included) with ``w``,
    ``lo``, ``hi`` (NaN for Efficient and Fair), mean ``E``, ``fair_reward``, ``abs_FE``,
    ``price_of_fairness`` and two fronts, one per fairness criterion: ``on_front_F``
    (no other setting of the group is at least as efficient and as fair by
    ``fair_reward``, the Fair policy's criterion, and better in one) and ``on_front_FE``
    (the same with fair-equity, a smaller ``abs_FE``: what FEA trades efficiency for).
    """
    groups = np.asarray(groups)
    efficient = goal_outcomes(c, p, Algorithm("efficient"), kits)
    best = efficient["E"].to_numpy()
    nan = float("nan")
    rows = _summarise(efficient, best, groups,
                      {"algorithm": "efficient", "w": nan, "lo": nan, "hi": nan})
    rows += _summarise(goal_outcomes(c, p, Algorithm("fair"), kits), best, groups,
                       {"algorithm": "fair", "w": nan, "lo": nan, "hi": nan})
    grid = list(product(bounds, weights))
    for (lo, hi), w in tqdm(grid, desc="FEA sweep", unit="setting",
                            disable=len(grid) < 4 or not sys.stderr.isatty()):
        algorithm = Algorithm("fea", w=float(w), lo=float(lo), hi=float(hi))
        rows += _summarise(goal_outcomes(c, p, algorithm, kits), best, groups,
                           {"algorithm": "fea", "w": float(w), "lo": float(lo),
                            "hi": float(hi)})
    frame = pd.DataFrame(rows)
    by_group = frame.assign(fair_equity=-frame["abs_FE"]).groupby("group", group_keys=False)
    frame["on_front_F"] = by_group[["E", "fair_reward"]].apply(_non_dominated)
    frame["on_front_FE"] = by_group[["E", "fair_equity"]].apply(_non_dominated)
    return frame


def _non_dominated(points: pd.DataFrame) -> pd.Series:
    """True for the points no other point beats on both axes (ties within 1e-12)."""
    values = points.to_numpy()
    at_least = (values[None, :, :] >= values[:, None, :] - 1e-12).all(axis=-1)
    better = (values[None, :, :] > values[:, None, :] + 1e-12).any(axis=-1)
    return pd.Series(~(at_least & better).any(axis=1), index=points.index)


def price_of_fairness(frame: pd.DataFrame) -> pd.DataFrame:
    """The Fair algorithm's and the default-weight FEA's price of fairness per group,
    from a ``sweep`` frame: the headline numbers of the trade-off."""
    fea = frame[(frame["algorithm"] == "fea")]
    fea = fea[np.isclose(fea["w"], Algorithm("fea").w)]
    chosen = pd.concat([frame[frame["algorithm"] == "fair"], fea])
    return chosen[["group", "algorithm", "w", "lo", "hi", "teams", "E", "fair_reward",
                   "price_of_fairness"]].reset_index(drop=True)
