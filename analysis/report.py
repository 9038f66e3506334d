"""The self-contained HTML report: every table and figure of a study database and a pool.

The report is one HTML file with its figures embedded (base64 PNG), so it can be mailed
or archived as is; beside it the figures are written as PNG and SVG and every table as
CSV, for papers and slides. Sections appear only when their data is there.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import figures, parity, questionnaires, sessions, simulation, tradeoff
from analysis.load import StudyData
from study.model import Algorithm
from study.pool.spec import PoolSpec
from study.pool.summary import PAPER_FAIR_GAP

FLOAT_FORMAT = "{:.3f}".format


@dataclass
class Section:
    """One titled part of the report: a short text, tables and figures."""

    title: str
    text: str = ""
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReportOptions:
    """Which participant attributes to compare groups by, how much of a pool the slower
    analyses use, and which FEA settings to sweep."""

    attributes: Sequence[str] = ("gender",)
    sweep_teams: int = 100_000
    order_sample: int = 200
    parity_sample: int = 2000
    weights: Sequence[float] = tradeoff.DEFAULT_WEIGHTS
    bounds: Sequence[tuple[float, float]] = ()
    seed: int = 0


# --- the study database -------------------------------------------------------------------


def participant_sections(data: StudyData, out: Path,
                         attributes: Sequence[str]) -> list[Section]:
    """Participants, task performance, allocations, ratings, time and parity."""
    if data.participants.empty:
        return [Section("Participants", "No participant data (after excluding withdrawn "
                                        "and declined participants).")]
    outcomes = sessions.session_outcomes(data)
    sections = [_participants_section(data), _performance_section(outcomes, out)]
    if not outcomes.empty:
        sections += [_conditions_section(outcomes, data, out),
                     _questionnaire_section(data.answers),
                     _session_time_section(data, out),
                     _participant_parity_section(data, outcomes, attributes, out)]
    return sections


def _participants_section(data: StudyData) -> Section:
    people = data.participants
    columns = [c for c in people.columns if c.startswith(("c_", "p_", "attr_"))]
    table = people.merge(data.teammates[["participant_id", "participant_human", "distance"]],
                         on="participant_id", how="left")[
        ["code", "protocol", "step", *columns, "participant_human", "distance"]]
    means = table.select_dtypes("number").mean().to_frame("mean").T
    text = (f"{len(people)} participants (withdrawn and declined participants excluded). "
            f"Mean teammate match distance d = {table['distance'].mean():.3f} "
            f"(closer to 0 is a better match).")
    return Section("Participants", text, [("Participants and their measured coefficients",
                                           table), ("Means", means)])


def _performance_section(outcomes: pd.DataFrame, out: Path) -> Section:
    section = Section("Task performance and allocations per participant and condition")
    if outcomes.empty:
        section.text = "No collaborative session has been recorded yet."
        return section
    columns = ["participant_id", "condition", "algorithm", "number", "cookies_team",
               "cookies_participant", "cookies_teammate", "rounds_capable_participant",
               "rounds_preferred_participant", "rounds_capable_teammate",
               "rounds_preferred_teammate", "distance"]
    section.text = ("Cookies are the counts stored per round; rounds on the most capable "
                    "and most preferred type are counted from the kits actually handed out.")
    section.tables.append(("One row per participant and condition", outcomes[columns]))
    section.figures.append(("Cookies per team and condition", figures.save(
        figures.cookies_figure(outcomes), out, "cookies_by_condition")))
    table = (role_frame(outcomes).groupby(["condition", "role"], sort=False)
             .agg(teams=("rounds_capable", "size"), capable_rounds=("rounds_capable", "mean"),
                  preferred_rounds=("rounds_preferred", "mean")).reset_index()
             .rename(columns={"condition": "algorithm", "role": "human"})
             .assign(team_type="participants"))
    section.figures.append(("Rounds on the most capable and most preferred type (participants"
                            " and their agent teammates)", figures.save(
                                figures.allocations_figure(table, "Allocations in the study"),
                                out, "allocations_study")))
    return section


def _conditions_section(outcomes: pd.DataFrame, data: StudyData, out: Path) -> Section:
    summary = sessions.condition_summary(outcomes, data.answers)
    section = Section("Conditions: the goal state and the ratings", (
        "Per condition, the final allocation's efficiency E, fairness F and fair-equity FE "
        "(signed: positive favours the participant), the policy's reward, and the "
        "predicted fairness rating (1 + 6 x fair reward) beside the participants' mean "
        "ratings, as in the paper's Figures 3 and 5."), [("Per condition", summary)])
    described = questionnaires.describe(data.answers.dropna(subset=["condition"]))
    if not described.empty:
        first = data.answers.drop_duplicates("item").reset_index(drop=True)
        described["label"] = described["item"].map(first.set_index("item")["label"])
        position = pd.Series(first.index, index=first["item"])
        described = described.sort_values(by="item", key=lambda items: items.map(position),
                                          kind="stable")
        predicted = outcomes.groupby("condition")["predicted_rating_fair"].agg(
            predicted="mean", predicted_sd="std").reset_index()
        section.figures.append(("Perceived and predicted fairness", figures.save(
            figures.ratings_figure(described, predicted), out, "ratings")))
    return section


def _questionnaire_section(answers: pd.DataFrame) -> Section:
    rated = answers.dropna(subset=["condition"])
    described = questionnaires.describe(rated)
    compared = questionnaires.paired_comparisons(rated)
    section = Section("Questionnaires", (
        "Each Likert item by condition, and each item compared within participants: "
        "Wilcoxon signed-rank test, matched-pairs rank-biserial correlation (positive: "
        "condition a rated higher)."), [("Likert items by condition", described),
                                         ("Within-participant comparisons", compared)])
    section.warnings = sorted({w for w in compared["warning"] if w})
    post = questionnaires.describe(answers[answers["questionnaire"] == "post"].assign(
        condition="post"))
    if not post.empty:
        section.tables.append(("Post-study numeric items", post))
    choices = answers[(answers["questionnaire"] == "post") & answers["value_text"].notna()]
    if not choices.empty:
        section.tables.append(("Post-study choices", choices.groupby(
            ["label", "value_text"]).size().rename("participants").reset_index()))
    return section


def _session_time_section(data: StudyData, out: Path) -> Section:
    summary, per_round = sessions.session_fairness_over_time(data)
    by_condition = summary.drop(columns=["participant_id", "session_id"]).groupby(
        ["condition", "algorithm", "round_order"]).mean().reset_index()
    per_round["unit"] = per_round["session_id"]
    section = Section("Fairness over time in the sessions", (
        "Running F and FE after each round (participant as human 0). Long-term: the last "
        "round; anytime: the worst round; average: mean over rounds; periodic: rounds 4 and "
        "8. Cumulative advantage sums the signed F over rounds (positive favours the "
        "participant); lead changes count how often the favoured human changed."),
        [("Mean per condition", by_condition), ("Per session", summary)])
    section.figures.append(("Running |F| per condition", figures.save(
        figures.running_fairness_figure(per_round, ["condition"], "F",
                                        "Running unfairness |F| in the sessions"),
        out, "sessions_running_F")))
    section.figures.append(("Running |FE| per condition", figures.save(
        figures.running_fairness_figure(per_round, ["condition"], "FE",
                                        "Running fair-equity |FE| in the sessions"),
        out, "sessions_running_FE")))
    return section


def role_frame(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Session outcomes in long form, one row per session and team member."""
    parts = []
    for role in sessions.ROLES:
        parts.append(pd.DataFrame({
            "session_id": outcomes["session_id"], "condition": outcomes["condition"],
            "role": role, "cookies": outcomes[f"cookies_{role}"],
            "rounds_capable": outcomes[f"rounds_capable_{role}"],
            "rounds_preferred": outcomes[f"rounds_preferred_{role}"]}))
    return pd.concat(parts, ignore_index=True)


def _participant_parity_section(data: StudyData, outcomes: pd.DataFrame,
                                attributes: Sequence[str], out: Path) -> Section:
    roles = role_frame(outcomes)
    tables = [parity.group_differences(roles, outcome, "role", pair_by="session_id")
              for outcome in ("cookies", "rounds_capable", "rounds_preferred")]
    attributes = [f"attr_{item}" for item in attributes
                  if f"attr_{item}" in data.participants]
    people = outcomes.merge(data.participants[["participant_id", *attributes]],
                            on="participant_id")
    for attribute in attributes:
        for outcome in ("cookies_participant", "rounds_preferred_participant"):
            tables.append(parity.group_differences(people, outcome, attribute))
    differences = pd.concat(tables, ignore_index=True)
    section = Section("Parity across groups", (
        "Differences of means with 95% percentile bootstrap intervals: participant against "
        "agent teammate within each session, and between the groups of the participant "
        f"attributes {', '.join(attributes) or '(none recorded)'}. Descriptive at this "
        "sample size."),
        [("Group differences", differences)])
    if not differences.empty:
        section.figures.append(("Group differences", figures.save(
            figures.parity_figure(differences, "Parity in the study"), out,
            "parity_study")))
    return section


# --- a team pool -----------------------------------------------------------------------------


def pool_sections(pool: pd.DataFrame, record: dict, out: Path,
                  options: ReportOptions) -> list[Section]:
    """Table 3, gaps, the allocation figure, round orders, the trade-off and parity."""
    spec = PoolSpec.from_dict(record["spec"], name=record["name"])
    algorithms = [spec.algorithm(name) for name in spec.algorithms]
    types = simulation.team_type_names(pool)
    sections = [Section("Team pool", f"{len(pool):,} teams of pool {record['name']!r} "
                                     f"(digest {record['digest'][:16]}).",
                        [("Pool specification", pd.DataFrame(
                            {"setting": list(spec.to_dict()), "value": [
                                json.dumps(v) for v in spec.to_dict().values()]}))])]
    if "fair_gap" in pool:
        sections.append(_gap_section(pool, types, out))
    sections.append(_allocation_section(pool, spec, out))
    sections.append(_order_section(pool, algorithms, spec, out, options))
    sections.append(_tradeoff_section(pool, types, spec, out, options))
    sections.append(_pool_parity_section(pool, types, spec, out, options))
    return sections


def _gap_section(pool: pd.DataFrame, types: pd.Series, out: Path) -> Section:
    table = simulation.table3(pool)
    return Section("Simulation Study #1: Table 3 and the gaps", (
        f"Teams with a fair gap above {PAPER_FAIR_GAP:g} by fair-gap and efficiency-gap bin, with "
        "the paper's counts (7,072 of 500,000 uniform teams). The paper's table matches a "
        "pool drawn as Study #1 (every coefficient uniform in [0.01, 0.99], no rejection)."),
        [("Table 3", table), ("Gap distributions per team type",
                              simulation.gap_summary(pool))],
        [("Fair and efficiency gaps", figures.save(
            figures.gaps_figure(pool, types, PAPER_FAIR_GAP), out, "pool_gaps"))])


def _allocation_section(pool: pd.DataFrame, spec: PoolSpec, out: Path) -> Section:
    table = simulation.allocation_summary(pool, spec.algorithms)
    return Section("Simulation Study #2: allocations", (
        "Mean rounds (of 8) each human spends on their most capable and on their most "
        "preferred task type, per algorithm and team type (the paper's Figure 4)."),
        [("Allocations", table)],
        [("Allocations per team type", figures.save(
            figures.allocations_figure(table, "Allocations in simulation"), out,
            "allocations_pool"))])


def _order_section(pool: pd.DataFrame, algorithms: list[Algorithm], spec: PoolSpec,
                   out: Path, options: ReportOptions) -> Section:
    summary, per_round = simulation.order_comparison(
        pool, algorithms, sample=options.order_sample, seed=options.seed, kits=spec.kits)
    means = summary.groupby(["team_type", "algorithm", "order"]).mean().reset_index()
    per_round = per_round.drop(columns="unit")
    return Section("Fairness over time per policy and round order", (
        f"Up to {options.order_sample} teams per team type. The goal (and so the long-term "
        "values) is the same in both orders; the anytime-fair order keeps the running "
        "unfairness small at every round."), [("Mean temporal summaries", means)],
        [("Running |F| per policy and order", figures.save(
            figures.running_fairness_figure(per_round, ["algorithm", "order"], "F",
                                            "Running unfairness |F| in simulation"),
            out, "pool_running_F"))])


def _tradeoff_section(pool: pd.DataFrame, types: pd.Series, spec: PoolSpec, out: Path,
                      options: ReportOptions) -> Section:
    rng = np.random.default_rng(options.seed)
    rows = np.sort(rng.permutation(len(pool))[:options.sweep_teams])
    c, p = simulation.coefficients(pool.iloc[rows])
    bounds = list(options.bounds) or [(spec.fea.lo, spec.fea.hi) if spec.fea else (0.0, 1.0)]
    sweep = tradeoff.sweep(c, p, types.to_numpy()[rows], options.weights, bounds, spec.kits)
    return Section("The fairness-efficiency trade-off", (
        f"FEA's weight w swept over {len(rows):,} pool teams for the FE' bounds "
        f"{', '.join(f'{lo:g}..{hi:g}' for lo, hi in bounds)}. Price of fairness: the mean "
        "share of the Efficient goal's efficiency a policy gives up, (E* - E) / E*."),
        [("Price of fairness", tradeoff.price_of_fairness(sweep)), ("Sweep", sweep)],
        [("Efficiency against fairness", figures.save(figures.tradeoff_figure(sweep), out,
                                                      "tradeoff"))])


def _pool_parity_section(pool: pd.DataFrame, types: pd.Series, spec: PoolSpec, out: Path,
                         options: ReportOptions) -> Section:
    rng = np.random.default_rng(options.seed)
    rows = rng.permutation(len(pool))[:options.parity_sample]
    part = pool.iloc[rows]
    top = part["most_capable_human"].to_numpy(dtype=int)
    tables = []
    for algorithm in spec.algorithms:
        preferred = simulation.per_human_rounds(part, f"{algorithm}_rounds_preferred")
        long = pd.DataFrame({
            "team": np.tile(np.arange(len(part)), 2),
            "team_type": np.tile(types.to_numpy()[rows], 2),
            "role": np.repeat(simulation.HUMAN_ROLES, len(part)),
            "rounds": np.concatenate([preferred[np.arange(len(part)), top],
                                      preferred[np.arange(len(part)), 1 - top]])})
        for team_type, group in long.groupby("team_type"):
            table = parity.group_differences(group, "rounds", "role", pair_by="team",
                                             seed=options.seed)
            tables.append(table.assign(outcome=algorithm, by=team_type))
    differences = pd.concat(tables, ignore_index=True)
    return Section("Parity in simulation", (
        f"Most capable human against the other, per algorithm and team type, on {len(part):,} "
        "pool teams: rounds on their most preferred type, paired within teams."),
        [("Role differences", differences)],
        [("Role differences", figures.save(figures.parity_figure(
            differences, "Rounds on the most preferred type: most capable human - other"),
            out, "parity_pool"))])


# --- rendering --------------------------------------------------------------------------------


def _table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, na_rep="", float_format=FLOAT_FORMAT, border=0,
                         classes="table")


def _figure_html(caption: str, png: Path) -> str:
    data = base64.b64encode(png.read_bytes()).decode()
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)} ({png.stem}.png / .svg)</figcaption></figure>")


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
  color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table.table { border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0 1.5em; }
table.table th, table.table td { padding: 2px 8px; border-bottom: 1px solid #eee;
  text-align: right; }
.scroll { overflow-x: auto; max-height: 420px; }
.warning { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; }
figure { margin: 1em 0; } img { max-width: 100%; }
figcaption { font-size: 0.85em; color: #555; }
"""


def render(title: str, sections: list[Section], metadata: dict) -> str:
    """The whole report as one HTML string."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<section><h2>{html.escape(section.title)}</h2>")
        if section.text:
            parts.append(f"<p>{html.escape(section.text)}</p>")
        parts += [f'<p class="warning">{html.escape(w)}</p>' for w in section.warnings]
        for caption, frame in section.tables:
            parts.append(f"<h3>{html.escape(caption)}</h3><div class='scroll'>"
                         f"{_table_html(frame)}</div>")
        parts += [_figure_html(caption, png) for caption, png in section.figures]
        parts.append("</section>")
    parts.append("<h2>Metadata</h2><pre>"
                 f"{html.escape(json.dumps(metadata, indent=2, default=str))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_tables(sections: list[Section], directory: Path) -> None:
    """Every table of the report as CSV, named after its section and caption."""
    directory.mkdir(parents=True, exist_ok=True)
    for number, section in enumerate(sections, start=1):
        for caption, frame in section.tables:
            slug = "".join(ch if ch.isalnum() else "_" for ch in caption.lower()).strip("_")
            frame.to_csv(directory / f"{number:02d}_{slug}.csv", index=False)


def write_report(data: StudyData, out: Path, pool: pd.DataFrame | None = None,
                 pool_record: dict | None = None,
                 options: ReportOptions = ReportOptions()) -> Path:
    """Write ``report.html``, ``figures/`` (PNG + SVG) and ``tables/`` (CSV) under ``out``."""
    figure_dir = out / "figures"
    sections = participant_sections(data, figure_dir, options.attributes)
    metadata = dict(data.metadata)
    if pool is not None and pool_record is not None:
        sections += pool_sections(pool, pool_record, figure_dir, options)
        metadata["report_pool"] = pool_record
    write_tables(sections, out / "tables")
    path = out / "report.html"
    protocols = ", ".join(data.metadata.get("protocols", [])) or "no participants"
    path.write_text(render(f"Study report: {protocols}", sections, metadata),
                    encoding="utf-8")
    return path
