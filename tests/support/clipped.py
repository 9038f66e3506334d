"""People quicker than the reference speeds leave room for, and the shipped study2 with a
consequence declared for a clipped capability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from study.people.speed import Human
from support.people import Person
from support.web import STUDY2, FakeClock, journey

# Times the human model's times. Capability goes as 1 / pace: the typical person measures
# squares about 0.25 and letters about 0.79, so at 0.5 letters clip at 0.99 with room to
# spare and squares (about 0.5) stay well clear of it (both clip below a pace of 0.25).
BRISK, TYPICAL = 0.5, 1.0
UNMATCHED_LINK = "https://app.prolific.com/submissions/complete?cc=CLIPPED1"


def study2_with(directory: Path, consequence: str) -> Path:
    """The shipped study2 with ``clipped_capability = consequence``, open enrolment, a link
    for the unmatched end and pay for it."""
    text = STUDY2.read_text(encoding="utf-8")
    assert 'clipped_capability = "keep"' in text
    text = (text.replace('clipped_capability = "keep"',
                         f'clipped_capability = "{consequence}"')
            .replace("open_enrolment = false", "open_enrolment = true")
            .replace("[bonus]\n", "[bonus]\nunmatched = 0.40\n"))
    path = directory / f"study2-{consequence}.toml"
    path.write_text(text + f'\n[recruitment.outcomes]\nunmatched = {{ url = "{UNMATCHED_LINK}", '
                           f'code = "CLIPPED1" }}\n', encoding="utf-8")
    return path


def practise_at(app: Any, clock: FakeClock, person: Person, pace: float, seed: int) -> None:
    """Consent, ratings and the four practice rounds at ``pace`` times the human model's
    times: every element a ``progress`` message, every finished cookie a ``cookie``."""
    rng = np.random.default_rng(seed)
    person.submit("consent", {"agree": True})
    person.submit("themes")
    person.submit("preferences", {"ratings": {"ravens": 6, "steelers": 2}})
    for number in range(1, 5):
        current = person.send("start_round", {"round": number})["state"]["round"]
        seconds = current["deadline"] - current["started_at"]
        for action in Human(pace=pace).round_actions(current["target"], seconds, rng):
            clock.now = current["started_at"] + action.at
            event = "cookie" if action.finished else "progress"
            assert person.send(event, {"round_id": current["id"],
                                       "content": action.content})["ok"]
        clock.now = current["deadline"]
        journey(app).tick(clock.now)
