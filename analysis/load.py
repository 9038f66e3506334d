"""Reading a study database into tidy pandas frames, one row per observation.

The database is opened read-only, so analysis can run beside a live server. Participants
who withdrew or declined are left out of every frame: their rows were erased, and even
the participant row that remains must not count as a participant (docs/database.md).
Every frame carries the ``protocol`` column and ``frame.attrs["metadata"]``: the
protocols in the database and the records of the pool files the teammates came from.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from study.allocation.model import InvalidInput
from study.pool.store import read_metadata

EXCLUDED_STEPS = ("withdrawn", "declined")
FRAMES = ("participants", "sessions", "rounds", "allocations", "cookies", "answers", "practice",
          "teammates", "status")
# The console's hold of each participant (study.web.console.holds); none recorded: active,
# unflagged.
STATUS_COLUMNS = ["participant_id", "status", "flagged", "note"]
RUNS_TABLE = "server_runs"


@dataclass
class StudyData:
    """The tidy frames of one study database."""

    participants: pd.DataFrame
    sessions: pd.DataFrame
    rounds: pd.DataFrame
    allocations: pd.DataFrame
    cookies: pd.DataFrame
    answers: pd.DataFrame
    practice: pd.DataFrame
    teammates: pd.DataFrame
    status: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STATUS_COLUMNS))
    metadata: dict[str, Any] = field(default_factory=dict)
    protocol_texts: dict[str, str] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every frame by name, in a stable order (the export's file names)."""
        return {name: getattr(self, name) for name in FRAMES}

    def replace(self, **frames: pd.DataFrame) -> StudyData:
        """A copy with some frames replaced (the same metadata)."""
        return dataclasses.replace(self, **frames)


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    if not path.is_file():
        raise InvalidInput("database", str(path), "no such file")
    connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        yield connection
    finally:
        connection.close()


def _query(connection: sqlite3.Connection, sql: str) -> pd.DataFrame:
    return pd.read_sql_query(sql, connection)


def _included(sql: str) -> str:
    """``sql`` restricted to participants who are not withdrawn or declined."""
    steps = ", ".join(f"'{step}'" for step in EXCLUDED_STEPS)
    return (f"SELECT t.* FROM ({sql}) AS t JOIN participants AS pp ON pp.id = t.participant_id"
            f" WHERE pp.step NOT IN ({steps}) AND pp.withdrawn_at IS NULL"
            f" AND COALESCE(pp.data_consent, '') != 'withdrawn'")


def _expand(frame: pd.DataFrame, column: str, prefix: str) -> pd.DataFrame:
    """A JSON ``[human][type]`` column as ``<prefix>_<i>_<j>`` columns (NaN when empty)."""
    parsed = [np.asarray(json.loads(value), dtype=float) if isinstance(value, str) else None
              for value in frame[column]]
    shape = next((value.shape for value in parsed if value is not None), None)
    if shape is None:
        return frame.drop(columns=column)
    cells = {f"{prefix}_{i}_{j}": [value[i, j] if value is not None else np.nan
                                   for value in parsed]
             for i in range(shape[0]) for j in range(shape[1])}
    return pd.concat([frame.drop(columns=column), pd.DataFrame(cells, index=frame.index)],
                     axis=1)


def _participants(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included("SELECT *, id AS participant_id FROM participants"))
    frame = frame.drop(columns="id")
    measured = _query(connection, _included("SELECT * FROM measurements"))
    names = measured.drop_duplicates("task_type").set_index("task_type")["task_name"]
    for kind, letter in (("capability", "c"), ("preference", "p")):
        wide = (measured[measured["kind"] == kind]
                .pivot(index="participant_id", columns="task_type", values="value"))
        wide.columns = [f"{letter}_{names[task_type]}" for task_type in wide.columns]
        frame = frame.merge(wide, left_on="participant_id", right_index=True, how="left")
    return frame.merge(_attributes(connection), on="participant_id", how="left")


def _attributes(connection: sqlite3.Connection) -> pd.DataFrame:
    """Post-study answers (age, gender, ...) as one ``attr_<item>`` column each."""
    post = _query(connection, _included(
        "SELECT participant_id, item, value_number, value_text FROM answers "
        "WHERE questionnaire = 'post'"))
    post["value"] = post["value_number"].astype(object).where(post["value_number"].notna(),
                                                              post["value_text"])
    wide = post.pivot(index="participant_id", columns="item", values="value")
    wide.columns = [f"attr_{item}" for item in wide.columns]
    return wide.reset_index()


def _sessions(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included("SELECT *, id AS session_id FROM sessions"))
    frame = frame.drop(columns=["id", "plan"])
    for column, prefix in (("team_c", "c"), ("team_p", "p"), ("goal", "goal")):
        frame = _expand(frame, column, prefix)
    return frame


def _rounds(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included(
        "SELECT r.id AS round_id, r.*, s.number AS session_number, s.kind, s.condition, "
        "s.algorithm FROM rounds AS r JOIN sessions AS s ON s.id = r.session_id")
    ).drop(columns="id")
    if "seat_cookies" in table_names(connection):
        others = _query(connection, TEAMMATES_COOKIES).set_index("round_id")["cookies"]
        team = frame["round_id"].isin(others.index)
        frame.loc[team, "teammate_cookies"] = frame.loc[team, "round_id"].map(others)
    return frame


# A real team's round (docs/teams.md): the teammates' cookies are the other people's, in
# their own rounds, and the agent seats' (withdrawn people's rows are gone, so not counted).
TEAMMATES_COOKIES = (
    "SELECT r.id AS round_id, (SELECT coalesce(sum(o.participant_cookies), 0) FROM rounds o "
    "WHERE o.team_round_id = r.team_round_id AND o.id != r.id) + (SELECT count(*) FROM "
    "seat_cookies c WHERE c.team_round_id = r.team_round_id) AS cookies "
    "FROM rounds r WHERE r.team_round_id IS NOT NULL")


def _allocations(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included(
        "SELECT a.*, s.condition, s.algorithm, s.number AS session_number "
        "FROM allocations AS a JOIN sessions AS s ON s.id = a.session_id"))
    return frame.drop(columns=["id", "held_before"])


def _cookies(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included(
        "SELECT c.*, r.session_id, r.number AS round, s.kind, s.condition "
        "FROM cookies AS c JOIN rounds AS r ON r.id = c.round_id "
        "JOIN sessions AS s ON s.id = r.session_id"))
    return frame.drop(columns=["id", "content", "msg_id"])


def _answers(connection: sqlite3.Connection) -> pd.DataFrame:
    frame = _query(connection, _included("SELECT * FROM answers")).drop(columns="id")
    frame["value"] = frame["value_number"]
    return frame


def _practice(connection: sqlite3.Connection) -> pd.DataFrame:
    """Practice rounds, with the capability measured from a round where there is one, and
    whether the server flagged it as no person's (``measurements.implausible``, in databases
    that record it)."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(measurements)")}
    implausible = "m.implausible" if "implausible" in columns else "NULL"
    return _query(connection, _included(
        "SELECT r.id AS round_id, r.participant_id, r.number, r.task_type, r.task_name, "
        "r.seconds, r.participant_cookies AS cookies, m.speed, m.reference_speed, "
        f"m.value AS capability, {implausible} AS implausible, m.id IS NOT NULL AS measured "
        "FROM rounds AS r JOIN sessions AS s ON s.id = r.session_id "
        "LEFT JOIN measurements AS m ON m.round_id = r.id AND m.kind = 'capability' "
        "WHERE s.kind = 'practice'"))


def _teammates(connection: sqlite3.Connection) -> pd.DataFrame:
    return _query(connection, _included("SELECT * FROM teammates"))


def table_names(connection: sqlite3.Connection) -> set[str]:
    return {name for (name,) in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


def _status(connection: sqlite3.Connection) -> pd.DataFrame:
    """The console's holds and flags; the table exists once a console was used."""
    if "console_status" not in table_names(connection):
        return pd.DataFrame({"participant_id": pd.Series(dtype=int),
                             "status": pd.Series(dtype=object),
                             "flagged": pd.Series(dtype=int), "note": pd.Series(dtype=object)})
    return _query(connection, _included(
        f"SELECT {', '.join(STATUS_COLUMNS)} FROM console_status"))


def protocol_runs(connection: sqlite3.Connection) -> pd.DataFrame:
    """The protocol snapshots of every server start (``server_runs``), oldest first; empty
    for a database written before snapshots were kept."""
    if RUNS_TABLE not in table_names(connection):
        return pd.DataFrame(columns=["protocol", "protocol_sha256", "protocol_text",
                                     "started_at"])
    return _query(connection, f"SELECT protocol, protocol_sha256, protocol_text, started_at "
                              f"FROM {RUNS_TABLE} ORDER BY rowid")


def pool_records(teammates: pd.DataFrame, directory: Path) -> dict[str, Any]:
    """The metadata of each pool file named by the teammates, where the file can be found
    (as recorded, or relative to the database's folder)."""
    records = {}
    for name in sorted(teammates["pool"].dropna().unique()):
        for candidate in (Path(name), directory / name, directory / Path(name).name):
            if candidate.is_file():
                records[name] = read_metadata(candidate)
                break
    return records


def load(path: Path | str) -> StudyData:
    """Every tidy frame of the database at ``path``."""
    path = Path(path)
    with _read_only(path) as connection:
        participants = _participants(connection)
        frames = {"sessions": _sessions(connection), "rounds": _rounds(connection),
                  "allocations": _allocations(connection), "cookies": _cookies(connection),
                  "answers": _answers(connection), "practice": _practice(connection),
                  "teammates": _teammates(connection), "status": _status(connection)}
        runs = protocol_runs(connection)
    metadata = {"database": str(path), "protocols": sorted(participants["protocol"].unique()),
                "pools": pool_records(frames["teammates"], path.parent),
                "protocol_sha256": {row.protocol: row.protocol_sha256
                                    for row in runs.itertuples()}}
    protocol = participants.set_index("participant_id")["protocol"]
    for frame in frames.values():
        frame.insert(1, "protocol", frame["participant_id"].map(protocol))
        frame.attrs["metadata"] = metadata
    participants.attrs["metadata"] = metadata
    texts = {row.protocol: row.protocol_text for row in runs.itertuples()}
    return StudyData(participants=participants, metadata=metadata, protocol_texts=texts,
                     **frames)
