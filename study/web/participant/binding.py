"""A code is not a key: which browser may act for a participant, and which of its tabs.

The participant pages give every browser a secret cookie (``BROWSER_COOKIE``). The first
browser to join binds the participant's code to a hash of that secret (``bindings``);
another browser presenting the code is refused (``other-browser``: "this study is open in
another browser") until the experimenter releases the code in the console, or the binding
has been idle (no join, no message, no live connection) for the protocol's
``binding_idle_minutes``. Within the bound browser the newest tab wins: older tabs of the
code are told so (``elsewhere``) and their messages are refused, so two tabs never race.
A recruitment id resuming a participant leads to the same page and the same rule.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from study.storage.database import Storage
from study.web.serving.processes import ALIVE_SECONDS

BROWSER_COOKIE = "study_browser"
CODE_COOKIE = "study_code"
COOKIE_DAYS = 60


def new_secret() -> str:
    return secrets.token_urlsafe(24)


def browser_of(secret: str | None) -> str | None:
    """What the database keeps of a browser's secret: its hash (None without a cookie)."""
    if not secret or len(secret) > 128:
        return None
    return hashlib.sha256(("browser:" + secret).encode()).hexdigest()


def claim(storage: Storage, participant: dict[str, Any], browser: str, now: float,
          idle_seconds: float) -> bool:
    """Bind the code to this browser if it is free, already this browser's, or idle;
    False when another browser holds it (call inside the join's transaction)."""
    row = storage.one("SELECT * FROM bindings WHERE participant_id = ?", (participant["id"],))
    if row is not None and row["browser"] != browser and not _idle(
            storage, participant, row, now, idle_seconds):
        return False
    bound_at = row["bound_at"] if row is not None and row["browser"] == browser else now
    storage.db.conn.execute(
        "INSERT INTO bindings (participant_id, browser, bound_at, seen_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (participant_id) DO UPDATE SET browser = excluded.browser, "
        "bound_at = excluded.bound_at, seen_at = excluded.seen_at",
        (participant["id"], browser, bound_at, now))
    return True


def _idle(storage: Storage, participant: dict[str, Any], row: dict[str, Any], now: float,
          idle_seconds: float) -> bool:
    """No live connection of the code, and nothing from it for ``idle_seconds``."""
    live = storage.one(
        "SELECT 1 FROM connections c JOIN processes p ON p.id = c.process "
        "WHERE c.code = ? AND p.last_seen > ? LIMIT 1", (participant["code"],
                                                         now - ALIVE_SECONDS))
    if live:
        return False
    last = storage.one("SELECT max(at) AS at FROM messages WHERE participant_id = ?",
                       (participant["id"],))
    last_sign = max(row["seen_at"], (last or {}).get("at") or 0.0)
    return now - last_sign >= idle_seconds


def displace(storage: Storage, code: str, sid: str) -> list[str]:
    """Forget the code's other connections (older tabs); returns their sids to tell them."""
    rows = storage.all("SELECT sid FROM connections WHERE code = ? AND sid != ?", (code, sid))
    if rows:
        storage.db.conn.execute("DELETE FROM connections WHERE code = ? AND sid != ?",
                                (code, sid))
    return [row["sid"] for row in rows]


class Displaced(Exception):
    """A newer tab of the code took over: this connection's messages are refused."""


def current(storage: Storage, sid: str, code: str) -> bool:
    """Whether this connection is still the code's tab (not displaced by a newer one)."""
    return storage.one("SELECT 1 FROM connections WHERE sid = ? AND code = ?",
                       (sid, code)) is not None


def ensure_current(storage: Storage, sid: str, code: str) -> None:
    """Raise ``Displaced`` unless this connection is still the code's tab. Inside a
    message's write transaction the check and the message are one step against a join
    displacing the tab (on any process), and where processes share the file the message
    reads nothing outside it (a read after another process's commit reads SQLite's pages
    again)."""
    if not current(storage, sid, code):
        raise Displaced(code)


def release(storage: Storage, participant: dict[str, Any]) -> bool:
    """Free the code from its browser (the console's ``release``); False if it was free."""
    with storage.event() as db:
        cursor = db.conn.execute("DELETE FROM bindings WHERE participant_id = ?",
                                 (participant["id"],))
        return cursor.rowcount > 0
