"""The participant flow (CONSORT style) and the analysis set every table and figure uses.

The flow follows every participant link from its creation to the end of the study and
says, at each stage, how many went on and how many were lost and why (declined,
withdrawn, aborted by the experimenter, no teammate found, dropped from a real team's seat
for being away or late, or left). A real team's lobby comes after practice, so waiting
there proves the practice was done. The server records
nothing until the consent page is answered, so a link that was opened but never answered
counts as not opened. Withdrawal erases the step log but keeps the furthest step it
showed (``participants.withdrawn_from``), so a withdrawn participant is placed at the stage
where they withdrew; a database from before that record places them at consented, the last
stage a withdrawal proves.

The analysis set then applies the protocol's declared exclusion rules (``design``) to the
participants whose data remain, and keeps only sessions played to their last round: a
session that was never played, or left half way, is never a zero.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import load
from analysis.design import AnalysisRules, Design, manipulation_passed
from analysis.load import StudyData
from study.allocation.terms import EXCLUSION_TEXT
from study.task.decorator import HIGHEST, LOWEST

# A study has one collaborative session per condition, two to four (docs/protocol.md).
SESSIONS = 2  # when nothing says how many
BEFORE_SESSIONS = ("consent", "themes", "preferences", "practice", "lobby", "teammate")
AFTER_SESSIONS = ("post", "debrief", "done")
LOSSES = ("not opened", "declined", "withdrawn", "aborted", "unmatched", "dropped", "left")
# Where the teammate rule placed a participant (``teammates.target_met``); an unmatched
# participant met the unmatched page because no member formed the target team.
TARGETS = {1: "placed in target team", 0: "placed off target"}


def step_order(sessions: int = SESSIONS) -> tuple[str, ...]:
    """The journey's steps in order, for a study of ``sessions`` sessions."""
    middle = (f"{part}-{number}" for number in range(1, sessions + 1)
              for part in ("intro", "session", "questionnaire"))
    return (*BEFORE_SESSIONS, *middle, *AFTER_SESSIONS)


def stages_of(sessions: int = SESSIONS) -> tuple[str, ...]:
    """The flow's stages: links created to done, with one stage per session."""
    return ("links created", "opened", "consented", "practised",
            *(f"session {number}" for number in range(1, sessions + 1)), "done")


def stage_steps(sessions: int = SESSIONS) -> dict[str, str]:
    """The first step that proves each stage was reached (opened and consented are read
    from the consent fields)."""
    return {"practised": "lobby", **{f"session {n}": f"session-{n}"
                                     for n in range(1, sessions + 1)}, "done": "done"}


def session_count(connection: sqlite3.Connection) -> int:
    """How many sessions a database's study has: its protocol's conditions as the
    collaborative sessions show them (at least two)."""
    row = connection.execute("SELECT max(number) FROM sessions").fetchone()
    return max(SESSIONS, int(row[0] or 0))


def sessions_in(stages: pd.DataFrame) -> int:
    """The sessions of a flow's stages: the last session stage reached (at least two)."""
    numbers = [int(stage.split()[1]) for stage in stages["stage"].unique()
               if str(stage).startswith("session ")]
    return max([SESSIONS, *numbers])


@dataclass
class AnalysisSet:
    """Who and what is analysed: per participant the stage, outcome and rules that apply,
    and the sessions kept."""

    participants: pd.DataFrame  # one row per participant with data, rule columns, included
    sessions: pd.DataFrame  # one row per collaborative session: complete, kept
    rules: AnalysisRules

    @property
    def kept_sessions(self) -> set[int]:
        return set(self.sessions.loc[self.sessions["kept"], "session_id"])

    @property
    def included(self) -> set[int]:
        return set(self.participants.loc[self.participants["included"], "participant_id"])


# --- the flow ------------------------------------------------------------------------------


def _furthest_step(connection: sqlite3.Connection, order: tuple[str, ...]) -> pd.DataFrame:
    """Per participant the index in ``order`` of the furthest step reached: from the step
    log, the current step, and for a withdrawal the step kept when the log was erased."""
    withdrawn_from = ("withdrawn_from" if "withdrawn_from" in _columns(connection, "participants")
                      else "NULL AS withdrawn_from")
    people = pd.read_sql_query(
        "SELECT id AS participant_id, code, protocol, step, consent, data_consent, "
        f"{withdrawn_from} FROM participants", connection)
    steps = pd.read_sql_query("SELECT participant_id, step FROM steps", connection)
    index = {step: k for k, step in enumerate(order)}
    steps["index"] = steps["step"].map(index)
    furthest = steps.groupby("participant_id")["index"].max()
    people["furthest"] = people["participant_id"].map(furthest)
    for known in (people["step"], people["withdrawn_from"]):
        people["furthest"] = np.fmax(people["furthest"].to_numpy(dtype=float),
                                     known.map(index).to_numpy(dtype=float))
    return people.drop(columns="withdrawn_from")


def _stage(row: pd.Series, order: tuple[str, ...], proofs: dict[str, str]) -> str:
    """The last stage the participant is known to have reached."""
    furthest = row["furthest"]
    reached = "links created"
    if row["consent"] is not None or (furthest == furthest and furthest > 0):
        reached = "opened"
    if row["consent"] == "given" or row["step"] == "withdrawn":  # only consent can be withdrawn
        reached = "consented"
    for stage, step in proofs.items():
        if furthest == furthest and furthest >= order.index(step):
            reached = stage
    if row["step"] == "unmatched":
        reached = "practised"
    return reached


def _outcome(row: pd.Series) -> str:
    if row["step"] == "done" and row["status"] != "aborted":
        return "done"
    if row["step"] in ("declined", "withdrawn", "unmatched", "dropped"):
        return str(row["step"])
    if row["status"] == "aborted" or row["step"] == "aborted":
        return "aborted"
    return "left"


def participant_stages(path: Path, sessions: int | None = None) -> pd.DataFrame:
    """One row per participant link: the stage reached, the outcome (done or why lost),
    the last step and the console's status and flag. ``sessions``: the study's sessions
    (by default as many as the database's sessions show)."""
    with load._read_only(Path(path)) as connection:
        sessions = sessions or session_count(connection)
        order = step_order(sessions)
        people = _furthest_step(connection, order)
        if "console_status" in load.table_names(connection):
            status = pd.read_sql_query(
                "SELECT participant_id, status, flagged FROM console_status", connection)
            people = people.merge(status, on="participant_id", how="left")
        else:
            people["status"], people["flagged"] = None, 0
        if "target_met" in _columns(connection, "teammates"):
            targets = pd.read_sql_query("SELECT participant_id, target_met FROM teammates",
                                        connection).set_index("participant_id")["target_met"]
            people["target"] = people["participant_id"].map(targets.map(TARGETS))
    people["status"] = people["status"].fillna("active")
    people["flagged"] = people["flagged"].fillna(0).astype(int)
    people["consent"] = people["consent"].astype(object).where(people["consent"].notna(), None)
    people["stage"] = people.apply(_stage, axis=1, args=(order, stage_steps(sessions)))
    people["outcome"] = people.apply(_outcome, axis=1)
    unopened = people["stage"].eq("links created") & people["outcome"].eq("left")
    people.loc[unopened, "outcome"] = "not opened"
    return people.drop(columns="furthest")


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    """A table's columns (a database from before the target was recorded lacks some)."""
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def flow_table(stages: pd.DataFrame, sessions: int | None = None) -> pd.DataFrame:
    """Per stage: how many reached it (and, where the database records it, how many of
    those were placed in the target team or off it), and how many went no further, by
    reason. ``sessions``: the study's (by default the last session stage reached)."""
    names = stages_of(sessions or sessions_in(stages))
    position = stages["stage"].map(names.index)
    rows = []
    for k, stage in enumerate(names):
        stopped = stages[(position == k) & (stages["outcome"] != "done")]
        row = {"stage": stage, "reached": int((position >= k).sum())}
        if "target" in stages:  # of those who reached the stage, where they were placed
            row.update({name: int(((position >= k) & stages["target"].eq(name)).sum())
                        for name in TARGETS.values()})
        row.update({loss: int((stopped["outcome"] == loss).sum()) for loss in LOSSES})
        row["last steps of those who left"] = ", ".join(
            f"{step} {n}" for step, n in stopped.loc[stopped["outcome"] == "left", "step"]
            .value_counts().sort_index().items())
        rows.append(row)
    return pd.DataFrame(rows)


# --- the analysis set ----------------------------------------------------------------------


def complete_sessions(data: StudyData) -> pd.DataFrame:
    """Every collaborative session with the rounds played, closed on recovery, and whether
    it was played to its last round."""
    sessions = data.sessions[data.sessions["kind"] == "collaborative"]
    rounds = data.rounds[data.rounds["kind"] == "collaborative"]
    closed = rounds[rounds["closed_at"].notna()]
    played = closed.groupby("session_id")["number"].nunique()
    recovered = closed[closed["close_reason"] == "recovery"].groupby("session_id").size()
    frame = sessions[["participant_id", "session_id", "number", "condition",
                      "rounds"]].copy()
    frame["rounds_played"] = frame["session_id"].map(played).fillna(0).astype(int)
    frame["rounds_recovered"] = frame["session_id"].map(recovered).fillna(0).astype(int)
    frame["complete"] = frame["rounds_played"] >= frame["rounds"]
    return frame.reset_index(drop=True)


def _rule_matches(data: StudyData, design: Design, people: pd.DataFrame) -> pd.DataFrame:
    """One boolean column per exclusion rule (whether or not the protocol applies it)."""
    status = data.status.set_index("participant_id") if not data.status.empty else None
    ids = people["participant_id"]
    matches = pd.DataFrame({"participant_id": ids})
    if status is None:
        matches["aborted"] = matches["flagged"] = False
    else:
        matches["aborted"] = ids.map(status["status"]).eq("aborted").to_numpy()
        matches["flagged"] = ids.map(status["flagged"]).fillna(0).astype(int).eq(1).to_numpy()
    matches["aborted"] |= people["step"].eq("aborted").to_numpy()
    matches["failed-manipulation-check"] = _failed_check(data, design, ids).to_numpy()
    practice = data.practice.merge(data.rounds[["round_id", "close_reason"]], on="round_id",
                                   how="left")
    recovered = set(practice.loc[practice["measured"].astype(bool)
                                 & practice["close_reason"].eq("recovery"), "participant_id"])
    matches["recovered-capability"] = ids.isin(recovered).to_numpy()
    matches["clipped-capability"] = ids.isin(clipped_ids(data.practice)).to_numpy()
    matches["incomplete"] = people["step"].ne("done").to_numpy()
    matches["not-target-team"] = _off_target(data, ids).to_numpy()
    return matches


def clipped_ids(practice: pd.DataFrame) -> set[int]:
    """Participants with a capability at a clip bound (0.01 or 0.99), a speed the reference
    speed could not measure, or from a round the server flagged as no person's decorating
    (``measurements.implausible``): either way not their value (MODEL.md). The value is
    clipped exactly when the measured ratio is, so the value alone says that, in any
    database."""
    measured = practice[practice["measured"].astype(bool)]
    values = measured["capability"].astype(float)
    flagged = measured["implausible"].notna() if "implausible" in measured else False
    return set(measured.loc[(values <= LOWEST) | (values >= HIGHEST) | flagged,
                            "participant_id"])


def _off_target(data: StudyData, ids: pd.Series) -> pd.Series:
    """Participants whose live team missed the target (databases from before the target
    was recorded count as on target: nothing says otherwise)."""
    teammates = data.teammates
    if "target_met" not in teammates:
        return pd.Series(False, index=ids.index)
    return ids.isin(teammates.loc[teammates["target_met"].eq(0), "participant_id"])


def _failed_check(data: StudyData, design: Design, ids: pd.Series) -> pd.Series:
    item = design.manipulation_check
    if item is None:
        return pd.Series(False, index=ids.index)
    answers = manipulation_answers(data, design)
    return ids.isin(answers.loc[answers["passed"].eq(False), "participant_id"])


def manipulation_answers(data: StudyData, design: Design) -> pd.DataFrame:
    """Each participant's answer to the manipulation check and whether it passed."""
    item = design.manipulation_check
    columns = ["participant_id", "answer", "passed"]
    if item is None:
        return pd.DataFrame(columns=columns)
    post = data.answers[(data.answers["questionnaire"] == "post")
                        & (data.answers["item"] == item.id)]
    answer = post["value_text"].astype(object).where(post["value_text"].notna(),
                                                     post["value_number"])
    passed = manipulation_passed(item, list(answer), design.rules.manipulation_check_pass)
    return pd.DataFrame({"participant_id": post["participant_id"].to_numpy(),
                         "answer": answer.to_numpy(), "passed": passed})


def analysis_set(data: StudyData, design: Design) -> AnalysisSet:
    """Apply the declared rules: which participants and which sessions are analysed."""
    rules = design.rules
    people = data.participants[["participant_id", "code", "step"]].copy()
    matches = _rule_matches(data, design, people)
    people = people.merge(matches, on="participant_id")
    applied = [rule for rule in rules.exclude]
    people["excluded_by"] = None
    for rule in applied:
        fresh = people["excluded_by"].isna() & people[rule]
        people.loc[fresh, "excluded_by"] = rule
    people["included"] = people["excluded_by"].isna()
    sessions = complete_sessions(data)
    only_incomplete = people[applied].sum(axis=1).eq(1) & people["incomplete"] & (
        "incomplete" in applied)
    keep_people = set(people.loc[people["included"], "participant_id"])
    if rules.keep_completed_sessions_of_incomplete:
        keep_people |= set(people.loc[only_incomplete, "participant_id"])
    sessions["kept"] = sessions["complete"] & sessions["participant_id"].isin(keep_people)
    return AnalysisSet(people, sessions, rules)


def exclusion_table(chosen: AnalysisSet) -> pd.DataFrame:
    """Per rule: whether the protocol applies it, the participants it matches and those it
    removed (each counted under the first applied rule that removes them), with what the
    rule means; the declared rules first, in their order."""
    people = chosen.participants
    declared = list(chosen.rules.exclude)
    rules = declared + [rule for rule in EXCLUSION_TEXT if rule not in declared]
    rows = [{"rule": rule, "applied": rule in declared, "meaning": EXCLUSION_TEXT[rule],
             "matched": int(people[rule].sum()),
             "removed": int((people["excluded_by"] == rule).sum())} for rule in rules]
    return pd.DataFrame(rows, columns=["rule", "applied", "meaning", "matched", "removed"])


def restrict(data: StudyData, chosen: AnalysisSet) -> StudyData:
    """The frames of the analysis set: the kept sessions (with their rounds, kits, cookies
    and ratings), and the practice, teammates and post-study answers of the participants
    who have a kept session."""
    sessions = chosen.kept_sessions
    people = set(chosen.sessions.loc[chosen.sessions["kept"], "participant_id"])

    def of_people(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["participant_id"].isin(people)].reset_index(drop=True)

    def of_sessions(frame: pd.DataFrame) -> pd.DataFrame:
        collaborative = frame["kind"] == "collaborative" if "kind" in frame else (
            frame["condition"].notna())
        keep = frame["participant_id"].isin(people) & (
            ~collaborative | frame["session_id"].isin(sessions))
        return frame[keep].reset_index(drop=True)

    answers = data.answers
    session_answer = answers["session_id"].notna()
    answers = answers[answers["participant_id"].isin(people)
                      & (~session_answer | answers["session_id"].isin(sessions))]
    return data.replace(
        participants=of_people(data.participants),
        sessions=of_sessions(data.sessions), rounds=of_sessions(data.rounds),
        allocations=of_people(data.allocations[data.allocations["session_id"].isin(sessions)]),
        cookies=of_sessions(data.cookies), answers=answers.reset_index(drop=True),
        practice=of_people(data.practice), teammates=of_people(data.teammates),
        status=of_people(data.status))
