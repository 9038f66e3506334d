"""Who may use the experimenter console, and CSRF protection for its forms.

The password comes from the app's config or the ``STUDY_CONSOLE_PASSWORD`` environment
variable. Without one the console runs in demo mode: open to anyone who reaches the server,
and labelled so on every page. A login stores a fingerprint of the password and a random
session secret in the signed session cookie; the secret's hash is kept in the database
(``console_sessions``) and checked on every console request, so a logout (which deletes
it) revokes the session on every server process, even for a copy of the cookie kept from
before. Changing the password logs everyone out. Every form post carries a per-session
CSRF token. Failed logins are limited per client address (``study.web.serving.security``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from flask import abort, current_app, redirect, request, session, url_for

from study.storage.health import StorageUnavailable

PASSWORD_KEY = "STUDY_CONSOLE_PASSWORD"
SESSION_KEY = "console_auth"
CSRF_KEY = "console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SESSION_SECRET_KEY = "console_session"
SEEN_EVERY = 60.0  # seconds between updates of a session's ``seen_at``


def password() -> str | None:
    """The console password (config first, then the environment); None: demo mode."""
    value = current_app.config.get(PASSWORD_KEY) or os.environ.get(PASSWORD_KEY)
    return value or None


def demo_mode() -> bool:
    return password() is None


def _fingerprint(secret: str) -> str:
    return hashlib.sha256(("console:" + secret).encode()).hexdigest()


def _storage() -> Any:
    return current_app.extensions["study"].storage


def _now() -> float:
    return float(current_app.extensions["study"].clock())


def _session_id(token: str) -> str:
    return hashlib.sha256(("console-session:" + token).encode()).hexdigest()


def logged_in() -> bool:
    secret = password()
    if secret is None:
        return True
    stored, token = session.get(SESSION_KEY), session.get(SESSION_SECRET_KEY)
    if not (isinstance(stored, str) and isinstance(token, str)
            and hmac.compare_digest(stored, _fingerprint(secret))):
        return False
    return _session_alive(_session_id(token))


def _session_alive(session_id: str) -> bool:
    """Whether the server still holds the session (logout deletes it); notes when seen."""
    storage = _storage()
    row = storage.one("SELECT seen_at FROM console_sessions WHERE id = ?", (session_id,))
    if row is None:
        return False
    now = _now()
    if now - row["seen_at"] >= SEEN_EVERY:
        with contextlib.suppress(StorageUnavailable):  # a full disk must not shut the console
            storage.update("console_sessions", session_id, {"seen_at": now})  # type: ignore[arg-type]
    return True


def current_session() -> str | None:
    """The server-side id of this request's console session; None without one (demo
    mode), so a socket can be tied to the session that opened it."""
    token = session.get(SESSION_SECRET_KEY)
    return _session_id(token) if password() is not None and isinstance(token, str) else None


def ended_sessions(storage: Any, session_ids: Iterable[str | None]) -> set[str]:
    """Which of these sessions the server no longer holds (logged out, on any process)."""
    wanted = {sid for sid in session_ids if sid is not None}
    if not wanted:
        return set()
    marks = ", ".join("?" * len(wanted))
    held = storage.all(f"SELECT id FROM console_sessions WHERE id IN ({marks})",
                       tuple(wanted))
    return wanted - {row["id"] for row in held}


def log_in(attempt: str, remote_addr: str | None) -> bool:
    """Check a password attempt; on success a new server-side session is opened."""
    secret = password()
    if secret is None or not hmac.compare_digest(attempt.encode(), secret.encode()):
        return False
    session.clear()
    token = secrets.token_urlsafe(32)
    now = _now()
    _storage().insert("console_sessions", {"id": _session_id(token), "created_at": now,
                                           "seen_at": now, "remote_addr": remote_addr})
    session[SESSION_KEY] = _fingerprint(secret)
    session[SESSION_SECRET_KEY] = token
    session.permanent = False
    return True


def log_out() -> None:
    """Revoke the session on the server, then forget it in the cookie."""
    token = session.get(SESSION_SECRET_KEY)
    if isinstance(token, str):
        with _storage().event() as db:
            db.execute("DELETE FROM console_sessions WHERE id = ?", (_session_id(token),))
    session.clear()


def csrf_token() -> str:
    """This session's CSRF token (made on first use)."""
    if CSRF_KEY not in session:
        session[CSRF_KEY] = secrets.token_urlsafe(24)
    return session[CSRF_KEY]


def check_csrf() -> None:
    """Abort with 400 unless the post carries this session's token (form field or header)."""
    expected = session.get(CSRF_KEY)
    sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        abort(400, description="missing or wrong CSRF token")


def console_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Only logged-in experimenters (anyone in demo mode); posts must carry the CSRF token."""
    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if not logged_in():
            if request.method == "GET" and request.accept_mimetypes.accept_html:
                return redirect(url_for("console.login", next=request.path))
            abort(401)
        if request.method == "POST":
            check_csrf()
        return view(*args, **kwargs)
    return guarded
