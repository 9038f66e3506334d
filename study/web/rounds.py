"""Round helpers: the cookie a round asks for, the robot's next kits, the teammate's pace.

Everything here is derived from stored rows, never from memory of earlier calls, so a
restarted server continues exactly where the database says the study is.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from study.decorator import Decorator, round_rng
from study.protocol import TASK_NAMES, Protocol
from study.solver import Policy
from study.web.targets import letters_target, squares_target


def target(protocol: Protocol, task_type: int, theme_id: str | None = None,
           ) -> dict[str, Any]:
    """The finished cookie of a task type, decorated with the theme assigned to it: the
    round's own (``rounds.theme``), else the protocol's (rounds stored before themes were
    recorded per round)."""
    theme = protocol.theme_of(task_type) if theme_id is None else protocol.theme(theme_id)
    if TASK_NAMES[task_type] == "letters":
        return {**letters_target(theme.text), "theme": theme.id, "colour": theme.colour}
    return {**squares_target(theme.initials), "theme": theme.id, "colour": theme.colour}


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


def cookie_elements(protocol: Protocol, task_type: int, theme_id: str | None = None) -> int:
    """Elements (letters, or boxes) of a cookie of ``task_type`` with the theme."""
    finished = target(protocol, task_type, theme_id)
    return len(finished["letters"] if "letters" in finished else finished["cells"])


def theme_scale(protocol: Protocol, task_type: int, theme_id: str | None) -> float:
    """How many of the protocol's own cookies of ``task_type`` (its ``[cookies]`` theme,
    which the reference speed is in) one cookie with ``theme_id`` is worth: a theme with
    longer text makes a cookie of more elements. Themes assigned by rating would otherwise
    make the capability depend on the theme."""
    if theme_id is None or theme_id == protocol.cookies[task_type].theme:
        return 1.0
    return cookie_elements(protocol, task_type, theme_id) / cookie_elements(protocol, task_type)


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
