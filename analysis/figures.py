"""The report's figures: the paper's figure types and the fairness-over-time ones.

Each function takes the tidy table another module computed and returns a matplotlib
figure; ``save`` writes it as PNG (for the report and slides) and SVG (for papers).
The Agg backend is forced so figures render on servers without a display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

COLOURS = {"efficient": "#1f77b4", "fair": "#d62728", "fea": "#2ca02c",
           "predicted": "#7f7f7f"}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
PNG_DPI = 130


def colour(name: object, index: int) -> str:
    return COLOURS.get(str(name), PALETTE[index % len(PALETTE)])


def save(figure: Figure, directory: Path, name: str) -> Path:
    """Write ``name.png`` and ``name.svg``; returns the PNG's path."""
    directory.mkdir(parents=True, exist_ok=True)
    png = directory / f"{name}.png"
    figure.savefig(png, dpi=PNG_DPI, bbox_inches="tight")
    figure.savefig(directory / f"{name}.svg", bbox_inches="tight")
    plt.close(figure)
    return png


def _panels(count: int, width: float, height: float,
            columns: int = 3) -> tuple[Figure, list[plt.Axes]]:
    """A grid of ``count`` panels, at most ``columns`` wide; unused cells hidden."""
    columns = min(columns, count)
    rows = -(-count // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows),
                                squeeze=False)
    flat = list(axes.ravel())
    for axis in flat[count:]:
        axis.set_visible(False)
    return figure, flat[:count]


def _grouped_bars(axis: plt.Axes, table: pd.DataFrame, categories: list[str],
                  series: list[str], errors: pd.DataFrame | None = None) -> None:
    """Bars of ``table[category, series]`` grouped by category."""
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(categories))
    for k, name in enumerate(series):
        values = table.reindex(index=categories)[name].to_numpy(dtype=float)
        error = None if errors is None else errors.reindex(index=categories)[name].to_numpy(
            dtype=float)
        axis.bar(x + (k - (len(series) - 1) / 2) * width, values, width, yerr=error,
                 capsize=3, label=str(name), color=colour(name, k))
    axis.set_xticks(x, categories)


def ratings_figure(described: pd.DataFrame, predicted: pd.DataFrame) -> Figure:
    """Figures 3 and 5 of the paper: mean rating (± sd) of each Likert item by condition,
    with the predicted fairness rating (the fair reward on the 1-7 scale) beside."""
    means = described.pivot(index="label", columns="condition", values="mean")
    spread = described.pivot(index="label", columns="condition", values="sd")
    order = list(dict.fromkeys(described["label"]))
    means.loc["Predicted"] = predicted.set_index("condition")["predicted"]
    spread.loc["Predicted"] = predicted.set_index("condition")["predicted_sd"]
    figure, axis = plt.subplots(figsize=(1.6 * (len(order) + 1) + 2, 3.8))
    _grouped_bars(axis, means, [*order, "Predicted"], list(means.columns), spread)
    axis.set_ylim(0, 7.5)
    axis.set_yticks(range(1, 8))
    axis.set_ylabel("rating (1-7)")
    axis.set_title("Perceived and predicted fairness by condition")
    axis.legend(title="condition", frameon=False, ncols=len(means.columns),
                loc="upper center", bbox_to_anchor=(0.5, -0.1))
    return figure


def allocations_figure(table: pd.DataFrame, title: str) -> Figure:
    """Figure 4 of the paper: mean rounds on the most capable and most preferred task type
    per human, per algorithm (or condition), one panel per team type."""
    types = list(dict.fromkeys(table["team_type"]))
    figure, axes = _panels(len(types), 5.6, 3.9, columns=2)
    for axis, team_type in zip(axes, types, strict=True):
        part = table[table["team_type"] == team_type]
        long = part.melt(id_vars=["algorithm", "human"],
                         value_vars=["capable_rounds", "preferred_rounds"])
        long["category"] = long["human"].str.replace(" ", "\n", n=1) + "\n" + long[
            "variable"].map({"capable_rounds": "capable type",
                             "preferred_rounds": "preferred type"})
        long = long.sort_values("human", kind="stable")
        wide = long.pivot(index="category", columns="algorithm", values="value")
        _grouped_bars(axis, wide, list(dict.fromkeys(long["category"])),
                      list(dict.fromkeys(part["algorithm"])))
        axis.set_title(f"{team_type} ({int(part['teams'].iloc[0]):,})")
        axis.tick_params(axis="x", labelsize=8)
        axis.set_ylim(0, 9.8)
        axis.set_yticks(range(0, 9))
        axis.set_ylabel("mean rounds (of 8)")
    axes[0].legend(frameon=False, fontsize=8, ncols=3, loc="upper center")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def gaps_figure(pool: pd.DataFrame, team_types: pd.Series, threshold: float) -> Figure:
    """Distribution of the fair gap and the efficiency gap per team type."""
    columns = [column for column in ("fair_gap", "efficiency_gap") if column in pool]
    figure, axes = _panels(len(columns), 5.5, 3.6)
    for axis, column in zip(axes, columns, strict=True):
        bins = np.linspace(pool[column].min(), pool[column].max(), 41)
        for k, name in enumerate(sorted(team_types.unique())):
            values = pool.loc[(team_types == name).to_numpy(), column]
            axis.hist(values, bins=bins, histtype="step", linewidth=1.5,
                      label=f"{name} ({len(values):,})", color=PALETTE[k % len(PALETTE)])
        if column == "fair_gap":
            axis.axvline(threshold, color="black", linestyle=":", linewidth=1)
        axis.set_yscale("log")
        axis.set_xlabel(column.replace("_", " ") + " (Fair minus Efficient)")
        axis.set_ylabel("teams")
        axis.legend(frameon=False, fontsize=8)
    figure.suptitle("Gaps between the Fair and the Efficient policy")
    return figure


def running_fairness_figure(per_round: pd.DataFrame, by: list[str], metric: str,
                            title: str) -> Figure:
    """Mean ``|metric|`` after each round per group (thick), each unit's path (thin) when
    there are few. The first grouping column sets the colour, a second the line style."""
    figure, axis = plt.subplots(figsize=(7.5, 3.8))
    data = per_round.assign(gap=per_round[metric].abs())
    firsts = list(dict.fromkeys(sorted(data[by[0]].astype(str))))
    seconds = list(dict.fromkeys(sorted(data[by[-1]].astype(str))))
    for name, part in data.groupby(by, sort=True):
        keys = [str(x) for x in (name if isinstance(name, tuple) else (name,))]
        tint = colour(keys[0], firsts.index(keys[0]))
        style = ("-", "--", ":", "-.")[seconds.index(keys[-1]) % 4] if len(by) > 1 else "-"
        if "unit" in part and part["unit"].nunique() <= 40:
            for _, unit in part.groupby("unit"):
                axis.plot(unit["round"], unit["gap"], color=tint, alpha=0.2, linewidth=0.8,
                          linestyle=style)
        mean = part.groupby("round")["gap"].mean()
        axis.plot(mean.index, mean.to_numpy(), color=tint, linewidth=2.2, marker="o",
                  markersize=4, linestyle=style, label=" / ".join(keys))
    axis.set_xlabel("round")
    axis.set_ylabel(f"|{metric}| after the round")
    axis.set_title(title)
    axis.set_ylim(bottom=0)
    axis.legend(frameon=False, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure


def tradeoff_figure(sweep: pd.DataFrame) -> Figure:
    """Efficiency against each fairness criterion per team group: the FEA weight sweep as
    a curve per bounds pair, Efficient and Fair as marked ends, and the non-dominated
    points ringed on each criterion's own front (top: fair reward ``1 - |F|``, the Fair
    policy's; bottom: mean ``|FE|``, the fair-equity FEA trades efficiency for)."""
    groups = list(dict.fromkeys(sweep["group"]))
    columns = min(len(groups), 4)
    figure, axes = plt.subplots(2, columns, figsize=(4.4 * columns, 7.6), squeeze=False)
    criteria = (("fair_reward", "on_front_F", "mean fair reward 1 - |F|"),
                ("abs_FE", "on_front_FE", "mean |FE| (lower: fairer equity)"))
    for column, group in enumerate(groups[:columns]):
        part = sweep[sweep["group"] == group]
        for row, (x, front, label) in enumerate(criteria):
            _tradeoff_panel(axes[row, column], part, x, front)
            axes[row, column].set_xlabel(label)
            axes[row, column].set_title(f"{group} ({int(part['teams'].iloc[0]):,} teams)")
        axes[1, column].invert_xaxis()
    axes[0, 0].legend(frameon=False, fontsize=7, loc="lower left")
    figure.suptitle("Fairness-efficiency trade-off of FEA's weight")
    figure.tight_layout()
    return figure


def _tradeoff_panel(axis: plt.Axes, part: pd.DataFrame, x: str, front: str) -> None:
    fea = part[part["algorithm"] == "fea"]
    for k, ((lo, hi), curve) in enumerate(fea.groupby(["lo", "hi"], sort=True)):
        curve = curve.sort_values("w")
        axis.plot(curve[x], curve["E"], marker=".", color=PALETTE[2 + k],
                  label=f"FEA, bounds {lo:g}..{hi:g}")
        for _, point in curve.iloc[[0, -1]].iterrows():
            axis.annotate(f"w={point['w']:g}", (point[x], point["E"]), fontsize=7,
                          xytext=(3, 3), textcoords="offset points")
    for name, marker in (("efficient", "s"), ("fair", "D")):
        point = part[part["algorithm"] == name]
        axis.scatter(point[x], point["E"], marker=marker, s=60, zorder=3,
                     color=COLOURS[name], label=name.title())
    ringed = part[part[front]]
    axis.scatter(ringed[x], ringed["E"], s=140, facecolors="none", edgecolors="black",
                 linewidths=0.7, label="non-dominated")
    axis.set_ylabel("mean efficiency E")


def parity_figure(differences: pd.DataFrame, title: str) -> Figure:
    """Each group difference with its bootstrap interval, one row per comparison."""
    rows = differences.reset_index(drop=True)
    labels = [f"{r.outcome} by {r.by}: {r.group_a} - {r.group_b}" for r in rows.itertuples()]
    figure, axis = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    y = np.arange(len(rows))[::-1]
    low = (rows["difference"] - rows["ci_low"]).clip(lower=0)
    high = (rows["ci_high"] - rows["difference"]).clip(lower=0)
    axis.errorbar(rows["difference"], y, xerr=[low.fillna(0), high.fillna(0)], fmt="o",
                  color="black", capsize=3)
    axis.axvline(0, color="grey", linewidth=0.8)
    axis.set_yticks(y, labels, fontsize=8)
    axis.set_xlabel("difference of means (95% bootstrap interval)")
    axis.set_title(title)
    return figure


def cookies_figure(outcomes: pd.DataFrame) -> Figure:
    """Cookies completed by each team in each condition, one line per participant."""
    wide = outcomes.pivot_table(index="participant_id", columns="condition",
                                values="cookies_team", aggfunc="sum")
    figure, axis = plt.subplots(figsize=(4.5, 3.8))
    x = np.arange(len(wide.columns))
    for _, row in wide.iterrows():
        axis.plot(x, row.to_numpy(dtype=float), color="grey", alpha=0.5, marker="o")
    axis.plot(x, wide.mean().to_numpy(), color="black", linewidth=2.5, marker="s",
              label="mean")
    axis.set_xticks(x, [str(name) for name in wide.columns])
    axis.set_xlim(-0.4, len(x) - 0.6)
    axis.set_ylabel("cookies completed by the team")
    axis.set_title("Task performance by condition")
    axis.legend(frameon=False)
    return figure
