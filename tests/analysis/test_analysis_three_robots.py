"""End to end for a study of three robots: simulated participants (the bots' answers and
decorating pace) through the real journey in-process, one of them leaving in the third
session; then the report, its flow, models, rankings and plan checked against the
database and against statsmodels' Holm adjustment."""

from __future__ import annotations

import itertools
import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from statsmodels.stats.multitest import multipletests
from support.analysis import InProcessBot, Tables, read_report, table
from support.once import built_once
from support.protocols import THREE
from support.web import FakeClock, make_app, small_pool

from analysis import cli
from study.bots import AckLog, Bot, StudyFacts, profile_for
from study.protocol.loader import load_protocol

FINISHING = 12  # two participants in each of the six orders
ROBOTS = ("efficient", "fair", "fea")


def run_three_robots(root: Path) -> None:
    """The study in-process, its database and its report in ``root``."""
    clock = FakeClock()
    pool = small_pool(root / "pools", teammate={"unplaced": "continue"})
    app = make_app(root, pool, clock, protocol=THREE)
    journey = app.extensions["study"]
    facts = StudyFacts.from_protocol(load_protocol(THREE))
    finals = []
    for index, stop in enumerate([None] * FINISHING + ["session-3:1"]):
        code = journey.enrol()["code"]
        profile = replace(profile_for(index, "fast", seed=11), stop_at=stop)
        bot = Bot("http://in-process", code, profile, AckLog(), facts=facts)
        finals.append(InProcessBot(journey, clock, code, bot).run())
    journey.storage.close()
    assert finals == ["done"] * FINISHING + ["session-3"]
    database = root / "study.sqlite"
    out = root / "out"
    assert cli.main(["report", str(database), "--pool", pool.name, "--out", str(out),
                     "--sweep-teams", "2000", "--order-sample", "10"]) == 0


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = built_once(tmp_path_factory, "three-robots", run_three_robots)
    return root / "study.sqlite", read_report(root / "out")[0], root / "out"


def query(database: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


def analysed(tables: Tables) -> str:
    """The analysis set's participant codes, as an SQL list (the report's participants
    table: the protocol's exclusions decide who is in it)."""
    codes = table(tables, "Participants and their measured coefficients")["code"]
    return ", ".join(f"'{code}'" for code in codes)


@pytest.mark.minutes(0.8)
def test_the_flow_has_a_stage_per_session(study):
    database, tables, _ = study
    flow = table(tables, "Participant flow").set_index("stage")
    assert list(flow.index) == ["links created", "opened", "consented", "practised",
                                "session 1", "session 2", "session 3", "done"]
    for number in (1, 2, 3):
        (reached,), = query(database, "SELECT count(DISTINCT participant_id) FROM steps "
                                      f"WHERE step = 'session-{number}'")
        assert int(flow.loc[f"session {number}", "reached"]) == reached
    assert int(flow.loc["done", "reached"]) == FINISHING
    assert int(flow.loc["session 3", "left"]) == 1


def test_every_outcome_compares_every_pair_of_robots_with_holm(study):
    _, tables, out = study
    mixed = table(tables, "Mixed models")
    for outcome, part in mixed.groupby("outcome"):
        fitted = part[part["estimate"] != ""]
        if fitted.empty:
            continue
        assert sorted(fitted["term"]) == ["fair - efficient", "fea - efficient", "fea - fair"]
        p = fitted["p_value"].astype(float).to_numpy()
        assert fitted["p_holm"].astype(float).to_numpy() == pytest.approx(
            multipletests(p, method="holm")[1], abs=2e-3), outcome
        assert "condition: Wald chi2(2)" in fitted["note"].iloc[0]
    carry = table(tables, "Carry-over")
    assert carry["note"].str.contains("first-order carry-over").any()
    assert (out / "figures" / "contrasts.png").exists()


def test_the_rankings_equal_the_stored_orders(study):
    database, tables, out = study
    stored = query(database, "SELECT a.value_text FROM answers a JOIN participants p ON "
                             "p.id = a.participant_id WHERE a.item = 'next_time_rank' AND "
                             f"p.code IN ({analysed(tables)})")
    assert stored
    places = {robot: [] for robot in ROBOTS}
    for (text,) in stored:
        for place, robot in enumerate(text.split(","), 1):
            places[robot].append(place)
    ranked = table(tables, "Robots ranked").set_index("condition")
    for robot, seen in places.items():
        assert float(ranked.loc[robot, "mean_place"]) == pytest.approx(
            sum(seen) / len(seen), abs=1e-3)
        assert int(ranked.loc[robot, "first"]) == seen.count(1)
    assert (out / "figures" / "ranks.png").exists()


def test_every_two_robots_are_counted_from_the_ranks_and_the_pairwise_item(study):
    database, tables, out = study
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for (item, text) in query(database, "SELECT a.item, a.value_text FROM answers a JOIN "
                                        "participants p ON p.id = a.participant_id WHERE "
                                        "a.item IN ('next_time_rank', 'fairer') AND "
                                        f"p.code IN ({analysed(tables)})"):
        if item == "next_time_rank":
            order = text.split(",")
            for a, b in itertools.combinations(sorted(order), 2):
                counts[(item, a, b, a if order.index(a) < order.index(b) else b)] += 1
        else:
            for token in text.split(";"):
                tied = "=" in token
                first, second = token.split("=" if tied else ">")
                a, b = sorted((first, second))
                counts[(item, a, b, "=" if tied else first)] += 1
    pairs = table(tables, "Robots against each other (sign tests, Holm-adjusted)")
    assert len(pairs) == 6
    for row in pairs.itertuples():
        a, b = row.condition_a, row.condition_b
        assert int(row.a_above_b) == counts[(row.item, a, b, a)]
        assert int(row.b_above_a) == counts[(row.item, a, b, b)]
        assert int(row.ties) == counts[(row.item, a, b, "=")]
        assert int(row.participants) == counts[(row.item, a, b, a)] + counts[
            (row.item, a, b, b)] + counts[(row.item, a, b, "=")] > 0
    assert (out / "figures" / "robot_pairs.png").exists()


def test_the_plan_covers_every_pair(study):
    _, tables, _ = study
    needed = table(tables, "Participants needed")
    cookies = [o for o in needed["outcome"] if o.startswith("team cookies")]
    likert = [o for o in needed["outcome"] if o.startswith("Likert")]
    assert len(cookies) == 3 and all("Holm over 3 pairs" in o for o in cookies)
    assert {o.split(", ")[1] for o in likert} == {"fair - efficient", "fea - fair"}
    curves = table(tables, "Power curves")
    assert set(curves["outcome"]) == set(needed["outcome"])


def test_the_session_questionnaires_are_analysed_per_robot(study):
    database, tables, _ = study
    described = table(tables, "Likert items by condition")
    fair = described[described["item"] == "fair_overall"].set_index("condition")
    assert set(fair.index) == set(ROBOTS)
    for robot in ROBOTS:
        values = [v for (v,) in query(database, "SELECT a.value_number FROM answers a JOIN "
                                                "participants p ON p.id = a.participant_id "
                                                "WHERE a.item = 'fair_overall' AND "
                                                f"a.condition = '{robot}' AND "
                                                f"p.code IN ({analysed(tables)})")]
        assert float(fair.loc[robot, "mean"]) == pytest.approx(sum(values) / len(values),
                                                               abs=1e-3)
    compared = table(tables, "Within-participant comparisons")
    assert len(compared[compared["item"] == "fair_overall"]) == 3
    assert "p_holm" in compared.columns  # tested and adjusted from 10 pairs on
