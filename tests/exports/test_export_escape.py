"""CSV cells a spreadsheet would run as a formula are escaped; Parquet keeps the raw text
and numbers are never changed."""

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from study.exports.tables import FORMULA_NOTE, build_export
from study.storage.database import Storage

FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"click\")", "+1+1", "-2+3", "@SUM(A1:A9)",
            "\tcmd", "\r=1"]
HARMLESS = ["fine, thanks", "1 = one", " =x", ""]


@pytest.fixture
def export(tmp_path: Path):
    """A participant whose free-text answers start like formulas, and a negative number."""
    storage = Storage(tmp_path / "study.sqlite")
    pid = storage.insert("participants", {
        "code": "abc123", "protocol": "demo", "created_at": 1.5, "step": "post",
        "condition_order": json.dumps(["efficient", "fair"]), "external_ids": "{}"})
    for number, text in enumerate([*FORMULAS, *HARMLESS]):
        storage.insert("answers", {
            "participant_id": pid, "questionnaire": "post", "item": f"why{number}",
            "label": "-why", "value_text": text, "at": 2.0 + number})
    storage.insert("answers", {
        "participant_id": pid, "questionnaire": "post", "item": "age", "label": "age",
        "value_number": -3.5, "at": 20.0})
    storage.close()
    return build_export(tmp_path / "study.sqlite")


def csv_rows(export, table: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(export.files[f"{table}.csv"].decode(),
                                           newline="")))


def test_text_cells_starting_as_a_formula_get_a_quote_in_front(export):
    rows = csv_rows(export, "answers")
    texts = [row["value_text"] for row in rows[:-1]]
    assert texts == [*("'" + text for text in FORMULAS), *HARMLESS]
    assert {row["label"] for row in rows[:-1]} == {"'-why"}


def test_numbers_are_never_changed(export):
    last = csv_rows(export, "answers")[-1]
    assert last["value_number"] == "-3.5" and last["value_text"] == ""
    assert last["at"] == "20.0" and last["participant_id"] == "1"


def test_parquet_keeps_the_raw_text(export):
    frame = pd.read_parquet(io.BytesIO(export.files["answers.parquet"]))
    assert frame["value_text"].tolist()[:-1] == [*FORMULAS, *HARMLESS]
    assert frame["label"].iloc[0] == "-why" and frame["value_number"].iloc[-1] == -3.5


def test_the_codebook_says_so(export):
    assert FORMULA_NOTE in export.files["codebook.md"].decode()
    assert "single quote" in FORMULA_NOTE and "Parquet" in FORMULA_NOTE
