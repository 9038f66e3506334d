"""Calibrating a protocol from people: the paper's loop from a pilot to the next study.

A capability is a measured speed over the protocol's reference speed, and only people can
say which speeds are typical (MODEL.md, "Calibration"). ``calibrate`` reads the measured
practice of a pilot database and returns the protocol's text with the reference speeds
(and, when asked, the pool's sampling ranges and FEA bounds) set from the pilot, plus a
``[calibration]`` block recording where they came from. The file is edited value by value,
so its comments and layout stay. The rules and refusals are those of
``docs/pilot-to-study.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from study.allocation.terms import InvalidInput
from study.people.scale import PAPER_RANGES
from study.protocol.loader import TASK_NAMES, Protocol
from study.protocol.toml_source import scan
from study.task.decorator import HIGHEST, LOWEST

# Fewer pilot participants than this say too little about typical speeds and their spread.
MIN_PARTICIPANTS = 5
# Pilot participants are kept this far inside the clip bounds: within [0.02, 0.98].
MARGIN = 0.01
# Significant digits of a written reference speed.
DIGITS = 4
# More clipped or out-of-range capabilities than this share of those measured calls for a
# calibration (the console's panel and the report's section warn).
OFF_SHARE = 0.10
REFERENCE_RULE = (
    "reference speed of a type = geometric mean of the pilot's measured speeds / the "
    "geometric centre of the type's target range, sqrt(lo * hi) with the range cut to "
    "[0.01, 0.99]; then moved the least needed for every pilot participant to measure "
    "within [0.02, 0.98], where the pilot's spread allows it; rounded to 4 significant "
    "digits")
RANGES_RULE = ("sampling ranges = min and max of the pilot's capabilities under the new "
               "reference speeds, rounded outward to 0.01")


@dataclass(frozen=True)
class Pilot:
    """The pilot participants who count: raw speeds and preference coefficients per type
    (the live teams they would form under a calibrated protocol are formed from these)."""

    path: Path
    digest: str
    speeds: np.ndarray  # [people, types] cookies per second
    preferences: np.ndarray  # [people, types] preference coefficients
    dates: tuple[str, str]
    left_out: dict[str, int] = field(default_factory=dict)
    ties: tuple[int | None, ...] = ()  # per person: the recorded draw for tied ratings

    @property
    def people(self) -> int:
        return len(self.speeds)


@dataclass(frozen=True)
class TypeResult:
    """One cookie type before and after: target range, reference speeds, pilot speeds."""

    name: str
    target: tuple[float, float]
    old: float
    new: float
    speeds: np.ndarray

    def capabilities(self, reference: float) -> np.ndarray:
        return np.clip(self.speeds / reference, LOWEST, HIGHEST)

    def median(self, reference: float) -> float:
        return float(np.median(self.capabilities(reference)))

    def clipped(self, reference: float) -> int:
        values = self.capabilities(reference)
        return int(((values <= LOWEST) | (values >= HIGHEST)).sum())

    def inside(self, reference: float) -> int:
        """Pilot participants measured inside the target range (a clipped value is not a
        measurement, so it is never inside)."""
        values = self.capabilities(reference)
        return int(((values >= self.target[0]) & (values <= self.target[1])
                    & (values > LOWEST) & (values < HIGHEST)).sum())


Change = tuple[str, str, str]  # dotted key, old value, new value (as TOML)


@dataclass(frozen=True)
class Calibration:
    """What ``calibrate`` decided: per type, the changed values and the new protocol text."""

    pilot: Pilot
    types: tuple[TypeResult, ...]
    changes: tuple[Change, ...]
    rule: str
    text: str
    notes: tuple[str, ...] = ()


# --- reading the pilot ------------------------------------------------------------------


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    if not path.is_file():
        raise InvalidInput("PILOT_DB", str(path), "no such file")
    connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        connection.execute("SELECT count(*) FROM sqlite_master")
    except sqlite3.DatabaseError:
        connection.close()
        raise InvalidInput("PILOT_DB", str(path), "is not an SQLite database") from None
    try:
        yield connection
    finally:
        connection.close()


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_pilot(path: Path, protocol: Protocol) -> Pilot:
    """The pilot's participants with a completed, measured practice (a capability measured
    on every type, which the server stores when practice ends), leaving out withdrawn and
    aborted participants and those the protocol's declared exclusion rules remove."""
    with _read_only(path) as db:
        tables = _tables(db)
        if not {"participants", "measurements"} <= tables:
            raise InvalidInput("PILOT_DB", str(path), "is not a study database")
        _check_protocol(db, path, protocol.name)
        speeds = _measured_speeds(db)
        if not speeds:
            raise InvalidInput("PILOT_DB", str(path), "holds no measured practice rounds "
                                                      "(no participant finished practice)")
        reasons = _left_out(db, tables, protocol)
        for (pid,) in db.execute("SELECT id FROM participants"):
            if pid not in reasons and not _complete(speeds.get(pid, {})):
                reasons[pid] = "without a measured practice"
        kept = sorted(pid for pid in speeds if pid not in reasons)
        table = [[speeds[pid][j][0] for j in range(len(TASK_NAMES))] for pid in kept]
        preferences = _preferences(db, kept)
        return Pilot(path, hashlib.sha256(db.serialize()).hexdigest(),
                     np.array(table, dtype=float).reshape(len(kept), len(TASK_NAMES)),
                     np.array([preferences[pid] for pid in kept],
                              dtype=float).reshape(len(kept), len(TASK_NAMES)),
                     _dates([at for pid in kept for _, at in speeds[pid].values()]),
                     dict(Counter(reasons.values())), _tie_draws(db, kept))


def _check_protocol(db: sqlite3.Connection, path: Path, name: str) -> None:
    others = sorted(row[0] for row in db.execute(
        "SELECT DISTINCT protocol FROM participants WHERE protocol != ?", (name,)))
    if others:
        raise InvalidInput("PILOT_DB", str(path), f"holds participants of protocol "
                                                  f"{', '.join(map(repr, others))}, not {name!r}")


def _measured_speeds(db: sqlite3.Connection) -> dict[int, dict[int, tuple[float, float]]]:
    """Participant -> task type -> (speed, when measured), for every capability measured."""
    speeds: dict[int, dict[int, tuple[float, float]]] = {}
    for row in db.execute("SELECT participant_id, task_type, speed, at FROM measurements "
                          "WHERE kind = 'capability' AND speed IS NOT NULL"):
        speeds.setdefault(row["participant_id"], {})[row["task_type"]] = (row["speed"],
                                                                          row["at"])
    return speeds


def _complete(by_type: dict[int, tuple[float, float]]) -> bool:
    """Measured on every type, and something was placed: a round with nothing done says
    nothing about speed."""
    return all(j in by_type and by_type[j][0] > 0 for j in range(len(TASK_NAMES)))


def _left_out(db: sqlite3.Connection, tables: set[str], protocol: Protocol) -> dict[int, str]:
    """Participant -> why they do not count: withdrawn, aborted, or a declared exclusion
    rule (``[analysis] exclude``) other than ``incomplete``: a measured practice does not
    need the sessions after it."""
    reasons: dict[int, str] = {}
    for row in db.execute("SELECT id, step, withdrawn_at, data_consent FROM participants"):
        if row["step"] == "declined":
            reasons[row["id"]] = "declined"
        elif (row["step"] == "withdrawn" or row["withdrawn_at"] is not None
              or row["data_consent"] == "withdrawn"):
            reasons[row["id"]] = "withdrawn"
        elif row["step"] == "aborted":
            reasons[row["id"]] = "aborted"
    rules = protocol.analysis.exclude
    if "console_status" in tables:
        for row in db.execute("SELECT participant_id, status, flagged FROM console_status"):
            if row["status"] == "aborted":
                reasons.setdefault(row["participant_id"], "aborted")
            elif row["flagged"] and "flagged" in rules:
                reasons.setdefault(row["participant_id"], "flagged")
    if "recovered-capability" in rules:
        for row in db.execute("SELECT m.participant_id FROM measurements m JOIN rounds r ON "
                              "r.id = m.round_id WHERE m.kind = 'capability' "
                              "AND r.close_reason = 'recovery'"):
            reasons.setdefault(row[0], "recovered-capability")
    if "failed-manipulation-check" in rules:
        for pid in _failed_check(db, protocol):
            reasons.setdefault(pid, "failed-manipulation-check")
    return reasons


def _failed_check(db: sqlite3.Connection, protocol: Protocol) -> list[int]:
    """Participants whose answer to the manipulation check is not a passing one."""
    rules = protocol.analysis
    passing = set(rules.manipulation_check_pass)
    failed = []
    for row in db.execute("SELECT participant_id, value_text, value_number FROM answers "
                          "WHERE questionnaire = 'post' AND item = ?",
                          (rules.manipulation_check_item,)):
        answer = row["value_text"] if row["value_text"] is not None else row["value_number"]
        if answer is not None and not _passes(answer, passing):
            failed.append(row["participant_id"])
    return failed


def _passes(answer: Any, passing: set[str]) -> bool:
    numbers = {_number(value) for value in passing} - {None}
    return str(answer) in passing or _number(answer) in numbers


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _tie_draws(db: sqlite3.Connection, people: Sequence[int]) -> tuple[int | None, ...]:
    """Per participant, the type drawn for equal ratings (``tied_ratings = "random"``);
    None where nothing was drawn or the database predates the record."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(participants)")}
    if "tie_preferred" not in columns:
        return tuple(None for _ in people)
    drawn = dict(db.execute("SELECT id, tie_preferred FROM participants").fetchall())
    return tuple(drawn.get(pid) for pid in people)


def _dates(times: Sequence[float]) -> tuple[str, str]:
    """The first and last day of the measurements (UTC); empty without any."""
    days = sorted(datetime.fromtimestamp(at, UTC).date().isoformat() for at in times)
    return (days[0], days[-1]) if days else ("", "")


def _preferences(db: sqlite3.Connection, people: Sequence[int]) -> dict[int, list[float]]:
    """Participant -> preference coefficient per type (stored at the ratings, before
    practice, so everyone with a measured practice has them)."""
    values: dict[int, list[float]] = {pid: [math.nan] * len(TASK_NAMES) for pid in people}
    for row in db.execute("SELECT participant_id, task_type, value FROM measurements "
                          "WHERE kind = 'preference'"):
        if row["participant_id"] in values:
            values[row["participant_id"]][row["task_type"]] = row["value"]
    return values


# --- the rules --------------------------------------------------------------------------


def measurable(target: tuple[float, float]) -> tuple[float, float]:
    """The part of a target range a capability can take: clip bounds included."""
    return max(target[0], LOWEST), min(target[1], HIGHEST)


def reference_speed(speeds: np.ndarray, target: tuple[float, float]) -> float:
    """``REFERENCE_RULE``: the pilot's typical participant at the geometric centre of the
    range, no pilot participant clipped when some reference speed can do that. Speeds
    spread by factors, so the geometric centre leaves a person as many times quicker than
    the typical one as slower inside the range; the arithmetic middle of a wide range sits
    near its top and gives back the room above."""
    lo, hi = measurable(target)
    typical = float(np.exp(np.log(speeds).mean()))
    chosen = typical / math.sqrt(lo * hi)
    fastest_unclipped = float(speeds.max()) / (HIGHEST - MARGIN)
    slowest_unclipped = float(speeds.min()) / (LOWEST + MARGIN)
    if fastest_unclipped <= slowest_unclipped:
        chosen = min(max(chosen, fastest_unclipped), slowest_unclipped)
    return float(f"{chosen:.{DIGITS}g}")


def check_target(result: TypeResult) -> None:
    """Refuse a target that cannot be met: fewer than half of the pilot inside it under
    the chosen reference speed, with the figures that say why."""
    people = len(result.speeds)
    inside = result.inside(result.new)
    if inside * 2 >= people:
        return
    lo, hi = measurable(result.target)
    q25, q75 = np.percentile(result.speeds, [25, 75])
    raise InvalidInput(
        f"--target {result.name}", f"{result.target[0]:g},{result.target[1]:g}",
        f"cannot be met: the pilot's middle half measured {q25:.4g}-{q75:.4g} cookies/s "
        f"(a ratio of {q75 / q25:.2f}; all {result.speeds.min():.4g}-"
        f"{result.speeds.max():.4g}), the range allows a ratio of {hi / lo:.2f}; with "
        f"reference speed {result.new:g} only {inside} of {people} pilot participants "
        f"measure inside")


def observed_range(capabilities: np.ndarray) -> tuple[float, float]:
    """``RANGES_RULE`` for one type."""
    lo = max(LOWEST, math.floor(round(float(capabilities.min()) * 100, 6)) / 100)
    hi = min(HIGHEST, math.ceil(round(float(capabilities.max()) * 100, 6)) / 100)
    return (lo, hi) if hi > lo else (lo, round(lo + 0.01, 2))


# --- the protocol text ------------------------------------------------------------------


def _string_end(text: str, start: int) -> int:
    """The index after the TOML string opening at ``start``."""
    quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
    position = start + len(quote)
    while not text.startswith(quote, position):
        position += 2 if quote[0] == '"' and text[position] == "\\" else 1
    return position + len(quote)


def _value_end(text: str, start: int) -> int:
    """The index after the TOML value starting at ``start``, before any comment."""
    depth, position, end = 0, start, start
    while position < len(text):
        char = text[position]
        if char in "\"'":
            position = end = _string_end(text, position)
            continue
        if char == "#":
            position = text.find("\n", position)
            if depth == 0 or position < 0:
                break
            continue
        if char == "\n" and depth == 0:
            break
        depth += char in "[{"
        depth -= char in "]}"
        position += 1
        if not char.isspace():
            end = position
    return end


def _line_start(text: str, line: int) -> int:
    position = 0
    for _ in range(line - 1):
        position = text.index("\n", position) + 1
    return position


def set_value(text: str, dotted: str, literal: str) -> str:
    """``text`` with the value of ``dotted`` replaced by ``literal`` (comments kept), or the
    key added under its table (the table added before the next one when missing)."""
    layout = scan(text)
    if dotted in layout.keys:
        start = _line_start(text, layout.keys[dotted])
        value = text.index("=", start) + 1
        value += len(text[value:]) - len(text[value:].lstrip(" \t"))
        return text[:value] + literal + text[_value_end(text, value):]
    table, key = dotted.rsplit(".", 1)
    if table in layout.headers:
        at = _line_start(text, layout.headers[table] + 1)
        return text[:at] + f"{key} = {literal}\n" + text[at:]
    parent = layout.headers[table.rsplit(".", 1)[0]]
    following = [line for line in layout.headers.values() if line > parent]
    at = _before_comments(text, min(following)) if following else len(text)
    return text[:at] + f"[{table}]\n{key} = {literal}\n\n" + text[at:]


def _before_comments(text: str, line: int) -> int:
    """The start of ``line``, or of the comment lines right above it (they belong to it)."""
    lines = text.splitlines(keepends=True)
    while line > 1 and lines[line - 2].lstrip().startswith("#"):
        line -= 1
    return _line_start(text, line)


def without_block(text: str, table: str) -> str:
    """``text`` without the top-level ``[table]`` (from its header to the next header)."""
    layout = scan(text)
    if table not in layout.headers:
        return text
    first = layout.headers[table]
    following = [line for line in layout.headers.values() if line > first]
    end = _line_start(text, min(following)) if following else len(text)
    return text[:_line_start(text, first)].rstrip("\n") + "\n" + text[end:]


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def toml_list(value: Any) -> str:
    """Numbers and nested lists of numbers as TOML, every number a float."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_list(item) for item in value) + "]"
    return repr(float(value))


def provenance_block(pilot: Pilot, rule: str, changes: Sequence[Change],
                     typical: Sequence[float]) -> str:
    """The ``[calibration]`` block appended to the new protocol; ``typical``: the pilot's
    typical capability per type under the new reference speeds."""
    listed = "".join(f"    {toml_string(f'{key}: {old} -> {new}')},\n"
                     for key, old, new in changes)
    return ("\n[calibration]\n"
            "# Written by `study calibrate` (docs/pilot-to-study.md): the pilot these values "
            "came from.\n"
            f"pilot = {toml_string(pilot.path.name)}\n"
            f"pilot_sha256 = {toml_string(pilot.digest)}\n"
            f"participants = {pilot.people}\n"
            f"first = {toml_string(pilot.dates[0])}\n"
            f"last = {toml_string(pilot.dates[1])}\n"
            f"rule = {toml_string(rule)}\n"
            f"changes = [\n{listed}]\n"
            f"typical = {toml_list([round(value, 4) for value in typical])}\n")


# --- calibrating ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What to calibrate: target ranges per type (none given: ``pool_target``), and whether the
    sampling ranges and the FEA bounds come from the pilot too."""

    targets: dict[str, tuple[float, float]] = field(default_factory=dict)
    ranges: bool = False
    fea_bounds: bool = False
    percentiles: tuple[float, float] | None = None
    min_participants: int = MIN_PARTICIPANTS


def parse_target(text: str) -> tuple[str, tuple[float, float]]:
    """``"letters=0.63,1"`` -> ``("letters", (0.63, 1.0))``: a range capabilities can lie in
    (part of it within the clip bounds [0.01, 0.99])."""
    name, _, bounds = text.partition("=")
    if name not in TASK_NAMES:
        raise InvalidInput("--target", text, f"expected TYPE=LO,HI with TYPE one of "
                                             f"{', '.join(TASK_NAMES)}")
    try:
        lo, hi = (float(part) for part in bounds.split(","))
    except ValueError:
        raise InvalidInput("--target", text, "expected TYPE=LO,HI such as letters=0.63,1") from None
    if not 0 <= lo < hi <= 1:
        raise InvalidInput("--target", text, "cannot be met: need 0 <= LO < HI <= 1")
    if hi <= LOWEST or lo >= HIGHEST:
        raise InvalidInput("--target", text, f"cannot be met: capabilities are measured "
                                             f"within [{LOWEST:g}, {HIGHEST:g}]")
    return name, (lo, hi)


def sampled_range(protocol: Protocol, task_type: int) -> tuple[float, float]:
    """The range the pool samples a type's capability from (over every human, when the
    pool gives them different ranges)."""
    ranges = [human[task_type] for human in protocol.pool_spec().sample_c]
    return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)


def whole_scale(protocol: Protocol, task_type: int) -> bool:
    """Whether the pool samples a type over the whole scale, which says nothing of where
    people measure."""
    lo, hi = sampled_range(protocol, task_type)
    return lo <= LOWEST and hi >= HIGHEST


def pool_target(protocol: Protocol, task_type: int) -> tuple[float, float]:
    """Where a type's capabilities should lie: the range the pool samples, or the paper's
    range where the pool samples the whole scale. Calibrating to it keeps the protocol on
    its scale, the paper's for the shipped protocols."""
    if whole_scale(protocol, task_type):
        return PAPER_RANGES[task_type]
    return sampled_range(protocol, task_type)


def target_source(protocol: Protocol) -> str:
    """Where ``pool_target`` took the ranges from, for the provenance."""
    whole = [whole_scale(protocol, j) for j in range(len(TASK_NAMES))]
    if all(whole):
        return "the paper's ranges: the pool samples the whole scale"
    return "[pool.sample] c" if not any(whole) else "[pool.sample] c, else the paper's"
