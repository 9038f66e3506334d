"""The server's own error pages in the study's language and look: an address it does not
know (404), a failure of its own (500), a moment it cannot serve (503) and a link longer
than the server reads (414) come from the protocol's ``[texts]``, like every other page a
participant sees.

The console's addresses keep the framework's plain English pages: the experimenter's
console is English throughout, and its scripts read only the status.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, current_app, render_template, request
from werkzeug.exceptions import HTTPException

from study.web.participant import binding
from study.web.participant.journey import CODE
from study.web.serving import security
from study.web.serving.unavailable import unavailable_page

CONSOLE_PREFIX = "/console"


def _for_the_console() -> bool:
    return request.path == CONSOLE_PREFIX or request.path.startswith(CONSOLE_PREFIX + "/")


def _page(error: HTTPException, title: str, text: str, *, back: bool = False) -> Any:
    """The study's page for ``error`` (its status kept); the console's stays plain."""
    if _for_the_console():
        return error
    protocol = current_app.extensions["study"].protocol
    page = render_template("error.html", protocol=protocol, status=error.code,
                           title=protocol.texts[title], text=protocol.texts[text],
                           back=back)
    return page, error.code, {"Cache-Control": "no-store"}


def not_found(error: HTTPException) -> Any:
    """A mistyped or outdated address; a browser that took part is offered the way back
    (``/start`` resumes the participant its cookie names)."""
    remembered = bool(CODE.match(request.cookies.get(binding.CODE_COOKIE, "")))
    return _page(error, "not_found_title", "not_found_text", back=remembered)


def server_error(error: HTTPException) -> Any:
    """An unexpected failure (already logged with its traceback): no details shown."""
    return _page(error, "error_title", "error_text")


def service_unavailable(error: HTTPException) -> Any:
    """Any 503: the calm page that reloads itself, as for a full disk."""
    return error if _for_the_console() else unavailable_page(error)


def overlong_link_answer(app: Flask) -> bytes:
    """The whole HTTP answer to a request line longer than the server reads (gunicorn's
    limit, ``deploy.study_worker``): the study's page for a link that carries no valid
    participant id, which a start link with an over-long id is, not gunicorn's bare
    "414 Request Line is too large". Nothing of the link is stored or logged."""
    with app.test_request_context("/start"):
        protocol = app.extensions["study"].protocol
        page = render_template("link.html", protocol=protocol, reason="bad-id",
                               return_url=protocol.recruitment.return_url)
        response = security.secure_headers(Response(
            page, 414, {"Cache-Control": "no-store", "Connection": "close"},
            content_type="text/html; charset=utf-8"))
        head = "".join([f"HTTP/1.1 {response.status}\r\n",
                        *(f"{name}: {value}\r\n" for name, value in response.headers.items()),
                        "\r\n"])
        return head.encode("latin-1") + response.get_data()


def init_app(app: Flask) -> None:
    app.register_error_handler(404, not_found)
    app.register_error_handler(500, server_error)
    app.register_error_handler(503, service_unavailable)
