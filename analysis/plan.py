"""Planning the next study: how many participants detect a difference between two conditions.

Power is estimated by simulating whole studies. Every simulated participant meets both
conditions, and each study is analysed with the test the report uses, at each candidate
number of participants:

- a Likert item: each participant has their own mean rating; a rating is that mean, plus
  the difference in one condition, plus noise, rounded and clipped to the scale; tested
  with the Wilcoxon signed-rank test;
- team cookies: teams are pool teams with the participant's capabilities those of a
  simulated participant, drawn from people: a pilot database's measured capabilities
  (resampled) when one is given, else people of the human decorating-speed model
  (``study.bots.human``) measured in one practice round, as the server measures them,
  under the protocol's reference speeds; the teammate is the pool team's other human.
  Each condition's policy gives the kits (the goal allocation), and every round's cookies
  come from the decorator model of ``study.decorator`` (gamma times between cookies at the
  speed the capability implies, the first one a forward recurrence time); the model's
  own difference between the conditions, or a given one, is tested with the paired t
  test.

``paired_t_power`` is the closed form for normally distributed differences (noncentral
t), which the simulation reproduces on such differences.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from study.decorator import Decorator
from study.model import Algorithm
from study.solver import solve_batch

DEFAULT_PARTICIPANTS = (6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
TEAM_SAMPLE = 2000  # pool teams whose cookies are simulated once and drawn from
REPLICATES = 16  # independent rounds of cookies per pool team and condition
CHUNK = 50  # teams whose cookies are drawn at once (bounds the memory used)
Draw = Callable[[np.random.Generator, int], np.ndarray]


@dataclass(frozen=True)
class PlanOptions:
    """What to detect and how sure to be."""

    power: float = 0.8
    alpha: float = 0.05
    simulations: int = 400
    participants: Sequence[int] = DEFAULT_PARTICIPANTS
    likert_difference: float = 1.0
    likert_sd: float = 1.5
    points: int = 7
    cookies_difference: float | None = None
    seed: int = 0
    pilot: Path | None = None  # a pilot database: participants' capabilities from its people


def paired_t_power(n: int | np.ndarray, effect_size: float, alpha: float = 0.05) -> np.ndarray:
    """Closed-form power of the two-sided paired t test for ``n`` pairs whose differences
    are normal with mean / sd = ``effect_size``."""
    n = np.asarray(n, dtype=float)
    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)
    shift = effect_size * np.sqrt(n)
    return (stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))


def rejections(differences: np.ndarray, test: str, alpha: float) -> np.ndarray:
    """Per simulated study (rows of paired differences), whether the two-sided test
    rejects: the one-sample t test, or the Wilcoxon signed-rank test (zeros dropped, the
    normal approximation with the tie correction: Likert differences are full of ties)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if test == "t":
            p_values = stats.ttest_1samp(differences, 0.0, axis=1).pvalue
        else:
            p_values = stats.wilcoxon(differences, axis=1, method="approx",
                                      zero_method="wilcox").pvalue
    return np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0) < alpha


def power_curve(draw: Draw, participants: Sequence[int], test: str, alpha: float,
                simulations: int, rng: np.random.Generator, label: str = "") -> pd.DataFrame:
    """Share of simulated studies whose test rejects, per number of participants, with a
    95 % Wilson interval for the simulation's own error."""
    rows = []
    progress = tqdm(participants, desc=f"power {label}".strip(), unit="n", leave=False,
                    disable=not sys.stderr.isatty())
    for n in progress:
        studies = np.stack([draw(rng, int(n)) for _ in range(simulations)])
        hits = int(rejections(studies, test, alpha).sum())
        low, high = _wilson(hits, simulations)
        rows.append({"participants": int(n), "power": hits / simulations, "ci_low": low,
                     "ci_high": high, "simulations": simulations, "test": test})
    return pd.DataFrame(rows)


def _wilson(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    share = hits / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * np.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / (
        1 + z * z / total)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def likert_draw(difference: float, sd: float, points: int = 7) -> Draw:
    """Paired rating differences (b - a) of simulated participants: a personal mean
    (spread one point around the middle), noise ``sd`` per rating, rounding and clipping
    to 1..points."""
    middle = (points + 1) / 2

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        person = rng.normal(middle, 1.0, n)
        a = np.clip(np.rint(person + rng.normal(0, sd, n)), 1, points)
        b = np.clip(np.rint(person + difference + rng.normal(0, sd, n)), 1, points)
        return b - a

    return draw


def cookie_counts(speed: np.ndarray, seconds: float, rng: np.random.Generator,
                  variation: float = Decorator.variation) -> np.ndarray:
    """Cookies finished within ``seconds`` by decorators of the given speeds (any shape):
    the decorator model of ``study.decorator`` drawn for all of them at once."""
    speed = np.asarray(speed, dtype=float)
    shape = 1.0 / variation ** 2
    mean = 1.0 / speed
    most = int(np.ceil(speed.max() * seconds * 1.5 + 10 * np.sqrt(speed.max() * seconds)
                       + 10))
    gaps = rng.gamma(shape, (mean / shape)[..., None], (*speed.shape, most))
    first = rng.uniform(size=speed.shape) * rng.gamma(shape + 1, mean / shape)
    gaps[..., 0] = first
    return (np.cumsum(gaps, axis=-1) <= seconds).sum(axis=-1)


def team_cookies(c: np.ndarray, goals: np.ndarray, reference_speed: Sequence[float],
                 seconds: float, rng: np.random.Generator, replicates: int) -> np.ndarray:
    """``[B, replicates]`` cookies of each team over a session whose kits are ``goals``
    ``[B, 2, n]`` (the order of rounds does not change the counts)."""
    speeds = c * np.asarray(reference_speed, dtype=float)  # [B, h, n] cookies per second
    rounds = int(goals[0].sum(axis=-1)[0])
    teams, humans, _ = c.shape
    types = np.zeros((teams, humans, rounds), dtype=int)
    positions = np.arange(rounds)
    types[:] = (positions[None, None, :] >= goals[..., 0][..., None]).astype(int)
    speed = np.take_along_axis(speeds, types, axis=-1)  # [B, h, R]
    totals = np.empty((teams, replicates), dtype=int)
    for start in range(0, teams, CHUNK):
        part = speed[start:start + CHUNK]
        counts = cookie_counts(np.broadcast_to(part[:, None], (len(part), replicates, humans,
                                                               rounds)), seconds, rng)
        totals[start:start + CHUNK] = counts.sum(axis=(-1, -2))
    return totals


def cookie_draw(c: np.ndarray, goals_a: np.ndarray, goals_b: np.ndarray,
                reference_speed: Sequence[float], seconds: float, rng: np.random.Generator,
                difference: float | None = None) -> tuple[Draw, np.ndarray]:
    """Paired differences of team cookies (b - a) of simulated participants drawn from
    pool teams, and every simulated difference (for its mean and spread). With
    ``difference`` the differences are shifted to that mean, keeping their spread."""
    a = team_cookies(c, goals_a, reference_speed, seconds, rng, REPLICATES)
    b = team_cookies(c, goals_b, reference_speed, seconds, rng, REPLICATES)
    differences = (b - a).astype(float).ravel()
    if difference is not None:
        differences = differences - differences.mean() + difference

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return differences[rng.integers(0, len(differences), n)]

    return draw, differences


def participant_capabilities(protocol: Any, pilot: Path | None, people: int,
                             rng: np.random.Generator) -> np.ndarray:
    """``[people, n]`` capabilities of simulated participants as the protocol measures
    them (speed over its reference speed, clipped): the pilot's participants drawn with
    replacement, else people of the human decorating-speed model, since only people say
    which capabilities are typical (MODEL.md, "Measuring a participant")."""
    from study.bots.human import coefficients, population_speeds

    references = tuple(cookie.reference_speed for cookie in protocol.cookies)
    if pilot is not None:
        from study.calibration import read_pilot

        measured = coefficients(read_pilot(pilot, protocol).speeds, references)
        return measured[rng.integers(0, len(measured), people)]
    from study.cookies import target

    targets = [target(protocol, task_type) for task_type in range(len(references))]
    speeds = population_speeds(targets, protocol.practice_seconds, people,
                               int(rng.integers(2 ** 32)))
    return coefficients(speeds, references)


def participant_humans(pool: pd.DataFrame, role: str, rng: np.random.Generator) -> np.ndarray:
    """``[B]`` which human of each pool team the participant plays: the role the protocol's
    teammate filter gives the participant (either human, at random, for ``any``)."""
    if role == "any":
        return rng.integers(0, 2, len(pool))
    most_capable = pool["most_capable_human"].to_numpy().astype(int)
    return most_capable if role == "most-capable" else 1 - most_capable


def with_participants(c: np.ndarray, humans: np.ndarray, participants: np.ndarray) -> np.ndarray:
    """``c [B, h, n]`` with each team's participant (``humans [B]``) given the simulated
    participant's capabilities (``participants [B, n]``)."""
    c = c.copy()
    c[np.arange(len(c)), humans] = participants
    return c


def condition_algorithm(condition: Any, pool_fea: Any | None) -> Algorithm:
    """The policy of a protocol condition; FEA bounds from the pool where it takes them."""
    bounds = condition.fea_bounds or ((pool_fea.lo, pool_fea.hi) if pool_fea else (0.0, 1.0))
    return Algorithm(condition.algorithm, w=condition.w, lo=bounds[0], hi=bounds[1])


def plan(pool: pd.DataFrame, protocol: Any, pool_fea: Any | None,
         options: PlanOptions = PlanOptions(),
         conditions: tuple[str, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Power curves (one row per outcome and number of participants) and the participants
    needed per outcome, for the first two conditions of the protocol (or ``conditions``)."""
    from analysis.simulation import coefficients

    rng = np.random.default_rng(options.seed)
    by_id = {condition.id: condition for condition in protocol.conditions}
    first, second = conditions or tuple(by_id)[:2]
    teams = pool.iloc[np.sort(rng.permutation(len(pool))[:TEAM_SAMPLE])]
    c, p = coefficients(teams)
    c = with_participants(c, participant_humans(teams, protocol.pool_spec().teammate.role, rng),
                          participant_capabilities(protocol, options.pilot, len(teams), rng))
    kits = tuple(protocol.kits)
    goals = [solve_batch(c, p, condition_algorithm(by_id[name], pool_fea), kits
                         ).goal_allocations for name in (first, second)]
    speeds = [cookie.reference_speed for cookie in protocol.cookies]
    draw, differences = cookie_draw(c, goals[0], goals[1], speeds, protocol.round_seconds,
                                    rng, options.cookies_difference)
    contrast = f"{second} - {first}"
    outcomes = [
        (f"team cookies ({contrast}, mean {differences.mean():.2f})", draw, "t",
         differences.mean() / differences.std(ddof=1) if differences.std() > 0 else np.nan),
        (f"Likert item (+{options.likert_difference:g} points, sd {options.likert_sd:.2f})",
         likert_draw(options.likert_difference, options.likert_sd, options.points),
         "wilcoxon", np.nan)]
    curves = []
    for label, outcome_draw, test, effect in outcomes:
        curve = power_curve(outcome_draw, options.participants, test, options.alpha,
                            options.simulations, rng, label)
        curve.insert(0, "outcome", label)
        curve["closed_form"] = (paired_t_power(curve["participants"], effect, options.alpha)
                                if np.isfinite(effect) else np.nan)
        curves.append(curve)
    curves_frame = pd.concat(curves, ignore_index=True)
    return curves_frame, needed(curves_frame, options.power)


def needed(curves: pd.DataFrame, power: float) -> pd.DataFrame:
    """Per outcome the fewest simulated participants reaching ``power`` (empty when none
    in the range did)."""
    rows = []
    for outcome, part in curves.groupby("outcome", sort=False):
        enough = part[part["power"] >= power]
        rows.append({"outcome": outcome, "target_power": power,
                     "participants_needed": int(enough["participants"].min())
                     if len(enough) else None,
                     "largest_simulated": int(part["participants"].max()),
                     "power_at_largest": float(part["power"].iloc[-1])})
    return pd.DataFrame(rows)
