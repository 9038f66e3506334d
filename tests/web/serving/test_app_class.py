"""The study's Flask class: a Socket.IO event's request context skips URL matching and
decodes the session cookie once per connection, and ordinary requests are unchanged."""

from __future__ import annotations

from flask import session
from werkzeug.test import EnvironBuilder

from study.web.serving.app_class import StudyFlask


def app_with_login() -> StudyFlask:
    app = StudyFlask(__name__)
    app.config["SECRET_KEY"] = "test"

    @app.route("/login")
    def login() -> str:
        session["who"] = "experimenter"
        return "ok"

    @app.route("/who")
    def who() -> str:
        return session.get("who", "nobody")

    return app


def session_cookie(app: StudyFlask) -> str:
    response = app.test_client().get("/login")
    return response.headers["Set-Cookie"].split(";")[0]


def test_ordinary_requests_route_and_keep_their_session():
    app = app_with_login()
    client = app.test_client()
    assert client.get("/who").text == "nobody"
    client.get("/login")
    assert client.get("/who").text == "experimenter"
    assert client.get("/missing").status_code == 404


def test_a_socket_event_context_is_not_routed_and_decodes_the_session_once(monkeypatch):
    app = app_with_login()
    environ = EnvironBuilder(path="/socket.io/", query_string="EIO=4&transport=websocket",
                             headers={"Cookie": session_cookie(app)}).get_environ()
    decoded = []
    original = app.session_interface.get_signing_serializer

    def counting(flask_app):
        decoded.append(1)
        return original(flask_app)

    monkeypatch.setattr(app.session_interface, "get_signing_serializer", counting)
    for _ in range(3):  # three events of one connection
        with app.request_context(environ) as context:
            assert context.url_adapter is None
            assert context.request.routing_exception is None
            assert session["who"] == "experimenter"
    assert len(decoded) == 1
