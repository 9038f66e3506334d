"""The teams under study in the report: live team types, target attainment in the flow,
the teammate rule's counts, the exclusion ``not-target-team`` and the sensitivity of the
main contrasts to the participants whose Eq. 6 nearest member was passed over.

Simulated participants (the bots' page answers and decorator pace) go through the real
journey in-process on a copy of the demo protocol whose target team is Mixed with the
participant as its most capable human: people whose preference runs with their capability
cannot be that human, so with ``unplaced = "continue"`` some are placed off target and with
``unplaced = "unmatched"`` they meet the unmatched page. Every count of the report is
checked against SQL on the database the journey wrote."""

import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from support.analysis import Tables, make_database, read_report, run_study, table
from support.once import built_once
from support.web import DEMO

from analysis import cli, teams

# (capabilities, preferences) per participant: preferences against capabilities can make
# the most capable human of a Mixed team, preferences with them cannot (off target); the
# third and fourth have nearer members passed over because their live team missed the
# target, several because both robots would have followed one plan. The bots report the
# cookie in progress at the deadline, so they measure near their capabilities: every
# capability here measures between the clip bounds, so nobody meets clipped-capability.
PROFILES = (((0.3, 0.7), (0.9, 0.1)), ((0.3, 0.7), (0.1, 0.9)), ((0.45, 0.3), (0.17, 0.99)),
            ((0.45, 0.3), (0.66, 0.83)), ((0.8, 0.3), (0.9, 0.1)), ((0.5, 0.6), (0.7, 0.3)),
            ((0.3, 0.8), (0.6, 0.5)), ((0.6, 0.4), (0.2, 0.8)), ((0.25, 0.45), (0.8, 0.2)),
            ((0.55, 0.35), (0.2, 0.8)))
TARGET = """[pool.teammate]
team_types = ["mixed"]
role = "most-capable"
rule = "typed"
unplaced = "{unplaced}"
"""
SENSITIVITY = "Main contrasts with and without participants whose nearest member was passed over"


def protocol_copy(directory: Path, unplaced: str, exclude: list[str]) -> Path:
    """The demo protocol with the Mixed, most-capable target team and the given rules."""
    text = re.sub(r"(?ms)^\[pool\.teammate\]\n.*\Z", TARGET.format(unplaced=unplaced),
                  DEMO.read_text())
    text = re.sub(r"(?m)^exclude = .*$", "exclude = [" + ", ".join(
        f'"{rule}"' for rule in exclude) + "]", text)
    assert f'unplaced = "{unplaced}"' in text and f'"{exclude[-1]}"]' in text
    path = directory / f"teams-{unplaced}-{len(exclude)}.toml"
    path.write_text(text)
    return path


def report(database: Path, out: Path, protocol: Path | None = None) -> tuple[Tables, str]:
    extra = ["--protocol", str(protocol)] if protocol else []
    assert cli.main(["report", str(database), "--out", str(out), *extra]) == 0
    return read_report(out)


def query(database: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


def count(database: Path, sql: str) -> int:
    return int(query(database, sql)[0][0])


def run_off_target(root: Path) -> None:
    """A study that lets the unplaced continue, its report with every participant and its
    report under ``exclude = ["aborted", "not-target-team"]`` (the protocol's own)."""
    database = run_study(root, PROFILES,
                         protocol_copy(root, "continue", ["aborted", "not-target-team"]))
    report(database, root / "everyone", protocol_copy(root, "continue", ["aborted"]))
    report(database, root / "excluded")


@pytest.fixture(scope="module")
def off_target(tmp_path_factory):
    root = built_once(tmp_path_factory, "teams-off-target", run_off_target)
    return (root / "study.sqlite", root, read_report(root / "everyone"),
            read_report(root / "excluded"))


def run_unmatched(root: Path) -> None:
    """A study that sends the unplaced to the unmatched page, and its report."""
    report(run_study(root, PROFILES, protocol_copy(root, "unmatched", ["aborted"])), root / "out")


@pytest.fixture(scope="module")
def unmatched(tmp_path_factory):
    root = built_once(tmp_path_factory, "teams-unmatched", run_unmatched)
    return root / "study.sqlite", read_report(root / "out")


@pytest.mark.minutes(0.35)
def test_the_study_places_people_in_and_off_the_target_team(off_target):
    database = off_target[0]
    assert count(database, "SELECT COUNT(*) FROM participants WHERE step = 'done'") == len(
        PROFILES)
    assert count(database, "SELECT COUNT(*) FROM teammates WHERE target_met = 1") > 0
    assert count(database, "SELECT COUNT(*) FROM teammates WHERE target_met = 0") > 0
    assert count(database, "SELECT COUNT(*) FROM teammates WHERE passed_same_plan > 0") > 0
    assert count(database, "SELECT COUNT(*) FROM teammates WHERE passed_off_target > 0") > 0


def test_flow_shows_target_attainment(off_target):
    database, _, (tables, _), _ = off_target
    flow = table(tables, "Participant flow").set_index("stage")
    met = count(database, "SELECT COUNT(*) FROM teammates WHERE target_met = 1")
    missed = count(database, "SELECT COUNT(*) FROM teammates WHERE target_met = 0")
    for stage in ("links created", "practised", "done"):
        assert int(flow.loc[stage, "placed in target team"]) == met
        assert int(flow.loc[stage, "placed off target"]) == missed
    attained = table(tables, "Target attainment").set_index("placement")["participants"]
    assert attained.astype(int).to_dict() == {
        "placed in target team": met, "placed off target": missed, teams.UNMATCHED: 0}


def test_live_types_table_and_figure(off_target):
    database, root, (tables, page), _ = off_target
    types = table(tables, "Live team types")
    assert len(types) == 8  # every type and role, zeros included
    stored = {(kind, role): (n, met) for kind, role, n, met in query(
        database, "SELECT live_type, participant_role, COUNT(*), SUM(target_met) "
                  "FROM teammates GROUP BY live_type, participant_role")}
    for row in types.itertuples():
        n, met = stored.get((row.live_type, row.participant_role), (0, 0))
        assert (int(row.participants), int(row.target_met)) == (n, met)
        assert float(row.share) == pytest.approx(n / len(PROFILES), abs=5e-4)
    assert {"mixed", "twins"} <= {kind for kind, _ in stored}
    assert (root / "everyone" / "figures" / "live_types.svg").is_file()
    assert 'alt="Live team types"' in page


def test_teammate_rule_counts(off_target):
    database, _, (tables, _), _ = off_target
    rules = table(tables, "Teammate rule").set_index("participants")
    assert list(rules.index) == ["placed", "analysed"]
    placed = rules.loc["placed"]
    assert placed["rule"] == "typed" and int(placed["n"]) == len(PROFILES)

    def how_many(where: str) -> int:
        return count(database, f"SELECT COUNT(*) FROM teammates WHERE {where}")

    assert int(placed["given_nearest"]) == how_many("passed_over = 0")
    assert int(placed["with_members_passed_over"]) == how_many("passed_over > 0")
    assert int(placed["passed_for_same_plan"]) == how_many("passed_same_plan > 0")
    assert int(placed["passed_off_target"]) == how_many("passed_off_target > 0")
    assert int(placed["members_passed_over"]) == count(
        database, "SELECT SUM(passed_over) FROM teammates")
    chosen, nearest = query(database, "SELECT AVG(distance), AVG(nearest_distance) "
                                      "FROM teammates")[0]
    assert float(placed["mean_d_chosen"]) == pytest.approx(chosen, abs=5e-4)
    assert float(placed["mean_d_nearest"]) == pytest.approx(nearest, abs=5e-4)
    assert chosen > nearest  # members were passed over, so the chosen are farther


def test_not_target_team_exclusion(off_target):
    database, _, (everyone, _), (tables, _) = off_target
    missed = count(database, "SELECT COUNT(*) FROM teammates WHERE target_met = 0")
    exclusions = table(tables, "Exclusions").set_index("rule")
    assert exclusions.loc["not-target-team", "applied"] == "True"
    assert int(exclusions.loc["not-target-team", "matched"]) == missed
    assert int(exclusions.loc["not-target-team", "removed"]) == missed
    assert table(everyone, "Exclusions").set_index("rule").loc[
        "not-target-team", "applied"] == "False"
    types = table(tables, "Live team types")
    assert (types["participants"] == types["target_met"]).all()
    assert types["participants"].astype(int).sum() == len(PROFILES) - missed
    analysed = table(tables, "Teammate rule").set_index("participants").loc["analysed"]
    assert int(analysed["n"]) == len(PROFILES) - missed


def paired_difference(database: Path, source: str, without: bool) -> tuple:
    """Participants and mean fair - efficient difference of ``source``'s ``v`` over the
    analysed participants (those on target), by SQL; ``without``: leaving out those whose
    nearest member was passed over."""
    skip = "AND t.passed_over = 0" if without else ""
    return query(database, f"""
        WITH v AS ({source}),
             d AS (SELECT f.participant_id, f.v - e.v AS diff FROM v f JOIN v e
                   ON e.participant_id = f.participant_id AND f.condition = 'fair'
                   AND e.condition = 'efficient')
        SELECT COUNT(*), AVG(diff) FROM d JOIN teammates t USING (participant_id)
        WHERE t.target_met = 1 {skip}""")[0]


def test_sensitivity_table_against_sql(off_target):
    database, _, _, (tables, _) = off_target
    contrasts = table(tables, SENSITIVITY)
    assert set(contrasts["contrast"]) == {"fair - efficient"}
    rows = contrasts.set_index("outcome")
    cookies = ("SELECT s.participant_id, s.condition, SUM(r.participant_cookies + "
               "r.teammate_cookies) AS v FROM rounds r JOIN sessions s ON s.id = r.session_id "
               "WHERE s.kind = 'collaborative' GROUP BY s.id")
    checked = {"team cookies": cookies}
    for item, label in query(database, "SELECT DISTINCT item, label FROM answers "
                                       "WHERE questionnaire LIKE 'session-%' "
                                       "AND value_number IS NOT NULL"):
        checked[f"rating: {label}"] = ("SELECT participant_id, condition, value_number AS v "
                                       f"FROM answers WHERE item = '{item}'")
    assert len(checked) > 1
    for outcome, source in checked.items():
        row = rows.loc[outcome]
        n_all, every = paired_difference(database, source, without=False)
        n_without, without = paired_difference(database, source, without=True)
        assert (int(row["participants_all"]), int(row["participants_without_passed_over"])
                ) == (n_all, n_without)
        assert float(row["difference_all"]) == pytest.approx(every, abs=5e-4)
        assert float(row["difference_without_passed_over"]) == pytest.approx(without,
                                                                             abs=5e-4)
        assert float(row["change"]) == pytest.approx(without - every, abs=5e-4)
    assert (contrasts["participants_without_passed_over"].astype(int)
            < contrasts["participants_all"].astype(int)).all()


def test_unmatched_participants_in_the_flow(unmatched):
    database, (tables, _) = unmatched
    stranded = count(database, "SELECT COUNT(*) FROM participants WHERE step = 'unmatched'")
    assert stranded > 0
    assert count(database, "SELECT COUNT(*) FROM teammates t JOIN participants p "
                           "ON p.id = t.participant_id WHERE p.step = 'unmatched'") == 0
    flow = table(tables, "Participant flow").set_index("stage")
    assert int(flow.loc["practised", "unmatched"]) == stranded
    assert int(flow.loc["practised", "placed off target"]) == 0
    assert int(flow.loc["practised", "placed in target team"]) == len(PROFILES) - stranded
    attained = table(tables, "Target attainment").set_index("placement")["participants"]
    assert int(attained[teams.UNMATCHED]) == stranded


def test_contrasts_on_a_constructed_example():
    outcomes = pd.DataFrame({"participant_id": [1, 1, 2, 2, 3, 3],
                             "condition": ["a", "b"] * 3,
                             "cookies_team": [10, 14, 8, 9, 5, 5]})
    ratings = pd.DataFrame({"participant_id": [1, 1, 2, 2, 3], "condition": ["a", "b", "a",
                                                                             "b", "a"],
                            "item": "x", "label": "X", "value": [2, 7, 3, 4, 6]})
    teammates = pd.DataFrame({"participant_id": [1, 2, 3], "distance": 0.1,
                              **{name: 0 for name in teams.PLACEMENT},
                              "live_type": "mixed"}).assign(passed_over=[2, 0, 0])
    table = teams.sensitivity(outcomes, ratings, [("cookies_team", "team cookies")],
                              teammates).set_index("outcome")
    assert table.loc["team cookies", "difference_all"] == pytest.approx((4 + 1 + 0) / 3)
    assert table.loc["team cookies", "difference_without_passed_over"] == pytest.approx(0.5)
    assert table.loc["rating: X", "participants_all"] == 2  # participant 3 rated a only
    assert table.loc["rating: X", "difference_all"] == pytest.approx(3.0)
    assert table.loc["rating: X", "difference_without_passed_over"] == pytest.approx(1.0)
    assert table.loc["rating: X", "change"] == pytest.approx(-2.0)


def test_a_database_from_before_the_record_still_reports(tmp_path):
    database = make_database(tmp_path / "old.sqlite")
    with sqlite3.connect(database) as connection:
        for column in ("rule", "nearest_team", "nearest_human", "nearest_distance",
                       "passed_over", "passed_same_plan", "passed_off_target", "live_type",
                       "participant_role", "target_met"):
            connection.execute(f"ALTER TABLE teammates DROP COLUMN {column}")
    tables, page = report(database, tmp_path / "out")
    assert "The database predates the record of the team under study" in page
    assert "Live team types" not in tables.tables
    flow = table(tables, "Participant flow")
    assert "placed off target" not in flow.columns and "unmatched" in flow.columns
    assert "Questionnaires" in page
