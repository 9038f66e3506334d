"""The experimenter console: who gets in, CSRF, links with balanced condition orders,
holds that the journey obeys, the live view, the action log and the data download."""

from __future__ import annotations

import io
import json
import re
import zipfile
from urllib.parse import unquote

import pytest
from support.console import PASSWORD, csrf_of, logged_in, make_app
from support.web import DEMO, page_socket

from study.protocol.loader import load_protocol
from study.web.console import live, views
from study.web.participant.agent_pool import PoolTeammates


@pytest.fixture(scope="module")
def teammates(tmp_path_factory):
    return PoolTeammates.for_protocol(load_protocol(DEMO), tmp_path_factory.mktemp("pools"))


@pytest.fixture
def app(tmp_path, teammates, monkeypatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    return make_app(tmp_path, teammates)


def journey(app):
    return app.extensions["study"]


def participant_at_practice(app, code: str) -> None:
    """A participant who consented, read the themes and rated them."""
    study = journey(app)
    study.enrol(code)
    for step, data in (("consent", {"agree": True}), ("themes", {}),
                       ("preferences", {"ratings": {"ravens": 5, "steelers": 3}})):
        reply = study.handle("submit", code, {"msg_id": f"{code}-{step}", "step": step,
                                              "data": data})
        assert reply["ok"], reply


def actions(app) -> list[str]:
    return [r["action"] for r in journey(app).storage.all(
        "SELECT action FROM console_actions ORDER BY id")]


# --- who gets in -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/console/", "/console/live.json", "/console/export.zip",
                                  "/console/log", "/console/finished.json"])
def test_every_console_page_needs_a_login(app, path):
    client = app.test_client()
    reply = client.get(path, headers={"Accept": "application/json"})
    assert reply.status_code == 401
    page = client.get(path, headers={"Accept": "text/html"})
    assert page.status_code == 302 and "/console/login" in page.headers["Location"]


def test_a_participant_with_a_link_cannot_reach_the_console(app):
    client = app.test_client()
    assert client.get("/p/pupil1").status_code == 200
    assert client.get("/console/live.json",
                      headers={"Accept": "application/json"}).status_code == 401
    assert client.post("/console/links", data={"count": "3"}).status_code == 401
    assert client.post("/console/participants/pupil1",
                       data={"action": "abort"}).status_code == 401
    socketio = app.extensions["socketio"]
    participant = socketio.test_client(app, flask_test_client=client)
    assert participant.emit("join", {"code": "pupil1"}, callback=True)["ok"]
    viewer = socketio.test_client(app, namespace="/console", flask_test_client=client)
    assert not viewer.is_connected("/console")
    assert journey(app).storage.all("SELECT * FROM console_status") == []


def test_wrong_passwords_are_refused_logged_and_throttled(app):
    client = app.test_client()
    token = csrf_of(client.get("/console/login").data)
    for _ in range(5):
        reply = client.post("/console/login", data={"password": "guess", "csrf_token": token})
        assert reply.status_code == 403
    reply = client.post("/console/login", data={"password": PASSWORD, "csrf_token": token})
    assert reply.status_code == 429
    assert actions(app) == ["login-failed"] * 5


def test_forms_without_the_csrf_token_are_refused(app):
    client = app.test_client()
    client.get("/console/login")
    assert client.post("/console/login", data={"password": PASSWORD}).status_code == 400
    client, token = logged_in(app)
    assert client.post("/console/links", data={"count": "2"}).status_code == 400
    assert client.post("/console/links", data={"count": "2",
                                                "csrf_token": "forged"}).status_code == 400
    assert journey(app).storage.all("SELECT * FROM participants") == []
    assert client.post("/console/links", data={"count": "2",
                                                "csrf_token": token}).status_code == 302


def test_demo_mode_is_open_and_says_so(tmp_path, teammates, monkeypatch):
    monkeypatch.delenv("STUDY_CONSOLE_PASSWORD", raising=False)
    app = make_app(tmp_path, teammates, password=None)
    page = app.test_client().get("/console/")
    assert page.status_code == 200 and b"DEMO MODE" in page.data


def test_the_password_can_come_from_the_environment(tmp_path, teammates, monkeypatch):
    monkeypatch.setenv("STUDY_CONSOLE_PASSWORD", PASSWORD)
    app = make_app(tmp_path, teammates, password=None)
    assert app.test_client().get("/console/", headers={"Accept": "text/html"}).status_code == 302
    client, _ = logged_in(app)
    page = client.get("/console/")
    assert page.status_code == 200 and b"DEMO MODE" not in page.data


# --- links and balance -----------------------------------------------------------------


def orders(app) -> list[list[str] | None]:
    return [json.loads(r["condition_order"] or "null") for r in journey(app).storage.all(
        "SELECT condition_order FROM participants ORDER BY id")]


def consent(app, code: str, agree: bool = True) -> None:
    reply = journey(app).handle("submit", code, {"msg_id": f"{code}-{agree}", "step": "consent",
                                                  "data": {"agree": agree}})
    assert reply["ok"], reply


def test_links_are_created_in_batches_and_balanced_at_consent(app):
    client, token = logged_in(app)
    reply = client.post("/console/links", data={"count": "4", "csrf_token": token,
                                                 "note": "Tuesday"})
    created = re.search(r"created=([^&]+)", reply.headers["Location"]).group(1)
    codes = unquote(created).split(",")
    assert len(codes) == 4
    page = client.get(reply.headers["Location"]).data.decode()
    assert all(f"/p/{code}" in page for code in codes)
    assert orders(app) == [None] * 4  # a link holds no order until its participant consents
    for code in codes:
        consent(app, code)
    assert sorted(map(tuple, orders(app))) == [("efficient", "fair")] * 2 + [("fair",
                                                                               "efficient")] * 2
    log = journey(app).storage.one("SELECT * FROM console_actions WHERE action = "
                                   "'create-links'")
    assert log["note"] == "Tuesday" and json.loads(log["detail"])["codes"] == codes


def lose(app, client, token, code: str, how: str) -> None:
    study = journey(app)
    if how == "declined":
        study.handle("submit", code, {"msg_id": f"{code}-no", "step": "consent",
                                      "data": {"agree": False}})
    elif how == "withdrawn":
        study.handle("withdraw", code, {"msg_id": f"{code}-bye"})
    else:
        act(client, token, code, "abort", "left")
    assert study.storage.participant(code)["step"] in ("declined", "withdrawn", "themes")


@pytest.mark.parametrize("how", ["declined", "withdrawn", "aborted"])
def test_balance_counts_participants_who_may_still_contribute(app, how):
    """The first participant consents and takes the first order; the second is lost
    (declining, they never held one); the third takes the second order, where alternating
    by enrolment would hand out the first order again."""
    client, token = logged_in(app)
    client.post("/console/links", data={"count": "3", "csrf_token": token})
    first, second, third = (row["code"] for row in journey(app).storage.all(
        "SELECT code FROM participants ORDER BY id"))
    consent(app, first)
    if how != "declined":
        consent(app, second)
    lose(app, client, token, second, how)
    consent(app, third)
    held = orders(app)
    assert held[2] is not None and held[2] != held[0]


def test_participants_in_progress_count_towards_the_balance(app):
    """Unlike a count of finished participants, people still in the study hold their order."""
    participant_at_practice(app, "started1")
    client, token = logged_in(app)
    client.post("/console/links", data={"count": "1", "csrf_token": token})
    consent(app, journey(app).storage.all("SELECT code FROM participants ORDER BY id")[1]["code"])
    first, second = orders(app)
    assert first != second


# --- holds -----------------------------------------------------------------------------


def act(client, token, code, action, note=""):
    return client.post(f"/console/participants/{code}", data={
        "action": action, "note": note, "csrf_token": token},
        headers={"Accept": "application/json"})


def test_a_paused_participant_cannot_start_rounds_until_resumed(app):
    participant_at_practice(app, "pausee1")
    client, token = logged_in(app)
    assert act(client, token, "pausee1", "pause", "fire alarm").status_code == 200
    reply = journey(app).handle("start_round", "pausee1", {"msg_id": "start-0001", "round": 1})
    assert not reply["ok"] and reply["reason"] == "paused"
    assert journey(app).storage.all("SELECT * FROM rounds") == []
    rejection = journey(app).storage.one("SELECT * FROM rejections WHERE reason = 'paused'")
    assert rejection["event"] == "start_round"
    act(client, token, "pausee1", "resume")
    assert journey(app).handle("start_round", "pausee1", {"msg_id": "start-0002",
                                                          "round": 1})["ok"]


def test_an_aborted_participant_can_only_withdraw(app):
    participant_at_practice(app, "abortee")
    client, token = logged_in(app)
    act(client, token, "abortee", "abort", "left the lab")
    reply = journey(app).handle("start_round", "abortee", {"msg_id": "start-0003", "round": 1})
    assert reply["reason"] == "aborted"
    assert act(client, token, "abortee", "resume").status_code == 400
    assert journey(app).handle("withdraw", "abortee", {"msg_id": "withdraw-01"})["ok"]


def test_withdrawal_erases_the_consoles_notes_on_the_participant(app):
    participant_at_practice(app, "notee1")
    client, token = logged_in(app)
    act(client, token, "notee1", "flag", "talked about their job")
    storage = journey(app).storage
    pid = storage.participant("notee1")["id"]
    assert storage.one("SELECT COUNT(*) AS n FROM console_actions WHERE participant_id = ?",
                       (pid,))["n"] == 1
    assert journey(app).handle("withdraw", "notee1", {"msg_id": "withdraw-02"})["ok"]
    for table in ("console_status", "console_actions"):
        assert storage.one(f"SELECT COUNT(*) AS n FROM {table} WHERE participant_id = ?",
                           (pid,))["n"] == 0
    assert storage.participant("notee1")["step"] == "withdrawn"


def test_every_experimenter_action_is_logged(app):
    participant_at_practice(app, "flagee1")
    client, token = logged_in(app)
    for action in ("flag", "note", "unflag", "pause", "resume"):
        act(client, token, "flagee1", action, f"why {action}")
    client.get("/console/export.zip")
    client.post("/console/logout", data={"csrf_token": token})
    assert actions(app) == ["login", "flag", "note", "unflag", "pause", "resume", "export",
                            "logout"]
    log_page = logged_in(app)[0].get("/console/log").data.decode()
    assert "why unflag" in log_page
    assert act(client, token, "nobody", "flag").status_code in (401, 404)


# --- the live view and the download ----------------------------------------------------


def test_live_view_shows_round_cookies_kits_and_connections(app):
    participant_at_practice(app, "livebot")
    study = journey(app)
    assert study.handle("start_round", "livebot", {"msg_id": "start-live", "round": 1})["ok"]
    socketio = app.extensions["socketio"]
    browser, _ = page_socket(app, "livebot")
    assert browser.emit("join", {"code": "livebot"}, callback=True)["ok"]
    client, _ = logged_in(app)
    viewer = socketio.test_client(app, namespace="/console", flask_test_client=client)
    assert viewer.is_connected("/console")
    app.extensions["console_pusher"].push()
    pushes = [p for p in viewer.get_received("/console") if p["name"] == "live"]
    text, now = pushes[-1]["args"]  # encoded once, the server's clock beside it
    assert now == pytest.approx(study.clock())
    [row] = [p for p in json.loads(text)["participants"] if p["code"] == "livebot"]
    assert row["step"] == "practice" and row["connections"] == 1
    current = row["current"]
    assert current["running"] and current["number"] == 1 and current["of"] == 4
    assert current["deadline"] == pytest.approx(study.clock() + study.protocol.practice_seconds)
    browser.disconnect()
    snapshot = client.get("/console/live.json").get_json()
    [row] = [p for p in snapshot["participants"] if p["code"] == "livebot"]
    assert row["connections"] == 0


def test_a_console_in_a_hidden_tab_costs_nothing_until_it_is_seen(app, monkeypatch):
    participant_at_practice(app, "hidden1")
    client, _ = logged_in(app)
    viewer = app.extensions["socketio"].test_client(app, namespace="/console",
                                                    flask_test_client=client)
    pusher = app.extensions["console_pusher"]
    built: list[int] = []
    real = views.current_snapshot
    monkeypatch.setattr(views, "current_snapshot", lambda app: built.append(1) or real(app))
    viewer.emit("looking", False, namespace="/console")
    pusher.push()
    assert built == [] and not viewer.get_received("/console")
    viewer.emit("looking", True, namespace="/console")
    pusher.push()  # unchanged since the last push, but new to the eyes
    pushes = [p for p in viewer.get_received("/console") if p["name"] == "live"]
    assert built == [1] and len(pushes) == 1


def test_the_live_view_takes_at_most_a_tenth_of_the_process(app):
    """A study of thousands takes a good part of a second to read (docs/study-day.md): the
    snapshots then come further apart, and the participants keep nine tenths of the
    process that serves them."""
    moments = iter([0.0, 0.4, 5.0, 5.01])  # a snapshot that took 0.4 s, then one of 0.01
    pusher = views.Pusher(app, app.extensions["socketio"], interval=0.5,
                          clock=lambda: next(moments))
    pusher.viewers["a viewer"] = None
    waits: list[float] = []

    class Stopped:
        def wait(self, timeout: float) -> bool:
            waits.append(timeout)
            return len(waits) > 2

    pusher.stopped = Stopped()  # type: ignore[assignment]
    pusher.push = lambda: None  # type: ignore[method-assign]  # its cost is the clock's
    pusher.run()
    assert waits == [0.5, pytest.approx(3.6), 0.5]


def test_a_snapshot_lets_other_work_go_first_between_its_queries_and_rows(app, monkeypatch):
    for _ in range(5):
        journey(app).enrol()
    chances: list[int] = []
    monkeypatch.setattr(live, "ROWS_AT_ONCE", 2)
    monkeypatch.setattr(live, "_give_way", lambda: chances.append(1))
    snapshot = live.snapshot(journey(app).storage, 0.0, lambda code: 0)
    assert len(snapshot["participants"]) == 5
    assert len(chances) == 5 + 2  # after four queries and the rows, and every two rows


def decline(app, code: str) -> None:
    journey(app).enrol(code)
    consent(app, code, agree=False)


def test_the_live_view_is_the_size_of_the_study_now(app):
    """Participants whose study ended are counts in the pushed view, however many: a study
    of thousands costs its console what the people in it now cost."""
    participant_at_practice(app, "still-here")
    before = live.snapshot(journey(app).storage, 0.0, lambda code: 0)
    for n in range(30):
        decline(app, f"gone-{n:02d}")
    after = live.snapshot(journey(app).storage, 0.0, lambda code: 0)
    assert [row["code"] for row in after["participants"]] == ["still-here"]
    assert after.pop("finished") == {"count": 30, "steps": {"declined": 30}}
    assert before.pop("finished") == {"count": 0, "steps": {}}
    assert after == before


def test_participants_whose_study_ended_are_read_a_page_at_a_time(app, monkeypatch):
    """The latest to end come first, whenever they began: who just finished is on top."""
    monkeypatch.setattr(live, "PAGE", 2)
    for n in range(5):
        journey(app).enrol(f"gone-{n}")
    participant_at_practice(app, "still-here")
    for n in (2, 0, 4, 1, 3):
        journey(app).clock.advance(60)
        consent(app, f"gone-{n}", agree=False)
    client, _ = logged_in(app)
    pages, query = [], ""
    while True:
        page = client.get(f"/console/finished.json{query}").get_json()
        pages.append([row["code"] for row in page["participants"]])
        if not page["more"]:
            break
        query = f"?before={page['participants'][-1]['id']}"
    assert pages == [["gone-3", "gone-1"], ["gone-4", "gone-0"], ["gone-2"]]
    taking_part = journey(app).storage.participant("still-here")["id"]
    for before, codes in (("abc", ["gone-3", "gone-1"]), ("-5", []), ("9" * 30, []),
                          (str(taking_part), [])):
        reply = client.get(f"/console/finished.json?before={before}")
        assert reply.status_code == 200
        assert [row["code"] for row in reply.get_json()["participants"]] == codes


def test_download_is_the_export_as_a_zip(app):
    participant_at_practice(app, "zipper1")
    client, _ = logged_in(app)
    reply = client.get("/console/export.zip")
    assert reply.status_code == 200 and reply.mimetype == "application/zip"
    with zipfile.ZipFile(io.BytesIO(reply.data)) as archive:
        names = set(archive.namelist())
        assert {"participants.csv", "participants.parquet", "codebook.csv"} <= names
        assert any(n.startswith("metadata/protocol-demo-") for n in names)
        [pool] = [n for n in names if n.startswith("metadata/pool-")]
        assert json.loads(archive.read(pool))["spec"]["teams"] == 20_000
        codebook = archive.read("codebook.md").decode()
    assert "UNDOCUMENTED" not in codebook
