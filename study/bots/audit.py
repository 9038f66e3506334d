"""Checking a run against its database: what the server acknowledged must be stored, and
rounds must close at their deadlines. Shared by the tests and the load benchmark."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from study.bots.client import AckLog


def _read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True)


def missing_acknowledged(db: Path, log: AckLog) -> list[tuple[str, str, str]]:
    """(code, event, msg_id) of every acknowledged message the database lacks: its
    ``messages`` row, and for cookies the cookie row carrying the same ``msg_id``."""
    with _read_only(db) as connection:
        messages = set(connection.execute(
            "SELECT p.code, m.msg_id FROM messages m JOIN participants p "
            "ON p.id = m.participant_id").fetchall())
        cookies = {msg for (msg,) in connection.execute(
            "SELECT msg_id FROM cookies WHERE actor = 'participant'")}
    missing = []
    for acked in log.acked:
        stored = (acked.code, acked.msg_id) in messages
        if acked.event == "cookie":
            stored = stored and acked.msg_id in cookies
        if not stored:
            missing.append((acked.code, acked.event, acked.msg_id))
    return missing


def closing_drift(db: Path, codes: list[str] | None = None) -> np.ndarray:
    """Seconds between each closed round's deadline and its closing by the scheduler, in
    time or late (rounds closed by recovery after a restart are left out)."""
    sql = ("SELECT r.closed_at - r.deadline FROM rounds r JOIN participants p ON "
           "p.id = r.participant_id WHERE r.close_reason IN ('deadline', 'late')")
    params: list[str] = []
    if codes is not None:
        sql += f" AND p.code IN ({','.join('?' * len(codes))})"
        params = codes
    with _read_only(db) as connection:
        return np.array([d for (d,) in connection.execute(sql, params)], dtype=float)
