"""Team types of MODEL.md: who is the most capable human and how each human's
capabilities and preferences relate.

Everything works on batches ``c, p`` of shape ``[B, h, n]`` so sampling can classify a
million candidate teams at once.
"""

from __future__ import annotations

import numpy as np

from study.allocation.model import first_argmax, sum_last
from study.protocol.pool_names import (
    COMPARATIVE_ADVANTAGE,
    HIGHEST_COEFFICIENT,
    MOST_CAPABLE_READINGS,
    TEAM_TYPES,
)


def best_type(c: np.ndarray) -> np.ndarray:
    """``[B]``: the team's best task type ``t*``, the highest summed capability (ties to
    the lowest index)."""
    return first_argmax(sum_last(np.swapaxes(c, -1, -2)))


def comparative_advantage(c: np.ndarray) -> np.ndarray:
    """``[B, h]``: each human's ``c_i[t*] - mean_{j != t*} c_i[j]`` on the team's best
    type ``t*``."""
    teams, humans, types = c.shape
    flat = np.arange(teams * humans) * types + np.repeat(best_type(c), humans)
    on_best = np.ascontiguousarray(c).reshape(-1).take(flat).reshape(teams, humans)
    elsewhere = (sum_last(c) - on_best) / (types - 1)
    return on_best - elsewhere


def most_capable_human(c: np.ndarray, reading: str = COMPARATIVE_ADVANTAGE) -> np.ndarray:
    """``[B]``: the most capable human of each team (ties to the lowest index).

    By comparative advantage (MODEL.md): the human with the largest advantage on the
    team's best type, the one Efficient gives that type to. By highest coefficient: the
    human with the highest single capability.
    """
    if reading == COMPARATIVE_ADVANTAGE:
        return first_argmax(comparative_advantage(c))
    if reading == HIGHEST_COEFFICIENT:
        return first_argmax(c.max(axis=-1))
    raise ValueError(f"unknown reading of the most capable human: {reading!r}; "
                     f"expected one of {', '.join(MOST_CAPABLE_READINGS)}")


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1-based, ties sharing their average rank (Spearman's
    ranks). Pairwise comparisons: the last axis is a handful of task types."""
    below = (values[..., None, :] < values[..., :, None]).sum(axis=-1)
    equal = (values[..., None, :] == values[..., :, None]).sum(axis=-1)
    return below + (equal + 1) / 2


def positively_correlated(c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``[B, h]``: whether each human's capabilities and preferences go together.

    Two task types: the most capable type is the most preferred one. More types: the
    Spearman correlation of ``c`` and ``p`` is positive (a constant vector counts as not
    correlated).
    """
    if c.shape[-1] == 2:
        return first_argmax(c) == first_argmax(p)
    rank_c = average_ranks(c)
    rank_p = average_ranks(p)
    rank_c -= rank_c.mean(axis=-1, keepdims=True)
    rank_p -= rank_p.mean(axis=-1, keepdims=True)
    return (rank_c * rank_p).sum(axis=-1) > 1e-12


def team_type_codes(c: np.ndarray, p: np.ndarray, reading: str = COMPARATIVE_ADVANTAGE,
                    positive: np.ndarray | None = None) -> np.ndarray:
    """``[B]`` int8 indices into ``TEAM_TYPES``.

    Twins: every human positive. Negative: every human negative. Otherwise Mixed when the
    most capable human is negative, Mixed-reversed when it is positive (for two humans,
    exactly MODEL.md's definitions). ``positive`` ``[B, h]``: each human's correlation
    when it is already known (a tie in someone's preferences broken by a recorded draw).
    """
    if positive is None:
        positive = positively_correlated(c, p)
    top = most_capable_human(c, reading)
    top_positive = positive[np.arange(len(top)), top]
    codes = np.where(top_positive, np.int8(TEAM_TYPES.index("mixed-reversed")),
                     np.int8(TEAM_TYPES.index("mixed")))
    every, some = positive[:, 0].copy(), positive[:, 0].copy()
    for i in range(1, positive.shape[1]):
        every &= positive[:, i]
        some |= positive[:, i]
    codes[every] = TEAM_TYPES.index("twins")
    codes[~some] = TEAM_TYPES.index("negative")
    return codes
