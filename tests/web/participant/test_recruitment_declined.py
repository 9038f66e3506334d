"""A participant who declined and comes back with the same recruitment id gets the declined
page again, from any browser; only a hash of the id is kept for that (docs/recruitment.md)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from support.recruitment import code_of, pid, recruitment_protocol
from support.web import make_app, msg, page_socket

RECRUITMENT_ID = pid("declines")


@pytest.fixture
def app(tmp_path, teammates, clock):
    return make_app(tmp_path, teammates, clock,
                    protocol=recruitment_protocol(tmp_path / "prolific.toml"))


def decline(app: Any, browser: Any) -> str:
    code = code_of(browser.get(f"/start?PROLIFIC_PID={RECRUITMENT_ID}&STUDY_ID=STUDY-93c1"))
    tab, _ = page_socket(app, code, browser)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    reply = tab.emit("submit", {"msg_id": msg(), "step": "consent",
                                "data": {"agree": False}}, callback=True)
    assert reply["ok"] and reply["state"]["step"] == "declined", reply
    return code


def step_seen(app: Any, code: str, browser: Any) -> str:
    tab, _ = page_socket(app, code, browser)
    reply = tab.emit("join", {"code": code}, callback=True)
    assert reply["ok"], reply
    return reply["state"]["step"]


@pytest.mark.parametrize("same_browser", [True, False])
def test_a_declined_recruitment_id_gets_the_declined_page_again(app, same_browser):
    first = app.test_client()
    code = decline(app, first)
    browser = first if same_browser else app.test_client()
    again = browser.get(f"/start?PROLIFIC_PID={RECRUITMENT_ID}&SESSION_ID=x2")
    assert again.status_code == 302 and code_of(again) == code
    assert step_seen(app, code, browser) == "declined"
    storage = app.extensions["study"].storage
    assert storage.one("SELECT count(*) AS n FROM participants")["n"] == 1


def test_only_a_hash_of_the_declined_id_is_kept(app):
    code = decline(app, app.test_client())
    storage = app.extensions["study"].storage
    row = storage.participant(code)
    digest = hashlib.sha256(f"declined:{RECRUITMENT_ID}".encode()).hexdigest()
    assert row["recruitment_id"] == f"sha256:{digest}" and row["external_ids"] is None
    path = storage.path
    wal = path.with_name(path.name + "-wal")
    stored = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert RECRUITMENT_ID.encode() not in stored and b"STUDY-93c1" not in stored


def test_another_recruitment_id_still_starts_afresh(app):
    code = decline(app, app.test_client())
    other = app.test_client().get(f"/start?PROLIFIC_PID={pid('someone-else')}")
    assert code_of(other) != code
    assert step_seen(app, code_of(other), app.test_client()) == "consent"
