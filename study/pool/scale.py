"""The robots' goals on a protocol's capability scale against their goals on the paper's.

A protocol whose typical person measures ``k`` times the paper's centres runs the paper's
robots on other rewards (MODEL.md, "The capability scale is part of the algorithm"). For
a protocol's teams, each robot is solved twice: on the capabilities as the protocol
measures them, and as the paper's scale would measure the same people
(``Scale.on_paper_scale``), its FEA bounds multiplied by ``k`` there (``|FE| = O/I``
grows by ``k`` when every capability shrinks by ``k``); the share of teams whose goal is
the same says how much of the paper's robot the protocol runs. FEA with weight ``w`` on
scale ``k`` acts as FEA with ``w'`` on the paper's (``weight_on_paper_scale``), so its
goals are compared with FEA at ``w'`` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from study.allocation.model import Algorithm
from study.allocation.solver import solve_batch
from study.allocation.terms import ALGORITHMS
from study.people.scale import Scale, weight_on_paper_scale

FEA_TERMS = ("efficiency", "fair_equity")


@dataclass(frozen=True)
class SameGoal:
    """One robot's teams whose goal is the same on the protocol's scale as on the paper's;
    for FEA, its weight, the weight it amounts to on the paper's scale, and the share of
    teams whose goal is FEA's at that weight there."""

    robot: str
    teams: int
    share: float
    weight: float | None = None
    paper_weight: float | None = None
    share_at_paper_weight: float | None = None


def fea_weight(terms: Sequence[tuple[str, float]]) -> float | None:
    """FEA's efficiency weight, for terms of efficiency and fair_equity alone (the preset
    or a declared algorithm of that form); None for any other reward, whose weights the
    scale does not turn into one number."""
    if tuple(name for name, _ in terms) != FEA_TERMS:
        return None
    return dict(terms)["efficiency"]


def on_paper_scale(algorithm: Algorithm, factor: float, w: float | None = None) -> Algorithm:
    """The algorithm as it acts on capabilities divided by ``factor``: its FEA bounds
    multiplied by ``factor``; with ``w``, FEA's weight replaced by ``w``."""
    lo, hi = ((algorithm.lo * factor, algorithm.hi * factor) if algorithm.uses_bounds
              else (algorithm.lo, algorithm.hi))
    if algorithm.name in ALGORITHMS:   # a preset's terms follow from its name and weight
        return Algorithm(algorithm.name, w=algorithm.w if w is None else w, lo=lo, hi=hi,
                         memory=algorithm.memory)
    terms = algorithm.terms if w is None else ((FEA_TERMS[0], w), (FEA_TERMS[1], 1.0 - w))
    return replace(algorithm, terms=terms, lo=lo, hi=hi)


def _goals(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
           kits: tuple[int, ...]) -> np.ndarray:
    return solve_batch(c, p, algorithm, kits).goal_allocations


def _share_same(a: np.ndarray, b: np.ndarray) -> float:
    same = (a == b).all(axis=(1, 2))
    return float(same.mean()) if len(same) else float("nan")


def same_goal_shares(c: np.ndarray, p: np.ndarray, robots: Sequence[tuple[str, Algorithm]],
                     kits: tuple[int, ...], scale: Scale) -> list[SameGoal]:
    """Per robot ``(name, algorithm)``, the share of teams ``c, p [B, h, n]`` (capabilities
    on the protocol's scale) whose goal is the one it reaches on the paper's scale."""
    paper_c = scale.on_paper_scale(c)
    shares = []
    for name, algorithm in robots:
        mine = _goals(c, p, algorithm, kits)
        share = _share_same(mine, _goals(paper_c, p, on_paper_scale(algorithm, scale.factor),
                                         kits))
        w = fea_weight(algorithm.terms)
        if w is None:
            shares.append(SameGoal(name, len(c), share))
            continue
        paper_w = weight_on_paper_scale(w, scale.factor)
        paper = on_paper_scale(algorithm, scale.factor, paper_w)
        shares.append(SameGoal(name, len(c), share, w, paper_w,
                               _share_same(mine, _goals(paper_c, p, paper, kits))))
    return shares


def format_same_goal(description: str, shares: Sequence[dict[str, Any]],
                     names: dict[str, str] | None = None) -> list[str]:
    """The scale (``Scale.describe``) and each robot's share (``SameGoal`` as a mapping, as
    ``--json`` prints it) as plain text lines; ``names``: how each robot is shown."""
    names = names or {}
    lines = [f"capability scale: {description}",
             f"  {'robot':<26}same goal on the paper's scale"]
    for entry in shares:
        line = (f"  {names.get(entry['robot'], entry['robot']):<26}"
                f"{100 * entry['share']:.1f}% of {entry['teams']:,} teams")
        if entry["paper_weight"] is not None:
            line += (f"; FEA w = {entry['weight']:g} acts as the paper's FEA at w = "
                     f"{entry['paper_weight']:.2f} (its goal in "
                     f"{100 * entry['share_at_paper_weight']:.1f}%)")
        lines.append(line)
    return lines
