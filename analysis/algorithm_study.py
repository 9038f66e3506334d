"""The simulation study of a protocol's algorithms: what a designer reads before piloting.

The paper's Simulation Studies #1 and #2 (MODEL.md, "Simulation comparisons"), for every
algorithm the protocol declares and every preset its conditions run, against Efficient,
on every team of its pool and per team type:

- how often the algorithm's plan departs from Efficient's (a different goal), and the
  efficiency it costs (``E`` of Efficient's goal minus its own, over all teams and over
  those where it departs);
- each term's gap: the value of every named term (docs/model.md, Algorithms as data) at
  its goal minus at Efficient's; the ``fairness`` gap is the paper's fair gap, tabulated
  in the paper's Study #1 bins (``study.pool.summary.study1_table``);
- the rounds each human spends on their most capable and their most preferred type, for
  the most capable human and the other (the paper's Figure 4, ``study2_table``'s roles);
- per algorithm (a first session), the share of teams whose goal is the one it reaches on
  the paper's capability scale (``study.pool.scale``): a protocol measuring people on
  another scale runs other robots than the paper's.

Goals are read from the pool where it solved the algorithm exactly as the protocol runs
it, and solved (``solve_batch``, vectorised) otherwise. An algorithm with memory over the
study is studied as a first session and after every set of the protocol's other
conditions that can come before it: there the terms are of the study so far (the earlier
sessions' kits and this one's, what memory optimises), for Efficient too.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from study.allocation.algorithms import declaration, declared_algorithm
from study.allocation.model import (
    Algorithm,
    HumanSums,
    most_capable_type,
    most_preferred_type,
    rounds_on_type,
    scale_fair_equity,
    sum_last,
    term_value,
)
from study.allocation.solver import solve_batch
from study.allocation.terms import TERMS
from study.people.scale import protocol_scale
from study.pool.contrast import ROLES, by_role
from study.pool.placing import algorithm_for
from study.pool.scale import same_goal_shares
from study.pool.store import Pool
from study.pool.summary import study1_table
from study.pool.teamtypes import TEAM_TYPES

BASELINE = "efficient"
ALL_TEAMS = "all"
ROLE_NAMES = dict(zip(ROLES, ("most capable human", "other human"), strict=True))
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Robot:
    """One algorithm of the study, by the name the tables use, and the sessions before
    it (an algorithm with memory counts their kits; empty for a first session)."""

    label: str
    algorithm: Algorithm
    earlier: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.label if not self.earlier else f"{self.label} after {', '.join(self.earlier)}"


@dataclass
class AlgorithmStudy:
    """Every table of the study (pandas frames, CSV-ready), the algorithms as data, and
    where each one's goals came from."""

    tables: dict[str, pd.DataFrame]
    algorithms: list[dict[str, Any]]
    pool: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)


def study_robots(protocol: Any, pool_bounds: tuple[float, float] | None) -> list[Robot]:
    """Efficient (the baseline), the presets the conditions run, and every declared
    algorithm; then each condition's algorithm with memory after every set of the other
    conditions that can come before it (the listed order alone when the order is fixed),
    and a declared one with memory that no condition runs after each condition's robot
    (what it would do as a later session of this study)."""
    firsts: dict[str, Robot] = {BASELINE: Robot(BASELINE, Algorithm(BASELINE))}
    by_condition: dict[str, Robot] = {}
    for condition in protocol.conditions:
        algorithm = algorithm_for(condition, pool_bounds)
        label = algorithm.name
        if label in firsts and firsts[label].algorithm != algorithm:
            label = f"{algorithm.name} ({condition.id})"
        firsts.setdefault(label, Robot(label, algorithm))
        by_condition[condition.id] = firsts[label]
    for declared in protocol.algorithms:
        if declared.id not in firsts:
            firsts[declared.id] = Robot(declared.id, declared_algorithm(declared, pool_bounds))
    robots = list(firsts.values())
    ids = [condition.id for condition in protocol.conditions]
    for position, condition_id in enumerate(ids):
        robot = by_condition[condition_id]
        if not robot.algorithm.memory:
            continue
        for earlier in _earlier_sets(ids, position, protocol.condition_order):
            robots.append(Robot(robot.label, robot.algorithm,
                                tuple(by_condition[other].label for other in earlier)))
    run = {robot.label for robot in by_condition.values()}
    for robot in list(firsts.values()):
        if robot.algorithm.memory and robot.label not in run:  # as a session after each
            robots += [Robot(robot.label, robot.algorithm, (label,))
                       for label in dict.fromkeys(r.label for r in by_condition.values())]
    return robots


def _earlier_sets(ids: list[str], position: int, order: str) -> list[tuple[str, ...]]:
    """The conditions that can run before ``ids[position]``, in the listed order: its
    prefix when the order is fixed, else every non-empty set of the others."""
    if order == "fixed":
        return [tuple(ids[:position])] if position else []
    others = [other for k, other in enumerate(ids) if k != position]
    return [combo for size in range(1, len(others) + 1)
            for combo in itertools.combinations(others, size)]


class _Goals:
    """Each robot's goal allocations ``[B, h, n]`` (and the kits of the sessions before),
    read from the pool or solved, each once."""

    def __init__(self, pool: Pool, robots: Sequence[Robot], progress: Progress) -> None:
        self.pool = pool
        self.c, self.p = pool.coefficients
        self.kits = pool.spec.kits
        self.firsts = {robot.label: robot for robot in robots if not robot.earlier}
        self.progress = progress
        self.source: dict[str, str] = {}
        self._goals: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}

    def of(self, label: str, earlier: tuple[str, ...] = ()) -> np.ndarray:
        robot = self.firsts[label]
        key = (label, earlier if robot.algorithm.memory else ())
        if key not in self._goals:
            self._goals[key] = self._solve(robot, key[1])
        return self._goals[key]

    def history(self, earlier: tuple[str, ...]) -> np.ndarray | None:
        """``[B, h, n]`` the kits of the sessions ``earlier`` (in that order) hand out."""
        if not earlier:
            return None
        return sum(self.of(label, earlier[:k]) for k, label in enumerate(earlier)
                   ).astype(float)  # type: ignore[union-attr]

    def _solve(self, robot: Robot, earlier: tuple[str, ...]) -> np.ndarray:
        name = Robot(robot.label, robot.algorithm, earlier).name
        spec = self.pool.spec
        if not earlier and robot.algorithm.name in spec.algorithms and spec.algorithm(
                robot.algorithm.name) == robot.algorithm:
            self.source[name] = "pool"
            return self._pool_goals(robot.algorithm.name)
        started = time.perf_counter()
        self.progress(f"solving {name} for {len(self.c):,} teams")
        goals = solve_batch(self.c, self.p, robot.algorithm, self.kits,
                            history=self.history(earlier)).goal_allocations.astype(np.int16)
        self.source[name] = f"solved ({time.perf_counter() - started:.2f} s)"
        return goals

    def _pool_goals(self, name: str) -> np.ndarray:
        spec = self.pool.spec
        return np.stack([np.stack([self.pool.column(f"{name}_goal_{i}_{j}")
                                   for j in range(spec.task_types)], axis=1)
                         for i in range(spec.humans)], axis=1).astype(np.int16)


def term_values(c: np.ndarray, p: np.ndarray, allocation: np.ndarray,
                bounds: tuple[float, float] | None) -> dict[str, np.ndarray]:
    """``[B]`` every term at the allocations ``[B, h, n]`` (fair_equity scaled by
    ``bounds``, left out without them)."""
    sums = HumanSums(*(np.moveaxis(values, -1, 0) for values in (
        sum_last(c * allocation), sum_last(p * allocation), sum_last(allocation),
        sum_last(c))))   # the sums of HumanSums.of, added type by type (faster for few)
    carrier = Algorithm(BASELINE) if bounds is None else Algorithm(BASELINE, lo=bounds[0],
                                                                   hi=bounds[1])
    values = {}
    for name in TERMS:
        if name == "fair_equity":
            if bounds is not None:
                values[name] = 1.0 - scale_fair_equity(sums.fair_equity(), *bounds)
            continue
        values[name] = term_value(name, sums, carrier)
    return values


class _TeamTypes:
    """Means over every team and over each team type present, by one counting pass."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes.astype(np.intp)
        self.counts = np.bincount(self.codes, minlength=len(TEAM_TYPES))
        self.names = [ALL_TEAMS, *(name for code, name in enumerate(TEAM_TYPES)
                                   if self.counts[code])]

    def teams(self) -> dict[str, int]:
        return {ALL_TEAMS: int(self.counts.sum()),
                **{name: int(self.counts[TEAM_TYPES.index(name)]) for name in self.names[1:]}}

    def means(self, values: np.ndarray, where: np.ndarray | None = None) -> dict[str, float]:
        """The mean of ``values`` (where ``where`` holds) per group; NaN for none."""
        weights = values if where is None else np.where(where, values, 0.0)
        counts = self.counts if where is None else np.bincount(
            self.codes, weights=where, minlength=len(TEAM_TYPES))
        totals = np.bincount(self.codes, weights=weights, minlength=len(TEAM_TYPES))
        with np.errstate(invalid="ignore", divide="ignore"):
            result = {ALL_TEAMS: float(totals.sum() / counts.sum())}
            result.update({name: float(totals[code] / counts[code])
                           for code, name in enumerate(TEAM_TYPES) if name in self.names})
        return result


def _fea_bounds(robots: Sequence[Robot],
                pool_bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    """The bounds the fair_equity term is measured with: the pool's, else those of the
    first algorithm that uses the term."""
    if pool_bounds is not None:
        return pool_bounds
    return next(((robot.algorithm.lo, robot.algorithm.hi) for robot in robots
                 if robot.algorithm.uses_bounds), None)


def run(pool: Pool, protocol: Any, progress: Progress = print) -> AlgorithmStudy:
    """The whole study on every team of ``pool`` for ``protocol``'s algorithms."""
    started = time.perf_counter()
    robots = study_robots(protocol, pool.fea_bounds)
    goals = _Goals(pool, robots, progress)
    c, p = goals.c, goals.p
    groups = _TeamTypes(pool.team_types)
    teams = groups.teams()
    top = pool.column("most_capable_human").astype(np.intp)
    bounds = _fea_bounds(robots, pool.fea_bounds)
    types = {"capable": most_capable_type(c), "preferred": most_preferred_type(p)}
    departures, gaps, rounds, bins = [], [], [], []
    baseline = goals.of(BASELINE)
    baseline_terms: dict[tuple[str, ...], dict[str, np.ndarray]] = {}
    for robot in robots:
        goal = goals.of(robot.label, robot.earlier)
        compared = robot.name != BASELINE   # Efficient is the reference: no gap to itself
        history = goals.history(robot.earlier)
        progress(f"measuring {robot.name}")
        earlier = 0 if history is None else history
        mine = term_values(c, p, goal + earlier, bounds)
        if robot.earlier not in baseline_terms:
            baseline_terms[robot.earlier] = term_values(c, p, baseline + earlier, bounds)
        theirs = baseline_terms[robot.earlier]
        gap = {name: mine[name] - theirs[name] for name in mine}
        departs = (goal != baseline).any(axis=(1, 2))
        cost = -gap["efficiency"]
        gap_means = {name: groups.means(values) for name, values in gap.items()}
        shares, costs = groups.means(departs.astype(float)), groups.means(cost)
        costs_where = groups.means(cost, departs)
        role_means = {(kind, role): groups.means(values) for kind, chosen in types.items()
                      for role, values in by_role(rounds_on_type(goal, chosen).astype(float),
                                                  top).items()}
        for team_type in groups.names:
            row = {"robot": robot.name, "algorithm": robot.label,
                   "earlier": ", ".join(robot.earlier), "team_type": team_type,
                   "teams": teams[team_type]}
            if compared:
                departures.append({**row, "departs_share": shares[team_type],
                                   "efficiency_cost": costs[team_type],
                                   "efficiency_cost_where_departs": costs_where[team_type],
                                   "fairness_gap": gap_means["fairness"][team_type]})
                gaps.append({**row, **{name: means[team_type]
                                       for name, means in gap_means.items()}})
            for role in ROLES:
                rounds.append({"team_type": team_type, "algorithm": robot.name,
                               "human": ROLE_NAMES[role], "teams": teams[team_type],
                               "capable_rounds": role_means["capable", role][team_type],
                               "preferred_rounds": role_means["preferred", role][team_type]})
        table = study1_table(gap["fairness"], gap["efficiency"])
        for measure in ("fair_gap", "efficiency_gap") if compared else ():
            bins += [{"robot": robot.name, "measure": measure.replace("_", " "),
                      "teams_above": table["selected"], "share_above": table[
                          "selected_percent"] / 100, **entry}
                     for entry in table[f"{measure}_bins"]]
    spec = pool.spec
    scale = protocol_scale(protocol)
    progress("solving every algorithm on the paper's capability scale")
    same_goal = same_goal_shares(c, p, [(label, robot.algorithm) for label, robot
                                        in goals.firsts.items()], spec.kits, scale)
    return AlgorithmStudy(
        tables={"departures": pd.DataFrame(departures), "term_gaps": pd.DataFrame(gaps),
                "rounds": pd.DataFrame(rounds), "fair_gap_bins": pd.DataFrame(bins),
                "paper_scale": pd.DataFrame([entry.__dict__ for entry in same_goal])},
        algorithms=[{"robot": robot.name, "goals": goals.source[robot.name],
                     **declaration(robot.algorithm)} for robot in robots],
        pool={"path": str(pool.path), "name": spec.name, "teams": pool.teams,
              "digest": pool.record["digest"], "rounds": sum(spec.kits) // spec.humans,
              "fair_equity_bounds": bounds, "capability_scale": scale.describe(),
              "scale_factor": scale.factor},
        seconds={"study": time.perf_counter() - started})


# --- what the study writes ---------------------------------------------------------------

TABLE_TITLES = {
    "departures": "How often each algorithm departs from Efficient, and what it costs",
    "term_gaps": "Each term's gap: its value at the algorithm's goal minus at Efficient's",
    "rounds": "Mean rounds on each human's most capable / most preferred type, by role",
    "fair_gap_bins": "Simulation Study #1: teams whose fair gap against Efficient is above "
                     "0.60, over the paper's bins",
    "paper_scale": "Share of teams whose goal is the one the algorithm reaches on the paper's "
                   "capability scale (FEA: its weight there, and the share at that weight)",
}


def format_study(study: AlgorithmStudy) -> str:
    """The tables as plain text, all teams first and then each team type."""
    pool = study.pool
    lines = [f"pool {pool['name']} ({pool['teams']:,} teams, digest {pool['digest'][:16]})"]
    lines += [f"  {entry['robot']}: {_describe(entry)}; goals {entry['goals']}"
              for entry in study.algorithms]
    lines.append(f"capability scale: {pool['capability_scale']}")
    for name, frame in study.tables.items():
        shown = frame.drop(columns=[column for column in ("algorithm", "earlier")
                                    if column in frame and name != "rounds"])
        lines += ["", TABLE_TITLES[name],
                  shown.to_string(index=False, float_format="{:.3f}".format)]
    return "\n".join(lines)


def _describe(entry: dict[str, Any]) -> str:
    reward = (f"code {entry['python']}" if entry["python"] else
              " + ".join(f"{weight:g} {term}" for term, weight in entry["terms"].items()))
    bounds = (f", bounds [{entry['fea_bounds'][0]:g}, {entry['fea_bounds'][1]:g}]"
              if entry["fea_bounds"] else "")
    memory = ", memory over the study" if entry["memory"] else ""
    return f"{reward}{bounds}{memory}"


def write(study: AlgorithmStudy, out: Path, progress: Progress = print) -> list[Path]:
    """``out/<table>.csv``, ``out/algorithms.json`` and the figures (PNG and SVG)."""
    import json

    from analysis import figures

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in study.tables.items():
        paths.append(out / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    paths.append(out / "algorithms.json")
    paths[-1].write_text(json.dumps({"pool": study.pool, "algorithms": study.algorithms},
                                    indent=2), encoding="utf-8")
    started = time.perf_counter()
    progress("drawing the figures")
    rounds = study.tables["rounds"]
    paths.append(figures.save(departures_figure(study.tables["departures"]), out,
                              "departures"))
    paths.append(figures.save(term_gaps_figure(study.tables["term_gaps"]), out, "term_gaps"))
    paths.append(figures.save(figures.allocations_figure(
        rounds, "Rounds on each human's most capable and most preferred type",
        study.pool["rounds"]), out, "rounds"))
    study.seconds["figures"] = time.perf_counter() - started
    return paths


def departures_figure(table: pd.DataFrame) -> Any:
    """Per team type and algorithm: the share of teams whose plan departs from Efficient's,
    and the efficiency it costs."""
    import matplotlib.pyplot as plt

    from analysis.figures import grouped_bars

    shown = table
    types = list(dict.fromkeys(shown["team_type"]))
    robots = list(dict.fromkeys(shown["robot"]))
    figure, axes = plt.subplots(2, 1, figsize=(max(6.5, 1.3 * len(types) + 2.5), 6.4),
                                sharex=True)
    for axis, column, label in ((axes[0], "departs_share", "share of teams departing"),
                                (axes[1], "efficiency_cost", "efficiency cost (E)")):
        wide = shown.pivot(index="team_type", columns="robot", values=column)
        grouped_bars(axis, wide, types, robots)
        axis.set_ylabel(label)
        axis.tick_params(axis="x", labelsize=8)
    axes[0].set_ylim(0, 1.05)
    axes[0].legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.suptitle("Departures from Efficient and their efficiency cost")
    figure.tight_layout()
    return figure


def term_gaps_figure(table: pd.DataFrame) -> Any:
    """Every term's mean gap against Efficient (all teams), one row per algorithm."""
    import matplotlib.pyplot as plt

    shown = table[table["team_type"] == ALL_TEAMS]
    terms = [name for name in TERMS if name in shown]
    values = shown[terms].to_numpy(dtype=float)
    limit = max(float(np.nanmax(np.abs(values))) if values.size else 0.0, 1e-9)
    figure, axis = plt.subplots(figsize=(1.0 * len(terms) + 2.5, 0.55 * len(shown) + 1.8))
    image = axis.imshow(values, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    axis.set_xticks(range(len(terms)), [name.replace("_", " ") for name in terms],
                    rotation=35, ha="right", fontsize=8)
    axis.set_yticks(range(len(shown)), list(shown["robot"]), fontsize=8)
    for (row, column), value in np.ndenumerate(values):
        ink = "white" if abs(value) > 0.6 * limit else "black"
        axis.text(column, row, f"{value:+.3f}", ha="center", va="center", fontsize=7,
                  color=ink)
    figure.colorbar(image, ax=axis, label="mean gap against Efficient")
    axis.set_title("Each term's gap against Efficient (all teams)")
    figure.tight_layout()
    return figure
