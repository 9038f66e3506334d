"""The contrast a study can show, read off its pool before anyone is recruited.

A within-subject study compares robots; where two robots give a team the same plan there
is nothing to compare, and where they differ by a round or two the contrast is weak. For
the protocol's target teams (the pool teams its ``[pool.teammate]`` criteria admit), this
reads from the pool's stored columns, per pair of the protocol's robots, the share of
teams whose goals differ and the rounds that differ per role (the most capable human and
the other), and per robot the rounds each role spends on its most capable and its most
preferred type (the paper's Figure 4). Nothing is solved again: the pool stores each
algorithm's goal and those rounds. Given the protocol's capability scale, it adds per robot
the share of target teams whose goal is the one it reaches on the paper's scale
(``study.pool.scale``, solved there).

Two robots that reach different goals follow different plans; two that reach the same
goal follow the same plan unless a condition orders its rounds differently
(``round_order``), which changes when, not how many, kits each human gets.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.people.scale import Scale
from study.pool.placing import algorithm_for
from study.pool.scale import format_same_goal, same_goal_shares
from study.pool.store import Pool
from study.protocol.pool_spec import PoolSpec

ROLES = ("most_capable", "other")


@dataclass(frozen=True)
class Robot:
    """A condition's robot as the pool solved it (its algorithm's columns)."""

    condition: str
    robot: str
    algorithm: str


def pool_robots(spec: PoolSpec, conditions: Sequence[Any]) -> tuple[list[Robot], list[str]]:
    """The conditions whose robots the pool solved exactly as the study will (the same
    algorithm, and for FEA the pool's weight and bounds), and why the others are left out."""
    robots, left_out = [], []
    for condition in conditions:
        why = _not_in_pool(spec, condition)
        if why is None:
            robots.append(Robot(condition.id, condition.robot, condition.algorithm))
        else:
            left_out.append(f"{condition.id}: {why}")
    return robots, left_out


def _not_in_pool(spec: PoolSpec, condition: Any) -> str | None:
    if condition.algorithm not in spec.algorithms:
        return f"the pool does not solve {condition.algorithm}"
    declared = getattr(condition, "declared", None)
    if declared is not None and declared.memory:
        return (f"{condition.algorithm} has memory over the study and the pool solves a "
                "first session; `analysis simulate` studies it after the sessions before it")
    if condition.algorithm != "fea" or spec.fea is None:
        return None
    if condition.w != spec.fea.w:
        return f"FEA w {condition.w:g}, the pool's {spec.fea.w:g}"
    if condition.fea_bounds is not None and tuple(condition.fea_bounds) != (spec.fea.lo,
                                                                            spec.fea.hi):
        return "its own FEA bounds, not the pool's"
    return None


def by_role(values: np.ndarray, top: np.ndarray) -> dict[str, np.ndarray]:
    """``[B, h]`` per-human values as the most capable human's and the others' mean."""
    mine = values[np.arange(len(top)), top]
    others = (values.sum(axis=1) - mine) / (values.shape[1] - 1)
    return {"most_capable": mine, "other": others}


def _goals(pool: Pool, algorithm: str, rows: np.ndarray) -> np.ndarray:
    """``[B, h, n]`` kits of each type each human holds at the algorithm's goal."""
    spec = pool.spec
    return np.stack([np.stack([pool.column(f"{algorithm}_goal_{i}_{j}")[rows]
                               for j in range(spec.task_types)], axis=1)
                     for i in range(spec.humans)], axis=1).astype(int)


def _rounds(pool: Pool, algorithm: str, kind: str, rows: np.ndarray) -> np.ndarray:
    """``[B, h]`` rounds each human spends on their most capable (or preferred) type."""
    return np.stack([pool.column(f"{algorithm}_rounds_{kind}_{i}")[rows]
                     for i in range(pool.spec.humans)], axis=1).astype(float)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def contrast(pool: Pool, conditions: Sequence[Any], scale: Scale | None = None
             ) -> dict[str, Any]:
    """Every figure of the contrast, as plain data (``study contrast --json``); with the
    protocol's ``scale``, each condition's robot on the paper's scale too."""
    spec = pool.spec
    rows = np.flatnonzero(pool.eligible(spec.teammate))
    top = pool.column("most_capable_human")[rows].astype(np.intp)
    robots, left_out = pool_robots(spec, conditions)
    goals = {robot.algorithm: _goals(pool, robot.algorithm, rows) for robot in robots}
    pairs = []
    for a, b in itertools.combinations(robots, 2):
        moved = np.abs(goals[a.algorithm] - goals[b.algorithm]).sum(axis=2) / 2  # [B, h]
        differ = moved.sum(axis=1) > 0
        roles = by_role(moved, top)
        pairs.append({"robots": [a.condition, b.condition], "teams_differ": int(differ.sum()),
                      "share_differ": float(differ.mean()) if len(rows) else float("nan"),
                      "rounds_differ": {role: _mean(roles[role]) for role in ROLES},
                      "rounds_differ_where_differ": {role: _mean(roles[role][differ])
                                                     for role in ROLES}})
    per_robot = {}
    for robot in robots:
        kinds = {kind: by_role(_rounds(pool, robot.algorithm, kind, rows), top)
                 for kind in ("capable", "preferred")}
        per_robot[robot.condition] = {role: {kind: _mean(kinds[kind][role])
                                             for kind in kinds} for role in ROLES}
    return {"pool": {"name": spec.name, "path": str(pool.path), "teams": pool.teams,
                     "digest": pool.record["digest"]},
            "target": spec.teammate.describe(), "target_teams": len(rows),
            "rounds": sum(spec.kits) // spec.humans,
            "robots": [robot.__dict__ for robot in robots], "left_out": left_out,
            "pairs": pairs, "per_robot": per_robot,
            **({} if scale is None else {"paper_scale": paper_scale(pool, rows, conditions,
                                                                    scale)})}


def paper_scale(pool: Pool, rows: np.ndarray, conditions: Sequence[Any],
                scale: Scale) -> dict[str, Any]:
    """The scale and, per condition, the share of the teams ``rows`` whose goal is the one
    its robot reaches on the paper's scale (FEA bounds: the protocol's, else the pool's; a
    robot with memory as a first session)."""
    c, p = pool.coefficients
    robots = [(condition.id, algorithm_for(condition, pool.fea_bounds))
              for condition in conditions]
    shares = same_goal_shares(c[rows], p[rows], robots, pool.spec.kits, scale)
    return {"typical": list(scale.typical), "factors": list(scale.factors),
            "factor": scale.factor, "off": scale.off, "description": scale.describe(),
            "robot_names": {condition.id: condition.robot for condition in conditions},
            "robots": [share.__dict__ for share in shares]}


def format_contrast(figures: dict[str, Any]) -> str:
    """The contrast as plain text: pairs, then rounds per robot and role."""
    pool = figures["pool"]
    names = {robot["condition"]: f"{robot['condition']} (Robot {robot['robot']})"
             for robot in figures["robots"]}
    lines = [f"pool {pool['name']} ({pool['teams']:,} teams, digest {pool['digest'][:16]}): "
             f"{figures['target_teams']:,} target teams ({figures['target']})"]
    lines += [f"  left out: {why}" for why in figures["left_out"]]
    lines += ["", "robots compared       plans differ         mean rounds that differ: most "
                  "capable, other (where they differ)"]
    for pair in figures["pairs"]:
        label = " / ".join(pair["robots"])
        share = f"{100 * pair['share_differ']:.1f}% ({pair['teams_differ']:,})"
        every, differ = pair["rounds_differ"], pair["rounds_differ_where_differ"]
        lines.append(f"  {label:<20}{share:<21}{every['most_capable']:.2f}, "
                     f"{every['other']:.2f} ({differ['most_capable']:.2f}, "
                     f"{differ['other']:.2f})")
    lines += ["", f"mean rounds of {figures['rounds']} on each role's most capable / most "
                  f"preferred type",
              f"  {'robot':<26}{'most capable: capable':>22}{'preferred':>11}"
              f"{'other: capable':>16}{'preferred':>11}"]
    for condition, roles in figures["per_robot"].items():
        top, other = roles["most_capable"], roles["other"]
        lines.append(f"  {names[condition]:<26}{top['capable']:>22.2f}"
                     f"{top['preferred']:>11.2f}{other['capable']:>16.2f}"
                     f"{other['preferred']:>11.2f}")
    if "paper_scale" in figures:
        scale = figures["paper_scale"]
        shown = {condition: f"{condition} (Robot {robot})"
                 for condition, robot in scale["robot_names"].items()}
        lines += ["", *format_same_goal(scale["description"], scale["robots"], shown)]
    return "\n".join(lines)
