"""The page a browser gets while the database cannot be written (a full disk).

A page load that needs a write (a new participant, a console action) answers ``503 Service
Unavailable`` with ``Retry-After`` and a calm page that reloads itself, instead of an error
page and a traceback per request; the storage logs the condition once a minute. The same
page, in the study's language, is what HAProxy answers while no worker can.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, current_app, render_template

from study.protocol.loader import Protocol
from study.storage.health import RETRY_AFTER_SECONDS, StorageUnavailable
from study.web.serving.app_class import STATIC, TEMPLATES

# Where the stylesheet's frame (colours, sign, card) ends: the balancer's page inlines it.
FRAME_END = "/* The frame ends here"
# A page reloads itself later than a message is resent: a reload costs the server more.
PAGE_RETRY_SECONDS = 3 * RETRY_AFTER_SECONDS
# What HAProxy answers by itself when no worker can (restarting, stalled, all busy).
BALANCER_ERRORS = {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
CALM_HEADERS = {"Retry-After": str(PAGE_RETRY_SECONDS), "Refresh": str(PAGE_RETRY_SECONDS),
                "Cache-Control": "no-store"}


def unavailable_page(_error: Exception) -> tuple[str, int, dict[str, str]]:
    """503 with a calm page; browsers reload it after ``PAGE_RETRY_SECONDS``."""
    page = render_template("unavailable.html", protocol=current_app.extensions["study"].protocol)
    return page, 503, CALM_HEADERS


def init_app(app: Flask) -> None:
    app.register_error_handler(StorageUnavailable, unavailable_page)


def frame_css() -> str:
    """The stylesheet's frame, the part every page's sign and card need: small enough for
    HAProxy's buffer, where the whole stylesheet is not."""
    css = (STATIC / "css" / "bakery.css").read_text(encoding="utf-8")
    return css[:css.index(FRAME_END)]


def balancer_error_files(protocol: Protocol, directory: Path) -> dict[int, Path]:
    """The calm page, in the study's language, as HAProxy's own answers (``errorfile``):
    a participant who reloads while no worker can answer reads the study's words in the
    study's frame, not the balancer's English, and the page reloads itself. The frame's
    styles are inline: no worker is there to serve the stylesheet."""
    app = Flask(__name__, template_folder=str(TEMPLATES), static_folder=str(STATIC))
    with app.test_request_context():
        body = render_template("unavailable.html", protocol=protocol,
                               frame_css=frame_css()).encode("utf-8")
    headers = {**CALM_HEADERS, "Content-Type": "text/html; charset=utf-8",
               "Content-Length": str(len(body)), "Connection": "close"}
    files = {}
    for status, reason in BALANCER_ERRORS.items():
        head = "".join([f"HTTP/1.1 {status} {reason}\r\n",
                        *(f"{name}: {value}\r\n" for name, value in headers.items()), "\r\n"])
        files[status] = directory / f"{status}.http"
        files[status].write_bytes(head.encode("ascii") + body)
    return files
