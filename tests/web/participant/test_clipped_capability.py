"""A capability clipped at 0.01 or 0.99 is not a measurement, and the protocol declares what
follows from it ([study] clipped_capability, MODEL.md "Measuring a participant"): the
unmatched page, with the unmatched outcome's link and pay, before any team is formed on it;
or the person continues and the analysis leaves them out (exclusion clipped-capability);
or the person continues, their team formed on the clipped value, and stays in the analysis.
A brisk simulated person (the human model at 0.5 times its times, quicker on letters than
the shipped reference speeds leave room for) goes through the real Socket.IO journey; the
console and the report count what followed."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.bonus import details
from support.clipped import BRISK, TYPICAL, UNMATCHED_LINK, practise_at, study2_with
from support.console import PASSWORD, logged_in
from support.people import Person, practise
from support.teams import team_protocol
from support.web import DEMO, FakeClock, journey, make_app, rows

from analysis import flow
from analysis.calibration import section as calibration_section
from analysis.load import load
from analysis.report import prepare
from analysis.teams import UNMATCHED_CLIPPED, attainment
from study.bots import AckLog, Bot, StudyFacts, profile_for
from study.bots.participant import _next_round
from study.exports.bonus import export_bonuses
from study.protocol.loader import load_protocol
from study.web.console import views as console
from study.web.participant.agent_pool import PoolTeammates

ROUND_STEPS = ("practice", "session-1", "session-2")


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pools")


def study_app(directory: Path, pools: Path, consequence: str, clock: FakeClock) -> Any:
    return app_for(study2_with(directory, consequence), pools, clock)


def app_for(protocol: Path, pools: Path, clock: FakeClock) -> Any:
    """The study of ``protocol`` in its folder, the console logged into by the tests."""
    teammates = PoolTeammates.for_protocol(load_protocol(protocol), pools)
    app = make_app(protocol.parent, teammates, clock, protocol=protocol,
                   STUDY_CONSOLE_PASSWORD=PASSWORD, TESTING=True)
    if "console" not in app.blueprints:
        console.init_app(app)
    app.extensions["console_pusher"].stop()
    return app


def clipped_flags(app: Any, code: str) -> list[int]:
    return [row["clipped"] for row in rows(
        app, "SELECT m.clipped FROM measurements m JOIN participants p ON p.id = "
             "m.participant_id WHERE p.code = ? AND m.kind = 'capability' "
             "ORDER BY m.task_type", code)]


def live_view(app: Any) -> dict[str, Any]:
    client, _ = logged_in(app)
    return client.get("/console/live.json").get_json()


def test_unmatched_a_brisk_person_meets_the_unmatched_page_with_its_link_and_pay(
        tmp_path: Path, pools: Path):
    clock = FakeClock()
    app = study_app(tmp_path, pools, "unmatched", clock)
    brisk, typical = Person(app, "brisk-1"), Person(app, "typical-1")
    practise_at(app, clock, brisk, BRISK, seed=1)
    practise_at(app, clock, typical, TYPICAL, seed=2)
    assert clipped_flags(app, "brisk-1") == [0, 1], "letters clip, squares do not"
    assert clipped_flags(app, "typical-1") == [0, 0]
    state = brisk.state()
    assert state["step"] == "unmatched"
    assert state["end"] == {"outcome": "unmatched", "url": UNMATCHED_LINK, "code": "CLIPPED1"}
    assert typical.state()["step"] == "teammate"
    pid = journey(app).storage.participant("brisk-1")["id"]
    assert rows(app, "SELECT * FROM teammates WHERE participant_id = ?", pid) == []
    assert rows(app, "SELECT * FROM sessions WHERE participant_id = ? AND number > 0",
                pid) == [], "no team is formed on a clipped value"

    view = live_view(app)
    assert view["calibration"]["clipped_people"] == {
        "consequence": "unmatched", "people": 1, "continued": 0, "unmatched": 1,
        "continued_as": "continued, left out of the analysis (clipped-capability)"}
    assert (view["target"]["unmatched"], view["target"]["unmatched_clipped"]) == (1, 1)

    out = tmp_path / "bonus"
    export_bonuses(journey(app).storage.path, out)
    assert ("brisk-1", "unmatched", 0.4) in details(out)

    data = load(journey(app).storage.path)
    study = prepare([data])
    table = attainment(study.stages, clipped=flow.clipped_ids(data.practice))
    counts = dict(zip(table["placement"], table["participants"], strict=True))
    assert counts[UNMATCHED_CLIPPED] == 1 and counts["placed in target team"] == 1
    followed = calibration_section(data, None, tmp_path / "figures")["tables"][-1][1]
    assert followed.iloc[0].to_dict() == {
        "clipped_capability": "unmatched", "participants_with_a_clipped_capability": 1,
        "continued_left_out_of_the_analysis": 0, "continued_kept_in_the_analysis": 0,
        "met_the_unmatched_page": 1}


def test_unmatched_a_clipped_person_never_enters_a_real_teams_lobby(tmp_path: Path, teammates):
    """A [team] formed in its lobby: the clipped person meets the unmatched page instead of
    waiting for people to be teamed with on a value that is not theirs."""
    path = team_protocol(tmp_path)
    text, found = re.subn(r"(?m)^clipped_capability = .*$",
                          'clipped_capability = "unmatched"', path.read_text(encoding="utf-8"))
    assert found == 1
    path.write_text(text, encoding="utf-8")
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, path)
    reference = load_protocol(path).cookies[1].reference_speed
    quick = int(np.ceil(0.99 * reference * load_protocol(path).practice_seconds)) + 1
    clipped, measured = Person(app, "clip-1"), Person(app, "fits-1")
    practise(app, clock, clipped, letters=quick)  # letters faster than the reference speed
    practise(app, clock, measured, letters=1)
    assert clipped_flags(app, "clip-1")[1] == 1 and clipped_flags(app, "fits-1") == [0, 0]
    assert clipped.state()["step"] == "unmatched"
    assert measured.state()["step"] == "lobby"
    lobby = {row["code"] for row in rows(app, "SELECT p.code FROM lobby l JOIN participants p "
                                              "ON p.id = l.participant_id")}
    assert lobby == {"fits-1"}


@pytest.fixture
def teammates(tmp_path: Path) -> PoolTeammates:
    from support.web import small_pool

    return small_pool(tmp_path / "pools")


def to_the_end(app: Any, clock: FakeClock, code: str) -> str:
    """The rest of the study as the bots answer its pages (questionnaires, debrief), one
    cookie a round."""
    facts = StudyFacts.from_protocol(journey(app).protocol)
    bot = Bot("http://in-process", code, profile_for(0, "fast", seed=3), AckLog(), facts=facts)
    state, sent = journey(app).state(code), itertools.count()
    while state["step"] not in ("done", "unmatched"):
        if state["step"] in ROUND_STEPS:
            reply = journey(app).handle("start_round", code, {
                "msg_id": f"{code}-{next(sent)}", "round": _next_round(state.get("round"))})
            assert reply["ok"], reply
            clock.now = reply["state"]["round"]["deadline"] + 0.01
            journey(app).tick(clock.now)
        else:
            reply = journey(app).handle("submit", code, {
                "msg_id": f"{code}-{next(sent)}", "step": state["step"],
                "data": bot.page_data(state)})
            assert reply["ok"], reply
        state = journey(app).state(code)
    return state["step"]


def test_continue_a_brisk_person_plays_on_and_the_analysis_leaves_them_out(
        tmp_path: Path, pools: Path):
    clock = FakeClock()
    app = study_app(tmp_path, pools, "continue", clock)
    brisk, typical = Person(app, "brisk-2"), Person(app, "typical-2")
    practise_at(app, clock, brisk, BRISK, seed=1)
    practise_at(app, clock, typical, TYPICAL, seed=2)
    assert clipped_flags(app, "brisk-2") == [0, 1]
    assert brisk.state()["step"] == "teammate", "continue: the study goes on"
    assert to_the_end(app, clock, "brisk-2") == to_the_end(app, clock, "typical-2") == "done"

    view = live_view(app)
    assert view["calibration"]["clipped_people"] == {
        "consequence": "continue", "people": 1, "continued": 1, "unmatched": 0,
        "continued_as": "continued, left out of the analysis (clipped-capability)"}
    assert view["target"]["unmatched_clipped"] == 0

    data = load(journey(app).storage.path)
    study = prepare([data])
    people = study.chosen.participants.set_index("code")
    assert people.loc["brisk-2", "excluded_by"] == "clipped-capability"
    assert bool(people.loc["typical-2", "included"])
    assert study.design.rules.exclude[-1] == "clipped-capability", "declared by the key"
    assert re.search(r'clipped-capability \(a capability was clipped', study.design.rules
                     .describe())
    exclusions = flow.exclusion_table(study.chosen).set_index("rule")
    assert (int(exclusions.loc["clipped-capability", "matched"]),
            int(exclusions.loc["clipped-capability", "removed"])) == (1, 1)
    analysed = set(study.analysed.participants["code"])
    assert analysed == {"typical-2"}
    followed = calibration_section(data, None, tmp_path / "figures")["tables"][-1][1]
    assert followed.iloc[0].to_dict() == {
        "clipped_capability": "continue", "participants_with_a_clipped_capability": 1,
        "continued_left_out_of_the_analysis": 1, "continued_kept_in_the_analysis": 0,
        "met_the_unmatched_page": 0}


def test_keep_a_brisk_person_plays_on_the_clipped_value_and_stays_in_the_analysis(
        tmp_path: Path, pools: Path):
    """The paper's practice: the clipped value forms the team and the robots' plans, as
    under continue, flagged; the report keeps the person and gives its results without
    them too (tests/analysis/test_analysis_clipped.py). The demo places everyone it
    measures, whatever their capabilities."""
    text, found = re.subn(r"(?m)^clipped_capability = .*$", 'clipped_capability = "keep"',
                          DEMO.read_text(encoding="utf-8"))
    assert found == 1
    protocol = tmp_path / "demo-keep.toml"
    protocol.write_text(text, encoding="utf-8")
    clock = FakeClock()
    app = app_for(protocol, pools, clock)
    brisk = Person(app, "brisk-3")
    practise_at(app, clock, brisk, BRISK, seed=1)
    assert 1 in clipped_flags(app, "brisk-3")
    assert brisk.state()["step"] == "teammate", "keep: the study goes on"
    assert to_the_end(app, clock, "brisk-3") == "done"
    pid = journey(app).storage.participant("brisk-3")["id"]
    measured = [row["value"] for row in rows(
        app, "SELECT value FROM measurements WHERE participant_id = ? AND kind = "
             "'capability' ORDER BY task_type", pid)]
    assert 0.99 in measured
    teams = rows(app, "SELECT team_c, participant_human FROM sessions WHERE "
                      "participant_id = ? AND kind = 'collaborative'", pid)
    assert len(teams) == 2
    assert all(json.loads(row["team_c"])[row["participant_human"]] == measured
               for row in teams), "the team is formed on the clipped value"

    view = live_view(app)
    assert view["calibration"]["clipped_people"] == {
        "consequence": "keep", "people": 1, "continued": 1, "unmatched": 0,
        "continued_as": "continued, kept in the analysis and reported with and without them"}

    data = load(journey(app).storage.path)
    study = prepare([data])
    assert "clipped-capability" not in study.design.rules.exclude
    assert set(study.analysed.participants["code"]) == {"brisk-3"}
    followed = calibration_section(data, None, tmp_path / "figures")["tables"][-1][1]
    assert followed.iloc[0].to_dict() == {
        "clipped_capability": "keep", "participants_with_a_clipped_capability": 1,
        "continued_left_out_of_the_analysis": 0, "continued_kept_in_the_analysis": 1,
        "met_the_unmatched_page": 0}


@pytest.mark.parametrize(("consequence", "placed", "unplaced"), [
    ("unmatched", 1, {"clipped capability": 1}), ("continue", 2, {})])
def test_a_pilot_s_live_teams_formed_offline_follow_the_declared_consequence(
        tmp_path: Path, consequence: str, placed: int, unplaced: dict[str, int]):
    """``study calibrate --fea-bounds people`` forms the pilot's live teams as the study
    would: a person whose capability clips under the calibrated reference speeds is not
    teamed under ``unmatched``."""
    from study.calibration.bounds import pilot_live_teams
    from study.calibration.pilot import Pilot

    protocol = load_protocol(study2_with(tmp_path, consequence))
    references = np.array([cookie.reference_speed for cookie in protocol.cookies])
    # the first clips on letters; the second is the human model's typical person
    ratios = np.array([[0.3, 1.5], [0.25, 0.79]])
    pilot = Pilot(tmp_path / "pilot.sqlite", "0" * 64, ratios * references,
                  np.array([[0.84, 0.17], [0.84, 0.17]]), ("2025-06-15", "2025-06-15"))
    teams, why = pilot_live_teams(protocol, pilot, protocol.pool_spec().fea)
    assert (len(teams), why) == (placed, unplaced)


def test_a_pilot_s_live_teams_under_keep_are_those_under_continue(tmp_path: Path):
    """``keep`` forms a team on a clipped value exactly as ``continue`` does: the pilot
    person who clips is teamed, on 0.99."""
    from study.calibration.bounds import pilot_live_teams
    from study.calibration.pilot import Pilot

    formed = {}
    for consequence in ("continue", "keep"):
        protocol = load_protocol(study2_with(tmp_path, consequence))
        references = np.array([cookie.reference_speed for cookie in protocol.cookies])
        pilot = Pilot(tmp_path / "pilot.sqlite", "0" * 64,
                      np.array([[0.26, 1.5]]) * references, np.array([[0.84, 0.17]]),
                      ("2025-06-15", "2025-06-15"))
        teams, why = pilot_live_teams(protocol, pilot, protocol.pool_spec().fea)
        formed[consequence] = ([team.c.tolist() for team in teams], why)
    assert formed["keep"] == formed["continue"]
    (team,), why = formed["keep"]
    assert why == {} and [0.26, 0.99] in team


@pytest.mark.parametrize(("consequence", "follows"), [
    ("unmatched", "the unmatched page once practice ends, before a team is formed"),
    ("continue", "the participant continues; the analysis leaves them out "
                 "(clipped-capability)")])
def test_study_check_says_what_follows_a_clipped_capability(tmp_path: Path, capsys,
                                                            consequence: str, follows: str):
    from study.cli import main

    assert main(["check", str(study2_with(tmp_path, consequence))]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines()
                if line.strip().startswith("clipped "))
    assert line.endswith(f"a capability at 0.01 or 0.99 is not a measurement: {follows}")
