"""Outcomes of the collaborative sessions: per participant and condition, and per condition.

Every number comes from what happened (the allocations and rounds stored for the
session), not from what the policy planned, so an interrupted session is measured as it
ran. Humans are renumbered so the participant is human 0: a signed ``F`` or ``FE`` is
then positive when the allocation favoured the participant, whatever seat they had. In a
real team of three (docs/teams.md) the others follow in seat order, ``F`` and ``FE`` are
the spreads ``max - min`` over the three (MODEL.md), and a ``teammate`` column holds the
others' mean (coefficients, rounds) or sum (cookies).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from analysis import fairness_time
from analysis.load import StudyData
from analysis.questionnaires import likert, predicted_rating
from analysis.simulation import per_human_array
from study.allocation.algorithms import from_declaration
from study.allocation.model import (
    Algorithm,
    all_metrics,
    most_capable_type,
    most_preferred_type,
    rounds_on_type,
)

ROLES = ("participant", "teammate")


def collaborative(sessions: pd.DataFrame) -> pd.DataFrame:
    return sessions[sessions["kind"] == "collaborative"].reset_index(drop=True)


def _seat_order(sessions: pd.DataFrame, humans: int) -> np.ndarray:
    """``[S, h]``: the live team's human index of the participant, then the others'."""
    seat = sessions["participant_human"].to_numpy(dtype=int)[:, None]
    others = np.arange(humans - 1)[None, :]
    return np.concatenate([seat, others + (others >= seat)], axis=1)


def position_of(human: np.ndarray, seat: np.ndarray) -> np.ndarray:
    """Where human ``human`` of a team stands in ``_seat_order``: 0 for the participant."""
    return np.where(human == seat, 0, human + (human < seat))


def team_arrays(sessions: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``c, p [S, h, n]`` of each session's live team, participant first."""
    c, p = per_human_array(sessions, "c"), per_human_array(sessions, "p")
    order = _seat_order(sessions, c.shape[1])[:, :, None]
    return np.take_along_axis(c, order, axis=1), np.take_along_axis(p, order, axis=1)


def _as_pair(values: np.ndarray) -> np.ndarray:
    """``[S, 2, ...]``: the participant and the others' mean (a pair as it is)."""
    if values.shape[1] == 2:
        return values
    return np.stack([values[:, 0], values[:, 1:].mean(axis=1)], axis=1)


def trajectories(sessions: pd.DataFrame, allocations: pd.DataFrame,
                 task_types: int, humans: int = 2) -> np.ndarray:
    """``[S, R + 1, h, n]`` kits held before round 1 and after each round, participant
    first, from the stored allocations (rounds not played add nothing)."""
    rounds = int(sessions["rounds"].max())
    kits = np.zeros((len(sessions), rounds + 1, humans, task_types), dtype=int)
    row_of = pd.Series(np.arange(len(sessions)), index=sessions["session_id"])
    given = allocations[allocations["session_id"].isin(row_of.index)]
    rows = row_of[given["session_id"]].to_numpy()
    seats = sessions["participant_human"].to_numpy(dtype=int)[rows]
    roles = position_of(given["human"].to_numpy(dtype=int), seats)
    np.add.at(kits, (rows, given["round"].to_numpy(), roles, given["task_type"].to_numpy()),
              1)
    return kits.cumsum(axis=1)


def session_outcomes(data: StudyData) -> pd.DataFrame:
    """One row per collaborative session: cookies of the team and each member, rounds
    each member spent on their most capable and most preferred type, both members'
    coefficients, the teammate match distance ``d``, and the final allocation's ``E``,
    ``F`` and ``FE`` (signed towards the participant) with the policy's reward and the
    predicted fairness ratings."""
    sessions = collaborative(data.sessions)
    c, p = team_arrays(sessions)
    final = trajectories(sessions, data.allocations, c.shape[-1], c.shape[1])[:, -1]
    frame = sessions[["participant_id", "protocol", "session_id", "number", "condition",
                      "algorithm", "round_order", "reward"]].copy()
    if "team_id" in sessions:  # a real team is a cluster of its members' sessions
        frame["team_id"] = sessions["team_id"].to_numpy()
    frame.insert(4, "period", frame["number"])
    frame.insert(5, "order", frame["participant_id"].map(condition_orders(data.participants)))
    if "site" in sessions:
        frame.insert(1, "site", sessions["site"].to_numpy())
    recovered = data.rounds[data.rounds["close_reason"] == "recovery"].groupby(
        "session_id").size()
    frame["rounds_recovered"] = frame["session_id"].map(recovered).fillna(0).astype(int)
    cookies = data.rounds.groupby("session_id")[["participant_cookies",
                                                  "teammate_cookies"]].sum()
    frame["cookies_participant"] = frame["session_id"].map(cookies["participant_cookies"])
    frame["cookies_teammate"] = frame["session_id"].map(cookies["teammate_cookies"])
    frame[["cookies_participant", "cookies_teammate"]] = frame[
        ["cookies_participant", "cookies_teammate"]].fillna(0).astype(int)
    frame["cookies_team"] = frame["cookies_participant"] + frame["cookies_teammate"]
    capable = _as_pair(rounds_on_type(final, most_capable_type(c)))
    preferred = _as_pair(rounds_on_type(final, most_preferred_type(p)))
    pair_c, pair_p = _as_pair(c), _as_pair(p)
    for k, role in enumerate(ROLES):
        frame[f"rounds_capable_{role}"] = capable[:, k]
        frame[f"rounds_preferred_{role}"] = preferred[:, k]
        for j in range(c.shape[-1]):
            frame[f"c_{role}_{j}"] = pair_c[:, k, j]
            frame[f"p_{role}_{j}"] = pair_p[:, k, j]
    distance = data.teammates.set_index("participant_id")["distance"]
    frame["distance"] = frame["participant_id"].map(distance)
    metrics = all_metrics(c, p, final)
    frame["E"], frame["F"], frame["FE"] = metrics["E"], metrics["F"], metrics["FE"]
    frame["fair_reward"] = 1 - np.abs(metrics["F"])
    frame["predicted_rating_fair"] = predicted_rating(frame["fair_reward"])
    frame["predicted_rating_reward"] = predicted_rating(frame["reward"])
    return frame


def condition_orders(participants: pd.DataFrame) -> pd.Series:
    """Each participant's order of conditions as text (``efficient > fair``), by id."""
    orders = participants.set_index("participant_id")["condition_order"]
    return orders.map(lambda text: " > ".join(json.loads(text)) if isinstance(text, str)
                      else "")


def session_fairness_over_time(data: StudyData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per session the temporal summaries (one row each) and the running metrics (one
    row per round), participant as human 0."""
    sessions = collaborative(data.sessions)
    c, p = team_arrays(sessions)
    kits = trajectories(sessions, data.allocations, c.shape[-1], c.shape[1])
    keys = sessions[["participant_id", "session_id", "condition", "algorithm",
                     "round_order"]]
    summary = pd.concat([keys, fairness_time.summary(c, p, kits)], axis=1)
    per_round = fairness_time.rounds_frame(c, p, kits)
    per_round = keys.iloc[per_round.pop("unit")].reset_index(drop=True).join(per_round)
    return summary, per_round


def condition_summary(outcomes: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """Per condition and algorithm: sessions, mean cookies and allocation metrics, the
    predicted fairness ratings and the participants' mean rating of each Likert item (the
    paper's Figures 3 and 5 as a table)."""
    measures = ["cookies_team", "cookies_participant", "cookies_teammate", "E", "F", "FE",
                "fair_reward", "reward", "predicted_rating_fair", "predicted_rating_reward"]
    table = outcomes.groupby(["condition", "algorithm"])[measures].mean()
    table.insert(0, "sessions", outcomes.groupby(["condition", "algorithm"]).size())
    ratings = likert(answers.dropna(subset=["condition"]))
    if not ratings.empty:
        algorithm = outcomes.drop_duplicates("condition").set_index("condition")["algorithm"]
        wide = (ratings.assign(algorithm=ratings["condition"].map(algorithm))
                .pivot_table(index=["condition", "algorithm"], columns="label",
                             values="value", aggfunc="mean"))
        wide.columns = [f"rating {label}" for label in wide.columns]
        table = table.join(wide)
    return table.reset_index()


def session_algorithm(session: pd.Series) -> Algorithm:
    """The policy a session ran, as the session recorded it: its algorithm as data (a
    declared one with its terms, bounds and memory), or for older rows FEA with its weight
    and bounds."""
    recorded = session.get("algorithm_declaration")
    if isinstance(recorded, str) and recorded:
        return from_declaration(json.loads(recorded))
    if session["algorithm"] == "fea":
        return Algorithm("fea", w=float(session["w"]), lo=float(session["fea_lo"]),
                         hi=float(session["fea_hi"]))
    return Algorithm(str(session["algorithm"]))


def role_rates(data: StudyData) -> pd.DataFrame:
    """Per analysed session and member (participant, teammate): the per-round preference
    outcome ``P_rate``, contribution ``C_rate`` and share of rounds on the most capable
    type ``Cap``, from the kits handed out."""
    from analysis.metrics import outcomes

    frame = collaborative(data.sessions)
    c, p = team_arrays(frame)
    final = trajectories(frame, data.allocations, c.shape[-1], c.shape[1])[:, -1]
    rates = {name: _as_pair(values) for name, values in outcomes(c, p, final).items()}
    parts = [pd.DataFrame({"session_id": frame["session_id"], "condition": frame["condition"],
                           "role": role, **{name: rates[name][:, k]
                                            for name in ("P_rate", "C_rate", "Cap")}})
             for k, role in enumerate(ROLES)]
    return pd.concat(parts, ignore_index=True)
