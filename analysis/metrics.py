"""The fairness and welfare metrics of the seed papers, for sessions and for pools.

Definitions follow the research notes on the seed papers (bakery notation: human 0 is the
participant in a session, ``T_t[i][j]`` kits of type ``j`` held by human ``i`` after round
``t``, ``P_i = sum_j p[i][j] T[i][j]`` the preference outcome and ``C_i = sum_j c[i][j]
T[i][j]`` the capability-weighted contribution):

- windowed fairness (Hu et al.'s short-term fairness): MODEL.md's ``F`` on the kits of the
  last ``w`` rounds only, and the windowed opportunity gap, the difference in the share of
  those rounds each human spent on their most capable type;
- Jensen-Shannon divergence (bits, fixed bins on [0, 1]) and the 1-Wasserstein distance
  between two distributions of a per-person outcome (FAIRO; Hu et al.);
- welfare of the two humans' outcomes (Alamdari et al.): utilitarian ``sum_i U_i``,
  Rawlsian ``min_i U_i`` and log-Nash ``sum_i log(U_i + 1)``;
- counterfactuals (La Malfa et al.): the seat swap ``P_0(c, p) - P_1(swap(c, p))`` (zero
  for an allocator that ignores seats) and the preference flip ``C_0(c, p) - C_0(c, p')``
  with human 0's two preferences swapped (what wanting the other task costs in
  contribution; a kits-on-capable-type version beside it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from scipy.spatial.distance import jensenshannon

from study.allocation.model import Algorithm, most_capable_type
from study.allocation.solver import solve_batch

DEFAULT_WINDOW = 2
DEFAULT_BINS = 20


def window_kits(trajectory: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Kits ``[..., R, h, n]`` handed out in the last ``window`` rounds up to each round,
    and the number of rounds that window holds (fewer at the start), ``[R]``."""
    trajectory = np.asarray(trajectory)
    rounds = trajectory.shape[-3] - 1
    after = np.arange(1, rounds + 1)
    before = np.maximum(after - window, 0)
    kits = trajectory[..., after, :, :] - trajectory[..., before, :, :]
    return kits, (after - before).astype(float)


def windowed_fairness(c: np.ndarray, p: np.ndarray, trajectory: np.ndarray,
                      window: int = DEFAULT_WINDOW) -> dict[str, np.ndarray]:
    """Per round ``[..., R]``: the signed windowed ``F`` (MODEL.md's mean of the equality
    of capability and of preference, on the window's kits only; positive favours human 0)
    and the windowed opportunity gap ``Opp_0 - Opp_1``."""
    kits, length = window_kits(trajectory, window)
    c = np.asarray(c, dtype=float)[..., None, :, :]
    p = np.asarray(p, dtype=float)[..., None, :, :]
    per_human_c = (c * kits).sum(-1) / length[:, None]
    per_human_p = (p * kits).sum(-1) / length[:, None]
    f = ((per_human_c[..., 0] - per_human_c[..., 1])
         + (per_human_p[..., 0] - per_human_p[..., 1])) / 2
    capable = most_capable_type(np.asarray(c)[..., 0, :, :])[..., None, :]
    on_capable = np.take_along_axis(kits, np.broadcast_to(
        capable[..., None], (*kits.shape[:-1], 1)), axis=-1)[..., 0] / length[:, None]
    return {"F_window": f, "opportunity_gap_window": on_capable[..., 0] - on_capable[..., 1]}


def windowed_summary(c: np.ndarray, p: np.ndarray, trajectory: np.ndarray,
                     window: int = DEFAULT_WINDOW) -> pd.DataFrame:
    """One row per trajectory: the mean and worst ``|F|`` and opportunity gap over windows."""
    series = windowed_fairness(c, p, trajectory, window)
    columns = {}
    for name, values in series.items():
        gap = np.abs(np.atleast_2d(values))
        columns[f"{name}_mean"] = gap.mean(axis=-1)
        columns[f"{name}_worst"] = gap.max(axis=-1)
    return pd.DataFrame(columns).assign(window=window)


def jensen_shannon_bits(a: np.ndarray, b: np.ndarray, bins: int = DEFAULT_BINS,
                        value_range: tuple[float, float] = (0.0, 1.0)) -> float:
    """Jensen-Shannon divergence in bits (0 same, 1 disjoint) between the histograms of
    two samples on fixed bins: ``KL(P||M)/2 + KL(Q||M)/2``, ``M = (P + Q)/2``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(a) or not len(b):
        return float("nan")
    edges = np.linspace(*value_range, bins + 1)
    counts_a = np.histogram(np.clip(a, *value_range), edges)[0]
    counts_b = np.histogram(np.clip(b, *value_range), edges)[0]
    return float(jensenshannon(counts_a, counts_b, base=2) ** 2)


def wasserstein(a: np.ndarray, b: np.ndarray) -> float:
    """1-Wasserstein distance between two samples: the area between their CDFs."""
    if not len(a) or not len(b):
        return float("nan")
    return float(stats.wasserstein_distance(np.asarray(a, float), np.asarray(b, float)))


def outcomes(c: np.ndarray, p: np.ndarray, final: np.ndarray) -> dict[str, np.ndarray]:
    """Per human ``[..., h]``: preference outcome ``P_i``, contribution ``C_i``, their
    per-round rates, and the share of rounds on the most capable type ``Cap_i``."""
    final = np.asarray(final, dtype=float)
    rounds = final.sum(axis=-1)
    preference = (np.asarray(p) * final).sum(-1)
    contribution = (np.asarray(c) * final).sum(-1)
    capable = np.take_along_axis(final, most_capable_type(np.asarray(c))[..., None],
                                 axis=-1)[..., 0]
    return {"P": preference, "C": contribution, "P_rate": preference / rounds,
            "C_rate": contribution / rounds, "Cap": capable / rounds}


def welfare(status: np.ndarray) -> dict[str, np.ndarray]:
    """Utilitarian, Rawlsian and log-Nash welfare of per-human statuses ``[..., h]``."""
    status = np.asarray(status, dtype=float)
    return {"utilitarian": status.sum(-1), "rawlsian": status.min(-1),
            "nash": np.log(status + 1).sum(-1)}


def welfare_frame(c: np.ndarray, p: np.ndarray, final: np.ndarray) -> pd.DataFrame:
    """One row per team: the three welfares of the preference outcomes and of the
    contributions at the goal."""
    per_human = outcomes(c, p, final)
    columns = {}
    for status in ("P", "C"):
        for name, value in welfare(per_human[status]).items():
            columns[f"{name}_{status}"] = np.atleast_1d(value)
    return pd.DataFrame(columns)


def _goals(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
           kits: tuple[int, ...]) -> np.ndarray:
    return solve_batch(c, p, algorithm, kits).goal_allocations


def counterfactuals(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
                    kits: tuple[int, ...]) -> pd.DataFrame:
    """Per team ``[B, 2, n]``: the seat-swap difference of preference outcomes and the
    preference-flip differences of human 0's contribution and rounds on their most
    capable type, each from re-solving the policy on the changed team."""
    c, p = np.asarray(c, dtype=float), np.asarray(p, dtype=float)
    goal = _goals(c, p, algorithm, kits)
    swapped = _goals(c[:, ::-1], p[:, ::-1], algorithm, kits)
    flipped_p = p.copy()
    flipped_p[:, 0] = p[:, 0, ::-1]
    flipped = _goals(c, flipped_p, algorithm, kits)
    actual = outcomes(c, p, goal)
    seat = outcomes(c[:, ::-1], p[:, ::-1], swapped)
    flip = outcomes(c, flipped_p, flipped)
    return pd.DataFrame({
        "seat_swap_P": actual["P"][:, 0] - seat["P"][:, 1],
        "preference_flip_C": actual["C"][:, 0] - flip["C"][:, 0],
        "preference_flip_Cap": actual["Cap"][:, 0] - flip["Cap"][:, 0]})


def distribution_distances(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """JSD (bits) and W1 between two samples of a rate in [0, 1]."""
    return {"jsd_bits": jensen_shannon_bits(a, b), "wasserstein": wasserstein(a, b)}
