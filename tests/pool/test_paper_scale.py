"""The robots on a protocol's capability scale against the paper's (``study.pool.scale``):
the same goals at the paper's scale, other goals for Fair at 0.29 times it, FEA acting as
the paper's FEA at the weight the scale turns its own into, and every shipped protocol's
robots reaching the paper's goals (MODEL.md, "The capability scale is part of the
algorithm")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.protocols import study2_at

from study.allocation.algorithms import declared_algorithm
from study.allocation.model import Algorithm
from study.allocation.solver import solve_batch
from study.cli import main as study_main
from study.people.scale import PAPER_CENTRES, Scale, protocol_scale
from study.pool import Pool, PoolSpec, build_pool
from study.pool.placing import algorithm_for
from study.pool.sampling import sample_teams
from study.pool.scale import on_paper_scale, same_goal_shares
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ROOT / "protocols"
TEAMS = 5_000
BOUNDS = (0.05, 9.0)   # FEA bounds of a paper-scale pool, about study2's


def scale_at(k: float) -> Scale:
    """A scale whose typical person measures ``k`` times the paper's centres."""
    return Scale(tuple(k * centre for centre in PAPER_CENTRES), (0.33 / k, 0.07 / k))


def robots(w: float = 0.7) -> list[tuple[str, Algorithm]]:
    return [("efficient", Algorithm("efficient")), ("fair", Algorithm("fair")),
            ("fea", Algorithm("fea", w=w, lo=BOUNDS[0], hi=BOUNDS[1]))]


def study2_teams() -> tuple[np.ndarray, np.ndarray]:
    """Teams drawn from the paper's Study #2 ranges, as its scale measures them."""
    spec = PoolSpec.from_protocol(PROTOCOLS / "study2-paper.toml").with_changes(teams=TEAMS)
    c, p = sample_teams(spec, 0, TEAMS)
    return np.minimum(c, 0.99), p


def test_on_the_papers_scale_every_robot_reaches_its_goal():
    c, p = study2_teams()
    shares = same_goal_shares(c, p, robots(), (8, 8), scale_at(1.0))
    assert [entry.robot for entry in shares] == ["efficient", "fair", "fea"]
    assert [entry.share for entry in shares] == [1.0, 1.0, 1.0]
    assert all(entry.teams == TEAMS for entry in shares)
    fea = shares[2]
    assert fea.paper_weight == pytest.approx(0.7) and fea.share_at_paper_weight == 1.0
    assert shares[0].paper_weight is None and shares[1].paper_weight is None


def test_at_029_fair_chooses_other_goals_and_fea_acts_as_the_papers_at_its_weight_there():
    """The people of the paper's ranges measured at 0.29 times its scale: Fair reaches the
    paper's goal in about a fifth of the teams (the issue's 21 %); FEA at w = 0.7 reaches
    the goal of the paper's FEA at w = 0.40 in all but a few."""
    c, p = study2_teams()
    scale = scale_at(0.29)
    measured = c * np.asarray(scale.factors)
    assert np.allclose(scale.on_paper_scale(measured), c)
    shares = {entry.robot: entry for entry in same_goal_shares(measured, p, robots(),
                                                               (8, 8), scale)}
    assert shares["efficient"].share == 1.0, "one factor for both types: the same order"
    assert 0.10 < shares["fair"].share < 0.35
    fea = shares["fea"]
    assert fea.paper_weight == pytest.approx(0.40, abs=0.005)
    assert fea.share_at_paper_weight >= 0.99
    assert fea.share < fea.share_at_paper_weight
    # the same figure solved here: FEA w = 0.7 on the measured capabilities against the
    # paper's FEA at 0.40 on the paper's, its bounds 0.29 times as wide apart
    mine = solve_batch(measured, p, Algorithm("fea", w=0.7, lo=BOUNDS[0], hi=BOUNDS[1]),
                       (8, 8)).goal_allocations
    papers = solve_batch(c, p, Algorithm("fea", w=fea.paper_weight, lo=0.29 * BOUNDS[0],
                                         hi=0.29 * BOUNDS[1]), (8, 8)).goal_allocations
    same = (mine == papers).all(axis=(1, 2)).mean()
    assert same == pytest.approx(fea.share_at_paper_weight, abs=1e-12)


def test_the_papers_scale_multiplies_the_fea_bounds_and_keeps_the_rest():
    fea = on_paper_scale(Algorithm("fea", w=0.7, lo=0.5, hi=10.0), 0.25)
    assert (fea.name, fea.w, fea.lo, fea.hi) == ("fea", 0.7, 0.125, 2.5)
    assert on_paper_scale(Algorithm("fea", w=0.7, lo=0.5, hi=10.0), 0.25, w=0.4).w == 0.4
    lean = Algorithm("lean", terms={"efficiency": 0.6, "fair_equity": 0.4}, lo=1.0, hi=3.0,
                     memory=True)
    moved = on_paper_scale(lean, 2.0, w=0.75)
    assert dict(moved.terms) == {"efficiency": 0.75, "fair_equity": 0.25}
    assert (moved.lo, moved.hi, moved.memory) == (2.0, 6.0, True)
    assert on_paper_scale(Algorithm("fair"), 0.25) == Algorithm("fair")


def test_study_contrast_prints_each_robots_goal_on_the_papers_scale(tmp_path, capsys):
    path = study2_at(tmp_path, 1.15, 0.244, teams=TEAMS)
    pools = tmp_path / "pools"
    assert study_main(["contrast", str(path), "--pools", str(pools)]) == 0
    out = capsys.readouterr().out
    assert study_main(["contrast", str(path), "--pools", str(pools), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["paper_scale"]
    scale = protocol_scale(load_protocol(path))
    assert figures["factor"] == pytest.approx(scale.factor) and figures["off"]
    assert f"capability scale: {scale.describe()}" in out
    assert scale.describe().startswith("the human model's typical person measures")
    efficient, fea = figures["robots"]
    assert (efficient["robot"], fea["robot"]) == ("efficient", "fea")
    assert fea["paper_weight"] == pytest.approx(0.40, abs=0.005)
    assert (f"  fea (Robot Pat)           {100 * fea['share']:.1f}% of {fea['teams']:,} "
            f"teams; FEA w = 0.7 acts as the paper's FEA at w = 0.40") in out
    pool = Pool.open(next(pools.glob("*.parquet")))
    rows = np.flatnonzero(pool.eligible())
    c, p = pool.coefficients
    expected = same_goal_shares(c[rows], p[rows], [("fea", algorithm_for(
        load_protocol(path).conditions[1], pool.fea_bounds))], pool.spec.kits, scale)
    assert fea["teams"] == len(rows) > 0 and fea["share"] == expected[0].share < 0.9


def test_every_shipped_protocols_robots_reach_the_papers_goals(tmp_path):
    """Read as the protocols are on disk: each one's robots (its conditions' and its
    declared algorithms) on 20,000 teams of its pool, the target teams' share whose goal
    is the one the robot reaches on the paper's scale."""
    table, low = [], []
    for path in sorted(PROTOCOLS.glob("*.toml")):
        protocol = load_protocol(path)
        spec = protocol.pool_spec().with_changes(teams=20_000)
        pool = Pool.open(build_pool(spec, tmp_path / f"{path.stem}.parquet", progress=False,
                                    workers=1))
        rows = np.flatnonzero(pool.eligible())
        c, p = pool.coefficients
        chosen = [(condition.id, algorithm_for(condition, pool.fea_bounds))
                  for condition in protocol.conditions]
        chosen += [(declared.id, declared_algorithm(declared, pool.fea_bounds))
                   for declared in protocol.algorithms if declared.id not in dict(chosen)]
        scale = protocol_scale(protocol)
        for entry in same_goal_shares(c[rows], p[rows], chosen, spec.kits, scale):
            table.append(f"{path.stem:<14}x{scale.factor:.3f}  {entry.robot:<10}"
                         f"{100 * entry.share:6.1f}%  of {entry.teams:,} target teams")
            if entry.share < 0.99:
                low.append(table[-1])
    print("\n".join(table))
    assert len(table) >= 16
    assert low == []
