"""FEA bounds from a pool: the spread of ``|FE|`` over every goal state of every team.

MODEL.md leaves ``(lo, hi)`` to the protocol and warns that a uniform pool's tiny
capability sums make ``max |FE|`` about 300. So bounds are derived from the pool of the
study at hand, optionally by percentiles, and come with a sentence saying where they
came from, for the protocol's ``pool.fea.bounds_source``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from study.model import InvalidInput, state_space
from study.pool.columns import goal_sums
from study.pool.store import coefficients_of, read_metadata, row_groups, spec_of


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
    space = state_space(humans, kits)
    goals = space.goal_allocations
    names = [f"{kind}_{i}_{j}" for kind in ("c", "p") for i in range(humans)
             for j in range(len(kits))]
    for batch in row_groups(path, names):
        c, p = coefficients_of(batch, humans, len(kits))
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


def derive_bounds(path: Path | str, percentiles: tuple[float, float] | None = None) -> Bounds:
    """Min and max (or the given percentiles) of ``|FE|`` over the pool's goal states.

    Min and max stream through the file; percentiles hold every ``|FE|`` value in memory
    (8 bytes per goal state: 720 MB for ten million two-human teams).
    """
    path = Path(path)
    record = read_metadata(path)
    spec = spec_of(path, record)
    parts = _abs_fair_equity(path, spec.humans, spec.kits)
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
    source = (f"{how} of |FE| over {count:,} goal states of pool {path.name} "
              f"({spec.name}, {spec.teams:,} teams, seed {spec.seed}, "
              f"teams digest {record['teams_digest'][:16]}), by `study pool bounds`")
    return Bounds(float(lo), float(hi), source, count)
