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

from analysis import design as design_module
from analysis import (
    fairness_time,
    figures,
    flow,
    metrics,
    models,
    parity,
    plan,
    pooling,
    probes,
    questionnaires,
    real_teams,
    sessions,
    simulation,
    teams,
    ties,
    tradeoff,
)
from analysis.calibration import section as calibration_section
from analysis.design import AnalysisRules, Design
from analysis.load import StudyData
from study.allocation.model import Algorithm
from study.pool.summary import PAPER_FAIR_GAP
from study.protocol.pool_spec import PoolSpec
from study.protocol.schema import ROBOT_ITEM_KINDS

FLOAT_FORMAT = "{:.3f}".format
# Printed, a table of more columns than these has its column names set upright (wide)
# and, beyond that, a smaller font (wider), so that it fits the page's width.
WIDE_TABLES = (("wide", 8), ("wider", 20))


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
    analyses use, which FEA settings to sweep, and where the design comes from."""

    attributes: Sequence[str] = ("gender",)
    sweep_teams: int = 100_000
    order_sample: int = 200
    parity_sample: int = 2000
    metrics_sample: int = 2000
    plan_simulations: int = 200
    weights: Sequence[float] = tradeoff.DEFAULT_WEIGHTS
    bounds: Sequence[tuple[float, float]] = ()
    seed: int = 0
    protocol: Path | None = None
    rules: AnalysisRules | None = None


@dataclass
class Study:
    """The study as the report analyses it: every participant link's stage, the design,
    the analysis set, and the frames restricted to it."""

    data: StudyData
    analysed: StudyData
    design: Design
    stages: pd.DataFrame
    chosen: flow.AnalysisSet
    fitted: dict[str, object] = field(default_factory=dict)


# --- the study database -------------------------------------------------------------------


def prepare(datasets: Sequence[StudyData], options: ReportOptions = ReportOptions()) -> Study:
    """Pool the databases (same protocol only), read the design and apply its rules."""
    paths = [Path(data.metadata["database"]) for data in datasets]
    sites = pooling.site_names(paths)
    data = pooling.combine(datasets, sites)
    chosen_design = design_module.study_design(data.protocol_texts, options.protocol,
                                               options.rules)
    stages = []
    for k, (path, site) in enumerate(zip(paths, sites, strict=True)):
        part = flow.participant_stages(path, len(chosen_design.conditions) or None)
        if len(paths) > 1:
            part["participant_id"] += k * pooling.ID_OFFSET
            part.insert(1, "site", site)
        stages.append(part)
    chosen = flow.analysis_set(data, chosen_design)
    return Study(data, flow.restrict(data, chosen), chosen_design, pd.concat(stages,
                                                                            ignore_index=True),
                 chosen)


def _robots(study: Study | None) -> list[str]:
    """The study's robots, in the protocol's order, then any other condition its sessions
    ran: the order ``figures.robot_colours`` colours them in."""
    if study is None:
        return []
    ran = study.data.sessions.get("condition", pd.Series(dtype=object)).dropna()
    return [*study.design.conditions, *sorted(set(ran.astype(str)))]


def participant_sections(study: Study, out: Path, options: ReportOptions) -> list[Section]:
    """Flow, the teams under study, participants, performance, conditions, questionnaires,
    the within-subject models, fairness over time, the seed metrics and parity, all on the
    analysis set."""
    real = real_teams.load_teams(study.data.metadata["database"]) \
        if "database" in study.data.metadata else None
    teamed = real is not None and (real.any or real.waited or study.design.real_teams)
    sections = [_flow_section(study, out), _real_teams_section(real, out)
                if teamed else _teams_section(study, out)]
    calibration = calibration_section(study.data, options.protocol, out)
    sections += [Section(**calibration)] if calibration else []
    data = study.analysed
    if data.participants.empty:
        return [*sections, Section("Participants", "No participant is in the analysis set.")]
    outcomes = sessions.session_outcomes(data)
    sections += [_participants_section(data), _performance_section(outcomes, study, out)]
    if not outcomes.empty:
        sections += [_conditions_section(outcomes, study, out),
                     _questionnaire_section(study, out),
                     _design_section(outcomes, study, out),
                     *([_clipped_section(study)]
                       if study.design.clipped_capability == "keep" else []),
                     _session_time_section(data, out, figures.robot_colours(_robots(study))),
                     *_probes_section(study, out),
                     _session_metrics_section(data, outcomes),
                     _participant_parity_section(data, outcomes, options.attributes, out)]
    return sections


def _flow_section(study: Study, out: Path) -> Section:
    table = flow.flow_table(study.stages, len(study.design.conditions) or None)
    exclusions = flow.exclusion_table(study.chosen)
    kept = study.chosen.sessions
    analysed = int(kept["kept"].sum())
    partial = int((~kept["complete"] & kept["rounds_played"].gt(0)).sum())
    unplayed = int(kept["rounds_played"].eq(0).sum())
    recovered = int(kept.loc[kept["kept"], "rounds_recovered"].sum())
    section = Section("Participant flow and the analysis set", (
        f"{len(study.stages)} participant links; {len(study.analysed.participants)} "
        f"participants in the analysis set, {analysed} collaborative sessions analysed. "
        f"{study.design.teammate_presentation()}"
        f"{study.design.rules.describe()} Not analysed: {unplayed} sessions never played and "
        f"{partial} left before their last round. {recovered} rounds of the analysed "
        f"sessions were closed on recovery after a crash (their cookies are those recorded "
        f"before it; see rounds_recovered). A link counts as opened once its consent "
        f"page was answered (the server records nothing before)."),
        [("Participant flow", table), ("Exclusions", exclusions),
         ("Collaborative sessions", kept)])
    section.figures.append(("Participant flow", figures.save(
        figures.flow_figure(table), out, "flow")))
    check = study.design.manipulation_check
    if check is not None:
        answers = flow.manipulation_answers(study.data, study.design)
        summary = answers.groupby(["answer", "passed"], dropna=False).size().rename(
            "participants").reset_index()
        section.tables.append((f"Manipulation check ({check.label})", summary))
    return section


def _real_teams_section(tables: real_teams.TeamTables, out: Path) -> Section:
    """Real teams (docs/teams.md): how they formed, who played each seat, per-member
    fairness for h humans, and person-versus-person parity inside teams; with no team
    formed, how the people who waited left the lobby and how long they waited."""
    section = _teams_formed(tables) if tables.any else Section("Real teams", (
        f"No team formed: {len(tables.lobby)} people entered the lobby. The team flow "
        "counts how each left it (a timer's timeout, leaving after the wait, or still "
        "waiting) and how long they waited."), [("Team flow", real_teams.flow(tables))])
    waits = (tables.lobby["left_at"] - tables.lobby["entered_at"]).dropna() \
        if tables.waited else pd.Series(dtype=float)
    if len(waits):
        section.figures.append(("Time in the lobby", figures.save(
            figures.lobby_figure(waits.to_numpy()), out, "lobby_wait")))
    return section


def _teams_formed(tables: real_teams.TeamTables) -> Section:
    """The teams that formed: the flow, the teams, each member per session, and every
    two people of a team against each other."""
    members = real_teams.members(tables)
    return Section("Real teams", (
        "Several people under one robot, formed in the lobby. Per member and session: the "
        "kits on their most capable and most preferred types, the fairness share b_i and "
        "O_i/I_i of MODEL.md, whose spreads (max - min over the team) are |F| and |FE| for "
        "any number of humans, and cookies (an agent seat's from its schedule). Parity: the "
        "mean absolute difference between every two people of a team who played every "
        "round themselves. The models below take the team as a cluster (a random intercept "
        "per team, participants nested in it)."),
        [("Team flow", real_teams.flow(tables)), ("Teams", real_teams.team_summary(tables)),
         ("Members per session", members),
         ("Person against person inside teams", real_teams.person_parity(members))])


def _teams_section(study: Study, out: Path) -> Section:
    """Live team types, target attainment, the teammate rule's counts and the main
    contrasts without the participants whose Eq. 6 nearest member was passed over."""
    section = Section("Teams under study")
    data, analysed = study.data, study.analysed
    if not teams.recorded(data.teammates):
        section.text = ("The database predates the record of the team under study (live "
                        "team type, participant's role, target met, the Eq. 6 nearest "
                        "member and the members passed over): nothing to show.")
        return section
    section.text = teams.summary(study.stages, data.teammates, analysed.teammates)
    types = teams.live_types(analysed.teammates)
    section.tables += [("Live team types", types),
                       ("Target attainment", teams.attainment(
                           study.stages, ties.tied_ids(data.participants)
                           if study.design.tied_ratings == "unmatched" else (),
                           flow.clipped_ids(data.practice)
                           if study.design.clipped_capability == "unmatched" else ())),
                       ("Teammate rule", teams.rule_counts(
                           data.teammates, analysed.teammates["participant_id"]))]
    section.figures.append(("Live team types", figures.save(
        figures.live_types_figure(types), out, "live_types")))
    if not sessions.collaborative(analysed.sessions).empty:
        section.tables.append(("Main contrasts with and without participants whose nearest "
                               "member was passed over", teams.sensitivity(
                                   sessions.session_outcomes(analysed), _likert_answers(study),
                                   DESIGN_OUTCOMES, analysed.teammates)))
    return section


def _participants_section(data: StudyData) -> Section:
    people = data.participants
    columns = [c for c in people.columns if c.startswith(("c_", "p_", "attr_"))]
    sites = ["site"] if "site" in people else []
    table = people.merge(data.teammates[["participant_id", "participant_human", "distance"]],
                         on="participant_id", how="left")[
        ["code", *sites, "protocol", "step", *columns, "participant_human", "distance"]]
    means = table.select_dtypes("number").mean().to_frame("mean").T
    text = (f"{len(people)} participants in the analysis set (see the flow above). "
            f"Mean teammate match distance d = {table['distance'].mean():.3f} "
            f"(closer to 0 is a better match).")
    return Section("Participants", text, [("Participants and their measured coefficients",
                                           table), ("Means", means)])


def _performance_section(outcomes: pd.DataFrame, study: Study, out: Path) -> Section:
    section = Section("Task performance and allocations per participant and condition")
    if outcomes.empty:
        section.text = "No collaborative session is in the analysis set."
        return section
    sites = ["site"] if "site" in outcomes else []
    columns = ["participant_id", *sites, "condition", "algorithm", "number", "order",
               "cookies_team", "cookies_participant", "cookies_teammate",
               "rounds_capable_participant", "rounds_preferred_participant",
               "rounds_capable_teammate", "rounds_preferred_teammate", "rounds_recovered",
               "distance"]
    rounds = study.design.rounds_label()
    section.text = ("Cookies are the counts stored per round; rounds (" + rounds + ") on the "
                    "most capable and most preferred type are counted from the kits actually "
                    "handed out. rounds_recovered counts rounds the server closed on recovery "
                    "after a crash (their cookies are those recorded before it).")
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
                                figures.allocations_figure(
                                    table, "Allocations in the study",
                                    study.design.rounds_per_session or int(
                                        outcomes["rounds_capable_participant"].max() or 8),
                                    figures.robot_colours(_robots(study))),
                                out, "allocations_study")))
    return section


def _likert_answers(study: Study) -> pd.DataFrame:
    rated = questionnaires.likert(study.analysed.answers.dropna(subset=["condition"]))
    kinds = {item.id: item.kind for item in study.design.session_items}
    if kinds:
        rated = rated[rated["item"].map(kinds).eq("likert")]
    return rated.merge(study.analysed.sessions[["session_id", "number"]].rename(
        columns={"number": "period"}), on="session_id", how="left")


def _points(study: Study) -> int:
    return max((item.points for item in study.design.session_items if item.kind == "likert"),
               default=7)


def _ordinal_models(study: Study, rated: pd.DataFrame,
                    seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ordinal model of every Likert item, fitted once per report."""
    if "ordinal" not in study.fitted:
        study.fitted["ordinal"] = _fit_ordinal_models(study, rated, seed)
    return study.fitted["ordinal"]  # type: ignore[return-value]


def _fit_ordinal_models(study: Study, rated: pd.DataFrame,
                        seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    effects, predicted = [], []
    for (item, label), part in rated.groupby(["item", "label"], sort=False):
        fitted, means = models.ordinal_model(part, label=str(label), points=_points(study),
                                             seed=seed)
        effects.append(fitted.assign(item=item))
        predicted.append(means)
    return (pd.concat(effects, ignore_index=True) if effects else pd.DataFrame(),
            pd.concat(predicted, ignore_index=True) if predicted else pd.DataFrame())


def _conditions_section(outcomes: pd.DataFrame, study: Study, out: Path) -> Section:
    data = study.analysed
    summary = sessions.condition_summary(outcomes, data.answers)
    section = Section("Conditions: the goal state and the ratings", (
        "Per condition, the final allocation's efficiency E, fairness F and fair-equity FE "
        "(signed: positive favours the participant), the policy's reward, and the "
        "predicted fairness rating (1 + 6 x fair reward) beside the participants' mean "
        "ratings, as in the paper's Figures 3 and 5. The figure shows each item's mean "
        "rating per condition from the ordinal model with its 95% interval (within the "
        "scale), the observed means, and the predicted rating with its range."),
        [("Per condition", summary)])
    rated = _likert_answers(study)
    effects, predicted = _ordinal_models(study, rated, 0)
    if not rated.empty:
        observed = rated.groupby(["label", "condition"], sort=False)["value"].mean().rename(
            "mean").reset_index().rename(columns={"label": "outcome"})
        fair = outcomes.groupby("condition")["predicted_rating_fair"]
        model_row = pd.DataFrame({"outcome": "Predicted (1 + 6 (1 - |F|))",
                                  "condition": fair.mean().index,
                                  "predicted_mean": fair.mean().to_numpy(),
                                  "ci_low": fair.min().to_numpy(),
                                  "ci_high": fair.max().to_numpy()})
        section.warnings = _warnings(effects)
        section.figures.append(("Perceived and predicted fairness", figures.save(
            figures.intervals_figure(pd.concat([predicted, model_row], ignore_index=True),
                                     observed, _points(study),
                                     figures.robot_colours(_robots(study)),
                                     _unfitted(effects), _caveat(section.warnings)),
            out, "ratings")))
    return section


def _warnings(table: pd.DataFrame) -> list[str]:
    """A table's notices of too few participants for a test, once each."""
    return sorted({w for w in table.get("warning", pd.Series(dtype=object)).dropna() if w})


def _caveat(warnings: list[str]) -> str:
    """The ratings figure's line under its title when a model had too few participants
    for a test, so the figure says so wherever it is shown."""
    return (f"Fewer than {models.MIN_PARTICIPANTS} participants: too few for a test, the "
            "model means are descriptive." if warnings else "")


def _unfitted(effects: pd.DataFrame) -> dict[str, str]:
    """The items whose ordinal model was not fitted, with why (its note)."""
    if effects.empty:
        return {}
    failed = effects[effects["estimate"].isna()]
    return {str(row.outcome): str(row.note).removeprefix("not fitted: ")
            for row in failed.itertuples()}


def _questionnaire_section(study: Study, out: Path) -> Section:
    answers = study.analysed.answers
    described = questionnaires.describe(answers.dropna(subset=["condition"]))
    compared = _paired_comparisons(study)
    likert = _likert_answers(study)
    effects, _ = _ordinal_models(study, likert, 0)
    section = Section("Questionnaires", (
        "Each Likert item by condition; each item compared within participants with the "
        "Wilcoxon signed-rank test and the matched-pairs rank-biserial correlation "
        "(positive: condition a rated higher); and a proportional-odds (cumulative logit) "
        "model per item with condition and period as fixed effects and standard errors "
        "clustered by participant (odds ratio > 1: higher ratings than the reference)."),
        [("Likert items by condition", described),
         ("Within-participant comparisons", compared),
         ("Ordinal models per item", effects)])
    section.warnings = sorted({*_warnings(compared), *_warnings(effects)})
    if not likert.empty:
        counts = likert.groupby(["label", "condition", "value"], sort=False).size().rename(
            "n").reset_index()
        counts["value"] = counts["value"].astype(int)
        labels = list(dict.fromkeys(likert["label"]))  # the questionnaire's order
        counts = counts.sort_values(["label", "condition"], kind="stable", key=lambda column: (
            column.map(labels.index) if column.name == "label" else column.astype(str)))
        section.figures.append(("Answer distributions (diverging stacked bars)", figures.save(
            figures.likert_figure(counts, _points(study)), out, "likert")))
    post = questionnaires.describe(answers[answers["questionnaire"] == "post"].assign(
        condition="post"))
    if not post.empty:
        section.tables.append(("Post-study numeric items", post))
    robot_items = [item.id for item in study.design.post_items
                   if item.kind in ROBOT_ITEM_KINDS]
    choices = answers[(answers["questionnaire"] == "post") & answers["value_text"].notna()
                      & ~answers["item"].isin(robot_items)]
    if not choices.empty:
        section.tables.append(("Post-study choices", choices.groupby(
            ["label", "value_text"]).size().rename("participants").reset_index()))
    _robot_items_part(section, study, out)
    return section


def _paired_comparisons(study: Study) -> pd.DataFrame:
    """Each Likert item compared within participants across every pair of conditions."""
    return questionnaires.paired_comparisons(study.analysed.answers.dropna(
        subset=["condition"]))


def _robot_comparisons(study: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The post-study items about every robot: the ranks given, and every two robots
    against each other (from the ranks and from the pairwise items) with sign tests
    Holm-adjusted over each item's pairs; both empty when the protocol asks neither."""
    kinds = {item.id: item.kind for item in study.design.post_items}
    answers = study.analysed.answers
    ranked = questionnaires.rankings(answers, [i for i, k in kinds.items() if k == "rank"])
    chosen = questionnaires.pairwise_choices(answers, [i for i, k in kinds.items()
                                                       if k == "pairwise"])
    if ranked.empty and chosen.empty:
        return ranked, pd.DataFrame()
    return ranked, questionnaires.pair_tests(pd.concat(
        [questionnaires.ranked_pairs(ranked), chosen], ignore_index=True))


def _robot_items_part(section: Section, study: Study, out: Path) -> None:
    """Where each robot was ranked and every two robots against each other, with, for a
    rank of three or more, Friedman's test."""
    ranked, pairs = _robot_comparisons(study)
    if ranked.empty and pairs.empty:
        return
    section.text += (" The robots ranked and compared after the last session: per pair of "
                     "robots how many participants put one above the other, a sign test "
                     "on those who did not tie, Holm-adjusted over the item's pairs.")
    if not ranked.empty:
        section.tables += [("Robots ranked", questionnaires.rank_summary(ranked)),
                           ("Ranks: Friedman's test", questionnaires.friedman(ranked))]
        section.figures.append(("Robots ranked", figures.save(
            figures.ranks_figure(ranked), out, "ranks")))
    section.tables.append(("Robots against each other (sign tests, Holm-adjusted)", pairs))
    section.figures.append(("Robots against each other", figures.save(
        figures.pairs_figure(pairs), out, "robot_pairs")))
    section.warnings += sorted({w for w in pairs["warning"] if w} - set(section.warnings))


DESIGN_OUTCOMES = (("cookies_team", "team cookies"), ("cookies_participant",
                                                       "participant cookies"),
                   ("E", "efficiency E"), ("F", "fairness F (signed)"),
                   ("FE", "fair-equity FE (signed)"),
                   ("rounds_capable_participant", "rounds on most capable type"),
                   ("rounds_preferred_participant", "rounds on most preferred type"))


def _design_section(outcomes: pd.DataFrame, study: Study, out: Path) -> Section:
    names = [name for name, _ in DESIGN_OUTCOMES]
    by_order = models.condition_by_order(outcomes, names)
    carry = pd.DataFrame([models.carryover_test(outcomes, name) for name in names])
    mixed = _mixed_models(outcomes)
    conditions = sorted(outcomes["condition"].unique(), key=str)
    several = len(conditions) > 2
    section = Section("The within-subject design: order, carry-over and mixed models", (
        "Outcome means by order of conditions and condition (the crossover's cells); "
        + ("a first-order carry-over test (a mixed model with the condition of the "
           "session before as a factor, Wald test of its terms); " if several else
           "Grizzle's carry-over test (the two-period totals compared between orders, "
           "Welch's t); ")
        + "and a linear mixed model per outcome with condition and period (and site, "
        "when pooled) as fixed effects and a random intercept per participant: "
        + (f"the condition a factor of {len(conditions)} levels, every pair of conditions "
           "compared by a contrast with its 95% interval, its p value Holm-adjusted over "
           "the outcome's pairs (p_holm), and as d, the difference over the total "
           "standard deviation; the note gives the Wald test of the whole factor."
           if several else "the condition difference with its 95% interval and as d, "
           "the difference over the total standard deviation.")),
        [("Outcomes by order and condition", by_order), ("Carry-over", carry),
         ("Mixed models", mixed)])
    if several:
        section.figures.append(("Every pair of conditions", figures.save(
            figures.contrasts_figure(mixed), out, "contrasts")))
    rated = _likert_answers(study)
    _tied_section_part(section, study, outcomes, rated, names)
    wide = rated.pivot_table(index="session_id", columns="item", values="value")
    wide.columns = [f"rating_{item}" for item in wide.columns]
    paired = outcomes.merge(wide, left_on="session_id", right_index=True, how="left")
    labels = rated.drop_duplicates("item").set_index("item")["label"]
    shown = [*DESIGN_OUTCOMES[:1], *DESIGN_OUTCOMES[3:4],
             *[(f"rating_{item}", str(label)) for item, label in labels.items()][:2]]
    section.figures.append(("Each participant in every condition", figures.save(
        figures.slope_figure(paired, shown, conditions, _points(study)), out, "paired")))
    return section


def _mixed_models(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The linear mixed model of every design outcome: the condition effects."""
    return pd.concat([models.mixed_model(outcomes, name) for name, _ in DESIGN_OUTCOMES],
                     ignore_index=True)


def _confirmatory_tables(study: Study) -> list[tuple[str, pd.DataFrame]]:
    """The report's tests of the conditions and the robots on the study's analysis set, as
    its sections give them: the mixed model of each outcome, the ordinal model and the
    within-participant comparisons of each Likert item, and the robots' ranks and pairs."""
    tables = [("Mixed models", _mixed_models(sessions.session_outcomes(study.analysed))),
              ("Ordinal models per item", _ordinal_models(study, _likert_answers(study), 0)[0]),
              ("Within-participant comparisons", _paired_comparisons(study))]
    ranked, pairs = _robot_comparisons(study)
    if not ranked.empty:
        tables.append(("Ranks: Friedman's test", questionnaires.friedman(ranked)))
    if not pairs.empty:
        tables.append(("Robots against each other (sign tests, Holm-adjusted)", pairs))
    return tables


def _without_clipped(study: Study) -> Study:
    """The study on its analysis set without the participants with a clipped capability:
    the declared rules and ``clipped-capability`` after them, applied by the same code."""
    chosen_design = design_module.without_clipped(study.design)
    chosen = flow.analysis_set(study.data, chosen_design)
    return Study(study.data, flow.restrict(study.data, chosen), chosen_design, study.stages,
                 chosen)


def _clipped_section(study: Study) -> Section:
    """Under ``clipped_capability = "keep"`` a clipped value, not a measurement of the
    person, stayed in their team, their robots' plans and the analysis set, so every
    confirmatory result is given again without those participants (MODEL.md, "Measuring
    a participant"); one line when no analysed participant clipped."""
    clipped = flow.clipped_ids(study.analysed.practice)
    if not clipped:
        return Section("Without the participants with a clipped capability", (
            "No analysed participant has a capability clipped at 0.01 or 0.99 "
            "(clipped_capability = keep): the results above are also those without them."))
    without = _without_clipped(study)
    label = f"without the {len(clipped)} participants with a clipped capability"
    section = Section(label[0].upper() + label[1:], (
        f"{len(clipped)} of the {len(study.analysed.participants)} analysed participants "
        "had a capability clipped at 0.01 or 0.99, a speed the reference speed could not "
        "measure. The protocol keeps the clipped value (clipped_capability = keep): it "
        "formed their team and the robots' plans, it is flagged (measurements.clipped), and "
        "they are in the analysis set of every section above. Here every confirmatory "
        "result (the mixed models, the ordinal models and the within-participant "
        "comparisons of the Likert items, and the robots' ranks and pairs when asked) is "
        f"given again over the {len(without.analysed.participants)} analysed participants "
        "without them, by the same code; compare each table with its namesake above."))
    if sessions.collaborative(without.analysed.sessions).empty:
        section.text += " No collaborative session remains without them."
        return section
    section.tables = [(f"{caption} {label}", frame)
                      for caption, frame in _confirmatory_tables(without)]
    section.warnings = sorted({w for _, frame in section.tables for w in _warnings(frame)})
    return section


def _tied_section_part(section: Section, study: Study, outcomes: pd.DataFrame,
                       rated: pd.DataFrame, names: list[str]) -> None:
    """The condition effects with and without the participants who rated both themes
    equally: their correlation, and so their role, came from a rule, not from them."""
    tied = ties.tied_ids(study.analysed.participants) & set(outcomes["participant_id"])
    rule = study.design.tied_ratings
    if not tied:
        section.text += (" No analysed participant rated both themes equally (the "
                         f"protocol's tied_ratings: {rule}).")
        return
    section.text += (f" {len(tied)} analysed participants rated both themes equally: which "
                     f"type they prefer, and so their role, came from the protocol's rule "
                     f"(tied_ratings: {rule}), not from them; the last table gives each "
                     f"condition effect with and without them.")
    section.tables.append((f"Condition effects with and without the {len(tied)} "
                           f"participants with tied ratings", ties.with_and_without(
                               outcomes, rated, names, tied, _points(study))))


def _session_time_section(data: StudyData, out: Path, colours: dict[str, str]) -> Section:
    summary, per_round = sessions.session_fairness_over_time(data)
    by_condition = summary.drop(columns=["participant_id", "session_id"]).groupby(
        ["condition", "algorithm", "round_order"]).mean().reset_index()
    per_round["unit"] = per_round["session_id"]
    section = Section("Fairness over time in the sessions", (
        "Running F and FE after each round (participant as human 0). Long-term: the last "
        "round; anytime: the worst round; average: mean over rounds; periodic: every "
        f"{fairness_time.DEFAULT_PERIOD}th round. Cumulative advantage sums the signed F "
        "over rounds (positive favours the participant; twice Alamdari et al.'s overall "
        "unfairness); lead changes count how often the favoured human changed."),
        [("Mean per condition", by_condition), ("Per session", summary)])
    section.figures.append(("Running |F| per condition", figures.save(
        figures.running_fairness_figure(per_round, ["condition"], "F",
                                        "Running unfairness |F| in the sessions", colours),
        out, "sessions_running_F")))
    section.figures.append(("Running |FE| per condition", figures.save(
        figures.running_fairness_figure(per_round, ["condition"], "FE",
                                        "Running fair-equity |FE| in the sessions", colours),
        out, "sessions_running_FE")))
    return section


def _probes_section(study: Study, out: Path) -> list[Section]:
    """The round probes beside the fairness of the rounds before them; none when the study
    asked no probe (a database without the table included)."""
    part = probes.section(study.analysed, _likert_answers(study), out,
                          figures.robot_colours(_robots(study)))
    return [Section(**part)] if part else []


def _session_metrics_section(data: StudyData, outcomes: pd.DataFrame) -> Section:
    per_session = session_metrics(data)
    measures = [c for c in per_session.columns if c not in (
        "participant_id", "session_id", "condition", "window")]
    by_condition = per_session.groupby("condition")[measures].mean().reset_index()
    people = sessions.role_rates(data)
    distances = []
    for condition, part in people.groupby("condition"):
        for rate in ("P_rate", "C_rate", "Cap"):
            distances.append({"condition": condition, "outcome": rate,
                              **metrics.distribution_distances(
                                  part.loc[part["role"] == "participant", rate],
                                  part.loc[part["role"] == "teammate", rate])})
    return Section("Seed metrics in the sessions", (
        f"Windowed fairness over the last {metrics.DEFAULT_WINDOW} rounds (mean and worst "
        "|F| and opportunity gap over the session), welfare of the two humans' preference "
        "outcomes P and contributions C (utilitarian, Rawlsian min, log-Nash), and the "
        "counterfactuals from re-solving each session's policy: seat swap (zero for a policy "
        "that ignores seats) and preference flip (what the participant's preferences cost "
        "them in contribution). Distances between the participants' and the teammates' "
        "outcome distributions: Jensen-Shannon (bits, 20 bins) and Wasserstein; with few "
        "sessions these are descriptive."),
        [("Seed metrics per condition", by_condition),
         ("Seed metrics per session", per_session),
         ("Participant against teammate distributions", pd.DataFrame(distances))])


def session_metrics(data: StudyData) -> pd.DataFrame:
    """One row per analysed session: windowed fairness, welfare and counterfactuals."""
    frame = sessions.collaborative(data.sessions)
    c, p = sessions.team_arrays(frame)
    kits = sessions.trajectories(frame, data.allocations, c.shape[-1], c.shape[1])
    keys = frame[["participant_id", "session_id", "condition"]].reset_index(drop=True)
    parts = [keys, metrics.windowed_summary(c, p, kits), metrics.welfare_frame(c, p, kits[:, -1])]
    counterfactual = []
    for k, row in frame.reset_index(drop=True).iterrows():
        algorithm = sessions.session_algorithm(row)
        goal_kits = tuple(int(x) for x in kits[k, -1].sum(axis=0))
        counterfactual.append(metrics.counterfactuals(c[k:k + 1], p[k:k + 1], algorithm,
                                                      goal_kits))
    parts.append(pd.concat(counterfactual, ignore_index=True))
    return pd.concat(parts, axis=1)


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


def pool_sections(pool: pd.DataFrame, record: dict, out: Path, options: ReportOptions,
                  study: Study | None = None) -> list[Section]:
    """Table 3, gaps, the allocation figure, round orders, the trade-off, parity, the seed
    metrics and, with the study's protocol, the plan for the next study."""
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
    colours = figures.robot_colours([*_robots(study), *spec.algorithms])
    sections.append(_allocation_section(pool, spec, out, colours))
    sections.append(_order_section(pool, algorithms, spec, out, options, colours))
    sections.append(_tradeoff_section(pool, types, spec, out, options))
    sections.append(_pool_parity_section(pool, types, spec, out, options))
    sections.append(_pool_metrics_section(pool, types, spec, options))
    protocol = _study_protocol(study, options)
    if protocol is not None:
        sections.append(_plan_section(pool, protocol, spec, study, out, options))
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


def _allocation_section(pool: pd.DataFrame, spec: PoolSpec, out: Path,
                        colours: dict[str, str]) -> Section:
    table = simulation.allocation_summary(pool, spec.algorithms)
    rounds = sum(spec.kits) // spec.humans
    return Section("Simulation Study #2: allocations", (
        f"Mean rounds (of {rounds}) each human spends on their most capable and on their "
        "most preferred task type, per algorithm and team type (the paper's Figure 4)."),
        [("Allocations", table)],
        [("Allocations per team type", figures.save(
            figures.allocations_figure(table, "Allocations in simulation", rounds,
                                       colours), out,
            "allocations_pool"))])


def _order_section(pool: pd.DataFrame, algorithms: list[Algorithm], spec: PoolSpec,
                   out: Path, options: ReportOptions, colours: dict[str, str]) -> Section:
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
                                            "Running unfairness |F| in simulation", colours),
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


def _pool_metrics_section(pool: pd.DataFrame, types: pd.Series, spec: PoolSpec,
                          options: ReportOptions) -> Section:
    rng = np.random.default_rng(options.seed)
    rows = np.sort(rng.permutation(len(pool))[:options.metrics_sample])
    part = pool.iloc[rows]
    c, p = simulation.coefficients(part)
    top = part["most_capable_human"].to_numpy(dtype=int)
    order = np.stack([top, 1 - top], axis=1)[:, :, None]
    c, p = np.take_along_axis(c, order, axis=1), np.take_along_axis(p, order, axis=1)
    names = types.to_numpy()[rows]
    tables, distances = [], []
    for name in spec.algorithms:
        algorithm = spec.algorithm(name)
        kits = fairness_time.policy_trajectories(c, p, algorithm, spec.kits)
        frame = pd.concat([metrics.windowed_summary(c, p, kits),
                           metrics.welfare_frame(c, p, kits[:, -1]),
                           metrics.counterfactuals(c, p, algorithm, spec.kits)], axis=1)
        frame = frame.assign(algorithm=name, team_type=names)
        tables.append(frame.drop(columns="window").groupby(["algorithm", "team_type"])
                      .mean().reset_index())
        rates = metrics.outcomes(c, p, kits[:, -1])
        for team_type in sorted(set(names)):
            chosen = names == team_type
            for rate in ("P_rate", "C_rate", "Cap"):
                distances.append({"algorithm": name, "team_type": team_type, "outcome": rate,
                                  **metrics.distribution_distances(rates[rate][chosen, 0],
                                                                   rates[rate][chosen, 1])})
    return Section("Seed metrics in simulation", (
        f"On {len(rows):,} pool teams, human 0 the most capable: windowed fairness over the "
        f"last {metrics.DEFAULT_WINDOW} rounds of the default-order plan, welfare of the "
        "preference outcomes P and contributions C, the seat-swap and preference-flip "
        "counterfactuals, and the Jensen-Shannon divergence (bits) and Wasserstein distance "
        "between the most capable and the other human's outcome distributions."),
        [("Per algorithm and team type", pd.concat(tables, ignore_index=True)),
         ("Most capable against other human", pd.DataFrame(distances))])


def _study_protocol(study: Study | None, options: ReportOptions) -> object | None:
    """The study's protocol as the study package loads it, for the plan (None without)."""
    from study.protocol.loader import load_protocol

    if options.protocol is not None:
        return load_protocol(options.protocol)
    if study is None or len(study.data.protocol_texts) != 1:
        return None
    return design_module.loaded_protocol(next(iter(study.data.protocol_texts.values())))


def _plan_section(pool: pd.DataFrame, protocol: object, spec: PoolSpec, study: Study | None,
                  out: Path, options: ReportOptions) -> Section:
    sd = _likert_sd(study)
    plan_options = plan.PlanOptions(simulations=options.plan_simulations, seed=options.seed,
                                    likert_sd=sd or plan.PlanOptions.likert_sd)
    curves, needed = plan.plan(pool, protocol, spec.fea, plan_options)
    several = len(protocol.conditions) > 2  # type: ignore[attr-defined]
    return Section("Planning the next study", (
        "Participants (each in every condition) needed to detect the difference in team "
        "cookies " + ("every two conditions' policies give" if several else
                      "the two conditions' policies give")
        + " on this pool, its teams' participants "
        "given the capabilities of people of the human decorating-speed model, with the "
        "decorator model (paired t test), and a one-point difference in a Likert item "
        "(Wilcoxon test), at "
        f"80% power and alpha 0.05, from {options.plan_simulations} simulated studies per "
        "size. " + ("Every pair is tested in each simulated study and the pairs' p values "
                    "are Holm-adjusted, as the report adjusts them; the Likert item differs "
                    "in the second condition only. " if several else "")
        + (f"The Likert spread ({sd:.2f}) is the analysed ratings' mean "
           "within-condition sd." if sd else "The Likert spread is the default.")
        + " Dashed: the closed-form power of the paired t test for normal differences with "
        "the simulated mean and sd" + (" at alpha over the number of pairs (Bonferroni's "
                                       "level, a floor under Holm's)" if several else "")
        + ". Run `analysis plan` for other differences."),
        [("Participants needed", needed), ("Power curves", curves)],
        [("Power against participants", figures.save(
            figures.power_figure(curves, plan_options.power), out, "plan"))])


def _likert_sd(study: Study | None) -> float | None:
    if study is None:
        return None
    rated = _likert_answers(study)
    spread = rated.groupby(["item", "condition"])["value"].std().dropna()
    return float(spread.mean()) if len(spread) and spread.mean() > 0 else None


# --- rendering --------------------------------------------------------------------------------


def _table_html(frame: pd.DataFrame) -> str:
    """The table, its column names breakable after each '_' and its width classed (a
    printed page narrows the columns to fit instead of cutting the table off)."""
    width = [name for name, columns in WIDE_TABLES if len(frame.columns) > columns]
    table = frame.to_html(index=False, na_rep="", float_format=FLOAT_FORMAT, border=0,
                          classes=["table", *width])
    head, _, body = table.partition("</thead>")
    return head.replace("_", "_<wbr>") + "</thead>" + body if body else table


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
  text-align: right; white-space: nowrap; }
.scroll { overflow: auto; max-width: 100%; max-height: 420px; border-right: 1px solid #eee; }
.warning { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; }
figure { margin: 1em 0; } img { max-width: 100%; }
figcaption { font-size: 0.85em; color: #555; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
@media print {
  @page { size: A4 landscape; margin: 10mm; }
  body { max-width: none; margin: 0; padding: 0; }
  .scroll { overflow: visible; max-height: none; border: 0; }
  table.table { font-size: 6.5pt; }
  table.table th, table.table td { padding: 1px 3px; white-space: normal;
    overflow-wrap: break-word; }
  table.wide th { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left;
    white-space: nowrap; }
  table.wider { font-size: 5pt; } table.wider th, table.wider td { padding: 1px 2px; }
  tr, figure { break-inside: avoid; } h2, h3 { break-after: avoid; }
}
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
            parts.append(f"<h3>{html.escape(caption)}</h3><div class='scroll' tabindex='0' "
                         f"role='region' aria-label='{html.escape(caption)}'>"
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


def write_report(data: StudyData | Sequence[StudyData], out: Path,
                 pool: pd.DataFrame | None = None, pool_record: dict | None = None,
                 options: ReportOptions = ReportOptions()) -> Path:
    """Write ``report.html``, ``figures/`` (PNG + SVG) and ``tables/`` (CSV) under ``out``
    from one study database or several of the same protocol (pooled, site as a factor)."""
    figure_dir = out / "figures"
    study = prepare([data] if isinstance(data, StudyData) else list(data), options)
    sections = participant_sections(study, figure_dir, options)
    metadata = dict(study.data.metadata)
    metadata["analysis_rules"] = study.design.rules.__dict__
    metadata["design_source"] = study.design.source
    metadata["agent_teammate"] = study.design.agent_teammate
    if pool is not None and pool_record is not None:
        sections += pool_sections(pool, pool_record, figure_dir, options, study)
        metadata["report_pool"] = pool_record
    write_tables(sections, out / "tables")
    path = out / "report.html"
    protocols = ", ".join(study.data.metadata.get("protocols", [])) or "no participants"
    path.write_text(render(f"Study report: {protocols}", sections, metadata),
                    encoding="utf-8")
    return path
