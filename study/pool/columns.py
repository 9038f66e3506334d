"""The per-team columns of a pool: every algorithm's goal, reward, metrics and the gaps.

The goal-state sums come from ``study.model.sums_over_goals`` (bit-identical whatever the
chunk size) and are shared by every algorithm; the optimal plans come from the solver's
``plan_batch`` on the rewards.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from study.model import (
    HumanSums,
    most_capable_type,
    most_preferred_type,
    reward_from_sums,
    rounds_on_type,
    scale_fair_equity,
    state_space,
    sums_over_goals,
)
from study.pool.spec import PoolSpec
from study.pool.teamtypes import most_capable_human, team_type_codes
from study.solver import plan_batch


def goal_sums(c: np.ndarray, p: np.ndarray, goals: np.ndarray) -> HumanSums:
    """``sums_over_goals`` whose metrics are computed once."""
    sums = sums_over_goals(c, p, goals)
    return _CachedSums(sums.capability, sums.preference, sums.kits, sums.inputs)


class _CachedSums(HumanSums):
    """``HumanSums`` whose metrics are computed once: the rewards and the columns of
    every algorithm read them again."""

    @cached_property
    def _efficiency(self) -> np.ndarray:
        return super().efficiency()

    @cached_property
    def _fairness(self) -> np.ndarray:
        return super().fairness()

    @cached_property
    def _fair_equity(self) -> np.ndarray:
        return super().fair_equity()

    def efficiency(self) -> np.ndarray:
        return self._efficiency

    def fairness(self) -> np.ndarray:
        return self._fairness

    def fair_equity(self) -> np.ndarray:
        return self._fair_equity


def _at(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``values[b, positions[b]]`` for every team ``b`` (``values`` is ``[B, G]``)."""
    flat = np.arange(len(positions)) * values.shape[1] + positions
    return np.ascontiguousarray(values).reshape(-1)[flat]


def fair_gaps(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``[B]`` fair gaps (Fair against Efficient), for rejection by a minimum gap."""
    space = state_space(spec.humans, spec.kits)
    sums = goal_sums(c, p, space.allocations[space.goals])
    fair_reward = 1.0 - np.abs(sums.fairness())
    positions = {name: plan_batch(space, reward_from_sums(spec.algorithm(name), sums))[1]
                 for name in ("efficient", "fair")}
    return _at(fair_reward, positions["fair"]) - _at(fair_reward, positions["efficient"])


def team_columns(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    """Every pool column for teams ``c, p [B, h, n]`` (see docs/pool.md for the list)."""
    space = state_space(spec.humans, spec.kits)
    goal_states = space.allocations[space.goals]
    sums = goal_sums(c, p, goal_states)
    metrics = {"E": sums.efficiency(), "F": sums.fairness(), "FE": sums.fair_equity()}
    columns = _coefficient_columns(c, p)
    columns["team_type"] = team_type_codes(c, p, spec.most_capable_reading)
    columns["most_capable_human"] = most_capable_human(c, spec.most_capable_reading).astype(
        np.int8)
    capable, preferred = most_capable_type(c), most_preferred_type(p)
    positions = {}
    for name in spec.algorithms:
        rewards = reward_from_sums(spec.algorithm(name), sums)
        positions[name] = plan_batch(space, rewards)[1]
        goal = goal_states[positions[name]]
        columns.update(_algorithm_columns(name, goal, _at(rewards, positions[name]),
                                          {k: _at(v, positions[name]) for k, v in
                                           metrics.items()}))
        on_capable, on_preferred = rounds_on_type(goal, capable), rounds_on_type(goal, preferred)
        for i in range(spec.humans):
            columns[f"{name}_rounds_capable_{i}"] = on_capable[:, i].astype(np.int8)
            columns[f"{name}_rounds_preferred_{i}"] = on_preferred[:, i].astype(np.int8)
    if spec.has_gaps:
        columns.update(_gap_columns(spec, metrics, positions))
    return columns


def _coefficient_columns(c: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    columns = {}
    for kind, values in (("c", c), ("p", p)):
        for i in range(values.shape[1]):
            for j in range(values.shape[2]):
                columns[f"{kind}_{i}_{j}"] = np.ascontiguousarray(values[:, i, j])
    return columns


def _algorithm_columns(name: str, goal: np.ndarray, reward: np.ndarray,
                       metrics: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    columns = {f"{name}_goal_{i}_{j}": goal[:, i, j].astype(np.int8)
               for i in range(goal.shape[1]) for j in range(goal.shape[2])}
    columns[f"{name}_reward"] = reward
    columns.update({f"{name}_{key}": values for key, values in metrics.items()})
    return columns


def _gap_columns(spec: PoolSpec, metrics: dict[str, np.ndarray],
                 positions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fair and efficiency gaps of Fair (and FEA) against Efficient, per MODEL.md."""
    efficient = positions["efficient"]
    fair_reward = 1.0 - np.abs(metrics["F"])
    columns = {
        "fair_gap": _at(fair_reward, positions["fair"]) - _at(fair_reward, efficient),
        "efficiency_gap": _at(metrics["E"], positions["fair"]) - _at(metrics["E"], efficient),
    }
    if spec.fea is not None:
        fea_term = 1.0 - scale_fair_equity(metrics["FE"], spec.fea.lo, spec.fea.hi)
        columns["fea_fair_gap"] = _at(fea_term, positions["fea"]) - _at(fea_term, efficient)
        columns["fea_efficiency_gap"] = (_at(metrics["E"], positions["fea"])
                                         - _at(metrics["E"], efficient))
    return columns
