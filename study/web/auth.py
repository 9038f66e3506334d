"""Who may use the experimenter console, and CSRF protection for its forms.

The password comes from the app's config or the ``STUDY_CONSOLE_PASSWORD`` environment
variable. Without one the console runs in demo mode: open to anyone who reaches the server,
and labelled so on every page. A login stores a fingerprint of the password in the signed
session cookie, so changing the password logs everyone out. Every form post carries a
per-session CSRF token.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from flask import abort, current_app, redirect, request, session, url_for

PASSWORD_KEY = "STUDY_CONSOLE_PASSWORD"
SESSION_KEY = "console_auth"
CSRF_KEY = "console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
LOGIN_ATTEMPTS = 5  # failed logins per address ...
LOGIN_WINDOW = 60.0  # ... within this many seconds before further tries are refused


def password() -> str | None:
    """The console password (config first, then the environment); None: demo mode."""
    value = current_app.config.get(PASSWORD_KEY) or os.environ.get(PASSWORD_KEY)
    return value or None


def demo_mode() -> bool:
    return password() is None


def _fingerprint(secret: str) -> str:
    return hashlib.sha256(("console:" + secret).encode()).hexdigest()


def logged_in() -> bool:
    secret = password()
    if secret is None:
        return True
    stored = session.get(SESSION_KEY)
    return isinstance(stored, str) and hmac.compare_digest(stored, _fingerprint(secret))


def log_in(attempt: str) -> bool:
    """Check a password attempt; on success the session is marked logged in."""
    secret = password()
    if secret is None or not hmac.compare_digest(attempt.encode(), secret.encode()):
        return False
    session.clear()
    session[SESSION_KEY] = _fingerprint(secret)
    session.permanent = False
    return True


def log_out() -> None:
    session.pop(SESSION_KEY, None)
    session.pop(CSRF_KEY, None)


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


class LoginThrottle:
    """Failed logins per remote address in a sliding window: guessing stays slow."""

    def __init__(self, attempts: int = LOGIN_ATTEMPTS, window: float = LOGIN_WINDOW) -> None:
        self.attempts = attempts
        self.window = window
        self.failures: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def allowed(self, address: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self.lock:
            recent = [t for t in self.failures.get(address, []) if now - t < self.window]
            self.failures[address] = recent
            return len(recent) < self.attempts

    def failed(self, address: str, now: float | None = None) -> None:
        with self.lock:
            self.failures.setdefault(address, []).append(
                time.monotonic() if now is None else now)
