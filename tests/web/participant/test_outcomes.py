"""Every way out of the study has its own link and code on its end page, reached the way
the journey really ends there, and the bonus export pays the waits, drops and unmatched
ends those journeys recorded (docs/recruitment.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from support.bonus import details
from support.people import Person, practise, tick_until, to_session
from support.teams import team_protocol
from support.web import DEMO, FakeClock, journey, make_app, rows

from study.exports.bonus import export_bonuses
from study.protocol.recruitment import OUTCOMES
from study.web.console.holds import apply_action
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.records import Records

TEAM_ONLY = ("lobby_timeout", "dropped")
BONUS = ("\n[bonus]\nper_cookie = 0.05\nper_team_cookie = 0.02\nper_lobby_minute = 0.10\n"
         "lobby_cap = 1.50\nunmatched = 0.40\nteammate_dropped = 0.25\ncap = 3.00\n")


def code_of(outcome: str) -> str:
    return f"C{OUTCOMES.index(outcome)}{outcome.upper().replace('_', '')[:7]}"


def link_of(outcome: str) -> str:
    return f"https://app.prolific.com/submissions/complete?cc={code_of(outcome)}"


def with_outcomes(path: Path, outcomes: tuple[str, ...], extra: str = "") -> Path:
    """The protocol at ``path`` on Prolific, with its own link and code for each of
    ``outcomes``."""
    table = "".join(f'{name} = {{ url = "{link_of(name)}", code = "{code_of(name)}" }}\n'
                    for name in outcomes)
    text = path.read_text().replace("open_enrolment = true", "open_enrolment = true\n"
                                    'id_parameter = "PROLIFIC_PID"', 1)
    path.write_text(text + "\n[recruitment.outcomes]\n" + table + extra)
    return path


def single_study(tmp_path: Path) -> Path:
    path = tmp_path / "single.toml"
    path.write_text(DEMO.read_text())
    return with_outcomes(path, tuple(o for o in OUTCOMES if o not in TEAM_ONLY))


def team_study(tmp_path: Path, **design: Any) -> Path:
    return with_outcomes(team_protocol(tmp_path, **design), OUTCOMES, BONUS)


def end(app: Any, code: str) -> dict[str, Any] | None:
    return journey(app).state(code)["end"]


def expected(outcome: str) -> dict[str, str]:
    return {"outcome": outcome, "url": link_of(outcome), "code": code_of(outcome)}


def test_finished_declined_withdrawn_and_aborted_each_get_their_own_link(tmp_path, teammates,
                                                                          clock):
    app = make_app(tmp_path, teammates, clock, protocol=single_study(tmp_path))
    people = {name: Person(app, name) for name in ("fin-1", "dec-1", "wd-1", "ab-1", "in-1")}
    for name in ("fin-1", "wd-1", "ab-1", "in-1"):
        people[name].submit("consent", {"agree": True})
    assert end(app, "in-1") is None  # still in the study: no way out shown
    people["dec-1"].submit("consent", {"agree": False})
    assert people["wd-1"].send("withdraw", {})["ok"]
    storage = journey(app).storage
    apply_action(storage, storage.participant("ab-1"), "abort", "", None, clock.now)
    finisher = storage.participant("fin-1")["id"]
    with storage.event():  # the step the last page leads to (the rounds are tested elsewhere)
        Records(storage).advance(finisher, "done", clock.now)
    for name, outcome in (("fin-1", "finished"), ("dec-1", "declined"),
                          ("wd-1", "withdrawn"), ("ab-1", "aborted")):
        assert end(app, name) == expected(outcome), name
    pushed = people["dec-1"].client.emit("sync", {}, callback=True)["state"]
    assert pushed["end"] == expected("declined")  # what the page draws its end from


class NobodyFits(PoolTeammates):
    """The tests' pool, where no member forms the target team with anyone."""

    rule = "typed"
    unplaced = "unmatched"

    def candidates(self, c: Any, p: Any, rule: str, preferred: int | None = None) -> Any:
        return iter(())


def test_a_participant_no_teammate_places_gets_the_unmatched_link(tmp_path, teammates, clock):
    app = make_app(tmp_path, NobodyFits(teammates.pool, teammates.name), clock,
                   protocol=single_study(tmp_path))
    ada = Person(app, "ada-1")
    practise(app, clock, ada)
    assert ada.state()["step"] == "unmatched"
    assert end(app, "ada-1") == expected("unmatched")


def enrolled(app: Any, code: str) -> Person:
    """A person who came by the platform's start link with a recruitment id of their own."""
    journey(app).enrol(code, {"PROLIFIC_PID": prolific_id(code)}, origin="recruitment")
    return Person(app, code)


def prolific_id(code: str) -> str:
    return code.encode().hex().ljust(24, "0")[:24]


def waits(app: Any) -> dict[str, float]:
    """Each person's recorded wait in the lobby, in minutes."""
    return {row["code"]: (row["left_at"] - row["entered_at"]) / 60 for row in rows(
        app, "SELECT p.code, l.* FROM lobby l JOIN participants p ON p.id = l.participant_id")}


def wait_pay(minutes: float) -> float:
    """BONUS's 0.10 a minute, at most 1.50, rounded down to the cent."""
    return min(math.floor(round(minutes * 0.10 * 100, 6)) / 100, 1.5)


def test_the_lobby_s_timeout_and_leaving_it_get_the_lobby_link_and_are_paid(tmp_path,
                                                                           teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_study(
        tmp_path, timers="individual_seconds = 300", on_timeout="unmatched"))
    ada = enrolled(app, "ada-1")
    practise(app, clock, ada)
    tick_until(app, clock, lambda: ada.state()["step"] != "lobby")
    assert ada.state()["step"] == "unmatched"
    bo = enrolled(app, "bo-22")  # alone in the lobby too, who leaves after the wait
    practise(app, clock, bo)
    clock.advance(41)
    assert bo.submit("lobby", {"leave": True})["step"] == "unmatched"
    assert [row["outcome"] for row in rows(app, "SELECT outcome FROM lobby ORDER BY id")] == [
        "timeout", "left"]
    assert end(app, "ada-1") == end(app, "bo-22") == expected("lobby_timeout")

    waited = waits(app)
    assert waited["ada-1"] == 5.0
    out = tmp_path / "bonus"
    export_bonuses(journey(app).storage.path, out)
    assert details(out) == [("ada-1", "lobby-wait", 0.5), ("ada-1", "unmatched", 0.4),
                            ("bo-22", "lobby-wait", wait_pay(waited["bo-22"])),
                            ("bo-22", "unmatched", 0.4)]
    platform = (out / "bonus.csv").read_text().splitlines()
    assert platform == [f"{prolific_id('ada-1')},0.90",
                        f"{prolific_id('bo-22')},{wait_pay(waited['bo-22']) + 0.4:.2f}"]


def test_a_dropped_person_gets_the_dropped_link_and_the_teammate_is_paid_for_it(tmp_path,
                                                                               teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_study(tmp_path))
    ada, bo = enrolled(app, "ada-1"), enrolled(app, "bo-22")
    practise(app, clock, ada)
    practise(app, clock, bo, squares=2, letters=2, ratings=(2, 6))
    to_session(app, clock, [ada, bo], 1)
    bo.leave()
    tick_until(app, clock, lambda: journey(app).storage.participant("bo-22")["step"] ==
               "dropped")
    assert end(app, "bo-22") == expected("dropped")
    assert end(app, "ada-1") is None  # playing on, with an agent in bo's seat

    waited = waits(app)
    out = tmp_path / "bonus"
    export_bonuses(journey(app).storage.path, out)
    assert details(out) == [("ada-1", "lobby-wait", wait_pay(waited["ada-1"])),
                            ("ada-1", "teammate-dropped", 0.25),
                            ("bo-22", "lobby-wait", wait_pay(waited["bo-22"]))]
    assert waited["ada-1"] > 1 and waited["bo-22"] == 0  # the team formed as bo arrived
    assert (out / "bonus.csv").read_text().splitlines() == [
        f"{prolific_id('ada-1')},{wait_pay(waited['ada-1']) + 0.25:.2f}"]
