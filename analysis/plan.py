"""Planning the next study: how many participants detect a difference between conditions.

Power is estimated by simulating whole studies. Every simulated participant meets every
condition (two to four), and each study is analysed with the test the report uses, at each
candidate number of participants; with more than two conditions every pair is tested and
the pairs' p values are Holm-adjusted within each simulated study, as the report adjusts
them, so a pair's power is that of the adjusted test:

- a Likert item: each participant has their own mean rating; a rating is that mean, plus
  the difference in one condition (the second), plus noise, rounded and clipped to the
  scale; tested with the Wilcoxon signed-rank test;
- team cookies: teams are pool teams with the participant's capabilities those of a
  simulated participant, drawn from people: a pilot database's measured capabilities
  (resampled) when one is given, else people of the human decorating-speed model
  (``study.people.speed``) measured in one practice round, as the server measures them,
  under the protocol's reference speeds; the teammate is the pool team's other human.
  Each condition's policy gives the kits (the goal allocation), and every round's cookies
  come from the decorator model of ``study.task.decorator`` (gamma times between cookies at the
  speed the capability implies, the first one a forward recurrence time); the model's
  own difference between the conditions, or a given one, is tested with the paired t
  test.

``paired_t_power`` is the closed form for normally distributed differences (noncentral
t), which the simulation reproduces on such differences; with several pairs it is given
at alpha over the number of pairs (Bonferroni's level, which Holm's procedure never
falls below).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from study.allocation.model import Algorithm, InvalidInput
from study.allocation.solver import solve_batch
from study.pool.placing import algorithm_for
from study.task.decorator import Decorator

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
    normal approximation with the tie correction: Likert differences are full of ties).
    Studies of several pairs (``[studies, participants, pairs]``) test every pair and
    reject by Holm's procedure over the pairs: ``[studies, pairs]``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if test == "t":
            p_values = stats.ttest_1samp(differences, 0.0, axis=1).pvalue
        else:
            p_values = stats.wilcoxon(differences, axis=1, method="approx",
                                      zero_method="wilcox").pvalue
    p_values = np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0)
    return holm_rejections(p_values, alpha) if p_values.ndim == 2 else p_values < alpha


def holm_rejections(p_values: np.ndarray, alpha: float) -> np.ndarray:
    """``[studies, pairs]`` whether Holm's step-down procedure rejects each pair of a
    study: the smallest p against alpha / m, the next against alpha / (m - 1), ...,
    stopping at the first that is not below (one pair: p < alpha)."""
    pairs = p_values.shape[1]
    order = np.argsort(p_values, axis=1, kind="stable")
    ranked = np.take_along_axis(p_values, order, axis=1)
    passed = np.cumprod(ranked < alpha / (pairs - np.arange(pairs)), axis=1).astype(bool)
    rejected = np.zeros_like(passed)
    np.put_along_axis(rejected, order, passed, axis=1)
    return rejected


def power_curve(draw: Draw, participants: Sequence[int], test: str, alpha: float,
                simulations: int, rng: np.random.Generator, label: str = "",
                pairs: Sequence[str] = ()) -> pd.DataFrame:
    """Share of simulated studies whose test rejects, per number of participants, with a
    95 % Wilson interval for the simulation's own error. A draw of several columns (one
    per pair of conditions, named by ``pairs``) gives each pair's power under Holm's
    adjustment over the pairs (column ``pair``)."""
    rows = []
    progress = tqdm(participants, desc=f"power {label}".strip(), unit="n", leave=False,
                    disable=not sys.stderr.isatty())
    for n in progress:
        studies = np.stack([draw(rng, int(n)) for _ in range(simulations)])
        rejected = rejections(studies, test, alpha).reshape(simulations, -1)
        for column in range(rejected.shape[1]):
            hits = int(rejected[:, column].sum())
            low, high = _wilson(hits, simulations)
            rows.append({"participants": int(n), "power": hits / simulations, "ci_low": low,
                         "ci_high": high, "simulations": simulations, "test": test,
                         **({"pair": pairs[column]} if pairs else {})})
    return pd.DataFrame(rows)


def _wilson(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    share = hits / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * np.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / (
        1 + z * z / total)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def likert_draw(difference: float, sd: float, points: int = 7, conditions: int = 2) -> Draw:
    """Paired rating differences (b - a) of simulated participants: a personal mean
    (spread one point around the middle), noise ``sd`` per rating, rounding and clipping
    to 1..points; the second condition is rated ``difference`` higher. With more than two
    conditions a draw holds every pair's differences (``pairs_of``), one column each."""
    middle = (points + 1) / 2
    shifts = np.zeros(conditions)
    shifts[1] = difference
    pairs = pairs_of(conditions)

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        person = rng.normal(middle, 1.0, n)
        ratings = np.stack([np.clip(np.rint(person + shift + rng.normal(0, sd, n)), 1,
                                    points) for shift in shifts], axis=1)
        differences = np.stack([ratings[:, b] - ratings[:, a] for a, b in pairs], axis=1)
        return differences[:, 0] if conditions == 2 else differences

    return draw


def pairs_of(conditions: int) -> list[tuple[int, int]]:
    """Every pair of conditions (a, b), a listed before b: the contrasts b - a."""
    return list(combinations(range(conditions), 2))


def cookie_counts(speed: np.ndarray, seconds: float, rng: np.random.Generator,
                  variation: float = Decorator.variation) -> np.ndarray:
    """Cookies finished within ``seconds`` by decorators of the given speeds (any shape):
    the decorator model of ``study.task.decorator`` drawn for all of them at once."""
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


def cookie_draw(c: np.ndarray, goals: Sequence[np.ndarray], reference_speed: Sequence[float],
                seconds: float, rng: np.random.Generator,
                difference: float | None = None) -> tuple[Draw, np.ndarray]:
    """Paired differences of team cookies of simulated participants drawn from pool teams,
    one column per pair of conditions (b - a, ``pairs_of``; one pair: a flat draw), each
    participant a team and its cookies in every condition; and every simulated difference
    (for their means and spreads). With ``difference`` each pair's differences are
    shifted to that mean, keeping their spread."""
    cookies = np.stack([team_cookies(c, goal, reference_speed, seconds, rng,
                                     REPLICATES).ravel() for goal in goals], axis=1)
    differences = np.stack([cookies[:, b] - cookies[:, a] for a, b in pairs_of(len(goals))],
                           axis=1).astype(float)
    if difference is not None:
        differences = differences - differences.mean(axis=0) + difference

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        drawn = differences[rng.integers(0, len(differences), n)]
        return drawn[:, 0] if drawn.shape[1] == 1 else drawn

    return draw, differences


def participant_capabilities(protocol: Any, pilot: Path | None, people: int,
                             rng: np.random.Generator) -> np.ndarray:
    """``[people, n]`` capabilities of simulated participants as the protocol measures
    them (speed over its reference speed, clipped): the pilot's participants drawn with
    replacement, else people of the human decorating-speed model, since only people say
    which capabilities are typical (MODEL.md, "Measuring a participant")."""
    from study.people.speed import coefficients, population_speeds

    references = tuple(cookie.reference_speed for cookie in protocol.cookies)
    if pilot is not None:
        from study.calibration.pilot import read_pilot

        measured = coefficients(read_pilot(pilot, protocol).speeds, references)
        return measured[rng.integers(0, len(measured), people)]
    from study.task.cookies import target

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
    """The policy of a protocol condition, as the live study solves it (a preset or a
    declared algorithm); bounds from the pool where it takes them."""
    return algorithm_for(condition, None if pool_fea is None else (pool_fea.lo, pool_fea.hi))


def plan(pool: pd.DataFrame, protocol: Any, pool_fea: Any | None,
         options: PlanOptions = PlanOptions(),
         conditions: Sequence[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Power curves (one row per outcome and number of participants) and the participants
    needed per outcome, for every condition of the protocol (or ``conditions``, two or
    more of them): team cookies for every pair, a Likert item for the pairs the second
    condition differs in; with more than two conditions Holm-adjusted over the pairs."""
    from analysis.simulation import coefficients

    rng = np.random.default_rng(options.seed)
    by_id = {condition.id: condition for condition in protocol.conditions}
    chosen = list(conditions or by_id)
    unknown = [name for name in chosen if name not in by_id]
    if unknown:
        raise InvalidInput("--conditions", ",".join(unknown),
                           f"name conditions of the protocol: {', '.join(by_id)}")
    teams = pool.iloc[np.sort(rng.permutation(len(pool))[:TEAM_SAMPLE])]
    c, p = coefficients(teams)
    c = with_participants(c, participant_humans(teams, protocol.pool_spec().teammate.role, rng),
                          participant_capabilities(protocol, options.pilot, len(teams), rng))
    goals = condition_goals(c, p, [by_id[name] for name in chosen], pool_fea,
                            tuple(protocol.kits))
    speeds = [cookie.reference_speed for cookie in protocol.cookies]
    draw, differences = cookie_draw(c, goals, speeds, protocol.round_seconds, rng,
                                    options.cookies_difference)
    pairs = pairs_of(len(chosen))
    family = f", Holm over {len(pairs)} pairs" if len(pairs) > 1 else ""
    cookie_labels = [f"team cookies ({chosen[b]} - {chosen[a]}, mean "
                     f"{differences[:, k].mean():.2f}{family})" for k, (a, b) in enumerate(pairs)]
    effects = [d.mean() / d.std(ddof=1) if d.std() > 0 else np.nan for d in differences.T]
    likert_labels = [f"Likert item (+{options.likert_difference:g} points, {chosen[b]} - "
                     f"{chosen[a]}, sd {options.likert_sd:.2f}{family})" for a, b in pairs]
    outcomes = [(cookie_labels, draw, "t", effects),
                (likert_labels, likert_draw(options.likert_difference, options.likert_sd,
                                            options.points, len(chosen)), "wilcoxon",
                 [np.nan] * len(pairs))]
    curves = []
    for labels, outcome_draw, test, pair_effects in outcomes:
        curve = power_curve(outcome_draw, options.participants, test, options.alpha,
                            options.simulations, rng, labels[0].split(" (")[0], labels)
        effect = curve["pair"].map(dict(zip(labels, pair_effects, strict=True)))
        curve.insert(0, "outcome", curve.pop("pair"))
        curve["closed_form"] = [paired_t_power(n, e, options.alpha / len(pairs))
                                if np.isfinite(e) else np.nan
                                for n, e in zip(curve["participants"], effect, strict=True)]
        if test == "wilcoxon":  # only the pairs the second condition differs in
            kept = {label for label, (a, b) in zip(labels, pairs, strict=True) if 1 in (a, b)}
            curve = curve[curve["outcome"].isin(kept)]
        curves.append(curve)
    curves_frame = pd.concat(curves, ignore_index=True)
    return curves_frame, needed(curves_frame, options.power)


def condition_goals(c: np.ndarray, p: np.ndarray, conditions: Sequence[Any],
                    pool_fea: Any | None, kits: tuple[int, ...]) -> list[np.ndarray]:
    """Each condition's goal allocations ``[B, h, n]``, in the order given: an algorithm
    with memory counts the kits the earlier conditions' sessions handed out."""
    goals: list[np.ndarray] = []
    held: np.ndarray | None = None
    for condition in conditions:
        algorithm = condition_algorithm(condition, pool_fea)
        history = held if algorithm.memory else None
        goal = solve_batch(c, p, algorithm, kits, history=history).goal_allocations
        goals.append(goal)
        held = goal.astype(float) if held is None else held + goal
    return goals


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
