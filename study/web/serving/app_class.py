"""The study's Flask class: a request context cheap enough to make per Socket.IO event.

Flask-SocketIO runs every event inside a request context made from the connection's
handshake environ. Flask would match that URL against the routes and decode the session
cookie again for every event, a quarter of a server's CPU at a person's pace with a
thousand participants. Here the session is decoded once per environ (one HTTP request, or
one Socket.IO connection for all its events: what Flask-SocketIO's own session copy sees
anyway), and Socket.IO's path, which no route serves, is not matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask, Request
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from werkzeug.routing import MapAdapter

SOCKET_IO_PATH = "/socket.io"
ROOT = Path(__file__).resolve().parents[3]
TEMPLATES, STATIC = ROOT / "templates", ROOT / "static"
SESSION_KEY = "study.session"


class OncePerEnvironSessions(SecureCookieSessionInterface):
    """The signed-cookie session, decoded once per request environ."""

    def open_session(self, app: Flask, request: Request) -> SessionMixin | None:
        environ: dict[str, Any] = request.environ
        if SESSION_KEY not in environ:
            environ[SESSION_KEY] = super().open_session(app, request)
        return environ[SESSION_KEY]


class StudyFlask(Flask):
    """Flask with the Socket.IO event context trimmed (see the module's docstring)."""

    session_interface = OncePerEnvironSessions()

    def create_url_adapter(self, request: Request | None) -> MapAdapter | None:
        if request is not None and request.environ.get("PATH_INFO", "").startswith(
                SOCKET_IO_PATH):
            return None
        return super().create_url_adapter(request)
