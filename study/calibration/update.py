"""The calibrated protocol: reference speeds, and on request the pool's sampling ranges and
FEA bounds, from a pilot's people, written into the protocol's text with a
``[calibration]`` block recording where each value came from (docs/pilot-to-study.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from study.allocation.terms import InvalidInput
from study.calibration.bounds import bounds_update
from study.calibration.pilot import (
    RANGES_RULE,
    REFERENCE_RULE,
    Calibration,
    Change,
    Pilot,
    Request,
    TypeResult,
    check_target,
    observed_range,
    pool_target,
    provenance_block,
    reference_speed,
    set_value,
    target_source,
    toml_list,
    without_block,
)
from study.protocol.loader import TASK_NAMES, Protocol, parse_protocol


def calibrate(protocol: Protocol, text: str, pilot: Pilot, request: Request) -> Calibration:
    """The new protocol's text (not yet validated) and what changed, or a refusal
    (``InvalidInput``)."""
    if pilot.people < request.min_participants:
        raise InvalidInput("PILOT_DB", str(pilot.path), (
            f"{pilot.people} participant(s) with a completed, measured practice (left out: "
            f"{_describe(pilot.left_out)}); calibration needs at least "
            f"{request.min_participants} (--min-participants)"))
    types = tuple(_type_result(protocol, task_type, pilot, request)
                  for task_type in range(len(TASK_NAMES)))
    changes = [(f"cookies.{t.name}.reference_speed", repr(t.old), repr(t.new)) for t in types]
    rules = [REFERENCE_RULE + "; targets " + ", ".join(
        f"{t.name} [{t.target[0]:g}, {t.target[1]:g}]" for t in types)
        + (" (--target)" if request.targets else f" ({target_source(protocol)})")]
    if request.ranges:
        changes.append(_ranges_change(protocol, types))
        rules.append(RANGES_RULE)
    notes: list[str] = []
    fea = protocol.pool_spec().fea
    if request.fea_bounds and fea is None:
        raise InvalidInput("--fea-bounds", "people", "the protocol's pool has no [pool.fea] "
                                                     "section (no FEA robot to scale)")
    if fea is not None:
        calibrated = parse_protocol(_with_changes(text, changes), protocol.path)
        update = bounds_update(fea, calibrated, pilot, request.fea_bounds,
                               request.percentiles)
        changes += update.changes
        rules += [update.rule] if update.rule else []
        notes += update.notes
    rule = "; ".join(rules)
    new_text = _with_changes(text, changes)
    typical = [float(np.exp(np.log(t.capabilities(t.new)).mean())) for t in types]
    new_text = new_text.rstrip("\n") + "\n" + provenance_block(pilot, rule, changes, typical)
    return Calibration(pilot, types, tuple(changes), rule, new_text, tuple(notes))


def _with_changes(text: str, changes: Sequence[Change]) -> str:
    """``text`` without its ``[calibration]`` block and with ``changes`` made."""
    new_text = without_block(text, "calibration")
    for key, _, new in changes:
        new_text = set_value(new_text, key, new)
    return new_text


def _describe(left_out: dict[str, int]) -> str:
    return ", ".join(f"{count} {why}" for why, count in sorted(left_out.items())) or "none"


def _type_result(protocol: Protocol, task_type: int, pilot: Pilot,
                 request: Request) -> TypeResult:
    name = TASK_NAMES[task_type]
    target = request.targets.get(name) or pool_target(protocol, task_type)
    speeds = pilot.speeds[:, task_type]
    result = TypeResult(name, target, protocol.cookies[task_type].reference_speed,
                        reference_speed(speeds, target), speeds)
    check_target(result)
    return result


def _ranges_change(protocol: Protocol, types: Sequence[TypeResult]) -> Change:
    old = protocol.pool_spec().sample_c
    spelled = old[0] if all(human == old[0] for human in old) else old
    new = [observed_range(t.capabilities(t.new)) for t in types]
    return "pool.sample.c", toml_list(spelled), toml_list(new)
