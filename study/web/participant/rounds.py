"""Round helpers: the cookie a round asks for, the robot's next kits, the teammate's pace.

Everything here is derived from stored rows, never from memory of earlier calls, so a
restarted server continues exactly where the database says the study is.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from study.allocation.solver import Policy
from study.protocol.loader import Protocol
from study.task.cookies import theme_scale
from study.task.decorator import Decorator, round_rng

# A round the scheduler closes later than this after its deadline is closed ``late`` (the
# database could not be written, e.g. a full disk): longer than a lease takeover (2 s) takes.
LATE_SECONDS = 5.0


def close_reason(reason: str, delay: float) -> str:
    """What a closed round records: ``recovery`` at a server's start, else ``deadline``, or
    ``late`` when the scheduler closed it ``delay`` s past its deadline. One rule for a
    person's rounds and their team's, so the two never disagree."""
    return "late" if reason == "deadline" and delay > LATE_SECONDS else reason


def themes_of(protocol: Protocol, participant: dict[str, Any]) -> tuple[str, ...]:
    """The participant's theme per cookie type, as assigned after the ratings."""
    if participant.get("themes"):
        return tuple(json.loads(participant["themes"]))
    return tuple(cookie.theme for cookie in protocol.cookies)


def held_before(allocations: list[dict[str, Any]], humans: int, types: int) -> np.ndarray:
    """``[h, n]`` kits each human holds, from the stored allocation rows."""
    held = np.zeros((humans, types), dtype=int)
    for row in allocations:
        held[row["human"], row["task_type"]] += 1
    return held


def next_kits(policy: Policy, held: np.ndarray) -> tuple[int, ...]:
    """The kit type per human the robot delivers next: the policy asked about the state."""
    return policy.action(held)


def teammate_decorator(protocol: Protocol, teammate: dict[str, Any],
                       round_row: dict[str, Any]) -> Decorator:
    """The agent teammate of a round: its capabilities in the protocol's cookies, its pace
    in the cookies of the round's theme (``theme_scale``)."""
    references = [c.reference_speed for c in protocol.cookies]
    task_type = round_row["teammate_task_type"]
    references[task_type] /= theme_scale(protocol, task_type, round_row.get("teammate_theme"))
    return Decorator(capability=(teammate["c_squares"], teammate["c_letters"]),
                     reference_speed=tuple(references))


def teammate_times(protocol: Protocol, teammate: dict[str, Any], round_row: dict[str, Any],
                   session_number: int) -> list[float]:
    """Seconds into the round at which the agent teammate finishes each cookie; seeded by
    participant, session and round so it replays identically after a restart."""
    rng = round_rng(round_row["participant_id"], session_number, round_row["number"])
    return teammate_decorator(protocol, teammate, round_row).cookie_times(
        round_row["teammate_task_type"], round_row["seconds"], rng)
