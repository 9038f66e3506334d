"""Recruitment platforms and enrolment that cannot be steered (docs/recruitment.md).

The same recruitment id always resumes the same participant; the browser remembers its
code; the done page sends the participant back to the platform; a closed study creates no
participant for a stray link; orders are balanced among participants who consented, so
page loads and declined consents steer nothing; a code belongs to the browser that joined
first until the experimenter releases it or it has been idle.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.recruitment import COMPLETE, RETURN, code_of, pid, recruitment_protocol
from support.web import DEMO, make_app, msg, page_socket

from study.web.console import balance

PASSWORD = "let-me-in"


@pytest.fixture
def app(tmp_path, teammates, clock, monkeypatch):
    monkeypatch.setenv("STUDY_CONSOLE_PASSWORD", PASSWORD)
    return make_app(tmp_path, teammates, clock,
                    protocol=recruitment_protocol(tmp_path / "prolific.toml"))


def start(name: str) -> str:
    """The start link's query of the participant ``name`` on Prolific."""
    return f"PROLIFIC_PID={pid(name)}"


def participants(app: Any) -> list[dict[str, Any]]:
    return app.extensions["study"].storage.all("SELECT * FROM participants ORDER BY id")


def consent(app: Any, code: str, agree: bool = True) -> dict[str, Any]:
    reply = app.extensions["study"].handle("submit", code, {
        "msg_id": msg(), "step": "consent", "data": {"agree": agree}})
    assert reply["ok"], reply
    return reply["state"]


# --- recruitment ids and the remembered code ---------------------------------------------


def test_the_same_recruitment_id_always_resumes_the_same_participant(app):
    first = app.test_client().get(f"/start?{start('abc123')}&STUDY_ID=s1&SESSION_ID=x1")
    again = app.test_client().get(f"/start?{start('abc123')}&SESSION_ID=x2")
    other = app.test_client().get(f"/start?{start('zzz999')}")
    assert first.status_code == again.status_code == other.status_code == 302
    assert code_of(first) == code_of(again) != code_of(other)
    [person, stranger] = participants(app)
    assert (person["recruitment_id"], person["origin"]) == (pid("abc123"), "recruitment")
    assert json.loads(person["external_ids"]) == {"PROLIFIC_PID": pid("abc123"),
                                                  "STUDY_ID": "s1", "SESSION_ID": "x2"}
    assert person["condition_order"] is None and stranger["recruitment_id"] == pid("zzz999")


def test_the_browser_remembers_its_code_so_start_and_reopened_tabs_resume(app):
    browser = app.test_client()
    code = code_of(browser.get(f"/start?{start('back-and-forth')}"))
    page = browser.get(f"/p/{code}")
    cookies = page.headers.getlist("Set-Cookie")
    assert any(c.startswith("study_code=") and "HttpOnly" in c and "SameSite=Lax" in c
               for c in cookies)
    assert code_of(browser.get("/start")) == code  # Back to /start, a reopened tab
    assert len(participants(app)) == 1


def test_a_closed_study_creates_nobody_for_a_stray_link(app):
    stray = app.test_client().get("/p/mistyped-code")
    assert stray.status_code == 404 and b"This link is not valid" in stray.data
    assert RETURN.encode() in stray.data
    bare = app.test_client().get("/start")
    assert bare.status_code == 404 and b"Please use the link you were given" in bare.data
    assert participants(app) == []


def test_the_end_pages_carry_the_completion_and_return_addresses(app):
    """Without [recruitment.outcomes], a participant who finished gets completion_url and
    one who declined return_url, as protocols written before it declare."""
    study = app.extensions["study"]
    finisher = code_of(app.test_client().get(f"/start?{start('done-soon')}"))
    decliner = code_of(app.test_client().get(f"/start?{start('no-thanks')}"))
    assert study.state(finisher)["end"] is None  # still in the study: no way out offered
    consent(app, decliner, agree=False)
    finish(app, finisher)
    assert study.state(finisher)["end"] == {"outcome": "finished", "url": COMPLETE,
                                            "code": None}
    assert study.state(decliner)["end"] == {"outcome": "declined", "url": RETURN, "code": None}


def finish(app: Any, code: str) -> None:
    """Jump a participant to the final page (what the rounds lead to is tested elsewhere)."""
    storage = app.extensions["study"].storage
    with storage.event():
        storage.update("participants", storage.participant(code)["id"], {"step": "done"})


# --- recruitment ids of the platform's format only ---------------------------------------

HOSTILE_IDS = {
    "comma and line break": pid("forger") + ",99.99\r\nx",
    "a formula": '=HYPERLINK("http://evil.example","claim")',
    "a sum": "+SUM(1,2)",
    "ten kilobytes": "a" * 10_000,
    "a valid id and more": pid("greedy") + "0",
    "upper-case digits": pid("shouting").upper(),
}


@pytest.mark.parametrize("name", HOSTILE_IDS)
def test_a_start_link_with_an_id_of_another_format_creates_nobody(app, name):
    """The issue's forgery: an id that is not Prolific's (24 hexadecimal digits) gets a
    clear page and no participant, so it can never reach the bulk bonus file."""
    reply = app.test_client().get("/start", query_string={"PROLIFIC_PID": HOSTILE_IDS[name],
                                                           "STUDY_ID": "s1"})
    assert reply.status_code == 400
    assert b"This link does not carry a valid participant id" in reply.data
    assert RETURN.encode() in reply.data
    assert participants(app) == []


def test_a_participant_link_with_a_forged_id_is_refused_too(tmp_path, teammates, clock):
    app = make_app(tmp_path, teammates, clock,
                   protocol=recruitment_protocol(tmp_path / "open.toml", open_enrolment=True))
    forged = app.test_client().get("/p/walk-in-1", query_string={
        "PROLIFIC_PID": "+SUM(1,2)"})
    assert forged.status_code == 400 and participants(app) == []
    assert app.test_client().get(f"/p/walk-in-1?{start('walk-in')}").status_code == 200
    assert participants(app)[0]["recruitment_id"] == pid("walk-in")


def test_the_refusal_page_speaks_the_study_language(tmp_path, teammates, clock):
    protocol = tmp_path / "de.toml"
    protocol.write_text((DEMO.parent / "demo-de.toml").read_text().replace(
        "open_enrolment = true", 'open_enrolment = false\nid_parameter = "PROLIFIC_PID"', 1))
    app = make_app(tmp_path, teammates, clock, protocol=protocol)
    reply = app.test_client().get("/start?PROLIFIC_PID=nicht-von-prolific")
    assert reply.status_code == 400
    assert "Dieser Link enthält keine gültige Teilnehmer-ID" in reply.data.decode()
    assert participants(app) == []


@pytest.mark.parametrize(("parameter", "pattern", "good", "bad"), [
    ("PROLIFIC_PID", None, "5f3e9a1c77d04b2e8a6c1f90", "5f3e9a1c77d04b2e8a6c1f9"),
    ("id", None, "48213", "048213"),  # SONA: 2 to 7 digits, no leading zero
    ("workerId", None, "A1B2C3D4E5F6G7", "a1b2c3d4e5f6g7"),
    ("workerId", None, "TP_1UPKSI2WHSJ4", "TP_1UPKSI2WHSJ4,1"),  # CloudResearch's
    ("participant", None, "lab-42_a", "-lab-42"),  # another platform: no formula start
    ("PROLIFIC_PID", "LAB-[0-9]{4}", "LAB-0042", "LAB-00420"),  # the protocol's own
])
def test_each_platform_s_ids_are_accepted_and_others_refused(tmp_path, teammates, clock,
                                                             parameter, pattern, good, bad):
    settings = [f'id_parameter = "{parameter}"'] + (
        [f'id_pattern = "{pattern}"'] if pattern else [])
    protocol = tmp_path / "platform.toml"
    protocol.write_text(DEMO.read_text().replace("open_enrolment = true", "\n".join(
        ["open_enrolment = false", *settings]), 1))
    app = make_app(tmp_path, teammates, clock, protocol=protocol)
    assert app.test_client().get("/start", query_string={parameter: bad}).status_code == 400
    assert app.test_client().get("/start", query_string={parameter: good}).status_code == 302
    assert [row["recruitment_id"] for row in participants(app)] == [good]


def test_a_pattern_that_is_no_regular_expression_is_refused_at_its_line(tmp_path):
    from study.protocol.loader import load_protocol
    from study.protocol.toml_source import ProtocolError

    protocol = tmp_path / "bad.toml"
    for pattern, words in (("LAB-[0-9", "not a regular expression"),
                           ("[0-9]*", "matches an empty id")):
        protocol.write_text(DEMO.read_text().replace("open_enrolment = true", "\n".join([
            "open_enrolment = false", 'id_parameter = "lab_id"',
            f'id_pattern = "{pattern}"']), 1))
        with pytest.raises(ProtocolError, match=rf"recruitment\.id_pattern: .*{words}"):
            load_protocol(protocol)


# --- counterbalancing and expiry -----------------------------------------------------------


def test_page_loads_and_declined_consents_do_not_steer_the_balance(tmp_path, teammates,
                                                                   clock):
    """The issue's attack: 40 anonymous page loads and 20 declined consents before 10 real
    participants, who must still get both orders equally."""
    app = make_app(tmp_path, teammates, clock,
                   protocol=recruitment_protocol(tmp_path / "open.toml", open_enrolment=True))
    for number in range(40):
        app.test_client().get(f"/p/anonymous-{number:03d}")
    for number in range(20):
        code = code_of(app.test_client().get(f"/start?{start(f'decliner-{number}')}"))
        consent(app, code, agree=False)
    orders = []
    for number in range(10):
        code = code_of(app.test_client().get(f"/start?{start(f'real-{number}')}"))
        assert participants_by_code(app)[code]["condition_order"] is None
        consent(app, code)
        orders.append(tuple(json.loads(participants_by_code(app)[code]["condition_order"])))
    assert sorted(set(orders)) == [("efficient", "fair"), ("fair", "efficient")]
    assert orders.count(("efficient", "fair")) == orders.count(("fair", "efficient")) == 5


ORDERS = [["efficient", "fair"], ["fair", "efficient"]]


def consented(tmp_path: Path, teammates: Any, clock: Any, count: int) -> tuple[Any, list[str]]:
    """An open study with ``count`` people who arrived and consented, and their codes."""
    app = make_app(tmp_path, teammates, clock,
                   protocol=recruitment_protocol(tmp_path / "open.toml", open_enrolment=True))
    codes = [code_of(app.test_client().get(f"/start?{start(f'member-{n}')}"))
             for n in range(count)]
    for code in codes:
        consent(app, code)
    return app, codes


def test_a_person_dropped_from_a_team_seat_frees_their_order(tmp_path, teammates, clock):
    app, codes = consented(tmp_path, teammates, clock, 2)
    storage = app.extensions["study"].storage
    assert balance.order_counts(storage, ORDERS) == [1, 1]
    dropped = participants_by_code(app)[codes[0]]
    with storage.event():
        storage.update("participants", dropped["id"], {"step": "dropped"})
    counts = balance.order_counts(storage, ORDERS)
    assert sum(counts) == 1
    assert counts[ORDERS.index(json.loads(dropped["condition_order"]))] == 0


def test_an_order_counts_once_however_its_json_is_spelled(tmp_path, teammates, clock):
    """SQLite groups the orders by their text: two spellings of one order are one order."""
    app, codes = consented(tmp_path, teammates, clock, 3)
    storage = app.extensions["study"].storage
    with storage.event():
        for code, spelled in zip(codes, ('["fair","efficient"]', '[ "fair", "efficient" ]',
                                         '["efficient", "fair"]'), strict=True):
            storage.write("UPDATE participants SET condition_order = ? WHERE code = ?",
                          (spelled, code))
    assert balance.order_counts(storage, ORDERS) == [1, 2]


def participants_by_code(app: Any) -> dict[str, dict[str, Any]]:
    return {row["code"]: row for row in participants(app)}


def test_unconsented_participants_expire_but_console_links_do_not(app, clock):
    study = app.extensions["study"]
    arrived = code_of(app.test_client().get(f"/start?{start('wanderer')}"))
    consented = code_of(app.test_client().get(f"/start?{start('stayer')}"))
    consent(app, consented)
    handed_out = study.enrol()["code"]  # a link the experimenter created
    clock.advance(29 * 60)
    assert study.expire_unconsented(force=True) == 0
    clock.advance(2 * 60)
    assert study.expire_unconsented(force=True) == 1
    assert set(participants_by_code(app)) == {consented, handed_out}
    assert study.storage.all("SELECT * FROM steps WHERE participant_id NOT IN "
                             "(SELECT id FROM participants)") == []
    again = code_of(app.test_client().get(f"/start?{start('wanderer')}"))
    assert again != arrived and participants_by_code(app)[again]["step"] == "consent"


# --- a code is not a key -------------------------------------------------------------------


def test_another_browser_cannot_act_until_the_experimenter_releases_the_code(app):
    mine = app.test_client()
    code = code_of(mine.get(f"/start?{start('owner-1')}"))
    tab, _ = page_socket(app, code, mine)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    # The recruitment id again, from another browser: the same participant, the same rule.
    thief_browser = app.test_client()
    assert code_of(thief_browser.get(f"/start?{start('owner-1')}")) == code
    thief, _ = page_socket(app, code, thief_browser)
    refused = thief.emit("join", {"code": code}, callback=True)
    assert refused["reason"] == "other-browser" and "state" not in refused
    assert "open in another browser" in refused["detail"]
    assert thief.emit("submit", {"msg_id": msg(), "step": "consent",
                                 "data": {"agree": True}}, callback=True)["reason"] == "not-joined"
    assert participants(app)[0]["consent"] is None

    console = logged_in(app)
    reply = console.post(f"/console/participants/{code}", data={
        "action": "release", "note": "lost her laptop", "csrf_token": csrf(console)},
        headers={"Accept": "application/json"})
    assert reply.status_code == 200
    log = app.extensions["study"].storage.one("SELECT * FROM console_actions WHERE action = "
                                              "'release'")
    assert log["note"] == "lost her laptop" and json.loads(log["detail"])["was_bound"]
    assert thief.emit("join", {"code": code}, callback=True)["ok"]
    told = [m for m in tab.get_received() if m["name"] == "elsewhere"]
    assert told  # the first browser's tab is told it lost the code
    assert tab.emit("join", {"code": code}, callback=True)["reason"] == "other-browser"


def test_a_binding_idle_for_the_protocol_time_may_be_taken_over(app, clock):
    first = app.test_client()
    code = code_of(first.get(f"/start?{start('idle-owner')}"))
    tab, _ = page_socket(app, code, first)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    tab.disconnect()
    clock.advance(19 * 60)
    later, _ = page_socket(app, code)
    assert later.emit("join", {"code": code}, callback=True)["reason"] == "other-browser"
    clock.advance(2 * 60)
    assert later.emit("join", {"code": code}, callback=True)["ok"]


def test_a_join_without_the_page_cookie_is_refused(app):
    code = app.extensions["study"].enrol()["code"]
    bare = app.extensions["socketio"].test_client(app)
    assert bare.emit("join", {"code": code}, callback=True)["reason"] == "no-cookie"
    assert app.extensions["study"].storage.all("SELECT * FROM bindings") == []


def csrf(client: Any) -> str:
    page = client.get("/console/").data.decode()
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def logged_in(app: Any) -> Any:
    client = app.test_client()
    page = client.get("/console/login").data.decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    reply = client.post("/console/login", data={"password": PASSWORD, "csrf_token": token})
    assert reply.status_code == 302
    return client


# --- withdrawal leaves no trace --------------------------------------------------------------


def test_a_withdrawal_leaves_no_trace_in_the_database_or_its_wal(app, clock):
    """The withdrawn participant's free-text answer and recruitment id are in neither the
    database file nor its write-ahead log (secure_delete, then a TRUNCATE checkpoint)."""
    from support.withdrawal import SECRET_ANSWER, mid_second_session

    study = app.extensions["study"]
    study.enrol("leaver-01")
    recruitment_id = pid("leaver-01")
    app.test_client().get(f"/p/leaver-01?PROLIFIC_PID={recruitment_id}&STUDY_ID=s-88")
    assert participants_by_code(app)["leaver-01"]["recruitment_id"] == recruitment_id
    you = mid_second_session(app, clock, "leaver-01")
    path = study.storage.path
    wal = path.with_name(path.name + "-wal")
    before = path.read_bytes() + wal.read_bytes()
    assert SECRET_ANSWER.encode() in before and recruitment_id.encode() in before
    assert you.send("withdraw", {})["ok"]
    after = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    for trace in (SECRET_ANSWER, recruitment_id, "s-88"):
        assert trace.encode() not in after, trace
    assert study.storage.one("PRAGMA secure_delete")["secure_delete"] == 1


def test_a_sona_credit_address_gets_the_participant_survey_code(tmp_path, teammates, clock):
    credit = ("https://uni.sona-systems.com/webstudy_credit.aspx?experiment_id=41&"
              "credit_token=9f1c&survey_code={id}")
    protocol = tmp_path / "sona.toml"
    protocol.write_text(DEMO.read_text().replace("open_enrolment = true", "\n".join([
        "open_enrolment = false", 'id_parameter = "id"', f'completion_url = "{credit}"']), 1))
    app = make_app(tmp_path, teammates, clock, protocol=protocol)
    code = code_of(app.test_client().get("/start?id=48213"))
    finish(app, code)
    assert app.extensions["study"].state(code)["end"] == {
        "outcome": "finished", "url": credit.replace("{id}", "48213"), "code": None}


def test_a_participant_reading_the_consent_page_does_not_expire(app, clock):
    browser = app.test_client()
    code = code_of(browser.get(f"/start?{start('slow-reader')}"))
    tab, _ = page_socket(app, code, browser)
    assert tab.emit("join", {"code": code}, callback=True)["ok"]
    clock.advance(31 * 60)
    assert app.extensions["study"].expire_unconsented(force=True) == 0
    tab.disconnect()
    assert app.extensions["study"].expire_unconsented(force=True) == 1
