"""Round probes in the analysis: answers planted from a known response model (a person's
intercept, plus a slope on their share of rounds so far on their most preferred type, plus
noise, rounded to the scale, some missed) are recovered by the mixed model; the report's
means by round are SQL over the table; the end-of-session items beside the probes are
Spearman's rho of the same sessions; a database without the table gives no section."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from support.analysis import add_participant, add_probes, make_database, read_report, table
from support.once import built_once
from support.protocols import PROBES

from analysis import cli, load, models, probes, report
from study.storage.database import Storage

PEOPLE = 40
INTERCEPT, SLOPE, NOISE, PERSON_SD, MISSED = 2.5, 2.5, 0.7, 0.4, 0.1
PROTOCOL = Path("protocols/study1.toml")


def planted(root: Path) -> Path:
    """``PEOPLE`` participants over two conditions in both orders, a probe after every round
    answered from the response model, and the protocol's snapshot with its probe."""
    path = root / "study.sqlite"
    storage = Storage(path)
    rng = np.random.default_rng(7)
    for seed in range(PEOPLE):
        order = ("efficient", "fair") if seed % 2 else ("fair", "efficient")
        pid = add_participant(storage, f"code{seed}", seed, conditions=order)
        own = INTERCEPT + rng.normal(0, PERSON_SD)

        def respond(share: float, own: float = own) -> int | None:
            if rng.random() < MISSED:
                return None
            return int(np.clip(np.rint(own + SLOPE * share + rng.normal(0, NOISE)), 1, 7))

        add_probes(storage, pid, respond)
    storage.db["server_runs"].insert({
        "started_at": 1.0, "protocol": "study1", "protocol_sha256": "probes",
        "protocol_text": PROTOCOL.read_text(encoding="utf-8") + PROBES})
    storage.close()
    return path


def run_report(root: Path) -> None:
    assert cli.main(["report", str(planted(root)), "--out", str(root / "out")]) == 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = built_once(tmp_path_factory, "probes", run_report)
    return root / "study.sqlite", root / "out"


@pytest.fixture(scope="module")
def answered(built):
    study = report.prepare([load.load(built[0])])
    return probes.answers(probes.read(study.analysed.metadata), study.analysed)


def query(database: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


@pytest.mark.minutes(1)
def test_the_planted_slope_is_recovered_within_its_interval(answered):
    fitted = probes.fit(answered).set_index("term")
    share = fitted.loc["preferred_share"]
    assert share["ci_low"] <= SLOPE <= share["ci_high"]
    assert share["ci_low"] > 0 and share["p_holm"] < 0.05
    assert share["participants"] == PEOPLE and not share["warning"]
    # no condition effect was planted: its interval covers 0
    contrast = fitted.loc["fair - efficient"]
    assert contrast["ci_low"] <= 0 <= contrast["ci_high"]


def test_the_scale_comes_from_the_protocol_snapshot(built):
    (text,), = query(built[0], "SELECT protocol_text FROM server_runs")
    declared = probes.declared({"study1": text})
    assert declared["fair_round"].points == 7
    assert declared["fair_round"].text.startswith("How fair was")
    assert probes.declared({"study1": PROTOCOL.read_text(encoding="utf-8")}) == {}


def test_the_running_measures_follow_the_kits(answered):
    first = answered[answered["round"] == 1]
    assert (first["preferred_share"] == first["last_preferred"]).all()
    assert first["F_recent"].to_numpy() == pytest.approx(first["F"].to_numpy())
    eight = answered[answered["round"] == 8]
    assert eight["preferred_share"].between(0, 1).all()
    assert set(answered["last_capable"]) <= {0, 1}


def test_means_by_round_equal_sql_over_the_table(built):
    database, out = built
    means = table(read_report(out)[0], "Probe answers by round and condition")
    expected = {(condition, number): (asked, answered, missed, mean)
                for condition, number, asked, answered, missed, mean in query(database, """
        SELECT s.condition, p.round_number, COUNT(*), COUNT(p.value), SUM(p.missed),
               AVG(p.value)
        FROM probes p JOIN sessions s ON s.id = p.session_id
        WHERE p.probe = 'fair_round' GROUP BY s.condition, p.round_number""")}
    assert len(means) == len(expected) == 16
    for row in means.itertuples():
        asked, answered, missed, mean = expected[(row.condition, int(row.round))]
        assert (int(row.asked), int(row.answered), int(row.missed)) == (asked, answered,
                                                                         missed)
        assert float(row.mean) == pytest.approx(mean, abs=6e-4)
    assert sum(int(x) for x in means["missed"]) > 0


def test_end_of_session_items_are_set_beside_the_last_and_mean_probe(built):
    database, out = built
    rows = table(read_report(out)[0], "End-of-session items beside the probes")
    row = rows[(rows["item"] == "fair_overall") & (rows["condition"] == "fair")].iloc[0]
    pairs = pd.DataFrame(query(database, """
        SELECT a.value_number,
               (SELECT value FROM probes q WHERE q.session_id = s.id AND q.value IS NOT NULL
                ORDER BY q.round_number DESC LIMIT 1),
               (SELECT AVG(value) FROM probes q WHERE q.session_id = s.id)
        FROM sessions s JOIN answers a ON a.session_id = s.id
        WHERE s.condition = 'fair' AND a.item = 'fair_overall'"""),
        columns=["item", "last", "mean"])
    assert int(row["sessions"]) == len(pairs) == PEOPLE
    for kind in ("last", "mean"):
        rho = stats.spearmanr(pairs["item"], pairs[kind]).statistic
        assert float(row[f"rho_{kind}"]) == pytest.approx(rho, abs=5e-4)


def test_the_report_has_the_section_and_its_figure(built):
    _, out = built
    _, page = read_report(out)
    assert "<h2>Round probes</h2>" in page
    assert 'alt="fair_round: How fair was' in page
    assert (out / "figures" / "probe_fair_round.png").stat().st_size > 10_000
    assert (out / "figures" / "probe_fair_round.svg").is_file()


def test_too_few_participants_get_the_notice_and_no_p_value(answered):
    few = answered[answered["participant_id"].isin(
        sorted(answered["participant_id"].unique())[:6])]
    fitted = probes.fit(few)
    assert fitted["warning"].str.startswith("Only 6 participants answered the probe").all()
    assert fitted["p_value"].isna().all() and fitted["p_holm"].isna().all()
    assert fitted["estimate"].notna().all()
    assert f"fewer than {models.MIN_PARTICIPANTS}" in fitted["warning"].iloc[0]


def test_a_database_without_the_table_gives_no_section_and_no_error(tmp_path):
    database = make_database(tmp_path / "study.sqlite")
    study = report.prepare([load.load(database)])
    assert probes.section(study.analysed, pd.DataFrame(), tmp_path, {}) is None  # none asked
    with sqlite3.connect(database) as connection:  # an older study's database
        connection.execute("DROP TABLE probes")
    study = report.prepare([load.load(database)])
    assert probes.read(study.data.metadata).empty
    assert probes.section(study.analysed, pd.DataFrame(), tmp_path, {}) is None
    assert cli.main(["report", str(database), "--out", str(tmp_path / "out")]) == 0
    _, page = read_report(tmp_path / "out")
    assert "Round probes" not in page
    assert not list((tmp_path / "out" / "figures").glob("probe_*"))


def test_pooled_databases_keep_their_probes_apart(tmp_path):
    paths = []
    for site in ("a", "b"):
        path = make_database(tmp_path / f"{site}.sqlite")
        storage = Storage(path)
        add_probes(storage, 1, lambda share: 4)
        storage.close()
        paths.append(path)
    study = report.prepare([load.load(path) for path in paths])
    read = probes.read(study.data.metadata)
    assert list(read.groupby("site").size()) == [16, 16]
    ids = set(study.data.sessions["session_id"])
    assert set(read["session_id"]) <= ids and read["session_id"].nunique() == 4
