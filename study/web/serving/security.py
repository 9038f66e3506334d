"""Web hardening of every response, page and console alike.

* Proxy headers (``X-Forwarded-For``, ``-Proto``, ``-Host``) are trusted only when the
  deployment says a proxy sits in front (``STUDY_TRUST_PROXY=1`` in the config or the
  environment); otherwise anyone could claim any address and dodge the per-address limits.
* Cookies are ``SameSite=Lax`` and ``HttpOnly``, and ``Secure`` whenever the request came
  over HTTPS (directly, or through a trusted proxy).
* Every response carries a Content-Security-Policy (scripts from this server or with this
  response's nonce, ``frame-ancestors 'none'``: the console cannot be framed),
  ``X-Content-Type-Options: nosniff`` and a same-origin referrer policy (a participant's
  code never leaks to the recruitment platform in a ``Referer``).
* Rate limits (Flask-Limiter) live in Redis when the processes share a message queue
  (``MESSAGE_QUEUE``), so they hold across server processes; in memory otherwise, and
  in each process's memory while Redis is away.
"""

from __future__ import annotations

import os
import secrets

from flask import Flask, Response, current_app, g, request
from flask.sessions import SecureCookieSessionInterface
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from werkzeug.middleware.proxy_fix import ProxyFix

TRUST_PROXY_KEY = "STUDY_TRUST_PROXY"
# Failed console logins per client address (only failures count, see ``study.web.console.auth``).
LOGIN_LIMIT = "5 per minute"
# New participants from one address (``/start``, open links): a script cannot steer the
# counterbalancing or fill the database; override with ``ENROL_RATE_LIMIT``.
ENROL_LIMIT = "600 per minute"
CONSOLE_LIMIT = "600 per minute"

limiter = Limiter(get_remote_address, default_limits=[])


def enrol_limit() -> str:
    """The app's ``ENROL_RATE_LIMIT``, else ``STUDY_ENROL_RATE_LIMIT`` from the environment
    (what every process of ``study serve --workers N`` sees), else ``ENROL_LIMIT``."""
    return (current_app.config.get("ENROL_RATE_LIMIT")
            or os.environ.get("STUDY_ENROL_RATE_LIMIT") or ENROL_LIMIT)


def trusts_proxy(app: Flask) -> bool:
    value = app.config.get(TRUST_PROXY_KEY, os.environ.get(TRUST_PROXY_KEY, ""))
    return str(value).lower() in ("1", "true", "yes")


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie session, marked ``Secure`` when the request was HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return request.is_secure


def cookie_options() -> dict[str, object]:
    """What every cookie the study sets carries."""
    return {"samesite": "Lax", "httponly": True, "secure": request.is_secure}


def nonce() -> str:
    """This response's script nonce (templates put it on their inline scripts)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def policy() -> str:
    return ("default-src 'self'; "
            f"script-src 'self' 'nonce-{nonce()}'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
            "frame-ancestors 'none'")


def secure_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", policy())
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response


def init_app(app: Flask) -> None:
    """Harden ``app``: proxy trust, cookies, headers and the shared rate limiter."""
    if trusts_proxy(app):
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)  # type: ignore[method-assign]
    app.config.update(SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_HTTPONLY=True)
    app.session_interface = SessionInterface()
    app.config.setdefault("RATELIMIT_STORAGE_URI", app.config.get("MESSAGE_QUEUE")
                          or "memory://")
    # Redis away: each process limits on its own until it is back (pages keep loading).
    # A request already asking Redis when another turned the limits over to memory fails
    # on Redis all the same; it is let through uncounted, and the next are limited in memory.
    app.config.setdefault("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", True)
    app.config.setdefault("RATELIMIT_SWALLOW_ERRORS", True)
    app.config.setdefault("RATELIMIT_KEY_PREFIX", f"study-{app.extensions['study'].protocol.name}")
    limiter.init_app(app)
    app.jinja_env.globals["csp_nonce"] = nonce
    app.after_request(secure_headers)
