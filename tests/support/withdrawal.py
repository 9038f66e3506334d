"""A participant with data of every kind, and the check that a withdrawal left none of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from support.journey import (
    SESSION_ANSWERS,
    Browser,
    play_practice,
    play_session,
    through_preferences,
)
from support.web import FakeClock, journey

SECRET_ANSWER = "my cousin bakes for the Ravens, 7731"
EXTERNAL_ID = "prolific-4417-xq"
# What a withdrawn participant's row keeps: the code, how the link came about (console or
# open enrolment), when it was made, and the withdrawal itself (when, and the furthest step).
KEPT = {"id", "code", "protocol", "origin", "created_at", "step", "data_consent",
        "withdrawn_at", "withdrawn_from"}


def assert_nothing_left(db_path: Path | str, code: str, texts: tuple[str, ...]) -> None:
    """No row of the participant in any table, no trace of their texts in any column, and
    a participants row that keeps only its code, protocol, creation and the withdrawal."""
    db = sqlite3.connect(db_path)
    db.row_factory = sqlite3.Row
    person = db.execute("SELECT * FROM participants WHERE code = ?", (code,)).fetchone()
    assert person["step"] == "withdrawn" and person["data_consent"] == "withdrawn"
    assert person["withdrawn_at"] is not None
    assert {column for column in person.keys() if person[column] is not None} <= KEPT  # noqa: SIM118
    tables = [name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
        if "participant_id" in columns:
            left = db.execute(f'SELECT count(*) FROM "{table}" WHERE participant_id = ?',
                              (person["id"],)).fetchone()[0]
            assert left == 0, f"{left} rows of the participant left in {table}"
        for column in columns:
            for text in texts:
                found = db.execute(f'SELECT count(*) FROM "{table}" WHERE '
                                   f'CAST("{column}" AS TEXT) LIKE ?', (f"%{text}%",)).fetchone()[0]
                assert found == 0, f"{text!r} left in {table}.{column}"


def mid_second_session(app: Any, clock: FakeClock, code: str) -> Browser:
    """A participant with every kind of data: recruitment ids, ratings, practice, a
    teammate, the first session and its answers, and a round of the second running."""
    app.test_client().get(f"/p/{code}?PROLIFIC_PID={EXTERNAL_ID}")
    you = Browser(app, code)
    through_preferences(you)
    play_practice(you, clock, app, cookies=1)
    you.submit("teammate")
    play_session(you, clock, app, 1)
    you.submit("questionnaire-1", {"answers": {**SESSION_ANSWERS,
                                               "fair_overall_why": SECRET_ANSWER}})
    you.submit("intro-2")
    running = you.start(1)
    clock.advance(2.0)
    journey(app).tick(clock.now)
    assert running["teammate"] is not None
    return you
