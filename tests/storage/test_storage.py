"""The database: durable settings, one transaction per event, erasure, and documentation."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from support.web import DEMO, make_app

from study.exports.bonus import RECORD_SCHEMA as BONUS_SCHEMA
from study.storage.database import SCHEMA, SERVER_SCHEMA, TEAM_SCHEMA, Storage, to_json
from study.web import create_app

DOCS = Path(__file__).resolve().parents[2] / "docs" / "database.md"


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "study.sqlite")


def participant(storage: Storage, code: str = "abc") -> int:
    return storage.insert("participants", {"code": code, "protocol": "demo", "created_at": 1.0,
                                           "step": "consent"})


def test_wal_foreign_keys_and_full_sync_are_on(storage):
    assert storage.one("PRAGMA journal_mode")["journal_mode"] == "wal"
    assert storage.one("PRAGMA foreign_keys")["foreign_keys"] == 1
    # Full durability syncs the log itself, once for every commit made before the sync.
    assert storage.one("PRAGMA synchronous")["synchronous"] == 1
    assert storage.wal_sync is not None
    assert storage.wal_sync.wal == storage.path.with_name(storage.path.name + "-wal")
    with pytest.raises(sqlite3.IntegrityError):
        storage.insert("steps", {"participant_id": 999, "step": "consent", "at": 1.0})


def test_normal_durability_waits_for_the_operating_system_only(tmp_path):
    storage = Storage(tmp_path / "study.sqlite", durability="normal")
    assert storage.one("PRAGMA synchronous")["synchronous"] == 1
    assert storage.wal_sync is None
    assert storage.one("PRAGMA journal_mode")["journal_mode"] == "wal"


def test_an_unknown_durability_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="full, normal"):
        Storage(tmp_path / "study.sqlite", durability="none")


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_the_app_passes_its_durability_to_the_database(tmp_path, teammates, clock, durability):
    app = make_app(tmp_path, teammates, clock, DURABILITY=durability)
    assert (app.extensions["study"].storage.wal_sync is None) == (durability == "normal")


def test_an_app_told_nothing_has_full_durability(tmp_path, teammates, clock):
    app = create_app({"PROTOCOL": DEMO, "DATABASE": tmp_path / "study.sqlite",
                      "TEAMMATES": teammates, "CLOCK": clock, "SCHEDULER": False})
    assert app.extensions["study"].storage.wal_sync is not None


def test_an_event_is_committed_at_once_and_visible_to_another_connection(storage):
    pid = participant(storage)
    other = sqlite3.connect(storage.path)
    assert other.execute("SELECT code FROM participants WHERE id = ?", (pid,)).fetchone() == (
        "abc",)


def test_a_failing_event_leaves_nothing_behind(storage):
    pid = participant(storage)
    with pytest.raises(RuntimeError), storage.event():
        storage.insert("steps", {"participant_id": pid, "step": "themes", "at": 2.0})
        raise RuntimeError("crash in the middle of an event")
    assert storage.db["steps"].count == 0


def test_insert_all_writes_every_row_and_values_as_stored(storage):
    pid = participant(storage)
    storage.insert_all("steps", [{"participant_id": pid, "step": step, "at": at}
                                 for at, step in enumerate(["consent", "themes"], 1)])
    storage.insert_all("steps", [])
    assert [(r["step"], r["at"]) for r in storage.all("SELECT * FROM steps ORDER BY at")] == [
        ("consent", 1.0), ("themes", 2.0)]


def test_insert_all_inside_a_failing_event_leaves_nothing_behind(storage):
    pid = participant(storage)
    with pytest.raises(RuntimeError), storage.event():
        storage.insert_all("steps", [{"participant_id": pid, "step": "consent", "at": 1.0}])
        raise RuntimeError("crash after the rows")
    with pytest.raises(sqlite3.IntegrityError):  # the statement's rows fail together
        storage.insert_all("steps", [{"participant_id": pid, "step": "consent", "at": 1.0},
                                     {"participant_id": 999, "step": "consent", "at": 1.0}])
    assert storage.db["steps"].count == 0


def test_erasing_a_participant_keeps_only_what_is_asked(storage):
    pid = participant(storage)
    keep = participant(storage, "other")
    for who in (pid, keep):
        storage.insert("steps", {"participant_id": who, "step": "consent", "at": 1.0})
        storage.reject(who, "submit", "m1", "duplicate", "", {"x": 1}, 1.0)
    storage.erase_participant(pid, {"step": "withdrawn", "data_consent": "withdrawn"})
    row = storage.participant("abc")
    assert (row["step"], row["data_consent"], row["external_ids"]) == ("withdrawn", "withdrawn",
                                                                       None)
    assert [r["participant_id"] for r in storage.all("SELECT * FROM steps")] == [keep]
    assert [r["participant_id"] for r in storage.all("SELECT * FROM rejections")] == [keep]


def test_duplicate_keys_are_refused_by_the_schema(storage):
    pid = participant(storage)
    storage.insert("messages", {"participant_id": pid, "msg_id": "m-1", "event": "x", "at": 1})
    with pytest.raises(sqlite3.IntegrityError):
        storage.insert("messages", {"participant_id": pid, "msg_id": "m-1", "event": "x",
                                    "at": 2})


def test_every_table_and_column_is_documented():
    text = DOCS.read_text()
    sections = dict(re.findall(r"^## (\w+)[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M))
    assert set(sections) == (set(SCHEMA) | set(SERVER_SCHEMA) | set(TEAM_SCHEMA)
                             | set(BONUS_SCHEMA))
    tables = {**{t: c for t, (c, *_) in SCHEMA.items()},
              **{t: c for t, (c, _) in SERVER_SCHEMA.items()},
              **{t: c for t, (c, _) in TEAM_SCHEMA.items()},
              **BONUS_SCHEMA}
    for table, columns in tables.items():
        documented = set()
        for cell in re.findall(r"^\| ([a-z_, ]+) \|", sections[table], re.M):
            documented.update(name.strip() for name in cell.split(","))
        assert set(columns) <= documented, (table, set(columns) - documented)


REDUNDANT = ("idx_messages_participant_id", "idx_cookies_round_id", "idx_rounds_session_id")


def index_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        return {name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_no_index_repeats_a_unique_one_that_leads_with_its_column(storage):
    """Every insert writes a page of each index: a foreign key's own index beside a unique
    index led by the same column would cost a page a message and find nothing more."""
    names = index_names(storage.path)
    assert not names & set(REDUNDANT)
    assert {"idx_messages_participant_id_msg_id", "idx_progress_participant_id"} <= names
    with sqlite3.connect(storage.path) as connection:
        plan = " ".join(row[-1] for row in connection.execute(
            "EXPLAIN QUERY PLAN SELECT max(at) FROM messages WHERE participant_id = 1"))
    assert "idx_messages_participant_id_msg_id (participant_id=?)" in plan


def test_a_database_made_before_loses_its_repeated_indexes_when_opened(tmp_path):
    path = tmp_path / "old.sqlite"
    Storage(path).close()
    with sqlite3.connect(path) as connection:  # as an older version made them
        for name in REDUNDANT:
            table, column = name.removeprefix("idx_").split("_", 1)
            connection.execute(f"CREATE INDEX {name} ON {table} ({column})")
    assert set(REDUNDANT) <= index_names(path)
    Storage(path).close()
    assert not index_names(path) & set(REDUNDANT)


def test_a_unique_index_of_one_column_stays(storage):
    """A table whose foreign key is unique alone (one binding a participant) keeps the
    unique index that ``ON CONFLICT`` names."""
    names = index_names(storage.path)
    assert {"idx_bindings_participant_id", "idx_lobby_participant_id",
            "idx_withdrawal_links_participant_id"} <= names
    storage.insert("participants", {"code": "abc", "protocol": "demo", "created_at": 1.0,
                                    "step": "consent"})
    for seen in (1.0, 2.0):
        storage.write("INSERT INTO bindings (participant_id, browser, bound_at, seen_at) "
                      "VALUES (1, 'b', 1.0, ?) ON CONFLICT (participant_id) DO UPDATE SET "
                      "seen_at = excluded.seen_at", (seen,))
    assert storage.one("SELECT seen_at FROM bindings")["seen_at"] == 2.0


@pytest.mark.parametrize("value", [
    {"round": 3, "content": [1, 2.5, "é", None, True]},
    {"big": 2**70}, {1: "key not a string"}, ["\ud800"], [[[[]]]] * 3,
    json.loads("[" * 400 + "]" * 400),
])
def test_to_json_reads_back_as_the_value_and_is_compact(value):
    text = to_json(value)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert ", " not in text and ": " not in text
