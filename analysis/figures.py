"""The report's figures: the paper's figure types and the fairness-over-time ones.

Each function takes the tidy table another module computed and returns a matplotlib
figure; ``save`` writes it as PNG (for the report and slides) and SVG (for papers).
The Agg backend is forced so figures render on servers without a display.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.flow import LOSSES

# Every line, marker and bar colour stands out from the white page by at least 3:1 (WCAG
# AA for graphics): the usual orange (#ff7f0e, 2.5:1) is a darker one. The presets keep
# their named colours in every figure; any other robot takes the palette's next colour no
# preset has, and a protocol's robots (2-4 conditions, up to 15 pool algorithms) fit in it.
COLOURS = {"efficient": "#1f77b4", "fair": "#d62728", "fea": "#2ca02c",
           "predicted": "#7f7f7f"}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#d95f02", "#8c564b", "#e7298a",
           "#006d77", "#a6761d", "#666666", "#393b79", "#637939", "#843c39", "#7b4173",
           "#1b9e77", "#5254a3", "#ad494a", "#8c6d31", "#2f4b7c")
# Light fills (the middle of a Likert scale) are outlined in this, 3:1 against them and
# the page.
OUTLINE = "#444444"
PNG_DPI = 130
SVG_MARGIN = 0.1  # inches the SVG's margin adds to the PNG's


def colour(name: object, index: int) -> str:
    return COLOURS.get(str(name), PALETTE[index % len(PALETTE)])


def robot_colours(robots: Iterable[object]) -> dict[str, str]:
    """A colour per robot, the same in every figure of a report: each preset its own
    (``COLOURS``), every other robot, in the order given, the palette's next colour that no
    preset has, so a declared robot never wears a preset's colour nor another's. Listing
    more robots after these leaves these their colours, so a report can add the pool's
    algorithms after the study's conditions."""
    free = itertools.cycle([shade for shade in PALETTE if shade not in COLOURS.values()])
    colours: dict[str, str] = {}
    for name in map(str, robots):
        if name not in colours:
            colours[name] = COLOURS.get(name) or next(free)
    return colours


def save(figure: Figure, directory: Path, name: str) -> Path:
    """Write ``name.png`` and ``name.svg``, both cut to the figure's ink; returns the PNG's
    path. The cut is measured once, for the PNG: each ``bbox_inches="tight"`` lays the
    whole figure out again, a quarter of a figure's time. The SVG's text, measured at 72
    dpi, runs up to about 1 % wider, so its margin is wider by ``SVG_MARGIN``."""
    directory.mkdir(parents=True, exist_ok=True)
    png = directory / f"{name}.png"
    figure.set_dpi(PNG_DPI)
    figure.draw_without_rendering()
    ink = figure.get_tightbbox().padded(matplotlib.rcParams["savefig.pad_inches"])
    figure.savefig(png, dpi=PNG_DPI, bbox_inches=ink)
    figure.savefig(directory / f"{name}.svg", bbox_inches=ink.padded(SVG_MARGIN))
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


def grouped_bars(axis: plt.Axes, table: pd.DataFrame, categories: list[str],
                 series: list[str], errors: pd.DataFrame | None = None,
                 colours: Mapping[str, str] | None = None) -> None:
    """Bars of ``table[category, series]`` grouped by category, each series in its colour
    (``colours``, by default ``robot_colours`` of the series)."""
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(categories))
    colours = colours or robot_colours(series)
    for k, name in enumerate(series):
        values = table.reindex(index=categories)[name].to_numpy(dtype=float)
        error = None if errors is None else errors.reindex(index=categories)[name].to_numpy(
            dtype=float)
        axis.bar(x + (k - (len(series) - 1) / 2) * width, values, width, yerr=error,
                 capsize=3, label=str(name), color=colours[str(name)])
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
    grouped_bars(axis, means, [*order, "Predicted"], list(means.columns), spread)
    axis.set_ylim(0, 7.5)
    axis.set_yticks(range(1, 8))
    axis.set_ylabel("rating (1-7)")
    axis.set_title("Perceived and predicted fairness by condition")
    axis.legend(title="condition", frameon=False, ncols=len(means.columns),
                loc="upper center", bbox_to_anchor=(0.5, -0.1))
    return figure


def allocations_figure(table: pd.DataFrame, title: str, rounds: int = 8,
                       colours: Mapping[str, str] | None = None) -> Figure:
    """Figure 4 of the paper: mean rounds (of ``rounds`` a session) on the most capable and
    most preferred task type per human, per algorithm (or condition), one panel per team
    type; an algorithm has one colour in every panel (``colours``, by default
    ``robot_colours`` of the table's algorithms)."""
    types = list(dict.fromkeys(table["team_type"]))
    colours = colours or robot_colours(table["algorithm"])
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
        grouped_bars(axis, wide, list(dict.fromkeys(long["category"])),
                     list(dict.fromkeys(part["algorithm"])), colours=colours)
        axis.set_title(f"{team_type} ({int(part['teams'].iloc[0]):,})")
        axis.tick_params(axis="x", labelsize=8)
        axis.set_ylim(0, rounds * 1.22)
        axis.set_yticks(range(0, rounds + 1, max(1, rounds // 8)))
        axis.set_ylabel(f"mean rounds (of {rounds})")
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
                            title: str, colours: Mapping[str, str] | None = None) -> Figure:
    """Mean ``|metric|`` after each round per group (thick), each unit's path (thin) when
    there are few. The first grouping column (the robot) sets the colour (``colours``, by
    default ``robot_colours`` of its values), a second the line style."""
    figure, axis = plt.subplots(figsize=(7.5, 3.8))
    data = per_round.assign(gap=per_round[metric].abs())
    colours = colours or robot_colours(sorted(data[by[0]].astype(str)))
    seconds = list(dict.fromkeys(sorted(data[by[-1]].astype(str))))
    for name, part in data.groupby(by, sort=True):
        keys = [str(x) for x in (name if isinstance(name, tuple) else (name,))]
        tint = colours[keys[0]]
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
    columns = min(len(groups), 3)
    bands = -(-len(groups) // columns)
    figure, axes = plt.subplots(2 * bands, columns, figsize=(4.4 * columns, 3.8 * 2 * bands),
                                squeeze=False)
    criteria = (("fair_reward", "on_front_F", "mean fair reward 1 - |F|"),
                ("abs_FE", "on_front_FE", "mean |FE| (lower: fairer equity)"))
    for k, group in enumerate(groups):
        part = sweep[sweep["group"] == group]
        band, column = divmod(k, columns)
        for row, (x, front, label) in enumerate(criteria):
            axis = axes[2 * band + row, column]
            _tradeoff_panel(axis, part, x, front)
            axis.set_xlabel(label)
            axis.set_title(f"{group} ({int(part['teams'].iloc[0]):,} teams)")
        axes[2 * band + 1, column].invert_xaxis()
    for band in range(bands):
        for column in range(columns):
            if band * columns + column >= len(groups):
                axes[2 * band, column].set_visible(False)
                axes[2 * band + 1, column].set_visible(False)
    axes[0, 0].legend(frameon=False, fontsize=7, loc="lower left")
    figure.suptitle("Fairness-efficiency trade-off of FEA's weight")
    figure.tight_layout(rect=(0, 0, 1, 0.985))
    return figure


def _tradeoff_panel(axis: plt.Axes, part: pd.DataFrame, x: str, front: str) -> None:
    fea = part[part["algorithm"] == "fea"]
    for k, ((lo, hi), curve) in enumerate(fea.groupby(["lo", "hi"], sort=True)):
        curve = curve.sort_values("w")
        axis.plot(curve[x], curve["E"], marker=".", color=PALETTE[2 + k],
                  label=f"FEA, bounds {lo:.3g}..{hi:.3g}")
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


def flow_figure(flow: pd.DataFrame) -> Figure:
    """The participant flow: how many reached each stage, with who was lost after it and
    why written beside the bar."""
    figure, axis = plt.subplots(figsize=(8.5, 0.5 * len(flow) + 1.2))
    y = np.arange(len(flow))[::-1]
    axis.barh(y, flow["reached"], color="#9ecae1", edgecolor="#3182bd")
    losses = [c for c in LOSSES if c in flow]
    for (_, row), height in zip(flow.iterrows(), y, strict=True):
        lost = ", ".join(f"{row[c]} {c}" for c in losses if row[c])
        axis.text(row["reached"], height, f"  {row['reached']}" + (
            f"   (then lost: {lost})" if lost else ""), va="center", fontsize=8)
    axis.set_yticks(y, flow["stage"])
    axis.set_xlim(0, max(1, flow["reached"].max()) * 2.2)
    axis.set_xlabel("participants")
    axis.set_title("Participant flow")
    axis.spines[["top", "right"]].set_visible(False)
    return figure


LIKERT_COLOURS = ("#b2182b", "#ef8a62", "#fddbc7", "#e0e0e0", "#d1e5f0", "#67a9cf",
                  "#2166ac")


def likert_figure(counts: pd.DataFrame, points: int = 7) -> Figure:
    """Diverging stacked bars of the answer distribution, one bar per item and
    condition: shares of the disagreeing answers left of zero, the agreeing ones right,
    the middle answer split across zero. ``counts`` has item label, condition, value, n."""
    bars = counts.groupby(["label", "condition"], sort=False)
    figure, axis = plt.subplots(figsize=(8.5, 0.42 * bars.ngroups + 1.6))
    middle = (points + 1) / 2
    colours = _likert_colours(points)
    names = []
    for row, ((label, condition), part) in enumerate(bars):
        shares = part.groupby("value")["n"].sum() / part["n"].sum()
        shares = shares.reindex(np.arange(1, points + 1), fill_value=0.0)
        left = -(shares[shares.index < middle].sum() + shares.get(middle, 0.0) / 2)
        y = bars.ngroups - 1 - row
        for value, share in shares.items():
            axis.barh(y, share, left=left, color=colours[value - 1], edgecolor=OUTLINE,
                      linewidth=0.6, label=str(value) if row == 0 else None)
            left += share
        names.append((y, f"{label}: {condition} (n={int(part['n'].sum())})"))
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks([y for y, _ in names], [name for _, name in names], fontsize=8)
    axis.set_xlim(-1, 1)
    axis.set_xticks(np.linspace(-1, 1, 5), ["100%", "50%", "0", "50%", "100%"])
    axis.set_xlabel("share of answers (disagree left, agree right)")
    axis.set_title("Likert answers by item and condition")
    axis.legend(title="answer", ncols=points, frameon=False, fontsize=7, loc="upper center",
                bbox_to_anchor=(0.5, -0.12 - 0.6 / max(bars.ngroups, 1)))
    return figure


def _likert_colours(points: int) -> list[str]:
    if points == len(LIKERT_COLOURS):
        return list(LIKERT_COLOURS)
    cmap = matplotlib.colormaps["RdBu"]
    return [matplotlib.colors.to_hex(cmap(x)) for x in np.linspace(0.1, 0.9, points)]


def slope_figure(frame: pd.DataFrame, outcomes: list[tuple[str, str]],
                 conditions: list[str], points: int = 7) -> Figure:
    """Paired slope plots: each participant's value in each condition joined by a line,
    one panel per outcome (column, title), the means of the complete pairs in black (a
    participant in one condition only is a lone dot); ratings
    (``rating_*`` columns) on their whole 1..points scale."""
    figure, axes = _panels(len(outcomes), 3.4, 3.4, columns=4)
    x = np.arange(len(conditions))
    for axis, (column, title) in zip(axes, outcomes, strict=True):
        wide = frame.pivot_table(index="participant_id", columns="condition", values=column,
                                 aggfunc="mean").reindex(columns=conditions)
        for _, row in wide.iterrows():
            values = row.to_numpy(dtype=float)
            axis.plot(x, values, color="grey", alpha=0.45, marker="o", markersize=3,
                      linewidth=0.9)
        axis.plot(x, wide.dropna().mean().to_numpy(dtype=float), color="black",
                  linewidth=2.4, marker="s", label="mean of the pairs")
        axis.set_xticks(x, conditions)
        axis.set_xlim(-0.3, len(x) - 0.7)
        if column.startswith("rating_"):
            axis.set_ylim(0.7, points + 0.3)
            axis.set_yticks(range(1, points + 1))
        axis.set_title(f"{title} (n={len(wide.dropna())} pairs)", fontsize=9)
    axes[0].legend(frameon=False, fontsize=8)
    figure.suptitle("Each participant in every condition")
    figure.tight_layout()
    return figure


def intervals_figure(predicted: pd.DataFrame, observed: pd.DataFrame | None = None,
                     points: int = 7, colours: Mapping[str, str] | None = None,
                     unfitted: Mapping[str, str] | None = None, caveat: str = "") -> Figure:
    """Predicted mean rating per item and condition with its model interval (points and
    lines, always within the 1..points scale), the observed means as open circles, and the
    fairness rating MODEL.md predicts from the allocations (1 + 6 (1 - |F|)) as its own
    row with its range. An item whose model was not fitted (``unfitted``: label, why) says
    why on its row, where its dots would be, so it does not just lose them; ``caveat``
    (too few participants for a test) stands under the title."""
    unfitted = unfitted or {}
    seen = [] if observed is None else list(observed["outcome"])
    labels = list(dict.fromkeys([*seen, *unfitted, *predicted["outcome"]]))
    shown = [] if observed is None else list(observed["condition"])
    conditions = sorted({*predicted["condition"], *shown}, key=str)
    colours = colours or robot_colours(conditions)
    figure, axis = plt.subplots(figsize=(7.5, 0.55 * len(labels) * len(conditions) / 2 + 1.8))
    step = 0.7 / max(len(conditions), 1)
    for k, condition in enumerate(conditions):
        part = predicted[predicted["condition"] == condition].set_index("outcome").reindex(
            labels)
        y = np.arange(len(labels))[::-1] + (k - (len(conditions) - 1) / 2) * step
        low = (part["predicted_mean"] - part["ci_low"]).clip(lower=0)
        high = (part["ci_high"] - part["predicted_mean"]).clip(lower=0)
        tint = colours[str(condition)]
        axis.errorbar(part["predicted_mean"], y, xerr=[low, high], fmt="o", capsize=3,
                      color=tint, label=str(condition))
        if observed is not None:
            seen = observed[observed["condition"] == condition].set_index("outcome").reindex(
                labels)
            axis.scatter(seen["mean"], y, facecolors="none", edgecolors=tint, s=40, zorder=3)
    rows = np.arange(len(labels))[::-1]
    for label, why in unfitted.items():
        axis.text((1 + points) / 2, rows[labels.index(label)],
                  textwrap.fill(f"model not fitted: {why}", 95), ha="center", va="center",
                  fontsize=7, style="italic", color=OUTLINE, zorder=1,
                  bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    axis.set_yticks(rows, labels)
    axis.set_xlim(0.8, points + 0.2)
    axis.set_xticks(range(1, points + 1))
    axis.set_xlabel(f"rating (1-{points}); dots: model mean with 95% interval; "
                    "circles: observed mean")
    axis.set_title("\n".join(["Perceived and predicted fairness by condition",
                               *textwrap.wrap(caveat, 80)]),
                   fontsize=9 if caveat else matplotlib.rcParams["axes.titlesize"])
    axis.legend(title="condition", frameon=False, fontsize=8, loc="center left",
                bbox_to_anchor=(1.01, 0.5))
    return figure


def power_figure(curves: pd.DataFrame, target: float) -> Figure:
    """Simulated power against participants per outcome, with the target power and, where
    there is one, the closed-form power of the paired t test as a dashed line."""
    figure, axis = plt.subplots(figsize=(7.5, 4.0))
    for k, (name, part) in enumerate(curves.groupby("outcome", sort=False)):
        tint = PALETTE[k % len(PALETTE)]
        axis.plot(part["participants"], part["power"], marker="o", markersize=3, color=tint,
                  label=str(name))
        axis.fill_between(part["participants"], part["ci_low"], part["ci_high"], color=tint,
                          alpha=0.15, linewidth=0)
        if "closed_form" in part and part["closed_form"].notna().any():
            axis.plot(part["participants"], part["closed_form"], linestyle="--", color=tint,
                      linewidth=1, label=f"{name}: paired t, closed form")
    axis.axhline(target, color="black", linestyle=":", linewidth=1)
    axis.set_ylim(0, 1.02)
    axis.set_xlabel("participants (each in every condition)")
    axis.set_ylabel("power")
    axis.set_title("Power to detect a difference between conditions")
    axis.legend(frameon=False, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure


def live_types_figure(types: pd.DataFrame) -> Figure:
    """Participants per live team type, each bar split by whether the live team was the
    target team (``teams.live_types``: type, role, participants, target_met)."""
    counts = types.groupby("live_type", sort=False)[["participants", "target_met"]].sum()
    met = counts["target_met"].to_numpy()
    missed = counts["participants"].to_numpy() - met
    figure, axis = plt.subplots(figsize=(1.3 * len(counts) + 2.5, 3.4))
    x = np.arange(len(counts))
    axis.bar(x, met, color="#2ca02c", label="target met")
    axis.bar(x, missed, bottom=met, color="#d9d9d9", hatch="//", label="off target",
             edgecolor=["#d62728" if n else "none" for n in missed])
    for k, total in enumerate(counts["participants"]):
        axis.text(k, total, f"{total}", ha="center", va="bottom", fontsize=8)
    axis.set_xticks(x, counts.index)
    axis.set_ylabel("participants")
    axis.set_title("Live teams of the analysed participants")
    axis.legend(frameon=False, fontsize=8)
    axis.spines[["top", "right"]].set_visible(False)
    return figure


def lobby_figure(waits: np.ndarray) -> Figure:
    """How long people waited in a real team's lobby (seconds, one bar a person)."""
    figure, axis = plt.subplots(figsize=(5.5, 3.2))
    axis.hist(waits, bins=min(20, max(3, len(waits))), color="#8c564b")
    axis.set_xlabel("seconds in the lobby")
    axis.set_ylabel("people")
    axis.set_title(f"Time in the lobby (median {np.median(waits):.0f} s)")
    axis.spines[["top", "right"]].set_visible(False)
    return figure


# --- a study of several conditions -----------------------------------------------------------


def contrasts_figure(table: pd.DataFrame) -> Figure:
    """Every pair of conditions per outcome (rows of ``models.mixed_model``): the
    difference with its 95% interval and its Holm-adjusted p value, one panel each."""
    fitted = table.dropna(subset=["estimate"])
    outcomes = list(dict.fromkeys(fitted["outcome"]))
    pairs = int(fitted.groupby("outcome").size().max()) if len(fitted) else 1
    figure, axes = _panels(max(len(outcomes), 1), 3.8, 0.55 * pairs + 1.3, columns=3)
    for axis, outcome in zip(axes, outcomes, strict=False):
        part = fitted[fitted["outcome"] == outcome].reset_index(drop=True)
        y = np.arange(len(part))[::-1]
        low = (part["estimate"] - part["ci_low"]).clip(lower=0)
        high = (part["ci_high"] - part["estimate"]).clip(lower=0)
        axis.errorbar(part["estimate"], y, xerr=[low, high], fmt="o", color="black",
                      capsize=3)
        axis.axvline(0, color="grey", linewidth=0.8)
        axis.set_yticks(y, [f"{row.term}\np (Holm) {row.p_holm:.3g}"
                            for row in part.itertuples()], fontsize=7)
        axis.set_title(str(outcome), fontsize=9)
    figure.suptitle("Every pair of conditions: difference, 95% interval, Holm-adjusted p")
    figure.tight_layout()
    return figure


def ranks_figure(ranked: pd.DataFrame) -> Figure:
    """Where the participants placed each robot (rows of ``questionnaires.rankings``):
    per rank item a bar per robot, split by place, first place darkest; robots by their
    mean place, best on top."""
    labels = list(dict.fromkeys(ranked["label"]))
    figure, axes = _panels(len(labels), 6.0, 0.55 * ranked["condition"].nunique() + 1.6,
                           columns=2)
    for axis, label in zip(axes, labels, strict=True):
        part = ranked[ranked["label"] == label]
        places = int(part["place"].max())
        shares = pd.crosstab(part["condition"], part["place"], normalize="index").reindex(
            columns=range(1, places + 1), fill_value=0.0)
        shares = shares.loc[part.groupby("condition")["place"].mean().sort_values().index]
        shades = matplotlib.colormaps["Blues"](np.linspace(0.95, 0.35, places))
        y = np.arange(len(shares))[::-1]
        left = np.zeros(len(shares))
        for place in range(1, places + 1):
            axis.barh(y, shares[place], left=left, color=shades[place - 1],
                      edgecolor=OUTLINE, linewidth=0.6, label=f"place {place}")
            left += shares[place].to_numpy()
        counts = part.groupby("condition").size()
        axis.set_yticks(y, [f"{name} (n={counts[name]})" for name in shares.index],
                        fontsize=8)
        axis.set_xlim(0, 1)
        axis.set_xlabel("share of participants")
        axis.set_title(str(label), fontsize=9)
        axis.legend(ncols=places, frameon=False, fontsize=7, loc="upper center",
                    bbox_to_anchor=(0.5, -0.25))
    figure.suptitle("Robots ranked by the participants")
    figure.tight_layout()
    return figure


def pairs_figure(tests: pd.DataFrame) -> Figure:
    """Every two robots (rows of ``questionnaires.pair_tests``): the share of participants
    who put a above b (left of the middle), tied (across it) and b above a (right), one
    bar per item and pair."""
    rows = tests.reset_index(drop=True)
    figure, axis = plt.subplots(figsize=(8.0, 0.45 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    total = rows["participants"].clip(lower=1).to_numpy(dtype=float)
    above, ties, below = (rows[c].to_numpy(dtype=float) / total
                          for c in ("a_above_b", "ties", "b_above_a"))
    axis.barh(y, -above - ties / 2, color=PALETTE[0], label="a above b")
    axis.barh(y, ties, left=-ties / 2, color="#dddddd", edgecolor=OUTLINE, linewidth=0.6,
              label="no difference")
    axis.barh(y, below, left=ties / 2, color=PALETTE[1], label="b above a")
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(y, [f"{r.label}: {r.condition_a} (a) vs {r.condition_b} (b), "
                        f"n={r.participants}" for r in rows.itertuples()], fontsize=8)
    axis.set_xlim(-1, 1)
    axis.set_xticks(np.linspace(-1, 1, 5), ["100%", "50%", "0", "50%", "100%"])
    axis.set_xlabel("share of participants")
    axis.set_title("Robots against each other")
    axis.legend(ncols=3, frameon=False, fontsize=8, loc="upper center",
                bbox_to_anchor=(0.5, -0.12 - 0.6 / max(len(rows), 1)))
    return figure


def probe_figure(means: pd.DataFrame, title: str, points: int,
                 measures: Sequence[tuple[str, str]],
                 colours: Mapping[str, str] | None = None) -> Figure:
    """One probe (rows of ``probes.means_by_round``): its mean answer by round per
    condition with its 95% interval, then, one panel per fairness measure, the mean answer
    of each round against the mean measure of the same person-rounds, a condition's rounds
    joined in order (first round ringed), one colour per robot."""
    conditions = sorted(means["condition"].unique(), key=str)
    colours = colours or robot_colours(conditions)
    figure, axes = _panels(len(measures) + 1, 3.3, 3.0, columns=4)
    for condition in conditions:
        part = means[means["condition"] == condition].sort_values("round")
        tint = colours[str(condition)]
        axes[0].errorbar(part["round"], part["mean"], yerr=part["ci"].fillna(0), color=tint,
                         marker="o", markersize=3, capsize=2, label=str(condition))
        for axis, (column, _) in zip(axes[1:], measures, strict=True):
            axis.plot(part[column], part["mean"], color=tint, marker="o", markersize=3,
                      linewidth=1)
            axis.scatter(part[column].iloc[:1], part["mean"].iloc[:1], s=60,
                         facecolors="none", edgecolors=tint)
    axes[0].set_xlabel("round")
    axes[0].set_title("mean answer by round", fontsize=9)
    axes[0].legend(title="condition", frameon=False, fontsize=7)
    for axis, (_, label) in zip(axes[1:], measures, strict=True):
        axis.set_xlabel(label, fontsize=8)
        axis.set_title(f"against {label}", fontsize=9)
    for axis in axes:
        axis.set_ylim(0.7, points + 0.3)
        axis.set_yticks(range(1, points + 1))
        axis.set_ylabel(f"mean answer (1-{points})", fontsize=8)
    figure.suptitle(textwrap.shorten(title, 110))
    figure.tight_layout()
    return figure
