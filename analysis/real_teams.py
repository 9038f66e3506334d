"""Real teams (docs/teams.md): how teams formed, who played each seat, per-member fairness
for any number of humans, and parity between the people of a team.

Read from the team tables of the study database; a database without them (an individual
study) has no teams, and every function returns empty frames.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from study.allocation.model import most_capable_type, most_preferred_type

TABLES = ("teams", "seats", "lobby", "team_rounds", "team_allocations", "seat_cookies")


@dataclass(frozen=True)
class TeamTables:
    """The team tables of one database, as frames (empty when the study has no teams)."""

    teams: pd.DataFrame
    seats: pd.DataFrame
    lobby: pd.DataFrame
    team_rounds: pd.DataFrame
    team_allocations: pd.DataFrame
    seat_cookies: pd.DataFrame
    person_cookies: pd.DataFrame  # per team round and seat: the person's finished cookies

    @property
    def any(self) -> bool:
        return not self.teams.empty

    @property
    def waited(self) -> bool:
        """Whether anyone entered the lobby: a study of real teams even if no team formed,
        whose lobby outcomes and waits are then all there is to report."""
        return not self.lobby.empty


def load_teams(path: Path | str) -> TeamTables:
    """The team tables, read only; a database without them gives empty frames."""
    with sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True) as connection:
        present = {name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        frames = {name: pd.read_sql_query(f"SELECT * FROM {name}", connection)
                  if name in present else pd.DataFrame() for name in TABLES}
        people = pd.read_sql_query(
            "SELECT r.team_round_id, s.seat, r.participant_cookies AS cookies FROM rounds r "
            "JOIN seats s ON s.participant_id = r.participant_id AND s.team_id = "
            "(SELECT team_id FROM team_rounds t WHERE t.id = r.team_round_id) "
            "WHERE r.team_round_id IS NOT NULL", connection) if "seats" in present \
            else pd.DataFrame(columns=["team_round_id", "seat", "cookies"])
    return TeamTables(person_cookies=people, **frames)


def flow(tables: TeamTables) -> pd.DataFrame:
    """The participant flow of real teams: teams by how they formed, seats by kind,
    seats taken over by why, the lobby's outcomes and how long people waited (with no
    team formed, the lobby's alone)."""
    if not tables.any and not tables.waited:
        return pd.DataFrame(columns=["what", "count"])
    rows = [("teams", len(tables.teams)),
            *((f"teams formed by {name}", n) for name, n in
              tables.teams["formed_by"].value_counts().sort_index().items()),
            *((f"{kind} seats", n) for kind, n in
              tables.seats["kind"].value_counts().sort_index().items()),
            ("seats taken over by an agent", int(tables.seats["dropped_at"].notna().sum())),
            *((f"taken over: {reason}", n) for reason, n in
              tables.seats["drop_reason"].dropna().value_counts().sort_index().items()),
            *((f"left the lobby: {outcome}", n) for outcome, n in
              tables.lobby["outcome"].fillna("still waiting").value_counts().sort_index()
              .items())]
    waited = (tables.lobby["left_at"] - tables.lobby["entered_at"]).dropna()
    if len(waited):
        rows += [("lobby wait, median s", round(float(waited.median()), 1)),
                 ("lobby wait, max s", round(float(waited.max()), 1))]
    # counts stay whole numbers beside the waits' seconds (a frame of the rows would make
    # every count a float, "3.000" people)
    return pd.DataFrame({"what": [what for what, _ in rows],
                         "count": pd.Series([count for _, count in rows], dtype=object)})


def members(tables: TeamTables) -> pd.DataFrame:
    """One row per team, session and seat: the seat's kits on their best and preferred
    types, outcome over input ``O_i / I_i``, fairness share ``b_i`` (MODEL.md, for any
    number of humans), cookies, and who played it."""
    if not tables.any or tables.team_allocations.empty:
        return pd.DataFrame()
    parts = [_team_members(team, tables) for team in tables.teams.itertuples()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _team_members(team, tables: TeamTables) -> pd.DataFrame:
    c, p = np.array(json.loads(team.team_c)), np.array(json.loads(team.team_p))
    humans, types = c.shape
    given = tables.team_allocations[tables.team_allocations["team_id"] == team.id]
    seats = tables.seats[tables.seats["team_id"] == team.id].set_index("seat")
    rows = []
    for session, kits in given.groupby("session"):
        held = np.zeros((humans, types))
        np.add.at(held, (kits["seat"].to_numpy(), kits["task_type"].to_numpy()), 1)
        shares, equity = _shares(c, p, held)
        cookies = _cookies(tables, team.id, session, humans)
        condition = json.loads(team.condition_order)[int(session) - 1]
        for seat in range(humans):
            row = seats.loc[seat]
            rows.append({
                "team_id": team.id, "session": int(session), "condition": condition,
                "seat": seat, "kind": row["kind"], "participant_id": row["participant_id"],
                "taken_over": bool(pd.notna(row["dropped_at"])),
                "rounds_capable": held[seat, most_capable_type(c[seat])],
                "rounds_preferred": held[seat, most_preferred_type(p[seat])],
                "share_b": shares[seat], "outcome_over_input": equity[seat],
                "cookies": cookies[seat]})
    frame = pd.DataFrame(rows)
    spread = frame.groupby("session")[["share_b", "outcome_over_input"]].agg(np.ptp)
    frame["team_F"] = frame["session"].map(spread["share_b"])
    frame["team_FE"] = frame["session"].map(spread["outcome_over_input"])
    return frame


def _shares(c: np.ndarray, p: np.ndarray, held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per human: ``b_i = (a_i^c + a_i^p) / 2`` with ``a_i^f = sum_j f_ij T_ij / ((1/h)
    sum_i sum_j T_ij)``, and ``O_i / I_i`` (MODEL.md, "Metrics of a state")."""
    humans = len(c)
    mean_kits = held.sum() / humans
    share_c = (c * held).sum(axis=1) / mean_kits
    share_p = (p * held).sum(axis=1) / mean_kits
    return (share_c + share_p) / 2, (p * held).sum(axis=1) / c.sum(axis=1)


def _cookies(tables: TeamTables, team_id: int, session: int, humans: int) -> np.ndarray:
    rounds = tables.team_rounds[(tables.team_rounds["team_id"] == team_id)
                                & (tables.team_rounds["session"] == session)]["id"]
    counts = np.zeros(humans)
    agents = tables.seat_cookies[tables.seat_cookies["team_round_id"].isin(rounds)]
    people = tables.person_cookies[tables.person_cookies["team_round_id"].isin(rounds)]
    np.add.at(counts, agents["seat"].to_numpy(dtype=int), 1)
    np.add.at(counts, people["seat"].to_numpy(dtype=int), people["cookies"].to_numpy())
    return counts


def person_parity(member_rows: pd.DataFrame) -> pd.DataFrame:
    """Person against person inside teams, per condition: the mean absolute difference
    between every two people of a team (seats an agent never played) in fairness share,
    rounds on their best and preferred types, and cookies."""
    measures = ["share_b", "rounds_capable", "rounds_preferred", "cookies"]
    if member_rows.empty:
        return pd.DataFrame(columns=["condition", "pairs", *measures])
    people = member_rows[(member_rows["kind"] == "person") & ~member_rows["taken_over"]]
    rows = []
    for (condition, _, _), group in people.groupby(["condition", "team_id", "session"]):
        values = group[measures].to_numpy(dtype=float)
        for a in range(len(values)):
            for b in range(a + 1, len(values)):
                rows.append({"condition": condition,
                             **dict(zip(measures, np.abs(values[a] - values[b]), strict=True))})
    if not rows:
        return pd.DataFrame(columns=["condition", "pairs", *measures])
    pairs = pd.DataFrame(rows)
    table = pairs.groupby("condition")[measures].mean()
    table.insert(0, "pairs", pairs.groupby("condition").size())
    return table.reset_index()


def team_summary(tables: TeamTables) -> pd.DataFrame:
    """One row per team: how it formed, its live type, its seats and who took over."""
    if not tables.any:
        return pd.DataFrame()
    seats = tables.seats.sort_values(["team_id", "seat"])
    described = seats.groupby("team_id").apply(
        lambda group: "; ".join(
            f"{int(s.seat) + 1}: {s.kind}" + (f" (agent from S{int(s.agent_from_session)} "
                                             f"R{int(s.agent_from_round)}, {s.drop_reason})"
                                             if pd.notna(s.dropped_at) else "")
            for s in group.itertuples()), include_groups=False)
    frame = tables.teams[["id", "humans", "persons", "formed_by", "live_type",
                          "condition_order"]].rename(columns={"id": "team_id"})
    frame["seats"] = frame["team_id"].map(described)
    frame["finished"] = tables.teams["finished_at"].notna().to_numpy()
    return frame
