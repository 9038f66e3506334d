"""The model's names and the input checks that need no arrays.

Kept apart from ``study.allocation.model`` so reading and checking a protocol (``study
check``, every command's error handling) does not import numpy; ``study.allocation.model``
re-exports all of it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field

ALGORITHMS = ("efficient", "fair", "fea")
DEFAULT_KITS = (8, 8)
DEFAULT_FEA_WEIGHT = 0.70
# The named terms of a goal reward (MODEL.md, Algorithms as data), in the order a weighted
# sum adds them: efficiency first, so the presets' sums take today's operations in order.
TERMS = ("efficiency", "fairness", "capability_equality", "preference_equality",
         "fair_equity", "nash_c", "nash_p", "egalitarian_c", "egalitarian_p", "preference")
# Terms about how outcomes are shared between humans: what an algorithm's running
# unfairness (the anytime-fair round order) averages; efficiency and preference are totals.
SHARING_TERMS = TERMS[1:-1]
WEIGHT_TOLERANCE = 1e-9
MEMORY_SCOPES = ("study",)
DISCOUNT = 0.9
# The exclusion rules a protocol's [analysis] section may name, one place for the protocol
# loader and the analysis package; each with the sentence the report prints.
EXCLUSION_TEXT = {
    "aborted": "the experimenter aborted the participant in the console",
    "flagged": "the experimenter flagged the participant in the console",
    "failed-manipulation-check": "the participant's answer to the manipulation check failed it",
    "recovered-capability": "a capability was measured from a practice round the server "
                            "closed on recovery after a crash",
    "clipped-capability": "a capability was clipped at 0.01 or 0.99 (a speed the reference "
                          "speed cannot measure), so the team was formed on a value that "
                          "is not the participant's",
    "incomplete": "the participant did not finish the study",
    "not-target-team": "the participant's live team was not the team under study (the "
                       "teammate rule could not place them in it)",
}
EXCLUSION_RULES = tuple(EXCLUSION_TEXT)


class InvalidInput(ValueError):
    """Input that the model refuses; the message names the field and the value."""

    def __init__(self, field_name: str, value: object, reason: str) -> None:
        self.field = field_name
        self.value = value
        self.reason = reason
        super().__init__(f"{field_name} = {value!r}: {reason}")

    def __reduce__(self) -> tuple[type[InvalidInput], tuple[str, object, str]]:
        """Its three parts, so it arrives whole from another process (a Dask worker)."""
        return type(self), (self.field, self.value, self.reason)


@dataclass(frozen=True)
class DeclaredAlgorithm:
    """An ``[[algorithms]]`` table: weighted terms or a goal reward given as code
    (``study.allocation.algorithms`` makes the model's ``Algorithm`` of it). Plain data, so a
    protocol and a pool spec carry it without numpy. ``folder``: where a goal reward given as code
    may sit beside its protocol; ``python_sha256``: its file's digest, so a pool built with
    other code is not reused."""

    id: str
    terms: tuple[tuple[str, float], ...] = ()
    fea_bounds: tuple[float, float] | None = None  # None with fair_equity: the pool's
    memory: bool = False
    python: str | None = None
    folder: str | None = field(default=None, compare=False)
    python_sha256: str | None = field(default=None, compare=False)

    @property
    def uses_bounds(self) -> bool:
        return any(name == "fair_equity" for name, _ in self.terms)


def preset_terms(name: str, w: float = DEFAULT_FEA_WEIGHT) -> dict[str, float]:
    """A preset's goal reward as weighted terms: Efficient, Fair, FEA with weight ``w``."""
    presets = {"efficient": {"efficiency": 1.0}, "fair": {"fairness": 1.0},
               "fea": {"efficiency": w, "fair_equity": 1.0 - w}}
    if name not in presets:
        raise InvalidInput("algorithm", name, f"must be one of {', '.join(ALGORITHMS)}")
    return presets[name]


def terms_problems(terms: object) -> list[tuple[str | None, str]]:
    """What is wrong with a goal reward's weighted terms, as (term or None, message):
    unknown names, weights that are not finite numbers >= 0, a sum other than 1."""
    if not isinstance(terms, dict) or not terms:
        return [(None, "must name at least one term with its weight, e.g. "
                       "{ efficiency = 1 }")]
    problems: list[tuple[str | None, str]] = []
    for name, weight in terms.items():
        if name not in TERMS:
            close = difflib.get_close_matches(str(name), TERMS, n=2, cutoff=0.6)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            problems.append((str(name), f"unknown term; {hint}terms: {', '.join(TERMS)}"))
        elif not _finite_weight(weight):
            problems.append((name, f"{weight!r}: a weight must be a finite number"))
        elif weight < 0:
            problems.append((name, f"{weight!r}: a weight must be at least 0"))
    if not problems:
        total = math.fsum(terms.values())
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            problems.append((None, f"the weights sum to {total:.12g}; they must sum to 1"))
    return problems


def _finite_weight(value: object) -> bool:
    """A finite int or float, not a bool (TOML's true is no weight)."""
    try:
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value))
    except OverflowError:
        return False


def validate_kits(kits: object, humans: int) -> tuple[int, ...]:
    """Kits per task type: whole, non-negative, and a total divisible by the humans."""
    try:
        values = tuple(int(k) for k in kits)  # type: ignore[union-attr]
    except (TypeError, ValueError) as error:
        raise InvalidInput("kits", kits, "must be whole numbers") from error
    if not values or any(k < 0 for k in values) or list(values) != [float(k) for k in kits]:  # type: ignore[union-attr]
        raise InvalidInput("kits", kits, "must be non-negative whole numbers")
    total = sum(values)
    if total == 0 or total % humans:
        raise InvalidInput("kits", list(values),
                           f"the total ({total}) must be a positive multiple of the "
                           f"number of humans ({humans})")
    return values
