"""FEA bounds from a pool: the spread of ``|FE|`` over every goal state of every team.

MODEL.md leaves ``(lo, hi)`` to the protocol and warns that a uniform pool's tiny
capability sums make ``max |FE|`` about 300. So bounds are derived from the pool of the
study at hand, optionally by percentiles, and come with a sentence saying where they
came from, for the protocol's ``pool.fea.bounds_source``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from study.allocation.model import InvalidInput, state_space
from study.pool.columns import goal_sums
from study.pool.sampling import SAMPLING_BLOCK, sample_teams
from study.pool.store import coefficients_of, read_metadata, row_groups, spec_of
from study.protocol.pool_spec import PoolSpec

# How ``derive_bounds`` and ``spec_bounds`` begin a source that took percentiles.
CITED_PERCENTILES = re.compile(r"percentiles ([0-9.]+) and ([0-9.]+) of \|FE\|")


@dataclass(frozen=True)
class Bounds:
    """Derived FEA bounds and the provenance to record beside them."""

    lo: float
    hi: float
    source: str
    goal_states: int

    def toml(self) -> str:
        """The lines to paste under ``[pool.fea]``."""
        return (f"bounds = [{self.lo!r}, {self.hi!r}]\n"
                f"bounds_source = {self.source!r}".replace("'", '"'))


def _abs_fair_equity(path: Path, humans: int, kits: tuple[int, ...]) -> Iterator[np.ndarray]:
    """``|FE|`` ``[G, B]`` over every goal state, one row group of teams at a time."""
    goals = state_space(humans, kits).goal_allocations
    names = [f"{kind}_{i}_{j}" for kind in ("c", "p") for i in range(humans)
             for j in range(len(kits))]
    for batch in row_groups(path, names):
        c, p = coefficients_of(batch, humans, len(kits))
        yield np.abs(goal_sums(c, p, goals).fair_equity())


def _sampled_fair_equity(spec: PoolSpec) -> Iterator[np.ndarray]:
    """``|FE|`` ``[G, B]`` over every goal state of the teams ``spec``'s pool holds, drawn
    as ``study pool build`` draws them (the same teams, nothing solved), a block at a
    time."""
    goals = state_space(spec.humans, spec.kits).goal_allocations
    for start in range(0, spec.teams, SAMPLING_BLOCK):
        c, p = sample_teams(spec, start, min(start + SAMPLING_BLOCK, spec.teams))
        yield np.abs(goal_sums(c, p, goals).fair_equity())


def parse_percentiles(text: str) -> tuple[float, float]:
    """``"1,99"`` -> ``(1.0, 99.0)``, checked."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise InvalidInput("--percentiles", text, "expected LOW,HIGH such as 1,99") from None
    if not 0 <= low < high <= 100:
        raise InvalidInput("--percentiles", text, "need 0 <= LOW < HIGH <= 100")
    return low, high


def cited_percentiles(source: str) -> tuple[float, float] | None:
    """The percentiles a ``bounds_source`` written by this module names (None: min and
    max), so bounds derived again for another pool follow the same rule."""
    found = CITED_PERCENTILES.match(source)
    return None if found is None else (float(found[1]), float(found[2]))


def _spread(parts: Iterable[np.ndarray],
            percentiles: tuple[float, float] | None) -> tuple[float, float, int, str]:
    """Min and max (or percentiles) of the values, their count, and how they were taken.

    Min and max stream through the parts; percentiles hold every value in memory (8
    bytes per goal state: 720 MB for ten million two-human teams).
    """
    if percentiles is None:
        lo, hi, count = np.inf, -np.inf, 0
        for values in parts:
            lo, hi, count = min(lo, values.min()), max(hi, values.max()), count + values.size
        how = "min and max"
    else:
        values = np.concatenate([v.ravel() for v in parts])
        lo, hi = np.percentile(values, percentiles)
        count = values.size
        how = f"percentiles {percentiles[0]:g} and {percentiles[1]:g}"
    if not hi > lo:
        raise InvalidInput("bounds", (float(lo), float(hi)), "the pool's |FE| has no spread")
    return float(lo), float(hi), count, how


def derive_bounds(path: Path | str, percentiles: tuple[float, float] | None = None) -> Bounds:
    """Min and max (or the given percentiles) of ``|FE|`` over the pool's goal states."""
    path = Path(path)
    record = read_metadata(path)
    spec = spec_of(path, record)
    lo, hi, count, how = _spread(_abs_fair_equity(path, spec.humans, spec.kits), percentiles)
    source = (f"{how} of |FE| over {count:,} goal states of pool {path.name} "
              f"({spec.name}, {spec.teams:,} teams, seed {spec.seed}, "
              f"teams digest {record['teams_digest'][:16]}), by `study pool bounds`")
    return Bounds(lo, hi, source, count)


def spec_bounds(spec: PoolSpec, percentiles: tuple[float, float] | None = None,
                by: str = "`study calibrate`") -> Bounds:
    """``derive_bounds`` of the pool ``spec`` builds, without building it: its teams are
    drawn exactly as the build draws them, and ``|FE|`` does not depend on the policies."""
    lo, hi, count, how = _spread(_sampled_fair_equity(spec), percentiles)
    source = (f"{how} of |FE| over {count:,} goal states of the pool of {spec.name} "
              f"({spec.teams:,} teams, seed {spec.seed}, teams digest "
              f"{spec.teams_digest()[:16]}), by {by}")
    return Bounds(lo, hi, source, count)
