"""FEA bounds of a calibrated protocol: those of the pool it builds, or those of the live
teams its pilot's people would form in that pool (MODEL.md, "Measuring a participant").

New sampling ranges make a new pool, and FEA's bounds must be that pool's (``study check``
and ``study serve`` refuse bounds citing other teams), so ``study calibrate`` derives them
again, by the rule the old ``bounds_source`` names, from the teams the new protocol
builds. With ``--fea-bounds people`` the bounds come from the pilot's people instead: each
is placed, offline, by the calibrated protocol's teammate rule in its pool (capabilities
under the new reference speeds), and the bounds are taken over the goal states of the
live teams they form. So a pilot whose people no pool member placed (the pilot that
needs calibrating) still gives them. Such bounds are not the pool's: the protocol then
says so (``bounds_fixed = true``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from study.allocation.model import Team
from study.allocation.terms import InvalidInput
from study.calibration.pilot import Change, Pilot, toml_list, toml_string
from study.pool.bounds import Bounds, cited_percentiles, spec_bounds
from study.protocol.loader import Protocol
from study.protocol.pool_spec import FeaSettings
from study.task.decorator import HIGHEST, LOWEST


@dataclass(frozen=True)
class BoundsUpdate:
    """The changes to ``[pool.fea]``, the rule for the ``[calibration]`` block (None when
    nothing was derived) and lines for the table."""

    changes: list[Change]
    rule: str | None
    notes: list[str]


def bounds_update(old: FeaSettings, protocol: Protocol, pilot: Pilot, people: bool,
                  percentiles: tuple[float, float] | None) -> BoundsUpdate:
    """The bounds the calibrated ``protocol`` (its text with every other change made)
    should carry, against ``old``, the bounds it was calibrated from."""
    spec = protocol.pool_spec()
    current = spec.stale_bounds() is None  # fixed, or already the new pool's
    if people:
        kept = old if current else _as_fea(old, spec_bounds(spec, cited_percentiles(
            old.source)))
        return _people_update(old, kept, protocol, pilot, percentiles)
    if old.fixed:
        return BoundsUpdate([], None, ["pool.fea.bounds: kept (bounds_fixed = true)"])
    if current:
        return BoundsUpdate([], None, [])
    derived = spec_bounds(spec, cited_percentiles(old.source))
    changes = _changes(old, derived.lo, derived.hi, derived.source)
    how = derived.source.split(" of |FE|")[0]
    return BoundsUpdate(changes, f"FEA bounds = {how} of |FE| over the goal states of the "
                                 f"calibrated protocol's pool", [])


def _as_fea(old: FeaSettings, bounds: Bounds) -> FeaSettings:
    return replace(old, lo=bounds.lo, hi=bounds.hi, source=bounds.source)


def _changes(old: FeaSettings, lo: float, hi: float, source: str,
             fixed: bool = False) -> list[Change]:
    """The ``[pool.fea]`` values that differ from ``old``."""
    changes = []
    if (lo, hi) != (old.lo, old.hi):
        changes.append(("pool.fea.bounds", toml_list([old.lo, old.hi]), toml_list([lo, hi])))
    if source != old.source:
        changes.append(("pool.fea.bounds_source", toml_string(old.source),
                        toml_string(source)))
    if fixed != old.fixed:
        changes.append(("pool.fea.bounds_fixed", str(old.fixed).lower(), str(fixed).lower()))
    return changes


def _people_update(old: FeaSettings, pool_fea: FeaSettings, protocol: Protocol,
                   pilot: Pilot, percentiles: tuple[float, float] | None) -> BoundsUpdate:
    teams, unplaced = pilot_live_teams(protocol, pilot, pool_fea)
    if not teams:
        raise InvalidInput("--fea-bounds", "people", (
            f"none of the pilot's {pilot.people} participants is placed in a team by the "
            f"calibrated protocol's teammate rule ({_reasons(unplaced)}); take the pool's "
            f"bounds (leave out --fea-bounds)"))
    lo, hi, count = people_bounds(teams, protocol.kits, percentiles)
    how = (f"percentiles {percentiles[0]:g} and {percentiles[1]:g}" if percentiles
           else "min and max")
    source = (f"{how} of |FE| over {count:,} goal states of the live teams of "
              f"{len(teams)} pilot participants, formed offline in the calibrated "
              f"protocol's pool (pilot {pilot.path.name}, sha256 {pilot.digest[:16]}; "
              f"capabilities under the calibrated reference speeds), by `study calibrate`")
    notes = [f"FEA bounds from the live teams of {len(teams)} of {pilot.people} pilot "
             f"participants, placed offline by rule {protocol.pool_spec().teammate.rule} "
             f"in the calibrated protocol's pool (not placed: {_reasons(unplaced)})"]
    return BoundsUpdate(_changes(old, lo, hi, source, fixed=True),
                        f"FEA bounds = {how} of |FE| over the goal states of the live teams "
                        f"the pilot's people form, offline, in the calibrated protocol's pool "
                        f"(FEA scaled meanwhile by {_describe(pool_fea)}); fixed on purpose "
                        f"(bounds_fixed)", notes)


def _describe(fea: FeaSettings) -> str:
    return f"[{fea.lo:.3g}, {fea.hi:.3g}]"


def _reasons(unplaced: dict[str, int]) -> str:
    return ", ".join(f"{count} {why}" for why, count in sorted(unplaced.items())) or "none"


def pilot_live_teams(protocol: Protocol, pilot: Pilot,
                     fea: FeaSettings) -> tuple[list[Team], dict[str, int]]:
    """The live team each pilot participant forms under ``protocol`` (capabilities: their
    raw speeds over its reference speeds), placed by its teammate rule in its pool built
    with FEA bounds ``fea``, tied ratings read by its ``tied_ratings`` (a random reading
    by the pilot's recorded draw, the lowest index where it drew none), a clipped
    capability left unplaced under ``clipped_capability = "unmatched"``; and why the
    others were not placed."""
    from study.pool import NoEligibleTeam, Pool, ensure_pool
    from study.pool.placing import PoolMembers, clipped, place, tied

    spec = replace(protocol.pool_spec(), fea=fea)
    if spec.humans != 2:
        raise InvalidInput("--fea-bounds", "people", "live teams are formed offline for a "
                                                     "participant and an agent teammate; a "
                                                     "[team] is formed in its lobby")
    references = np.array([cookie.reference_speed for cookie in protocol.cookies])
    teams: list[Team] = []
    unplaced: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="calibrate-pool-") as directory:
        path = ensure_pool(spec, directory, progress=False)
        source = PoolMembers(Pool.load(path), path.name)
        for k in range(pilot.people):
            c = np.clip(pilot.speeds[k] / references, LOWEST, HIGHEST)
            p = pilot.preferences[k]
            if protocol.clipped_capability == "unmatched" and clipped(c):
                unplaced["clipped capability"] = unplaced.get("clipped capability", 0) + 1
                continue
            if protocol.tied_ratings == "unmatched" and tied(p):
                unplaced["tied ratings"] = unplaced.get("tied ratings", 0) + 1
                continue
            drawn = pilot.ties[k] if protocol.tied_ratings == "random" and pilot.ties else None
            try:
                placed = place(source, c, p, protocol.conditions, protocol.kits, drawn)
            except NoEligibleTeam:
                placed = None
            if placed is None:
                unplaced["unmatched"] = unplaced.get("unmatched", 0) + 1
            else:
                teams.append(placed.team)
    return teams, unplaced


def people_bounds(teams: Sequence[Team], kits: tuple[int, ...],
                  percentiles: tuple[float, float] | None) -> tuple[float, float, int]:
    """Min and max (or percentiles) of ``|FE|`` over every goal state of ``teams``; lo,
    hi and the number of goal states."""
    from study.allocation.model import state_space
    from study.pool.columns import goal_sums

    c = np.stack([team.c for team in teams])
    p = np.stack([team.p for team in teams])
    goals = state_space(c.shape[1], tuple(kits)).goal_allocations
    values = np.abs(goal_sums(c, p, goals).fair_equity()).ravel()
    lo, hi = (np.percentile(values, percentiles) if percentiles
              else (values.min(), values.max()))
    if not hi > lo:
        raise InvalidInput("--fea-bounds", "people", "|FE| over the pilot's live teams has "
                                                     "no spread")
    return float(lo), float(hi), int(values.size)
