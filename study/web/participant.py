"""The participant's pages: links with a code, recruitment-platform parameters recorded.

The page itself is one shell; the study's steps are drawn by ``static/js/bakery.js`` from the
state the server sends over Socket.IO.
"""

from __future__ import annotations

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    redirect,
    render_template,
    request,
    url_for,
)

from study.web import withdrawal
from study.web.journey import Journey
from study.web.rejections import Rejected

blueprint = Blueprint("participant", __name__)
MAX_PARAMETERS = 12


def journey() -> Journey:
    return current_app.extensions["study"]


def external_ids() -> dict[str, str]:
    """Query parameters a recruitment platform appended (PROLIFIC_PID, STUDY_ID, ...)."""
    return dict(list(request.args.items())[:MAX_PARAMETERS])


@blueprint.get("/")
def index() -> str:
    return render_template("index.html", protocol=journey().protocol)


@blueprint.get("/start")
def start() -> Response:
    """A fresh participant for links without a code (e.g. a recruitment platform)."""
    if not journey().protocol.open_enrolment:
        abort(404)
    participant = journey().enrol(None, external_ids())
    return redirect(url_for("participant.page", code=participant["code"]))  # type: ignore[return-value]


@blueprint.get("/p/<code>")
def page(code: str) -> str:
    study = journey()
    try:
        if study.storage.participant(code) is None and not study.protocol.open_enrolment:
            abort(404)
        study.enrol(code, external_ids())
    except Rejected:
        abort(404)
    return render_template("participant.html", code=code, protocol=study.protocol)


@blueprint.get("/withdraw/<token>")
def withdraw_later(token: str) -> tuple[str, int]:
    """The private link of the final page: asks once more before deleting anything."""
    known = withdrawal.participant_of(journey().storage, token) is not None
    return render_template("withdraw.html", protocol=journey().protocol, token=token,
                           state="confirm" if known else "unknown"), 200 if known else 404


@blueprint.post("/withdraw/<token>")
def withdraw_later_confirmed(token: str) -> tuple[str, int]:
    done = journey().withdraw_with_link(token)
    return render_template("withdraw.html", protocol=journey().protocol, token=token,
                           state="withdrawn" if done else "unknown"), 200 if done else 404


@blueprint.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "protocol": journey().protocol.name}
