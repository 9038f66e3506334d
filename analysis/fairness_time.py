"""Fairness over time: the running metrics after each round and their temporal summaries.

MODEL.md's rewards judge only the goal state, so the round order of an optimal plan is
left to the tie rule. The other seed papers judge the path too (Alamdari et al.'s
long-term, anytime and periodic fairness; cumulative advantage and who leads), which is
what a participant lives through round by round. Everything here takes trajectories
``[..., R + 1, h, n]`` (kits held before round 1 and after each round) and coefficients
``[..., h, n]``, so one session, every session of a study and a pool of simulated teams
go through the same code.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from tqdm import tqdm

from study.allocation.model import Algorithm, StateSpace, Team, all_metrics
from study.allocation.solver import solve, solve_batch

TIE = 1e-12
DEFAULT_PERIOD = 4
# The unfairness series each summary is computed on: non-negative gaps, 0 = fair.
GAPS = {"F": "|F|", "FE_rate": "|FE|/t"}


def trajectories_from_plans(space: StateSpace, plans: np.ndarray) -> np.ndarray:
    """``[B, R + 1, h, n]`` kits held over time for plans ``[B, R]`` of action numbers."""
    types = space.actions[np.asarray(plans, dtype=np.intp)]
    kits = np.eye(space.task_types, dtype=int)[types].cumsum(axis=-3)
    start = np.zeros_like(kits[..., :1, :, :])
    return np.concatenate([start, kits], axis=-3)


def running_metrics(c: np.ndarray, p: np.ndarray,
                    trajectory: np.ndarray) -> dict[str, np.ndarray]:
    """Every MODEL.md metric after each round, ``[..., R]``, plus ``FE_rate = FE / t``.

    ``FE`` sums preference outcomes, so it grows with the rounds; its rate per round is
    what can be compared between time points.
    """
    after = np.asarray(trajectory)[..., 1:, :, :]
    c = np.asarray(c, dtype=float)[..., None, :, :]
    p = np.asarray(p, dtype=float)[..., None, :, :]
    metrics = all_metrics(c, p, after)
    metrics["FE_rate"] = metrics["FE"] / np.arange(1, after.shape[-3] + 1)
    return metrics


def temporal_summary(gap: np.ndarray, period: int = DEFAULT_PERIOD,
                     first_round: int = 1) -> dict[str, np.ndarray]:
    """Temporal aggregates of a non-negative unfairness series ``[..., R]``.

    long-term: the last round (what the seed rewards judge); anytime: the worst round;
    average: the mean over rounds; periodic: the mean over rounds ``period, 2 period, ...``
    (NaN when the session is shorter than one period). ``first_round`` drops early rounds
    from anytime and average, whose gaps the first kits often force.
    """
    gap = np.asarray(gap, dtype=float)
    window = gap[..., first_round - 1:]
    checkpoints = gap[..., period - 1::period]
    return {
        "long_term": gap[..., -1],
        "anytime": window.max(axis=-1),
        "average": window.mean(axis=-1),
        "periodic": (checkpoints.mean(axis=-1) if checkpoints.shape[-1]
                     else np.full(gap.shape[:-1], np.nan)),
    }


def cumulative_advantage(signed: np.ndarray) -> np.ndarray:
    """``sum_t D_t`` of a signed series (positive favours human 0): later rounds may make
    up for earlier ones, unlike the anytime gap. For two humans this is twice Alamdari et
    al.'s overall unfairness to human 0, ``sum_t (U_0(t) - mean_i U_i(t)) = sum_t D_t / 2``."""
    return np.asarray(signed, dtype=float).sum(axis=-1)


def _leader(signed: np.ndarray, tie: float) -> np.ndarray:
    """+1 when human 0 leads, -1 when human 1 does, 0 on a tie."""
    signed = np.asarray(signed, dtype=float)
    return np.where(np.abs(signed) > tie, np.sign(signed), 0.0)


def lead_share(signed: np.ndarray, tie: float = TIE) -> np.ndarray:
    """Share of rounds in which human 0 is ahead, ties counted one half."""
    return ((_leader(signed, tie) + 1) / 2).mean(axis=-1)


def lead_changes(signed: np.ndarray, tie: float = TIE) -> np.ndarray:
    """How often the lead passes from one human to the other; tied rounds keep the last
    leader, so ``+, 0, -`` is one change."""
    leader = _leader(signed, tie)
    rounds = np.arange(leader.shape[-1])
    last_decided = np.maximum.accumulate(np.where(leader != 0, rounds, -1), axis=-1)
    held = np.take_along_axis(leader, np.maximum(last_decided, 0), axis=-1)
    held = np.where(last_decided >= 0, held, 0.0)
    return ((held[..., 1:] * held[..., :-1]) < 0).sum(axis=-1)


def summary(c: np.ndarray, p: np.ndarray, trajectory: np.ndarray,
            period: int = DEFAULT_PERIOD, first_round: int = 1) -> pd.DataFrame:
    """One row per trajectory: the temporal summaries of ``|F|`` and ``|FE|/t`` and, for
    two humans, the cumulative advantage, lead share and lead changes of both."""
    metrics = running_metrics(c, p, trajectory)
    columns: dict[str, np.ndarray] = {}
    for name in GAPS:
        signed = np.atleast_2d(metrics[name])
        aggregates = temporal_summary(np.abs(signed), period, first_round)
        columns.update({f"{name}_{key}": value for key, value in aggregates.items()})
        if np.shape(trajectory)[-2] == 2:
            columns[f"{name}_cumulative_advantage"] = cumulative_advantage(signed)
            columns[f"{name}_lead_share"] = lead_share(signed)
            columns[f"{name}_lead_changes"] = lead_changes(signed)
    return pd.DataFrame(columns)


def rounds_frame(c: np.ndarray, p: np.ndarray, trajectory: np.ndarray) -> pd.DataFrame:
    """Long format, one row per trajectory and round: ``unit``, ``round`` and each running
    metric, ready for plotting or a mixed model."""
    metrics = {key: np.atleast_2d(value) for key, value in
               running_metrics(c, p, trajectory).items()}
    units, rounds = metrics["E"].shape
    frame = pd.DataFrame({key: value.ravel() for key, value in metrics.items()})
    frame.insert(0, "round", np.tile(np.arange(1, rounds + 1), units))
    frame.insert(0, "unit", np.repeat(np.arange(units), rounds))
    return frame


def policy_trajectories(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
                        kits: tuple[int, ...] | None = None,
                        order: str = "default") -> np.ndarray:
    """``[B, R + 1, h, n]`` trajectories of the optimal plans of many teams.

    The default order comes from the batch solver at once; other orders need one solve
    per team (about a millisecond each), shown with a progress bar.
    """
    if order == "default":
        batch = solve_batch(c, p, algorithm, kits)
        return trajectories_from_plans(batch.space, batch.plans)
    teams = tqdm(range(len(c)), desc=f"{algorithm.name} {order}", unit="team",
                 leave=False, disable=len(c) < 500 or not sys.stderr.isatty())
    return np.stack([solve(Team(c[k], p[k]), algorithm, kits, order).trajectory
                     for k in teams])
