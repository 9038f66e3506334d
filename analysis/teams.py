"""Teams under study: the live team each participant was placed in, whether it was the
target team, how the teammate rule chose, and whether the main contrasts hold without the
participants whose Eq. 6 nearest member was passed over.

A study of, say, Mixed teams with the participant as the most capable human speaks only
for participants whose *live* team (their measured coefficients with the teammate's) is
such a team (MODEL.md, "Forming the team under study"). The server records the placement
of every participant in ``teammates`` (rule, nearest member and its d, members passed over
and why, live type, role, target met); a database written before that record has none of
it, and ``recorded`` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from analysis.flow import TARGETS
from study.protocol.pool_names import TEAM_TYPES

ROLES = ("most-capable", "other")
PLACEMENT = ("rule", "nearest_distance", "passed_over", "passed_same_plan",
             "passed_off_target", "live_type", "participant_role", "target_met")
UNMATCHED = "unmatched: no member formed the target team"
UNMATCHED_TIED = "unmatched: tied ratings (tied_ratings = unmatched)"
UNMATCHED_CLIPPED = "unmatched: clipped capability (clipped_capability = unmatched)"
SENSITIVITY_COLUMNS = ["outcome", "contrast", "participants_all", "difference_all",
                       "participants_without_passed_over", "difference_without_passed_over",
                       "change"]


def placed(teammates: pd.DataFrame) -> pd.DataFrame:
    """The teammate rows whose placement was recorded (none before the record)."""
    if not set(PLACEMENT) <= set(teammates.columns):
        return pd.DataFrame(columns=["participant_id", "distance", *PLACEMENT])
    return teammates[teammates["live_type"].notna()]


def recorded(teammates: pd.DataFrame) -> bool:
    """Whether the database records where its participants were placed."""
    return not placed(teammates).empty


def live_types(teammates: pd.DataFrame) -> pd.DataFrame:
    """Participants per live team type and participant role (every combination, zeros
    included, so an absent type shows): count, share, and how many met the target."""
    rows = placed(teammates)
    types = [*TEAM_TYPES, *sorted(set(rows["live_type"]) - set(TEAM_TYPES))]
    grid = pd.MultiIndex.from_product([types, ROLES], names=["live_type", "participant_role"])
    grouped = rows.groupby(["live_type", "participant_role"])
    table = pd.DataFrame({"participants": grouped.size(),
                          "target_met": grouped["target_met"].sum()}).reindex(grid, fill_value=0)
    table = table.astype(int)
    table["share"] = table["participants"] / len(rows) if len(rows) else float("nan")
    return table.reset_index()[["live_type", "participant_role", "participants", "share",
                                "target_met"]]


def attainment(stages: pd.DataFrame, tied: Iterable[int] = (),
               clipped: Iterable[int] = ()) -> pd.DataFrame:
    """Every participant link that reached team formation, by where it put them: in the
    target team, off target (the protocol let them continue), or the unmatched page, the
    ``clipped`` participants (a capability at a clip bound) and then the ``tied`` ones
    (equal ratings) apart when they met it, in the order the server checks them."""
    target = stages["target"] if "target" in stages else pd.Series(dtype=object)
    counts = {name: int(target.eq(name).sum()) for name in TARGETS.values()}
    unmatched = stages["outcome"].eq("unmatched")
    for_clip = unmatched & stages["participant_id"].isin(set(clipped))
    for_tie = unmatched & ~for_clip & stages["participant_id"].isin(set(tied))
    counts[UNMATCHED] = int((unmatched & ~for_clip & ~for_tie).sum())
    if for_clip.any():
        counts[UNMATCHED_CLIPPED] = int(for_clip.sum())
    if for_tie.any():
        counts[UNMATCHED_TIED] = int(for_tie.sum())
    table = pd.DataFrame({"placement": list(counts), "participants": list(counts.values())})
    total = table["participants"].sum()
    table["share"] = table["participants"] / total if total else float("nan")
    return table


def _rule_row(group: str, rule: str, members: pd.DataFrame) -> dict[str, object]:
    passed = members["passed_over"].fillna(0)
    return {"participants": group, "rule": rule, "n": len(members),
            "given_nearest": int(passed.eq(0).sum()),
            "with_members_passed_over": int(passed.gt(0).sum()),
            "passed_for_same_plan": int(members["passed_same_plan"].gt(0).sum()),
            "passed_off_target": int(members["passed_off_target"].gt(0).sum()),
            "members_passed_over": int(passed.sum()),
            "mean_d_chosen": float(members["distance"].mean()),
            "mean_d_nearest": float(members["nearest_distance"].mean())}


def rule_counts(teammates: pd.DataFrame, analysed: Iterable[int]) -> pd.DataFrame:
    """Per teammate rule, for every placed participant and for the analysis set: who got
    the Eq. 6 nearest member, who had nearer members passed over and why (both robots one
    plan, live team off target; a participant can have both), and the mean d of the chosen
    and of the nearest member (the paper reports mean d as the quality of the match)."""
    rows = placed(teammates)
    groups = (("placed", rows), ("analysed", rows[rows["participant_id"].isin(set(analysed))]))
    return pd.DataFrame([_rule_row(group, str(rule), members) for group, part in groups
                         for rule, members in part.groupby("rule", sort=True)])


def _differences(wide: pd.DataFrame, condition: str, reference: str) -> pd.Series:
    pairs = wide[[condition, reference]].dropna()
    return pairs[condition] - pairs[reference]


def _contrast_rows(outcome: str, wide: pd.DataFrame, dropped: set[int]) -> list[dict]:
    """Each condition against the first by name (as the mixed models take it): the mean
    within-participant difference with everyone and without ``dropped``."""
    conditions = sorted(wide.columns, key=str)
    kept = wide[~wide.index.isin(dropped)]
    rows = []
    for condition in conditions[1:]:
        every = _differences(wide, condition, conditions[0])
        without = _differences(kept, condition, conditions[0])
        rows.append({"outcome": outcome, "contrast": f"{condition} - {conditions[0]}",
                     "participants_all": len(every), "difference_all": every.mean(),
                     "participants_without_passed_over": len(without),
                     "difference_without_passed_over": without.mean(),
                     "change": without.mean() - every.mean()})
    return rows


def passed_over_ids(teammates: pd.DataFrame) -> set[int]:
    """Participants whose Eq. 6 nearest member the teammate rule passed over."""
    rows = placed(teammates)
    return set(rows.loc[rows["passed_over"].gt(0), "participant_id"])


def sensitivity(outcomes: pd.DataFrame, ratings: pd.DataFrame,
                measures: Sequence[tuple[str, str]], teammates: pd.DataFrame) -> pd.DataFrame:
    """The main condition contrasts, each outcome's and each Likert item's mean
    within-participant difference, with every analysed participant and without those
    whose nearest member was passed over, side by side: a contrast that moves shows how
    much the result rests on the departure from Eq. 6."""
    dropped = passed_over_ids(teammates)
    wides = [(label, outcomes.pivot_table(index="participant_id", columns="condition",
                                          values=name, aggfunc="mean"))
             for name, label in measures if name in outcomes]
    wides += [(f"rating: {label}", part.pivot_table(index="participant_id",
                                                    columns="condition", values="value",
                                                    aggfunc="mean"))
              for (_, label), part in ratings.groupby(["item", "label"], sort=False)]
    rows = [row for label, wide in wides for row in _contrast_rows(label, wide, dropped)]
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)


def summary(stages: pd.DataFrame, teammates: pd.DataFrame, analysed: pd.DataFrame) -> str:
    """The section's opening sentences: attainment, the rule's departures from Eq. 6, and
    what the sensitivity table compares."""
    rows = placed(teammates)
    counts = attainment(stages).set_index("placement")["participants"]
    in_target, off_target = (counts[name] for name in TARGETS.values())
    rules = ", ".join(sorted(rows["rule"].astype(str).unique()))
    return (
        f"The teammate rule ({rules}) placed {in_target} participants in the target team "
        f"and {off_target} off target; {counts[UNMATCHED]} met the unmatched page because "
        f"no member formed the target team (see the flow). Live team: the participant's "
        f"measured coefficients with the teammate's, typed as in MODEL.md; the table and "
        f"figure show the {len(placed(analysed))} analysed participants. "
        f"{int(rows['passed_over'].eq(0).sum())} of {len(rows)} placed participants got the "
        f"member Eq. 6 alone would choose; mean d {rows['distance'].mean():.3f} for the "
        f"chosen member against {rows['nearest_distance'].mean():.3f} for the nearest. The "
        f"sensitivity table gives each main contrast (the mean within-participant "
        f"difference, each condition minus the first by name) with every analysed "
        f"participant and without the {len(passed_over_ids(analysed))} whose nearest member "
        f"was passed over.")
