"""The model's names and the input checks that need no arrays.

Kept apart from ``study.model`` so reading and checking a protocol (``study check``, every
command's error handling) does not import numpy; ``study.model`` re-exports all of it.
"""

from __future__ import annotations

ALGORITHMS = ("efficient", "fair", "fea")
DEFAULT_KITS = (8, 8)
DEFAULT_FEA_WEIGHT = 0.70
DISCOUNT = 0.9
# The exclusion rules a protocol's [analysis] section may name, one place for the protocol
# loader and the analysis package; each with the sentence the report prints.
EXCLUSION_TEXT = {
    "aborted": "the experimenter aborted the participant in the console",
    "flagged": "the experimenter flagged the participant in the console",
    "failed-manipulation-check": "the participant's answer to the manipulation check failed it",
    "recovered-capability": "a capability was measured from a practice round the server "
                            "closed on recovery after a crash",
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
        super().__init__(f"{field_name} = {value!r}: {reason}")


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
