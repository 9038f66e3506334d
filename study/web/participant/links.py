"""The participant's pages: links with a code, recruitment-platform parameters recorded.

The page itself is one shell; the study's steps are drawn by ``static/js/bakery.js`` from the
state the server sends over Socket.IO. Every page gives the browser its secret cookie (the key
the code is bound to, ``study.web.participant.binding``) and remembers the participant's code
in a cookie, so ``/start``, Back, a reload or a reopened tab land where the participant is.
With the protocol's ``[recruitment] id_parameter`` the same recruitment id always resumes the
same participant (``docs/recruitment.md``).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import (
    Blueprint,
    Response,
    current_app,
    g,
    make_response,
    redirect,
    render_template,
    request,
    send_from_directory,
    url_for,
)

from study.web.participant import binding, withdrawal
from study.web.participant.journey import CODE, Journey
from study.web.participant.rejections import Rejected
from study.web.serving import security

blueprint = Blueprint("participant", __name__)
log = logging.getLogger(__name__)
MAX_PARAMETERS = 12
FAVICON_SECONDS = 24 * 3600


def journey() -> Journey:
    return current_app.extensions["study"]


def external_ids() -> dict[str, str]:
    """Query parameters a recruitment platform appended (PROLIFIC_PID, STUDY_ID, ...)."""
    return dict(list(request.args.items())[:MAX_PARAMETERS])


@blueprint.get("/")
def index() -> str:
    return render_template("index.html", protocol=journey().protocol)


def _created(response: Response) -> bool:
    """Only requests that created a participant count towards the enrolment limit."""
    return bool(g.get("enrolled"))


def _remembered() -> dict[str, Any] | None:
    """The participant this browser was last (its code cookie), if still known."""
    code = request.cookies.get(binding.CODE_COOKIE, "")
    return journey().storage.participant(code) if CODE.match(code) else None


@blueprint.get("/start")
@security.limiter.limit(security.enrol_limit, deduct_when=_created)
def start() -> Any:
    """The start link of a recruitment platform (or an open study): the participant of the
    recruitment id, else the one this browser remembers, else a new one if enrolment is
    open; a closed study without either says so."""
    study = journey()
    ids = external_ids()
    parameter = study.protocol.recruitment.id_parameter
    if parameter and ids.get(parameter, "").strip():
        try:
            participant = study.enrol(None, ids, origin="recruitment")
        except Rejected:
            return _bad_id()
    else:
        participant = _remembered()
        if participant is None and study.protocol.open_enrolment:
            participant = study.enrol(None, ids, origin="open")
    if participant is None:
        return _not_found("closed")
    g.enrolled = participant.get("created", False)
    return _remember(redirect(url_for("participant.page", code=participant["code"])),
                     participant["code"])


@blueprint.get("/p/<code>")
@security.limiter.limit(security.enrol_limit, deduct_when=_created)
def page(code: str) -> Any:
    """The participant's page; an unknown code creates a participant only when enrolment
    is open (a mistyped link in a closed study gets a clear page, nothing is stored)."""
    study = journey()
    try:
        known = study.storage.participant(code) is not None
        if not known and not study.protocol.open_enrolment:
            return _not_found("unknown")
        participant = study.enrol(code, external_ids(), origin="open")
    except Rejected as rejection:
        return _bad_id() if rejection.reason == "bad-recruitment-id" else _not_found("unknown")
    g.enrolled = participant.get("created", False)
    page_html = render_template("participant.html", code=code, protocol=study.protocol)
    return _remember(make_response(page_html), code)


def _not_found(reason: str) -> tuple[str, int]:
    """A clear page for a link that leads to no participant (nothing is created)."""
    return render_template("link.html", protocol=journey().protocol, reason=reason,
                           return_url=journey().protocol.recruitment.return_url), 404


def _bad_id() -> tuple[str, int]:
    """A clear page for a start link whose recruitment id is not of the platform's format:
    nothing is created (the id would reach the bulk bonus file); the log keeps no byte
    of it."""
    log.info("a link's %s is not a recruitment id of the expected format: refused",
             journey().protocol.recruitment.id_parameter)
    return render_template("link.html", protocol=journey().protocol, reason="bad-id",
                           return_url=journey().protocol.recruitment.return_url), 400


def _remember(response: Response, code: str) -> Response:
    """Give the browser its secret (once) and remember the participant's code."""
    days = binding.COOKIE_DAYS * 24 * 3600
    if binding.browser_of(request.cookies.get(binding.BROWSER_COOKIE)) is None:
        response.set_cookie(binding.BROWSER_COOKIE, binding.new_secret(), max_age=days,
                            **security.cookie_options())  # type: ignore[arg-type]
    response.set_cookie(binding.CODE_COOKIE, code, max_age=days,
                        **security.cookie_options())  # type: ignore[arg-type]
    response.headers["Cache-Control"] = "no-store"
    return response


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


@blueprint.get("/favicon.ico")
def favicon() -> Response:
    """Browsers ask for ``/favicon.ico`` whatever the page links: the same cookie icon."""
    return send_from_directory(current_app.static_folder or "static", "favicon.svg",
                               mimetype="image/svg+xml", max_age=FAVICON_SECONDS)


@blueprint.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "protocol": journey().protocol.name}
