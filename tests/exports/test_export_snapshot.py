"""An export is one snapshot: every table is read in one read transaction, so rows written
while the export runs appear in none of its tables (a running study's export agrees with
itself: its rounds' cookie counts match its cookie rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import study.exports.tables as export
from study.storage.database import Storage


def a_round_with_cookies(storage: Storage, cookies: int) -> int:
    """One participant's round with ``cookies`` participant cookies, counted on the round."""
    pid = storage.insert("participants", {"code": "snap-1", "protocol": "demo",
                                          "created_at": 1.0, "step": "practice"})
    session = storage.insert("sessions", {"participant_id": pid, "number": 0,
                                          "kind": "practice", "rounds": 4, "created_at": 1.0})
    round_id = storage.insert("rounds", {
        "session_id": session, "participant_id": pid, "number": 1, "task_type": 0,
        "started_at": 1.0, "deadline": 31.0, "seconds": 30.0, "participant_cookies": 0,
        "teammate_cookies": 0})
    for number in range(1, cookies + 1):
        add_cookie(storage, pid, round_id, number)
    return round_id


def add_cookie(storage: Storage, pid: int, round_id: int, number: int) -> None:
    """What the journey does for an accepted cookie: a row and the round's count, together."""
    with storage.event():
        storage.insert("cookies", {"round_id": round_id, "participant_id": pid,
                                   "actor": "participant", "number": number, "task_type": 0,
                                   "finished_at": 1.0 + number, "seconds": float(number)})
        storage.update("rounds", round_id, {"participant_cookies": number})


def test_rows_written_during_an_export_are_in_none_of_its_tables(tmp_path: Path,
                                                                 monkeypatch: Any):
    storage = Storage(tmp_path / "study.sqlite")
    round_id = a_round_with_cookies(storage, 2)
    read = export.read_table
    written = []

    def read_then_write(connection: Any, table: Any) -> pd.DataFrame:
        frame = read(connection, table)
        if table.name == "rounds" and not written:  # the study goes on mid-export
            add_cookie(storage, 1, round_id, 3)
            written.append(table.name)
        return frame

    monkeypatch.setattr(export, "read_table", read_then_write)
    result = export.build_export(storage.path)
    assert written and storage.one("SELECT count(*) AS n FROM cookies")["n"] == 3
    cookies = pd.read_csv(pd.io.common.BytesIO(result.files["cookies.csv"]))
    rounds = pd.read_csv(pd.io.common.BytesIO(result.files["rounds.csv"]))
    assert len(cookies) == rounds.loc[0, "participant_cookies"] == 2


@pytest.mark.parametrize("tables_read_first", [1, 5])
def test_the_snapshot_holds_whichever_table_is_read_first(tmp_path: Path, monkeypatch: Any,
                                                          tables_read_first: int):
    storage = Storage(tmp_path / "study.sqlite")
    round_id = a_round_with_cookies(storage, 1)
    read = export.read_table
    seen = []

    def read_then_write(connection: Any, table: Any) -> pd.DataFrame:
        seen.append(table.name)
        if len(seen) == tables_read_first:
            add_cookie(storage, 1, round_id, 2)
        return read(connection, table)

    monkeypatch.setattr(export, "read_table", read_then_write)
    result = export.build_export(storage.path)
    assert result.rows["cookies"] == 1 and result.rows["rounds"] == 1


def test_a_withdrawal_during_an_export_checkpoints_once_the_export_is_done(tmp_path: Path):
    """A reader holds the write-ahead log: the checkpoint after erasing waits a moment,
    gives up without stalling, and empties the log at a later commit."""
    storage = Storage(tmp_path / "study.sqlite")
    a_round_with_cookies(storage, 2)
    wal = storage.path.with_name(storage.path.name + "-wal")
    reader = export.connect_read_only(storage.path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM cookies").fetchone()  # an export in progress
    storage.erase_participant(1, {"step": "withdrawn"})
    assert storage.checkpoint_due and wal.stat().st_size > 0
    reader.rollback()
    reader.close()
    storage.checkpoint_retry_at = 0.0  # the retry's wait has passed
    storage.insert("counters", {"name": "after", "count": 1, "at": 2.0})
    assert not storage.checkpoint_due and wal.stat().st_size == 0
