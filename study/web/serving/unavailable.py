"""The page a browser gets while the database cannot be written (a full disk).

A page load that needs a write (a new participant, a console action) answers ``503 Service
Unavailable`` with ``Retry-After`` and a calm page that reloads itself, instead of an error
page and a traceback per request; the storage logs the condition once a minute.
"""

from __future__ import annotations

from flask import Flask, current_app, render_template

from study.storage.health import RETRY_AFTER_SECONDS, StorageUnavailable

# A page reloads itself later than a message is resent: a reload costs the server more.
PAGE_RETRY_SECONDS = 3 * RETRY_AFTER_SECONDS


def unavailable_page(_error: Exception) -> tuple[str, int, dict[str, str]]:
    """503 with a calm page; browsers reload it after ``PAGE_RETRY_SECONDS``."""
    page = render_template("unavailable.html", protocol=current_app.extensions["study"].protocol)
    return page, 503, {"Retry-After": str(PAGE_RETRY_SECONDS),
                       "Refresh": str(PAGE_RETRY_SECONDS), "Cache-Control": "no-store"}


def init_app(app: Flask) -> None:
    app.register_error_handler(StorageUnavailable, unavailable_page)
