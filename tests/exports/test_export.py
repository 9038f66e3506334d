"""``study export``: tidy tables as CSV and Parquet, a codebook that covers every column,
and the protocol and pool the data were collected under."""

import io
import json
import re
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from study.cli import main
from study.exports.tables import (
    CODEBOOK,
    build_export,
    record_server_run,
    write_export,
    zip_export,
)
from study.storage.database import Storage

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "protocols" / "demo.toml"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A small database: one participant with a round, two cookies and an answer."""
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    pid = storage.insert("participants", {
        "code": "abc123", "protocol": "demo", "created_at": 1.5, "step": "session-1",
        "condition_order": json.dumps(["efficient", "fair"]), "external_ids": "{}"})
    session = storage.insert("sessions", {
        "participant_id": pid, "number": 1, "kind": "collaborative", "condition": "fair",
        "rounds": 2, "created_at": 2.0})
    round_id = storage.insert("rounds", {
        "session_id": session, "participant_id": pid, "number": 1, "task_type": 1,
        "task_name": "letters", "started_at": 3.0, "deadline": 11.0, "seconds": 8.0,
        "participant_cookies": 1, "teammate_cookies": 0})
    storage.insert("cookies", {
        "round_id": round_id, "participant_id": pid, "actor": "participant", "number": 1,
        "task_type": 1, "task_name": "letters", "finished_at": 5.0, "seconds": 2.0,
        "content": json.dumps("GORAVENS"), "msg_id": "m-0000001"})
    storage.insert("answers", {
        "participant_id": pid, "questionnaire": "preferences", "item": "ravens",
        "label": "ravens", "value_number": 6, "at": 2.5})
    record_server_run(storage, PROTOCOL, "demo", None, at=1.0)
    storage.close()
    return path


def test_every_table_is_written_as_csv_and_parquet_with_types_kept(database, tmp_path):
    export = build_export(database)
    out = tmp_path / "out"
    write_export(export, out)
    for table in export.rows:
        assert (out / f"{table}.csv").is_file() and (out / f"{table}.parquet").is_file()
    rounds = pd.read_parquet(out / "rounds.parquet")
    assert rounds["teammate_task_type"].isna().all()
    assert str(rounds["number"].dtype) == "Int64"
    csv = pd.read_csv(out / "cookies.csv")
    assert csv.loc[0, "msg_id"] == "m-0000001" and json.loads(csv.loc[0, "content"]) == "GORAVENS"
    assert export.rows["participants"] == 1 and export.rows["cookies"] == 1


def test_codebook_documents_every_column_of_the_live_schema(database):
    export = build_export(database)
    assert export.undocumented == []
    codebook = pd.read_csv(io.BytesIO(export.files["codebook.csv"]))
    assert list(codebook.columns) == ["table", "column", "type", "meaning", "units", "allowed"]
    for table in export.rows:
        header = pd.read_csv(io.BytesIO(export.files[f"{table}.csv"]), nrows=0).columns
        documented = codebook.loc[codebook["table"] == table, "column"].tolist()
        assert documented == list(header), table
    assert codebook["meaning"].notna().all()
    assert "## rounds" in export.files["codebook.md"].decode()


def test_codebook_agrees_with_the_database_documentation():
    """docs/database.md and the codebook name the same columns for every table."""
    text = (ROOT / "docs" / "database.md").read_text()
    documented: dict[str, list[str]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        name = section.split()[0]
        columns = []
        for line in section.splitlines():
            cell = line.split("|")[1].strip() if line.startswith("| ") else ""
            if cell and cell != "column" and not cell.startswith("---"):
                columns += [c.strip() for c in cell.split(",")]
        documented[name] = columns
    assert {"participants", "rounds", "cookies", "rejections"} <= set(documented)
    for table in CODEBOOK:
        if table.name in documented:
            assert [c.name for c in table.columns] == documented[table.name], table.name


def test_undocumented_columns_are_exported_and_flagged(database):
    storage = Storage(database)
    storage.db.execute("ALTER TABLE steps ADD COLUMN mystery TEXT")
    storage.close()
    export = build_export(database)
    assert export.undocumented == ["steps.mystery"]
    assert "UNDOCUMENTED" in export.files["codebook.md"].decode()


def test_metadata_holds_the_exact_protocol_text(database):
    export = build_export(database)
    [name] = [n for n in export.files if n.startswith("metadata/protocol-demo-")]
    assert export.files[name].decode() == PROTOCOL.read_text()


def test_a_database_without_snapshots_says_so(tmp_path):
    Storage(tmp_path / "bare.sqlite").close()
    export = build_export(tmp_path / "bare.sqlite")
    assert "metadata/MISSING.txt" in export.files


def test_zip_holds_the_same_files(database):
    export = build_export(database)
    with zipfile.ZipFile(io.BytesIO(zip_export(export))) as archive:
        assert sorted(archive.namelist()) == sorted(export.files)
        assert archive.read("codebook.csv") == export.files["codebook.csv"]


def test_export_only_reads_the_database(database):
    before = database.read_bytes()
    build_export(database)
    assert database.read_bytes() == before


def test_cli_writes_the_export_and_reports_rows(database, tmp_path, capsys):
    assert main(["export", str(database), "--out", str(tmp_path / "x")]) == 0
    assert "cookies" in capsys.readouterr().out
    assert (tmp_path / "x" / "codebook.csv").is_file()


def test_cli_names_a_missing_database(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none.sqlite"), "--out", str(tmp_path)]) == 2
    assert "none.sqlite" in capsys.readouterr().err
