"""The per-team columns of a pool: every algorithm's goal, reward, metrics and the gaps.

The goal-state sums come from ``study.allocation.model.goal_major_sums`` (goals first, teams last;
bit-identical whatever the chunk size) and are shared by every algorithm; the optimal
goals come from the solver's lookup by the set of optimal goals, as ``solve_batch``'s do.
Every value at a team's goal is read from the goal-major arrays by one flat gather.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from study.allocation.model import (
    Algorithm,
    GoalSums,
    StateSpace,
    code_goal_rewards,
    goal_major_sums,
    most_capable_type,
    most_preferred_type,
    reward_from_sums,
    scale_fair_equity,
    state_space,
)
from study.allocation.solver import at_positions, optimal_goal_positions
from study.pool.teamtypes import most_capable_human, team_type_codes
from study.protocol.pool_spec import PoolSpec


def goal_sums(c: np.ndarray, p: np.ndarray, goals: np.ndarray) -> GoalSums:
    """``[h, G, B]`` sums over every goal of a batch, their metrics computed once."""
    return goal_major_sums(c, p, goals)


def fair_gaps(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``[B]`` fair gaps (Fair against Efficient), for rejection by a minimum gap."""
    space = state_space(spec.humans, spec.kits)
    sums = goal_sums(c, p, space.goal_allocations)
    fairness = sums.fairness()
    at_goal = {name: at_positions(fairness, optimal_goal_positions(
        space, reward_from_sums(spec.algorithm(name), sums))) for name in ("efficient", "fair")}
    return (1.0 - np.abs(at_goal["fair"])) - (1.0 - np.abs(at_goal["efficient"]))


# Teams computed together: every goal-major intermediate (``[G, teams]`` floats) then stays
# in the core's cache, which measured about twice as fast as 65,536 at once.
COMPUTE_SLICE = 16_384


def team_columns(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    """Every pool column for teams ``c, p [B, h, n]`` (see docs/pool.md for the list)."""
    parts = team_column_slices(spec, c, p)
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def team_column_slices(spec: PoolSpec, c: np.ndarray,
                       p: np.ndarray) -> list[dict[str, np.ndarray]]:
    """``team_columns`` of ``COMPUTE_SLICE`` teams at a time: the writer takes the slices
    as they are, so no column is copied into one array."""
    return [_slice_columns(spec, c[start:start + COMPUTE_SLICE], p[start:start + COMPUTE_SLICE])
            for start in range(0, max(len(c), 1), COMPUTE_SLICE)]


def _slice_columns(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    space = state_space(spec.humans, spec.kits)
    sums = goal_sums(c, p, space.goal_allocations)
    metrics = {"E": sums.efficiency(), "F": sums.fairness(), "FE": sums.fair_equity()}
    columns = _coefficient_columns(c, p)
    columns["team_type"] = team_type_codes(c, p, spec.most_capable_reading)
    columns["most_capable_human"] = most_capable_human(c, spec.most_capable_reading).astype(
        np.int8)
    types = {"capable": most_capable_type(c), "preferred": most_preferred_type(p)}
    at_goal = {}
    teams = np.arange(len(c))
    for name in spec.algorithms:
        rows = reward_rows(spec.algorithm(name), sums, c, p, space)
        positions = optimal_goal_positions(space, rows)
        flat = positions * len(c) + teams   # into the goal-major [G, B] arrays, flattened
        at_goal[name] = {key: values.reshape(-1).take(flat) for key, values in
                         metrics.items()}
        columns.update(_goal_columns(name, space, positions, types))
        columns[f"{name}_reward"] = rows.reshape(-1).take(flat)
        columns.update({f"{name}_{key}": values for key, values in at_goal[name].items()})
    if spec.has_gaps:
        columns.update(_gap_columns(spec, at_goal))
    return columns


def reward_rows(algorithm: Algorithm, sums: GoalSums, c: np.ndarray, p: np.ndarray,
                space: StateSpace) -> np.ndarray:
    """``[G, B]`` goal rewards of one algorithm: weighted terms from the shared goal sums,
    a goal reward given as code from the goal allocations (as ``solve_batch`` computes
    them). A pool solves every algorithm for one session: an algorithm with memory plans
    it as a study's first session (no earlier kits)."""
    if algorithm.code is None:
        return reward_from_sums(algorithm, sums)
    return np.ascontiguousarray(code_goal_rewards(algorithm.code, c, p,
                                                  space.goal_allocations).T)


def _coefficient_columns(c: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    columns = {}
    for kind, values in (("c", c), ("p", p)):
        for i in range(values.shape[1]):
            for j in range(values.shape[2]):
                columns[f"{kind}_{i}_{j}"] = np.ascontiguousarray(values[:, i, j])
    return columns


def _goal_columns(name: str, space: StateSpace, positions: np.ndarray,
                  types: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Kits per human and type at the goal reached, and the rounds each human spends on
    their most capable and most preferred type, by lookups into the goal states."""
    held = _held_at_goals(space)
    columns = {}
    for i in range(space.humans):
        per_type = [held[i, j].take(positions) for j in range(space.task_types)]
        for j, values in enumerate(per_type):
            columns[f"{name}_goal_{i}_{j}"] = values
        for kind, per_human in types.items():
            columns[f"{name}_rounds_{kind}_{i}"] = _pick(per_human[:, i], per_type)
    return columns


def _pick(choice: np.ndarray, options: list[np.ndarray]) -> np.ndarray:
    """``options[choice[b]][b]`` for every team ``b`` (``np.choose``, faster for a few
    options)."""
    picked = options[0]
    for k in range(1, len(options)):
        picked = np.where(choice == k, options[k], picked)
    return picked


@lru_cache(maxsize=16)
def _held_at_goals(space: StateSpace) -> np.ndarray:
    """``[h, n, G]`` int8: the kits of each type each human holds in each goal state."""
    return np.ascontiguousarray(space.allocations[space.goals].transpose(1, 2, 0),
                                dtype=np.int8)


def _gap_columns(spec: PoolSpec,
                 at_goal: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Fair and efficiency gaps of Fair (and FEA) against Efficient, per MODEL.md."""
    efficient, fair = at_goal["efficient"], at_goal["fair"]
    columns = {
        "fair_gap": (1.0 - np.abs(fair["F"])) - (1.0 - np.abs(efficient["F"])),
        "efficiency_gap": fair["E"] - efficient["E"],
    }
    if spec.fea is not None:
        fea = at_goal["fea"]
        lo, hi = spec.fea.lo, spec.fea.hi
        columns["fea_fair_gap"] = ((1.0 - scale_fair_equity(fea["FE"], lo, hi))
                                   - (1.0 - scale_fair_equity(efficient["FE"], lo, hi)))
        columns["fea_efficiency_gap"] = fea["E"] - efficient["E"]
    return columns
