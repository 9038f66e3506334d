"""A minimal experimenter page: the participants so far and a button for a new link.

The full console is a later piece of work; this page is behind the key printed by
``study serve``.
"""

from __future__ import annotations

import secrets

from flask import Blueprint, abort, current_app, render_template, request, url_for

from study.web.journey import Journey

blueprint = Blueprint("experimenter", __name__, url_prefix="/experimenter")


def _checked(key: str) -> Journey:
    if not secrets.compare_digest(key, current_app.config["EXPERIMENTER_KEY"]):
        abort(404)
    return current_app.extensions["study"]


@blueprint.route("/<key>", methods=["GET", "POST"])
def console(key: str) -> str:
    study = _checked(key)
    created = None
    if request.method == "POST":
        code = study.enrol()["code"]
        created = url_for("participant.page", code=code, _external=True)
    participants = study.storage.all(
        "SELECT code, step, condition_order, consent, data_consent, created_at "
        "FROM participants ORDER BY id")
    return render_template("experimenter.html", protocol=study.protocol, key=key,
                           participants=participants, created=created)
