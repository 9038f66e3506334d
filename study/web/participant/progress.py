"""Partial cookies: every element a participant places is checked against the round's
target (``placement``) and stored (``playing.Rounds.progress``), so a practice round
measures speed continuously (``docs/model.md``).

A round's speed counts the cookie left unfinished at the deadline by the fraction of its
elements placed correctly, so a short round measures the same speed as a long one, and a
round cut by server downtime is measured over the time the server was up. Time the
experimenter held the participant (a console pause) is not decorating time: the round is
measured without it and without the work done in it.

Only practice rounds measure, so only there does the page report every element at once; in
a played round it reports at most every ``PLAYED_REPORT_SECONDS`` (``report_seconds``).

A measured round that no person's page could have sent is not a measurement
(``not_a_person``): finished cookies of which not one came with an element report (the page
reports every element but the one that finishes a cookie), or a speed above the human
model's quickest plausible person (``fastest_speed``). A client that sends finished cookies
at a pace of its choosing would otherwise dial in its own capability.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.people.speed import Human, measured_speed
from study.storage.database import Storage
from study.web.console.holds import held_intervals
from study.web.participant.rejections import Rejected

LETTERS_CONTENT = re.compile(r"^[A-Z0-9]{0,64}$")
# A played round's reports draw only teammates' stations, told at most once a second
# (``station_pushes``), and a reopened page's cookie: one a second serves both, at about
# half the messages of a squares round (``docs/socket-protocol.md#progress``).
PLAYED_REPORT_SECONDS = 1.0
# The quickest plausible person: the human model's person at a fifth of its typical times,
# without slips or variation from element to element. The model's people differ by a
# log-normal factor of spread 0.13 (docs/human-model.md), so a fifth is 12 spreads below the
# typical person; the quickest person the robustness test plays is at 0.3
# (``study.people.speed.ROBUSTNESS_PACES``). On study1's cookies that is 0.40 squares and
# 0.28 letters cookies a second, 1.2 and 4 times their reference speeds.
FASTEST_PACE = 0.2
# Why a measured round is not a person's (``measurements.implausible``).
NO_ELEMENT_REPORTS = "no-element-reports"
FASTER_THAN_PEOPLE = "faster-than-people"


def report_seconds(session_number: int) -> float:
    """``round.progress_seconds``: how often a page reports its cookie in progress; 0, every
    element at once, in practice (session 0), which measures the person."""
    return 0.0 if session_number == 0 else PLAYED_REPORT_SECONDS


@dataclass(frozen=True)
class Placement:
    """What is on a cookie: elements placed, how many of them count towards the target,
    and that count as a share of the target's elements."""

    placed: int
    correct: int
    fraction: float


def placement(target: dict[str, Any], content: Any) -> Placement:
    """Check a partial cookie against its target; raises ``Rejected`` on malformed content.

    Letters: the letters placed so far, in order; the correct ones are the prefix that
    spells the target (a wrong letter and everything after it must come off again).
    Squares: the boxes filled so far; each wrong box cancels a right one, since clearing it
    takes a click as well."""
    if target["kind"] == "letters":
        if not isinstance(content, str) or not LETTERS_CONTENT.match(content):
            raise Rejected("malformed", "letters progress is the placed letters, A-Z and 0-9")
        wanted = target["letters"]
        correct = next((i for i, (a, b) in enumerate(zip(content, wanted, strict=False))
                        if a != b), min(len(content), len(wanted)))
        return Placement(len(content), correct, correct / len(wanted))
    boxes = target["rows"] * target["cols"]
    if (not isinstance(content, list) or len(content) > boxes
            or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < boxes
                       for c in content) or len(set(content)) != len(content)):
        raise Rejected("malformed", "squares progress is the filled boxes, each once")
    wanted = set(target["cells"])
    right = len(wanted.intersection(content))
    correct = max(0, right - (len(content) - right))
    return Placement(len(content), correct, correct / len(wanted))


@dataclass(frozen=True)
class RoundSpeed:
    """The work of one round over the seconds it is measured on."""

    cookies: int
    fraction: float
    seconds: float  # measured: without the time the participant was held
    cut_by_downtime: bool
    held_work: float = 0.0  # cookies (and fractions) decorated while held
    reported: int = 0  # finished cookies that came with an element report

    @property
    def speed(self) -> float:
        """Cookies per second, the unfinished cookie counted by its fraction, the work done
        while held left out."""
        work = self.cookies + self.fraction - self.held_work
        return work / self.seconds if self.seconds > 0 else 0.0

    def __add__(self, other: RoundSpeed) -> RoundSpeed:
        return RoundSpeed(self.cookies + other.cookies, self.fraction + other.fraction,
                          self.seconds + other.seconds,
                          self.cut_by_downtime or other.cut_by_downtime,
                          self.held_work + other.held_work, self.reported + other.reported)


def measured_until(round_row: dict[str, Any]) -> tuple[float, bool]:
    """The end of a round's measured time and whether downtime cut it: the deadline, or
    the last moment the server was known to be up (``rounds.alive_until``) if earlier."""
    alive = round_row.get("alive_until")
    if alive is not None and alive < round_row["deadline"]:
        return max(float(alive), round_row["started_at"]), True
    return round_row["deadline"], False


def work_at(storage: Storage, round_id: int, at: float) -> tuple[int, float]:
    """Cookies finished by ``at`` and the correct fraction of the next one at ``at``."""
    cookies = storage.one(
        "SELECT count(*) AS n FROM cookies WHERE round_id = ? AND actor = 'participant' "
        "AND finished_at <= ?", (round_id, at))["n"]  # type: ignore[index]
    last = storage.one(
        "SELECT fraction FROM progress WHERE round_id = ? AND cookie = ? AND at <= ? "
        "ORDER BY at DESC, id DESC LIMIT 1", (round_id, cookies + 1, at))
    return int(cookies), min(1.0, last["fraction"]) if last else 0.0


def round_speed(storage: Storage, round_row: dict[str, Any]) -> RoundSpeed:
    """Finished cookies plus the unfinished cookie's correct fraction, over the measured
    seconds (``measured_until``); only what the server received in that time counts.
    Holds (``holds.held_intervals``) are cut out: their seconds, and the work done in them
    (a paused participant may go on decorating the running round)."""
    until, cut = measured_until(round_row)
    start, round_id = round_row["started_at"], round_row["id"]
    cookies, fraction = work_at(storage, round_id, until)
    held = held_intervals(storage, round_row["participant_id"], start, until)
    held_work = sum(sum(work_at(storage, round_id, end)) - sum(work_at(storage, round_id, begin))
                    for begin, end in held)
    seconds = until - start - sum(end - begin for begin, end in held)
    return RoundSpeed(cookies, fraction, seconds, cut, held_work,
                      reported_cookies(storage, round_id, cookies, until))


def reported_cookies(storage: Storage, round_id: int, cookies: int, until: float) -> int:
    """How many of the round's first ``cookies`` finished cookies came with at least one
    element report received by ``until``."""
    row = storage.one("SELECT count(DISTINCT cookie) AS n FROM progress WHERE round_id = ? "
                      "AND cookie <= ? AND at <= ?", (round_id, cookies, until))
    return int(row["n"]) if row else 0


def fastest_speed(target: dict[str, Any], seconds: float) -> float:
    """Cookies per second of the quickest plausible person (``FASTEST_PACE``) decorating
    ``target`` for ``seconds``, measured as a round is."""
    person = Human(pace=FASTEST_PACE, spread=0.0, slip=0.0)
    actions = person.round_actions(target, seconds, np.random.default_rng(0))
    return measured_speed(actions, seconds)


def not_a_person(measured: RoundSpeed, target: dict[str, Any]) -> str | None:
    """Why a measured round on ``target`` cannot be a person's decorating, or None: its
    finished cookies came without one element report (a cookie of one element has none to
    report), or it is quicker than the quickest plausible person."""
    elements = len(target["letters"] if target["kind"] == "letters" else target["cells"])
    if measured.cookies and not measured.reported and elements > 1:
        return NO_ELEMENT_REPORTS
    if measured.seconds > 0 and measured.speed > fastest_speed(target, measured.seconds):
        return FASTER_THAN_PEOPLE
    return None

