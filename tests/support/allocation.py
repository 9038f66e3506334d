"""MODEL.md's goal reward term by term in plain Python floats, to check the solver against."""

from __future__ import annotations

import math

import numpy as np

BOUNDS = (0.1, 1.5)


def brute_reward(terms: dict[str, float], c: np.ndarray, p: np.ndarray, held: np.ndarray,
                 bounds: tuple[float, float] = BOUNDS) -> float:
    """MODEL.md's table, term by term, in plain Python floats."""
    humans, types = c.shape
    kits = [float(sum(held[i])) for i in range(humans)]
    weighted_c = [sum(c[i][j] * held[i][j] for j in range(types)) for i in range(humans)]
    weighted_p = [sum(p[i][j] * held[i][j] for j in range(types)) for i in range(humans)]
    mean_kits = sum(kits) / humans
    share_c = [x / mean_kits for x in weighted_c]
    share_p = [x / mean_kits for x in weighted_p]
    combined = [(a + b) / 2 for a, b in zip(share_c, share_p, strict=True)]
    rate_c = [x / k for x, k in zip(weighted_c, kits, strict=True)]
    rate_p = [x / k for x, k in zip(weighted_p, kits, strict=True)]
    equity = [weighted_p[i] / sum(c[i]) for i in range(humans)]
    lo, hi = bounds
    values = {
        "efficiency": sum(weighted_c) / sum(kits),
        "fairness": 1 - (max(combined) - min(combined)),
        "capability_equality": 1 - (max(share_c) - min(share_c)),
        "preference_equality": 1 - (max(share_p) - min(share_p)),
        "fair_equity": 1 - min(max((max(equity) - min(equity) - lo) / (hi - lo), 0.0), 1.0),
        "nash_c": math.prod(rate_c) ** (1 / humans),
        "nash_p": math.prod(rate_p) ** (1 / humans),
        "egalitarian_c": min(rate_c),
        "egalitarian_p": min(rate_p),
        "preference": sum(rate_p) / humans,
    }
    return sum(weight * values[name] for name, weight in terms.items())
