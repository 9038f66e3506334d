"""The paper's tables read off a pool.

Study #1 (Table 3 and the text around it): how many teams have a fair gap above 0.60,
and how they split over fair-gap and efficiency-gap bins. Study #2 (Figure 4): per team
type and algorithm, the mean number of rounds the most capable human and the other
human get their most capable and their most preferred task type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from study.pool.store import (
    column_values,
    read_columns,
    read_metadata,
    spec_of,
    team_type_codes_of,
)
from study.pool.teamtypes import TEAM_TYPES

PAPER_FAIR_GAP = 0.60
Bins = tuple[tuple[str, Callable[[np.ndarray], np.ndarray]], ...]
FAIR_GAP_BINS: Bins = (
    ("[0.60, 0.70)", lambda g: (g >= 0.60) & (g < 0.70)),
    ("[0.70, 0.80)", lambda g: (g >= 0.70) & (g < 0.80)),
    ("[0.80, 0.90]", lambda g: (g >= 0.80) & (g <= 0.90)),
    ("above 0.90", lambda g: g > 0.90),
)
# The first bin keeps anything above 0: the Efficient goal has the highest E, so a
# positive efficiency gap can only be rounding.
EFFICIENCY_GAP_BINS: Bins = (
    ("[-0.10, 0.00]", lambda g: g >= -0.10),
    ("[-0.50, -0.10)", lambda g: (g >= -0.50) & (g < -0.10)),
    ("below -0.50", lambda g: g < -0.50),
)


def _split(values: np.ndarray, bins: Bins, selected: int) -> list[dict[str, Any]]:
    rows = []
    for label, inside in bins:
        count = int(inside(values).sum())
        rows.append({"bin": label, "teams": count,
                     "percent": 100.0 * count / selected if selected else 0.0})
    return rows


def study1_table(fair_gap: np.ndarray, efficiency_gap: np.ndarray) -> dict[str, Any]:
    """Teams with a fair gap above 0.60 and their split over the paper's bins."""
    selected = fair_gap > PAPER_FAIR_GAP
    count = int(selected.sum())
    return {
        "teams": len(fair_gap),
        "fair_gap_above": PAPER_FAIR_GAP,
        "selected": count,
        "selected_percent": 100.0 * count / len(fair_gap) if len(fair_gap) else 0.0,
        "fair_gap_bins": _split(fair_gap[selected], FAIR_GAP_BINS, count),
        "efficiency_gap_bins": _split(efficiency_gap[selected], EFFICIENCY_GAP_BINS, count),
    }


def study2_table(columns: dict[str, np.ndarray], algorithms: tuple[str, ...],
                 humans: int) -> dict[str, Any]:
    """Per team type and algorithm, mean rounds on the most capable and most preferred
    type for the most capable human and (averaged) the others."""
    codes, top = columns["team_type"], columns["most_capable_human"].astype(np.intp)
    rows = np.arange(len(codes))
    table: dict[str, Any] = {}
    for code, name in enumerate(TEAM_TYPES):
        of_type = codes == code
        if not of_type.any():
            continue
        entry: dict[str, Any] = {"teams": int(of_type.sum())}
        for algorithm in algorithms:
            per_role: dict[str, dict[str, float]] = {"most_capable": {}, "other": {}}
            for kind in ("capable", "preferred"):
                rounds = np.stack([columns[f"{algorithm}_rounds_{kind}_{i}"]
                                   for i in range(humans)], axis=1).astype(float)
                mine = rounds[rows, top]
                others = (rounds.sum(axis=1) - mine) / (humans - 1)
                per_role["most_capable"][kind] = float(mine[of_type].mean())
                per_role["other"][kind] = float(others[of_type].mean())
            entry[algorithm] = per_role
        table[name] = entry
    return table


def summarize(path: Path | str) -> dict[str, Any]:
    """Every number of the summary, as plain data (``--json`` prints exactly this)."""
    record = read_metadata(path)
    spec = spec_of(path, record)
    names = ["most_capable_human"] + [f"{a}_rounds_{kind}_{i}" for a in spec.algorithms
                                      for kind in ("capable", "preferred")
                                      for i in range(spec.humans)]
    if spec.has_gaps:
        names += ["fair_gap", "efficiency_gap"]
    table = read_columns(path, [*names, "team_type"])
    columns = {name: column_values(table.column(name)) for name in names}
    columns["team_type"] = team_type_codes_of(table.column("team_type"))
    summary: dict[str, Any] = {
        "pool": {"path": str(path), "name": record["name"], "teams": table.num_rows,
                 "seed": record["seed"], "digest": record["digest"],
                 "most_capable_reading": record["most_capable_reading"],
                 "fea_bounds": record["fea_bounds"]},
        "study2": study2_table(columns, spec.algorithms, spec.humans),
    }
    if spec.has_gaps:
        summary["study1"] = study1_table(columns["fair_gap"], columns["efficiency_gap"])
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as the paper's two tables in plain text."""
    pool = summary["pool"]
    lines = [f"pool {pool['name']}: {pool['teams']:,} teams, seed {pool['seed']}, "
             f"digest {pool['digest'][:16]}; most capable human by "
             f"{pool['most_capable_reading']}"]
    if pool["fea_bounds"]:
        bounds = pool["fea_bounds"]
        lines.append(f"FEA w = {bounds['w']:g}, bounds [{bounds['lo']:.6g}, "
                     f"{bounds['hi']:.6g}] ({bounds['source']})")
    if "study1" in summary:
        lines += ["", *_format_study1(summary["study1"])]
    lines += ["", *_format_study2(summary["study2"])]
    return "\n".join(lines)


def _format_study1(study1: dict[str, Any]) -> list[str]:
    lines = [f"Simulation Study #1: {study1['selected']:,} of {study1['teams']:,} teams "
             f"({study1['selected_percent']:.2f}%) have a fair gap > "
             f"{study1['fair_gap_above']:.2f}"]
    for title, key in (("fair gap", "fair_gap_bins"), ("efficiency gap", "efficiency_gap_bins")):
        lines.append(f"  {title:<16}{'teams':>8}{'share':>9}")
        lines += [f"  {row['bin']:<16}{row['teams']:>8,}{row['percent']:>8.2f}%"
                  for row in study1[key]]
    return lines


def _format_study2(study2: dict[str, Any]) -> list[str]:
    lines = ["Simulation Study #2: mean rounds on each human's most capable / most "
             "preferred task type",
             f"  {'team type':<16}{'teams':>8}  {'algorithm':<10}"
             f"{'top: capable':>14}{'preferred':>11}{'other: capable':>16}{'preferred':>11}"]
    for name, entry in study2.items():
        for algorithm, roles in entry.items():
            if algorithm == "teams":
                continue
            top, other = roles["most_capable"], roles["other"]
            lines.append(f"  {name:<16}{entry['teams']:>8,}  {algorithm:<10}"
                         f"{top['capable']:>14.2f}{top['preferred']:>11.2f}"
                         f"{other['capable']:>16.2f}{other['preferred']:>11.2f}")
    return lines
