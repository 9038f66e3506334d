"""Withdrawing later: the private link a participant gets on the final page.

The link carries a random token stored next to the participant (``withdrawal_links``). It
is the participant's own key, distinct from the code of the study link, which the
experimenter and the recruitment platform also know. Withdrawing erases the token with the
rest of the participant's rows, so a used link is simply unknown afterwards.
"""

from __future__ import annotations

import secrets
from typing import Any

import sqlite_utils

TABLE = "withdrawal_links"  # created with the study's schema (study.storage.database)
TOKEN_BYTES = 18  # 24 URL-safe characters


def issue(db: sqlite_utils.Database, participant_id: int, now: float) -> str:
    """A new token for the participant (or the one already issued)."""
    existing = next(db.query(f"SELECT token FROM {TABLE} WHERE participant_id = ?",
                             (participant_id,)), None)
    if existing:
        return str(existing["token"])
    token = secrets.token_urlsafe(TOKEN_BYTES)
    db[TABLE].insert({"participant_id": participant_id, "token": token, "created_at": now})
    return token


def token_of(storage: Any, participant_id: int) -> str | None:
    row = storage.one(f"SELECT token FROM {TABLE} WHERE participant_id = ?", (participant_id,))
    return row["token"] if row else None


def participant_of(storage: Any, token: str) -> dict[str, Any] | None:
    """The participant a token belongs to, or None for an unknown or used token."""
    if not token:
        return None
    return storage.one(f"SELECT p.* FROM {TABLE} w JOIN participants p ON "
                       f"p.id = w.participant_id WHERE w.token = ?", (token,))
