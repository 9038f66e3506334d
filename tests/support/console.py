"""The experimenter console on the demo study, and a client logged into it."""

from __future__ import annotations

import re
from pathlib import Path

from study.web import create_app
from study.web.console import views as console
from support.web import DEMO, FakeClock

PASSWORD = "correct horse battery staple"


def make_app(tmp_path: Path, teammates, password: str | None = PASSWORD):
    """The study in-process with its console, under normal durability as the journey's
    in-process app (``support.web.make_app``): the console's tests wait on no fsync."""
    config = {"PROTOCOL": DEMO, "DATABASE": tmp_path / "study.sqlite", "TEAMMATES": teammates,
              "CLOCK": FakeClock(), "SCHEDULER": False, "TESTING": True,
              "DURABILITY": "normal"}
    if password is not None:
        config["STUDY_CONSOLE_PASSWORD"] = password
    app = create_app(config)
    if "console" not in app.blueprints:
        console.init_app(app)
    app.extensions["console_pusher"].stop()
    return app


def csrf_of(page: bytes) -> str:
    return re.search(rb'name="csrf_token" value="([^"]+)"', page).group(1).decode()


def logged_in(app):
    client = app.test_client()
    token = csrf_of(client.get("/console/login").data)
    reply = client.post("/console/login", data={"password": PASSWORD, "csrf_token": token})
    assert reply.status_code == 302
    return client, csrf_of(client.get("/console/").data)
