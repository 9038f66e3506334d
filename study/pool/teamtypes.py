"""Team types of MODEL.md: who is the most capable human and how each human's
capabilities and preferences relate.

Everything works on batches ``c, p`` of shape ``[B, h, n]`` so sampling can classify a
million candidate teams at once.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

# "mixed-reversed" is MODEL.md's remaining case (the most capable human positively
# correlated, another negatively): the paper's prior counts it as Mixed, but its Mixed
# results describe the most capable human as the negatively correlated one, so the pool
# keeps the two apart and a protocol says which it means.
TEAM_TYPES = ("mixed", "twins", "negative", "mixed-reversed")


def most_capable_human(c: np.ndarray) -> np.ndarray:
    """``[B]``: the human with the highest single capability (ties to the lowest index)."""
    return np.argmax(c.max(axis=-1), axis=-1)


def positively_correlated(c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``[B, h]``: whether each human's capabilities and preferences go together.

    Two task types: the most capable type is the most preferred one. More types: the
    Spearman correlation of ``c`` and ``p`` is positive (a constant vector counts as not
    correlated).
    """
    if c.shape[-1] == 2:
        return np.argmax(c, axis=-1) == np.argmax(p, axis=-1)
    rank_c = rankdata(c, axis=-1)
    rank_p = rankdata(p, axis=-1)
    rank_c -= rank_c.mean(axis=-1, keepdims=True)
    rank_p -= rank_p.mean(axis=-1, keepdims=True)
    return (rank_c * rank_p).sum(axis=-1) > 1e-12


def team_type_codes(c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``[B]`` int8 indices into ``TEAM_TYPES``.

    Twins: every human positive. Negative: every human negative. Otherwise Mixed when the
    most capable human is negative, Mixed-reversed when it is positive (for two humans,
    exactly MODEL.md's definitions).
    """
    positive = positively_correlated(c, p)
    top = most_capable_human(c)
    top_positive = np.take_along_axis(positive, top[:, None], axis=1)[:, 0]
    codes = np.where(top_positive, TEAM_TYPES.index("mixed-reversed"),
                     TEAM_TYPES.index("mixed")).astype(np.int8)
    codes[positive.all(axis=1)] = TEAM_TYPES.index("twins")
    codes[~positive.any(axis=1)] = TEAM_TYPES.index("negative")
    return codes
