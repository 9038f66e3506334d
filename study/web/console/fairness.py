"""Live fairness on the console: each session's kits so far, running ``F`` and ``FE``
against the robot's stored plan, whether the session follows it, the last probe answers,
and the same per condition.

The snapshot is pushed every few seconds, so this works from rows the snapshot reads
anyway (the session's stored live team and plan, the kits handed out) and solves nothing:
the metrics of every session of one shape come from one numpy call
(``study.allocation.model.all_metrics``), as the analysis computes them after each round
(``analysis.fairness_time``), the first person of the view as its first human.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.allocation.model import all_metrics
from study.protocol.loader import TASK_NAMES

DIGITS = 3  # finer than anyone reads a running metric, and a smaller push
AMONG = "(SELECT value FROM json_each(?))"


@dataclass(frozen=True)
class SessionKits:
    """One session as the live view judges it: the live team's stored coefficients and
    plan, and the kits handed out so far, humans in the order the view names them."""

    number: int | None
    condition: str | None
    robot: str | None
    people: tuple[str, ...]
    c: np.ndarray  # [h, n]
    p: np.ndarray  # [h, n]
    plan: np.ndarray  # [R, h] the planned kit type per round and human
    given: np.ndarray  # [r, h] the kit types handed out in the rounds so far, r <= R


def stored_session(session: dict[str, Any], kits: Iterable[dict[str, Any]],
                   order: list[int], people: tuple[str, ...]) -> SessionKits | None:
    """A ``sessions`` row (``team_c``, ``team_p``, ``plan``) and its kits (rows with
    ``round``, ``human``, ``task_type``), its humans taken in ``order``; None before its
    first round or without a stored plan."""
    rounds: dict[int, dict[int, int]] = defaultdict(dict)
    for kit in kits:
        rounds[kit["round"]][kit["human"]] = kit["task_type"]
    if not rounds or not session.get("plan"):
        return None
    plan = np.array(json.loads(session["plan"]), dtype=int)[:, order]
    played = max(rounds)
    if played > len(plan) or any(len(rounds[r]) != len(order) for r in range(1, played + 1)):
        return None  # kits the plan cannot be held against
    given = np.array([[rounds[r][h] for h in order] for r in range(1, played + 1)])
    c = np.array(json.loads(session["team_c"]), dtype=float)[order]
    p = np.array(json.loads(session["team_p"]), dtype=float)[order]
    return SessionKits(session.get("number"), session.get("condition"), session.get("robot"),
                       people, c, p, plan, given)


def first_as(first: int, humans: int) -> list[int]:
    """The humans' order with ``first`` (the participant) ahead of the others."""
    return [first] + [h for h in range(humans) if h != first]


def with_agents(humans: int) -> tuple[str, ...]:
    """The people of a participant's live team with agent teammates, participant first."""
    if humans == 2:
        return ("participant", "teammate")
    return ("participant", *(f"teammate {k}" for k in range(1, humans)))


def views(sessions: list[SessionKits]) -> list[dict[str, Any]]:
    """Each session's live fairness, in the order given."""
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for index, session in enumerate(sessions):
        groups[session.plan.shape + session.c.shape].append(index)
    out: list[dict[str, Any]] = [{} for _ in sessions]
    for indexes in groups.values():
        batch = [sessions[i] for i in indexes]
        actual, planned = _running(batch)
        for k, i in enumerate(indexes):
            out[i] = _view(batch[k], actual[:, k], planned[:, k])
    return out


def _running(batch: list[SessionKits]) -> tuple[np.ndarray, np.ndarray]:
    """``[2, B, R]`` running ``F`` and ``FE`` after each round, of the kits handed out
    (the plan's after the rounds so far, never read) and of the plan."""
    plans = np.stack([session.plan for session in batch])
    given = plans.copy()
    for k, session in enumerate(batch):
        given[k, :len(session.given)] = session.given
    types = batch[0].c.shape[-1]
    held = np.eye(types, dtype=int)[np.concatenate([given, plans])].cumsum(axis=1)
    c = np.stack([session.c for session in batch] * 2)[:, None]
    p = np.stack([session.p for session in batch] * 2)[:, None]
    metrics = all_metrics(c, p, held)
    both = np.stack([metrics["F"], metrics["FE"]])
    return both[:, :len(batch)], both[:, len(batch):]


def _view(session: SessionKits, actual: np.ndarray, planned: np.ndarray) -> dict[str, Any]:
    played = len(session.given)
    off = np.flatnonzero((session.given != session.plan[:played]).any(axis=1))
    held = np.eye(session.c.shape[-1], dtype=int)[session.given].sum(axis=0)
    return {
        "session": session.number, "condition": session.condition, "robot": session.robot,
        "people": list(session.people), "types": list(TASK_NAMES[:held.shape[-1]]),
        "kits": held.tolist(), "rounds": played, "of": len(session.plan),
        "F": _rounded(actual[0, :played]), "FE": _rounded(actual[1, :played]),
        "planned_F": _rounded(planned[0]), "planned_FE": _rounded(planned[1]),
        "follows": off.size == 0, "off_plan_from": int(off[0]) + 1 if off.size else None,
    }


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(value), DIGITS) for value in values]


def by_condition(units: Iterable[tuple[dict[str, Any], int]]) -> list[dict[str, Any]]:
    """Per condition, over the people taking part (a view given with how many people
    live it: a participant with an agent teammate is one, a real team its people):
    mean ``|F|`` and ``|FE|`` after the rounds so far and the plan's after as many
    rounds, and the share of people whose session follows the plan."""
    grouped: dict[str | None, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for view, people in units:
        if view and people:
            grouped[view["condition"]].append((view, people))
    return [_aggregate(condition, rows) for condition, rows in sorted(
        grouped.items(), key=lambda item: str(item[0]))]


def _aggregate(condition: str | None, rows: list[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    weights = np.array([people for _, people in rows], dtype=float)

    def mean(values: list[float]) -> float:
        return round(float(np.average(np.abs(values), weights=weights)), DIGITS)

    return {"condition": condition, "robot": rows[0][0]["robot"], "people": int(weights.sum()),
            "F": mean([view["F"][-1] for view, _ in rows]),
            "planned_F": mean([view["planned_F"][view["rounds"] - 1] for view, _ in rows]),
            "FE": mean([view["FE"][-1] for view, _ in rows]),
            "planned_FE": mean([view["planned_FE"][view["rounds"] - 1] for view, _ in rows]),
            "following": round(float(np.average([view["follows"] for view, _ in rows],
                                                weights=weights)), DIGITS)}


def last_probes(storage: Any, participant_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per participant and probe, the latest probe settled (answered: its value; or
    missed), where the study has probes."""
    if not participant_ids or "probes" not in storage.db.table_names():
        return {}
    latest: dict[int, dict[str, Any]] = defaultdict(dict)
    # SQLite takes the bare columns from the row of the max().
    for row in storage.all(
            "SELECT participant_id, probe, value, missed, session_number, round_number, "
            "max(session_number * 1000000 + round_number) AS place FROM probes "
            f"WHERE participant_id IN {AMONG} AND (value IS NOT NULL OR missed = 1) "
            "GROUP BY participant_id, probe", (json.dumps(participant_ids),)):
        answered = row["value"] is not None
        latest[row["participant_id"]][row["probe"]] = {
            "value": row["value"] if answered else "missed",
            "session": row["session_number"], "round": row["round_number"]}
    return dict(latest)
