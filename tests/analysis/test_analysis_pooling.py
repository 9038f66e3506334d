"""Several databases pooled with the site as a factor; different protocols refused with the
reason; the declared rules read from a protocol; stop points of the bots."""

import sqlite3

import pandas as pd
import pytest
from support.analysis import make_database

from analysis import cli, design, load, models, pooling, report, sessions
from study.allocation.model import InvalidInput
from study.bots.participant import stop_point_reached
from study.commands.bot import stop_points_from
from study.storage.database import Storage


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory):
    root = tmp_path_factory.mktemp("sites")
    return make_database(root / "north.sqlite"), make_database(root / "south.sqlite")


def test_same_protocol_is_pooled_with_the_site_as_a_factor(two_sites):
    datasets = [load.load(path) for path in two_sites]
    pooled = pooling.combine(datasets, pooling.site_names(two_sites))
    assert len(pooled.participants) == 8
    assert set(pooled.participants["site"]) == {"north", "south"}
    assert pooled.sessions["session_id"].is_unique
    assert pooled.rounds["round_id"].is_unique
    outcomes = sessions.session_outcomes(pooled)
    assert len(outcomes) == 16 and set(outcomes["site"]) == {"north", "south"}
    north = sessions.session_outcomes(datasets[0])
    assert outcomes.loc[outcomes["site"] == "north", "cookies_team"].sum() == north[
        "cookies_team"].sum()
    fitted = models.mixed_model(outcomes.assign(cookies_team=outcomes["cookies_team"]
                                                + (outcomes["site"] == "south") * 100.0),
                                "cookies_team")
    # a site shift of 100 cookies is absorbed by the site factor, not the condition effect
    alone = models.mixed_model(outcomes, "cookies_team")
    assert fitted["estimate"].iloc[0] == pytest.approx(alone["estimate"].iloc[0], abs=1e-6)


def test_report_of_two_databases_counts_both(two_sites, tmp_path):
    assert cli.main(["report", *map(str, two_sites), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    assert "16 collaborative sessions analysed" in page


def test_different_protocols_are_refused_with_the_reason(two_sites, tmp_path):
    other = tmp_path / "other.sqlite"
    make_database(other)
    with sqlite3.connect(other) as connection:
        connection.execute("UPDATE participants SET protocol = 'study2'")
    with pytest.raises(InvalidInput, match=r"different protocols.*study1.*study2"):
        report.prepare([load.load(two_sites[0]), load.load(other)])
    assert cli.main(["report", str(two_sites[0]), str(other), "--out", str(tmp_path)]) == 2


def test_same_name_but_different_protocol_text_names_the_sections(two_sites, tmp_path):
    texts = ['[study]\nname = "study1"\nkits = [8, 8]\n',
             '[study]\nname = "study1"\nkits = [4, 4]\n']
    paths = []
    for k, text in enumerate(texts):
        path = make_database(tmp_path / f"site{k}.sqlite")
        storage = Storage(path)
        storage.db["server_runs"].insert({"started_at": 1.0, "protocol": "study1",
                                          "protocol_sha256": str(k), "protocol_text": text})
        storage.close()
        paths.append(path)
    reason = pooling.protocol_mismatch([load.load(p) for p in paths], ["site0", "site1"])
    assert reason and "section(s) study" in reason


def test_rules_from_the_protocol_and_defaults(tmp_path):
    shipped = design.study_design({}, design.Path("protocols/demo.toml"))
    # the demo declares clipped_capability = "keep": the analysis keeps them
    assert shipped.rules.exclude == ("aborted", "recovered-capability")
    assert shipped.manipulation_check is not None and shipped.rounds_per_session == 2
    bare = design.design_from_text('[study]\nname = "x"\nkits = [8, 8]\n', "text")
    assert bare.rules.exclude == (*design.DEFAULT_EXCLUDE, "clipped-capability")
    assert bare.rounds_per_session == 8
    assert "no [analysis] section" in bare.rules.describe()
    assert 'clipped_capability = "continue"' in bare.rules.describe()
    unmatched = design.design_from_text(
        '[study]\nname = "x"\nkits = [8, 8]\nclipped_capability = "unmatched"\n', "text")
    assert unmatched.rules == design.AnalysisRules(), "nobody clipped has a session"
    with pytest.raises(InvalidInput, match="choose from"):
        design.rules_from_table({"exclude": ["sleepy"]})
    item = design.Item("check", "Check", "likert", points=7)
    assert design.manipulation_passed(item, [7, 4, None]) == [True, False, None]
    choice = design.Item("check", "Check", "choice", ("Yes", "No"))
    assert design.manipulation_passed(choice, ["Yes", "No"], ("No",)) == [False, True]


def test_the_report_says_how_the_agent_teammate_was_presented():
    said = {name: design.study_design({}, design.Path(f"protocols/{name}.toml"))
            for name in ("demo", "study1", "teams2")}
    assert said["demo"].teammate_presentation().startswith(
        "The pages said the teammate was a computer agent")
    assert "as a person until the debrief" in said["study1"].teammate_presentation()
    assert said["teams2"].agent_teammate is None  # its team pages name every seat
    assert said["teams2"].teammate_presentation() == ""
    older = design.design_from_text('[study]\nname = "x"\nkits = [8, 8]\n', "text")
    assert "predates agent_teammate" in older.teammate_presentation()


def test_stop_points_of_the_bots():
    round_state = {"running": False, "next": 3, "of": 4}
    assert stop_point_reached("session-2", {"step": "session-2"})
    assert not stop_point_reached("session-2", {"step": "session-1"})
    assert stop_point_reached("session-1:2", {"step": "session-1", "round": round_state})
    assert not stop_point_reached("session-1:3", {"step": "session-1", "round": round_state})
    assert not stop_point_reached("session-1:2", {"step": "session-1", "round": {
        **round_state, "running": True}})
    assert not stop_point_reached(None, {"step": "consent"})
    assert stop_points_from("end,session-2,practice:2") == [None, "session-2", "practice:2"]
    with pytest.raises(InvalidInput):
        stop_points_from("session-1:x")


def test_flow_places_withdrawn_and_declined_participants(two_sites):
    stages = report.flow.participant_stages(two_sites[0]).set_index("code")
    assert stages.loc["gone", "outcome"] == "withdrawn"
    assert stages.loc["nope", "outcome"] == "declined"
    assert stages.loc["nope", "stage"] == "opened"
    table = report.flow.flow_table(stages.reset_index())
    assert int(table.set_index("stage").loc["links created", "reached"]) == 6
    assert isinstance(table, pd.DataFrame)
