"""The allocation model of MODEL.md: teams, the state space, metrics and goal rewards.

Everything here is pure numpy: arrays in, arrays out, no I/O. Metric functions take
allocation arrays of shape ``[..., h, n]`` (kits of type ``j`` given to human ``i``) and
coefficient arrays broadcastable to them, so one implementation serves a single state,
every round of an episode and a batch of a million teams.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from study.allocation.memo import cached_value
from study.allocation.terms import (
    ALGORITHMS,
    DEFAULT_FEA_WEIGHT,
    DEFAULT_KITS,
    SHARING_TERMS,
    TERMS,
    InvalidInput,
    preset_terms,
    terms_problems,
    validate_kits,
)


def _as_coefficients(name: str, values: object, shape: tuple[int, ...] | None) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise InvalidInput(name, values, "must be numbers") from error
    if array.ndim < 2:
        raise InvalidInput(name, values, "must have shape [..., humans, task types]")
    if shape is not None and array.shape[-2:] != shape:
        raise InvalidInput(name, values, f"must have shape [..., {shape[0]}, {shape[1]}]")
    if not _within_unit_interval(array):
        bad = ~np.isfinite(array) | (array < 0) | (array > 1)
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidInput(f"{name}{list(index)}", float(array[index]),
                           "must be a finite number within [0, 1]")
    return array


# Below this many numbers (one team) plain Python floats check faster than array passes.
_SMALL = 64


def _within_unit_interval(array: np.ndarray) -> bool:
    """Every value finite and within [0, 1] (NaN fails every comparison)."""
    if array.size <= _SMALL:
        return all(0.0 <= value <= 1.0 for value in array.ravel().tolist())
    return bool(((array >= 0) & (array <= 1)).all())


def _inputs_positive(capability: np.ndarray) -> bool:
    """Every human's capabilities sum to more than 0."""
    if capability.size <= _SMALL:
        return all(sum(row) > 0 for row in capability.reshape(-1, capability.shape[-1]).tolist())
    return bool((capability.sum(axis=-1) > 0).all())


def validate_coefficients(c: object, p: object) -> tuple[np.ndarray, np.ndarray]:
    """Check capability and preference arrays (``[..., h, n]``) and return them as floats."""
    capability = _as_coefficients("c", c, None)
    preference = _as_coefficients("p", p, capability.shape[-2:])
    if capability.shape[-2] < 2:
        raise InvalidInput("c", c, "a team needs at least 2 humans")
    if preference.shape != capability.shape:
        raise InvalidInput("p", p, f"must have the same shape as c {capability.shape}")
    if not _inputs_positive(capability):
        inputs = capability.sum(axis=-1)
        index = tuple(int(i) for i in np.argwhere(inputs <= 0)[0])
        raise InvalidInput(f"c{list(index)}", capability[index].tolist(),
                           "a human's capabilities must sum to more than 0")
    return capability, preference


def _valid_float_team(c: object, p: object) -> bool:
    """Whether ``c, p`` are already float arrays ``[h, n]`` of a valid team (the live
    path's case), checked on a few Python floats; anything else takes the full check and
    its error messages."""
    if not (type(c) is np.ndarray and type(p) is np.ndarray and c.dtype == np.float64
            and p.dtype == np.float64 and c.ndim == 2 and c.shape == p.shape
            and c.shape[0] >= 2 and c.size <= _SMALL):
        return False
    capability = c.tolist()
    return (all(0.0 <= value <= 1.0 for row in capability for value in row)
            and all(0.0 <= value <= 1.0 for row in p.tolist() for value in row)
            and all(sum(row) > 0 for row in capability))


@dataclass(frozen=True)
class Team:
    """Capabilities ``c[i][j]`` and preferences ``p[i][j]`` of one team, validated."""

    c: np.ndarray
    p: np.ndarray
    _goal_sums: dict[StateSpace, TeamGoalSums] = field(default_factory=dict, init=False,
                                                       repr=False, compare=False)

    def __post_init__(self) -> None:
        if _valid_float_team(self.c, self.p):
            return
        c, p = validate_coefficients(self.c, self.p)
        if c.ndim != 2:
            raise InvalidInput("c", self.c.tolist(), "a team has shape [humans, task types]")
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "p", p)

    @property
    def humans(self) -> int:
        return self.c.shape[0]

    @property
    def task_types(self) -> int:
        return self.c.shape[1]

    def swapped(self, order: list[int]) -> Team:
        """The same team with its humans renumbered (``order[k]`` becomes human ``k``)."""
        return Team(self.c[order], self.p[order])

    def goal_sums(self, space: StateSpace) -> TeamGoalSums:
        """Sums over the goal states of ``space``, computed once per space (a live session
        solves the same team for each of its conditions)."""
        if space not in self._goal_sums:
            self._goal_sums[space] = team_goal_sums(self.c, self.p, space)
        return self._goal_sums[space]


def _finite_number(value: object) -> bool:
    """A finite int or float (an int beyond a float's range is not)."""
    try:
        return isinstance(value, int | float) and math.isfinite(value)
    except OverflowError:
        return False


# A goal reward given as code: ``c, p [B, h, n]`` and goal allocations ``[B, G, h, n]``
# (read-only) -> one value in [0, 1] per goal, ``[B, G]``.
GoalRewardFunction = Callable[[np.ndarray, np.ndarray, np.ndarray], object]
# The dtypes a goal reward's values may have: booleans, integers and floats.
NUMBER_KINDS = "biuf"


@dataclass(frozen=True)
class GoalRewardCode:
    """A goal reward given as code (``python = "pkg.module:fn"``), its every answer checked:
    the solver's guarantees hold only for one finite value in [0, 1] per goal."""

    source: str
    function: GoalRewardFunction = field(compare=False)

    def rewards(self, c: np.ndarray, p: np.ndarray, allocations: np.ndarray) -> np.ndarray:
        """``[B, G]`` goal rewards of teams ``c, p [B, h, n]`` at ``allocations [B, G, h, n]``."""
        try:
            values = self.function(c, p, allocations)
        except Exception as error:  # the lab's code: whatever fails is reported as its fault
            raise InvalidInput("python", self.source, f"raised {type(error).__name__}: "
                                                      f"{error}") from error
        return checked_code_rewards(self.source, values, allocations.shape[:2])


def checked_code_rewards(source: str, values: object, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as a float array of ``shape``, or an error saying what is wrong with it.
    Only numbers count: numpy would read the texts "0.5" or an object array as floats."""
    try:
        given = np.asarray(values)
    except (TypeError, ValueError) as error:
        raise InvalidInput("python", source, f"returned {type(values).__name__}, not numbers "
                                             f"({error})") from None
    if given.dtype.kind not in NUMBER_KINDS:
        raise InvalidInput("python", source, f"returned {type(values).__name__} of dtype "
                                             f"{given.dtype}, not numbers; a goal reward "
                                             "returns a float array")
    array = given.astype(float)
    if array.shape != tuple(shape):
        raise InvalidInput("python", source, f"returned shape {list(array.shape)}; a goal "
                                             f"reward returns one value per team and goal, "
                                             f"{list(shape)}")
    for wrong, rule in ((~np.isfinite(array), "values must be finite"),
                        ((array < 0) | (array > 1), "values must lie in [0, 1]")):
        if wrong.any():
            team, goal = (int(i) for i in np.argwhere(wrong)[0])
            raise InvalidInput("python", source, f"returned {float(array[team, goal])!r} at "
                                                 f"team {team}, goal {goal}; {rule}")
    return array


def _canonical_terms(terms: Mapping[str, float] | tuple[tuple[str, float], ...]
                     ) -> tuple[tuple[str, float], ...]:
    """Weighted terms in ``TERMS`` order (efficiency first), checked."""
    given = dict(terms)
    problems = terms_problems(given)
    if problems:
        term, message = problems[0]
        raise InvalidInput("terms" if term is None else f"terms.{term}", given, message)
    return tuple((name, float(given[name])) for name in TERMS if name in given)


# How an algorithm's goal reward is computed: the presets' own float paths, any weighted
# terms, or code.
_EFFICIENCY, _FAIRNESS, _FEA, _TERMS, _CODE = "efficiency", "fairness", "fea", "terms", "code"


@dataclass(frozen=True)
class Algorithm:
    """An allocation objective (MODEL.md, Algorithms as data): a preset by name
    (``efficient``, ``fair``, ``fea`` with weight ``w``), or a declared one, weighted
    ``terms`` (a mapping is accepted and kept as pairs in ``TERMS`` order) or a goal
    reward given as ``code``. ``lo, hi`` scale the fair_equity term; with ``memory`` the
    goal reward counts the kits of the study's earlier sessions (a solve's ``history``)."""

    name: str
    w: float = DEFAULT_FEA_WEIGHT
    lo: float = 0.0
    hi: float = 1.0
    terms: tuple[tuple[str, float], ...] = ()
    memory: bool = False
    code: GoalRewardCode | None = None
    form: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("w", "lo", "hi"):
            value = getattr(self, name)
            if not _finite_number(value):
                raise InvalidInput(name, value, "must be a finite number")
        if not 0 <= self.w <= 1:
            raise InvalidInput("w", self.w, "must be within [0, 1]")
        if self.hi <= self.lo:
            raise InvalidInput("fea bounds", (self.lo, self.hi), "hi must be greater than lo")
        if not isinstance(self.memory, bool):
            raise InvalidInput("memory", self.memory, "must be true or false")
        declared = bool(self.terms) or self.code is not None
        if declared and self.name in ALGORITHMS:
            raise InvalidInput("algorithm", self.name, "names a preset, whose terms are fixed; "
                                                       "give a declared algorithm its own name")
        if self.terms and self.code is not None:
            raise InvalidInput("algorithm", self.name, "takes weighted terms or code, not both")
        if self.code is not None:
            terms, form = (), _CODE
        elif self.terms:
            terms = _canonical_terms(self.terms)
            form = _form_of(terms)
        else:
            terms, form = _preset(self.name, self.w)
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "form", form)

    @property
    def uses_bounds(self) -> bool:
        """Whether the fair_equity term (scaled by ``lo, hi``) is part of the reward."""
        return any(name == "fair_equity" for name, _ in self.terms)

    def goal_reward(self, c: np.ndarray, p: np.ndarray, allocation: np.ndarray,
                    history: np.ndarray | None = None) -> np.ndarray:
        return goal_reward(self, c, p, allocation, history)

    def running_unfairness(self, c: np.ndarray, p: np.ndarray, allocation: np.ndarray,
                           history: np.ndarray | None = None) -> np.ndarray:
        """The unfairness this algorithm's reward penalises: ``|F|`` for Efficient and
        Fair, ``FE'`` for FEA; for other terms the weighted mean of ``1 - term`` over its
        terms of sharing (``SHARING_TERMS``), ``|F|`` when it has none (or is code). With
        memory, of the totals including ``history``."""
        if self.memory and history is not None:
            allocation = np.asarray(allocation, dtype=float) + history
        sharing = [(name, weight) for name, weight in self.terms if name in SHARING_TERMS]
        if [name for name, _ in sharing] == ["fair_equity"]:
            return scaled_fair_equity(c, p, allocation, self.lo, self.hi)
        if not sharing or [name for name, _ in sharing] == ["fairness"]:
            return np.abs(fairness(c, p, allocation))
        sums = HumanSums.of(c, p, allocation)
        total = math.fsum(weight for _, weight in sharing)
        return sum(weight * (1.0 - term_value(name, sums, self))
                   for name, weight in sharing) / total

    def describe(self) -> str:
        memory = ", memory over the study" if self.memory else ""
        if self.name in ALGORITHMS and self.name != "fea":
            return self.name + (f"({memory[2:]})" if memory else "")
        if self.name == "fea":
            return f"fea(w={self.w:g}, bounds={self.lo:g}..{self.hi:g}{memory})"
        if self.code is not None:
            return f"{self.name}(code {self.code.source}{memory})"
        terms = " + ".join(f"{weight:g} {name}" for name, weight in self.terms)
        bounds = f", bounds={self.lo:g}..{self.hi:g}" if self.uses_bounds else ""
        return f"{self.name}({terms}{bounds}{memory})"


@lru_cache(maxsize=256)
def _preset(name: str, w: float) -> tuple[tuple[tuple[str, float], ...], str]:
    """A preset's terms and form, worked out once (the live path builds an ``Algorithm``
    for every session it plans)."""
    terms = _canonical_terms(preset_terms(name, w))
    return terms, _form_of(terms)


def _form_of(terms: tuple[tuple[str, float], ...]) -> str:
    """The presets' shapes keep their own (float) paths; anything else is weighted terms."""
    names = tuple(name for name, _ in terms)
    if names == ("efficiency",):
        return _EFFICIENCY
    if names == ("fairness",):
        return _FAIRNESS
    if names == ("efficiency", "fair_equity"):
        return _FEA
    return _TERMS


# --- metrics ---------------------------------------------------------------------------
#
# Every metric is a function of three per-human sums: capability-weighted kits, preference-
# weighted kits and kits. ``HumanSums`` holds them, so a batch can compute the sums once
# (``goal_major_sums``: every goal of a batch of teams) and derive every metric from them.


@dataclass(frozen=True)
class HumanSums:
    """Per-human sums from which every metric of MODEL.md follows.

    The human axis comes first (``[h, ...]``) so sums and differences over humans are
    element-wise operations on contiguous arrays. ``kits`` and ``inputs`` may hold
    size-1 axes where they do not vary (kits per goal, inputs per team).
    """

    capability: np.ndarray
    preference: np.ndarray
    kits: np.ndarray
    inputs: np.ndarray

    @classmethod
    def of(cls, c: np.ndarray, p: np.ndarray, allocation: np.ndarray) -> HumanSums:
        allocation = np.asarray(allocation, dtype=float)
        per_human = np.broadcast_arrays(
            (c * allocation).sum(axis=-1), (p * allocation).sum(axis=-1),
            allocation.sum(axis=-1), np.asarray(c, dtype=float).sum(axis=-1))
        return cls(*(np.moveaxis(x, -1, 0) for x in per_human))

    def mean_kits(self) -> np.ndarray:
        """Kits per human on average, the denominator of every share."""
        return _total(self.kits) / len(self.kits)

    def _per_kit(self, numerator: np.ndarray, kits: np.ndarray) -> np.ndarray:
        """``numerator / kits``: NaN, without a warning, where no kit has been handed out."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return numerator / kits

    def share(self, weighted: np.ndarray) -> np.ndarray:
        """``a_i^f``: feature-weighted kits over the mean kits per human."""
        return self._per_kit(weighted, self.mean_kits())

    def efficiency(self) -> np.ndarray:
        return self._per_kit(_total(self.capability), _total(self.kits))

    def equality_of_capability(self) -> np.ndarray:
        return self._per_kit(_difference(self.capability), self.mean_kits())

    def equality_of_preference(self) -> np.ndarray:
        return self._per_kit(_difference(self.preference), self.mean_kits())

    def fairness(self) -> np.ndarray:
        """``(a^c + a^p) / 2`` compared between humans: the shares' common denominator
        is taken out of the difference."""
        both = self.capability + self.preference
        return self._per_kit(_difference(both), 2 * self.mean_kits())

    def fair_equity(self) -> np.ndarray:
        return _difference(self.preference / self.inputs)

    def capability_utilities(self) -> np.ndarray:
        """``u_i^c``: each human's output rate, capability-weighted kits over their kits."""
        return self._per_kit(self.capability, self.kits)

    def preference_utilities(self) -> np.ndarray:
        """``u_i^p``: the share of each human's time on what they prefer."""
        return self._per_kit(self.preference, self.kits)


class GoalSums(HumanSums):
    """``HumanSums`` over goal states: every human holds kits there (no division by zero
    to guard), and the metrics are computed once, as several algorithms read them (a
    pool's three, a live session's conditions)."""

    def _per_kit(self, numerator: np.ndarray, kits: np.ndarray) -> np.ndarray:
        return numerator / kits

    @cached_property
    def _efficiency(self) -> np.ndarray:
        return super().efficiency()

    @cached_property
    def _fairness(self) -> np.ndarray:
        return super().fairness()

    @cached_property
    def _fair_equity(self) -> np.ndarray:
        return super().fair_equity()

    def efficiency(self) -> np.ndarray:
        return self._efficiency

    def fairness(self) -> np.ndarray:
        return self._fairness

    def fair_equity(self) -> np.ndarray:
        return self._fair_equity

    def with_history(self, c: np.ndarray, p: np.ndarray, history: np.ndarray) -> GoalSums:
        """The sums of the totals (MODEL.md, memory): each team's kits of earlier sessions,
        ``history [B, h, n]`` for teams ``c, p [B, h, n]``, added to every goal."""
        def earlier(feature: np.ndarray) -> np.ndarray:
            return sum_last(feature * history).T[:, None, :]

        return GoalSums(self.capability + earlier(c), self.preference + earlier(p),
                        self.kits + sum_last(history).T[:, None, :], self.inputs)


def _total(per_human: np.ndarray) -> np.ndarray:
    """Sum over the leading human axis, in human order."""
    if len(per_human) == 1:
        return per_human[0].copy()
    total = per_human[0] + per_human[1]
    for row in per_human[2:]:
        total += row
    return total


def _difference(per_human: np.ndarray) -> np.ndarray:
    """Signed ``x_0 - x_1`` for two humans; the spread ``max - min`` for more."""
    if len(per_human) == 2:
        return per_human[0] - per_human[1]
    return per_human.max(axis=0) - per_human.min(axis=0)


def _least(per_human: np.ndarray) -> np.ndarray:
    """The minimum over the leading human axis, as a new array."""
    if len(per_human) == 2:
        return np.minimum(per_human[0], per_human[1])
    return per_human.min(axis=0)


def _geometric_mean(per_human: np.ndarray) -> np.ndarray:
    """The geometric mean over the leading human axis, the product taken in human order."""
    product = per_human[0] * per_human[1]
    for row in per_human[2:]:
        product = product * row
    if len(per_human) == 2:
        return np.sqrt(product)
    return np.power(product, 1.0 / len(per_human))


def _weighted_goal_major(feature: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """``[h, G, B]``: ``sum_j feature[b, i, j] * goals[g, i, j]``, summed in ``j`` order."""
    goal_count, humans, types = goals.shape
    by_human = np.ascontiguousarray(np.moveaxis(feature, 0, -1))
    out = np.empty((humans, goal_count, len(feature)))
    scratch = np.empty((goal_count, len(feature))) if types > 1 else None
    for i in range(humans):
        np.multiply(goals[:, i, 0, None], by_human[i, 0], out=out[i])
        for j in range(1, types):
            np.multiply(goals[:, i, j, None], by_human[i, j], out=scratch)
            out[i] += scratch
    return out


def goal_major_sums(c: np.ndarray, p: np.ndarray, goals: np.ndarray) -> GoalSums:
    """``HumanSums`` of shape ``[h, G, B]`` for teams ``[B, h, n]`` and goals ``[G, h, n]``.

    Goals first, teams last, so every reduction over goals runs over contiguous rows.
    Element-wise products summed in a fixed order, without BLAS (whose rounding depends
    on the batch size): a team's rewards are bit-identical however the teams are chunked.
    """
    goals = np.asarray(goals, dtype=float)
    kits = goals.sum(axis=-1).T[:, :, None]
    inputs = c[:, :, 0].copy()
    for j in range(1, c.shape[2]):
        inputs += c[:, :, j]
    return GoalSums(_weighted_goal_major(c, goals), _weighted_goal_major(p, goals), kits,
                    inputs.T[:, None, :])


@dataclass(eq=False)
class TeamGoalSums:
    """One team's per-human sums in every goal state, as Python floats (the live path).

    A live session solves one team over a handful of goals, where plain floats are several
    times faster than array operations. Every metric takes the operations of ``HumanSums``
    in the same order, so a team's rewards equal its row of a batch to the last bit.
    ``capability[i]`` and ``preference[i]`` hold human ``i``'s weighted kits in every goal,
    ``kits`` all humans' kits in every goal, ``inputs`` each human's summed capabilities.
    """

    capability: list[list[float]]
    preference: list[list[float]]
    kits: list[float]
    inputs: list[float]
    human_kits: np.ndarray    # [h, G]: each human's kits in every goal

    @cached_value
    def efficiency(self) -> list[float]:
        if len(self.capability) == 2:      # the same operations in one pass
            return [(a + b) / kits for a, b, kits in zip(*self.capability, self.kits,
                                                         strict=True)]
        return [total / kits for total, kits in zip(_goalwise_total(self.capability),
                                                    self.kits, strict=True)]

    @cached_value
    def fairness(self) -> list[float]:
        if len(self.capability) == 2:      # the same operations in one pass
            return [((c0 + p0) - (c1 + p1)) / (2 * (kits / 2))
                    for c0, c1, p0, p1, kits in zip(*self.capability, *self.preference,
                                                    self.kits, strict=True)]
        both = [[c + p for c, p in zip(cap, pref, strict=True)]
                for cap, pref in zip(self.capability, self.preference, strict=True)]
        humans = len(both)
        return [difference / (2 * (kits / humans))
                for difference, kits in zip(_goalwise_difference(both), self.kits, strict=True)]

    @cached_value
    def fair_equity(self) -> list[float]:
        if len(self.preference) == 2:      # the same operations in one pass
            first, second = self.inputs
            return [a / first - b / second for a, b in zip(*self.preference, strict=True)]
        return _goalwise_difference([[p / inputs for p in pref]
                                     for pref, inputs in zip(self.preference, self.inputs,
                                                             strict=True)])

    def rewards(self, algorithm: Algorithm) -> list[float]:
        """``R(s')`` of every goal, as ``reward_from_sums`` computes it: the presets' terms
        on floats, any other terms by ``reward_from_sums`` on these sums as arrays."""
        if algorithm.form == _EFFICIENCY:
            return self.efficiency
        if algorithm.form == _FAIRNESS:
            return [1.0 - abs(f) for f in self.fairness]
        if algorithm.form != _FEA:
            return reward_from_sums(algorithm, self.as_goal_sums())[:, 0].tolist()
        (_, w), (_, keep) = algorithm.terms
        lo, span = algorithm.lo, algorithm.hi - algorithm.lo
        scaled = [(abs(fe) - lo) / span for fe in self.fair_equity]
        return [w * e + (1.0 - (0.0 if s <= 0.0 else 1.0 if s >= 1.0 else s)) * keep
                for e, s in zip(self.efficiency, scaled, strict=True)]

    def as_goal_sums(self) -> GoalSums:
        """These sums as the ``[h, G, 1]`` arrays of a batch of one (the same numbers)."""
        return GoalSums(np.array(self.capability)[:, :, None],
                        np.array(self.preference)[:, :, None], self.human_kits[:, :, None],
                        np.array(self.inputs)[:, None, None])


def _goalwise_total(per_human: list[list[float]]) -> list[float]:
    """``_total`` on Python floats: per goal, the humans' values added in human order."""
    total = per_human[0]
    for values in per_human[1:]:
        total = [a + b for a, b in zip(total, values, strict=True)]
    return total


def _goalwise_difference(per_human: list[list[float]]) -> list[float]:
    """``_difference`` on Python floats: ``x_0 - x_1`` for two humans, else the spread."""
    if len(per_human) == 2:
        return [a - b for a, b in zip(*per_human, strict=True)]
    return [max(values) - min(values) for values in zip(*per_human, strict=True)]


def team_goal_sums(c: np.ndarray, p: np.ndarray, space: StateSpace) -> TeamGoalSums:
    """The sums of ``goal_major_sums`` for one team ``c, p [h, n]``: products by one array
    operation, each human's sum over task types in type order as a batch adds them."""
    products = space.doubled_goal_allocations * np.concatenate((c, p))
    weighted = products[..., 0]
    for j in range(1, c.shape[1]):
        weighted = weighted + products[..., j]
    humans = len(c)
    per_human = weighted.T.tolist()
    return TeamGoalSums(per_human[:humans], per_human[humans:], space.goal_kit_totals,
                        _goalwise_total(c.T.tolist()), space.goal_kits)


def sums_over_goals(c: np.ndarray, p: np.ndarray, goals: np.ndarray) -> HumanSums:
    """``goal_major_sums`` seen team-first: ``[h, B, G]``."""
    sums = goal_major_sums(c, p, goals)
    return HumanSums(*(np.swapaxes(x, 1, 2) for x in (sums.capability, sums.preference,
                                                       sums.kits, sums.inputs)))


def efficiency(c: np.ndarray, allocation: np.ndarray) -> np.ndarray:
    """``E``: capability-weighted kits over all kits, in [0, 1]; NaN before any kit."""
    return HumanSums.of(c, c, allocation).efficiency()


def equality(feature: np.ndarray, allocation: np.ndarray) -> np.ndarray:
    """``F_f``: equality of one feature, signed (positive favours human 0) for two humans."""
    return HumanSums.of(feature, feature, allocation).equality_of_capability()


def fairness(c: np.ndarray, p: np.ndarray, allocation: np.ndarray) -> np.ndarray:
    """``F``: combined equality of capability and preference, signed for two humans."""
    return HumanSums.of(c, p, allocation).fairness()


def fair_equity(c: np.ndarray, p: np.ndarray, allocation: np.ndarray) -> np.ndarray:
    """``FE``: Adams' equity, preference outcomes over capability inputs, between humans."""
    return HumanSums.of(c, p, allocation).fair_equity()


def scale_fair_equity(fe: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``FE'``: ``|FE|`` mapped onto [0, 1] by the protocol's bounds, clipped."""
    if hi <= lo:
        raise InvalidInput("fea bounds", (lo, hi), "hi must be greater than lo")
    scaled = np.abs(fe)
    scaled -= lo            # in place on the new array: fewer passes over memory
    scaled /= hi - lo
    if isinstance(scaled, np.ndarray) and scaled.size > _SMALL:
        return np.clip(scaled, 0.0, 1.0, out=scaled)   # one pass, many times faster on
    return np.minimum(np.maximum(scaled, 0.0), 1.0)    # big arrays; slower on a few values


def scaled_fair_equity(c: np.ndarray, p: np.ndarray, allocation: np.ndarray,
                       lo: float, hi: float) -> np.ndarray:
    """``FE'`` of allocations."""
    return scale_fair_equity(fair_equity(c, p, allocation), lo, hi)


def term_value(name: str, sums: HumanSums, algorithm: Algorithm) -> np.ndarray:
    """One term of a goal reward (MODEL.md's table), in [0, 1], higher better. A new
    array, except ``efficiency``, which ``GoalSums`` keeps for every algorithm."""
    if name == "efficiency":
        return sums.efficiency()
    if name == "fairness":
        return 1.0 - np.abs(sums.fairness())
    if name == "capability_equality":
        return 1.0 - np.abs(sums.equality_of_capability())
    if name == "preference_equality":
        return 1.0 - np.abs(sums.equality_of_preference())
    if name == "fair_equity":
        return 1.0 - scale_fair_equity(sums.fair_equity(), algorithm.lo, algorithm.hi)
    if name == "nash_c":
        return _geometric_mean(sums.capability_utilities())
    if name == "nash_p":
        return _geometric_mean(sums.preference_utilities())
    if name == "egalitarian_c":
        return _least(sums.capability_utilities())
    if name == "egalitarian_p":
        return _least(sums.preference_utilities())
    if name == "preference":
        utilities = sums.preference_utilities()
        return _total(utilities) / len(utilities)
    raise InvalidInput("term", name, f"must be one of {', '.join(TERMS)}")


def reward_from_sums(algorithm: Algorithm, sums: HumanSums) -> np.ndarray:
    """``R(s')`` of MODEL.md from per-human sums, in [0, 1]: the algorithm's weighted
    terms added in ``TERMS`` order. A single term is its value; FEA takes
    ``w E + (1 - FE') (1 - w)``, the operations (and so the bits) of the presets."""
    if algorithm.code is not None:
        raise InvalidInput("algorithm", algorithm.name, "a goal reward given as code is "
                                                        "computed from the allocations")
    (first, weight), *rest = algorithm.terms
    if not rest:
        return term_value(first, sums, algorithm)
    reward = weight * term_value(first, sums, algorithm)
    for name, weight in rest:
        value = term_value(name, sums, algorithm)   # a new array (efficiency comes first)
        value *= weight
        reward += value
    return reward


def goal_reward(algorithm: Algorithm, c: np.ndarray, p: np.ndarray,
                allocation: np.ndarray, history: np.ndarray | None = None) -> np.ndarray:
    """``R(s')`` of MODEL.md for goal allocations, in [0, 1]. With memory, ``history``
    (the kits of earlier sessions, broadcastable to ``allocation``) counts too."""
    if algorithm.memory and history is not None:
        allocation = np.asarray(allocation, dtype=float) + np.asarray(history, dtype=float)
    if algorithm.code is not None:
        return code_goal_rewards(algorithm.code, c, p, allocation)
    return reward_from_sums(algorithm, HumanSums.of(c, p, allocation))


def code_goal_rewards(code: GoalRewardCode, c: np.ndarray, p: np.ndarray,
                      allocations: np.ndarray) -> np.ndarray:
    """A goal reward given as code, for one team ``c, p [h, n]`` and allocations
    ``[..., h, n]``, or teams ``[B, h, n]`` and allocations ``[G, h, n]`` or
    ``[B, G, h, n]``. The code sees read-only arrays, so it cannot change the solver's."""
    c, p = np.asarray(c, dtype=float), np.asarray(p, dtype=float)
    allocations = np.asarray(allocations, dtype=float)
    if c.ndim == 2:
        batch = allocations.reshape(1, -1, *c.shape)
        rewards = code.rewards(_read_only(c[None]), _read_only(p[None]), _read_only(batch))
        return rewards.reshape(allocations.shape[:-2])
    if allocations.ndim == 3:
        allocations = np.broadcast_to(allocations, (len(c), *allocations.shape))
    return code.rewards(_read_only(c), _read_only(p), _read_only(allocations))


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def validate_history(history: object, shape: tuple[int, ...]) -> np.ndarray:
    """The kits each human was allocated in the study's earlier sessions, shaped like the
    teams' coefficients ``[..., h, n]``: whole numbers >= 0, and the same number for every
    human of a team (every round hands each human one kit)."""
    try:
        array = np.asarray(history, dtype=float)
    except (TypeError, ValueError) as error:
        raise InvalidInput("history", history, "must be numbers") from error
    if array.shape != tuple(shape):
        raise InvalidInput("history", list(array.shape), f"must have the teams' shape "
                                                         f"{list(shape)} [..., humans, types]")
    if not (np.isfinite(array).all() and (array >= 0).all()
            and (array == np.round(array)).all()):
        raise InvalidInput("history", array.tolist() if array.size <= _SMALL else "...",
                           "must be whole numbers of kits, at least 0")
    held = array.sum(axis=-1)
    if (held != held[..., :1]).any():
        index = tuple(int(i) for i in np.argwhere(held != held[..., :1])[0][:-1])
        raise InvalidInput(f"history{list(index)}" if index else "history",
                           held[index].tolist(), "every human of a team holds the same "
                                                 "number of kits (one a round)")
    return array


def all_metrics(c: np.ndarray, p: np.ndarray, allocation: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric of MODEL.md for the given allocations, keyed by its short name."""
    sums = HumanSums.of(c, p, allocation)
    return {
        "E": sums.efficiency(),
        "F_c": sums.equality_of_capability(),
        "F_p": sums.equality_of_preference(),
        "F": sums.fairness(),
        "FE": sums.fair_equity(),
    }


def first_argmax(values: np.ndarray) -> np.ndarray:
    """``np.argmax`` over the last axis (ties to the lowest index), as one element-wise
    pass per entry of that axis: many times faster than ``argmax`` when, as here, the
    axis is a handful of humans or task types and the batch is large."""
    values = np.asarray(values)
    count = values.shape[-1]
    best = values[..., 0]
    index = np.zeros(best.shape, dtype=np.intp)
    for k in range(1, count):
        candidate = values[..., k]
        better = candidate > best
        index = better.astype(np.intp) if k == 1 else np.where(better, k, index)
        if k < count - 1:
            best = np.where(better, candidate, best)
    return index


def sum_last(values: np.ndarray) -> np.ndarray:
    """The sum over a short last axis, in index order (see ``first_argmax``)."""
    values = np.asarray(values)
    total = values[..., 0].copy()
    for k in range(1, values.shape[-1]):
        total += values[..., k]
    return total


def most_capable_type(c: np.ndarray) -> np.ndarray:
    """Each human's most capable task type (ties to the lowest index)."""
    return first_argmax(c)


def most_preferred_type(p: np.ndarray) -> np.ndarray:
    """Each human's most preferred task type (ties to the lowest index)."""
    return first_argmax(p)


def rounds_on_type(allocation: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Kits (rounds) each human got of the given per-human type: ``[..., h]``."""
    return np.take_along_axis(np.asarray(allocation), types[..., None], axis=-1)[..., 0]


# --- state space -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StateSpace:
    """The reachable states of the allocation MDP for ``h`` humans and kits ``K``.

    A state is an integer array ``[h + 1, n]``: row 0 the fetch station, row ``1 + i``
    human ``i``'s kits. States are numbered breadth-first from the start state, actions
    as ``itertools.product(range(n), repeat=h)`` enumerates them.
    """

    humans: int
    kits: tuple[int, ...]
    states: np.ndarray = field(repr=False)
    successor: np.ndarray = field(repr=False)
    depth: np.ndarray = field(repr=False)
    index: dict[bytes, int] = field(repr=False)

    @property
    def task_types(self) -> int:
        return len(self.kits)

    @property
    def rounds(self) -> int:
        return sum(self.kits) // self.humans

    @property
    def size(self) -> int:
        return len(self.states)

    @cached_property
    def actions(self) -> np.ndarray:
        """``[A, h]``: the task type each action fetches for each human."""
        return np.array(list(itertools.product(range(self.task_types), repeat=self.humans)))

    @cached_property
    def allocations(self) -> np.ndarray:
        """``[S, h, n]``: the kits each human holds in each state."""
        return self.states[:, 1:, :]

    @cached_property
    def goals(self) -> np.ndarray:
        """State numbers of the goal states, in state order."""
        return np.flatnonzero(self.depth == self.rounds)

    @cached_property
    def goal_allocations(self) -> np.ndarray:
        """``[G, h, n]`` floats: the kits each human holds in each goal state."""
        return self.allocations[self.goals].astype(float)

    @cached_property
    def doubled_goal_allocations(self) -> np.ndarray:
        """``[G, 2h, n]``: the goal allocations twice, to weight capabilities and
        preferences in one product."""
        return np.concatenate((self.goal_allocations, self.goal_allocations), axis=1)

    @cached_property
    def goal_kits(self) -> np.ndarray:
        """``[h, G]``: the kits each human holds in each goal state."""
        return self.goal_allocations.sum(axis=-1).T

    @cached_property
    def goal_kit_totals(self) -> list[float]:
        """``[G]``: all humans' kits in each goal state, as ``_total`` adds them."""
        return _goalwise_total(self.goal_kits.tolist())

    @cached_property
    def action_types(self) -> tuple[tuple[int, ...], ...]:
        """The task type per human of every action, as plain tuples."""
        return tuple(tuple(int(t) for t in row) for row in self.actions)

    @cached_property
    def reachable_goals(self) -> np.ndarray:
        """``[S, G]`` booleans: which goals can still be reached from each state."""
        reach = np.zeros((self.size, len(self.goals)), dtype=bool)
        reach[self.goals, np.arange(len(self.goals))] = True
        for state in np.argsort(-self.depth, kind="stable"):
            targets = self.successor[state][self.successor[state] >= 0]
            if len(targets) and self.depth[state] < self.rounds:
                reach[state] = reach[targets].any(axis=0)
        return reach

    def state_number(self, state: np.ndarray) -> int:
        key = np.asarray(state, dtype=np.int16).reshape(self.humans + 1, -1).tobytes()
        try:
            return self.index[key]
        except KeyError:
            raise InvalidInput("state", np.asarray(state).tolist(),
                               "is not a reachable state of this allocation") from None

    def state_of(self, allocation: np.ndarray) -> int:
        """State number from the kits each human holds (``[h, n]``)."""
        allocation = np.asarray(allocation, dtype=np.int16)
        fetch = np.asarray(self.kits, dtype=np.int16) - allocation.sum(axis=0)
        return self.state_number(np.vstack([fetch, allocation]))

    def action_number(self, types: tuple[int, ...] | list[int]) -> int:
        number = 0
        for task_type in types:
            if not 0 <= int(task_type) < self.task_types:
                raise InvalidInput("action", list(types), "names an unknown task type")
            number = number * self.task_types + int(task_type)
        if len(types) != self.humans:
            raise InvalidInput("action", list(types), f"must name {self.humans} task types")
        return number


def _apply(state: np.ndarray, action: np.ndarray) -> np.ndarray | None:
    """The state after fetching ``action``; None when the fetch station lacks a kit."""
    after = state.copy()
    for human, task_type in enumerate(action):
        after[0, task_type] -= 1
        after[1 + human, task_type] += 1
    return None if (after[0] < 0).any() else after


@lru_cache(maxsize=64)
def state_space(humans: int = 2, kits: tuple[int, ...] = DEFAULT_KITS) -> StateSpace:
    """Enumerate the reachable states breadth-first (cached: it depends on ``h`` and ``K``)."""
    kits = validate_kits(kits, humans)
    actions = list(itertools.product(range(len(kits)), repeat=humans))
    start = np.zeros((humans + 1, len(kits)), dtype=np.int16)
    start[0] = kits
    states, depths, index = [start], [0], {start.tobytes(): 0}
    successors: list[list[int]] = []
    queue = deque([0])
    while queue:
        number = queue.popleft()
        row = []
        for action in actions:
            after = _apply(states[number], np.array(action))
            if after is None:
                row.append(-1)
                continue
            key = after.tobytes()
            if key not in index:
                index[key] = len(states)
                states.append(after)
                depths.append(depths[number] + 1)
                queue.append(index[key])
            row.append(index[key])
        successors.append(row)
    return StateSpace(humans, kits, np.array(states), np.array(successors),
                      np.array(depths), index)
