"""Participants with a clipped capability in the report, as the protocol's
``clipped_capability`` declares (MODEL.md, "Measuring a participant"): under ``"keep"``
they stay in the analysis set and every confirmatory result is given again without them;
under ``"continue"`` the rule clipped-capability leaves them out (analysis/report.py,
docs/analysis.md). One database, written row by row, is reported under each protocol."""

import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from support.analysis import Tables, add_participant, read_report, table
from support.once import built_once
from support.web import DEMO

from analysis import cli
from analysis.design import CLIPPED_RULE
from study.protocol.loader import load_protocol
from study.storage.database import Storage

PEOPLE = 8
CLIPPED = ("code2", "code5")  # their letters capability measured at the upper clip bound
WITHOUT = f"without the {len(CLIPPED)} participants with a clipped capability"
CONFIRMATORY = ("Mixed models", "Ordinal models per item", "Within-participant comparisons")


def protocol_copy(directory: Path, consequence: str) -> Path:
    """The demo protocol with ``[study] clipped_capability = consequence``."""
    text, found = re.subn(r"(?m)^clipped_capability = .*$",
                          f'clipped_capability = "{consequence}"', DEMO.read_text())
    assert found == 1
    path = directory / f"demo-{consequence}.toml"
    path.write_text(text)
    assert load_protocol(path).clipped_capability == consequence
    return path


def write_study(path: Path, clipped: tuple[str, ...]) -> Path:
    """``PEOPLE`` participants who finished both sessions; those in ``clipped`` measured at
    0.99 on letters, flagged as the server flags a clipped value."""
    storage = Storage(path)
    for seed in range(PEOPLE):
        add_participant(storage, f"code{seed}", seed)
    storage.close()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE measurements SET clipped = 0 WHERE kind = 'capability'")
        connection.executemany(
            "UPDATE measurements SET value = 0.99, clipped = 1 WHERE kind = 'capability' "
            "AND task_type = 1 AND participant_id = (SELECT id FROM participants "
            "WHERE code = ?)", [(code,) for code in clipped])
    return path


def report(database: Path, protocol: Path, out: Path) -> tuple[Tables, str]:
    assert cli.main(["report", str(database), "--protocol", str(protocol),
                     "--out", str(out)]) == 0
    return read_report(out)


def run_both(root: Path) -> None:
    """The study with two clipped participants, reported under keep and under continue."""
    database = write_study(root / "study.sqlite", CLIPPED)
    for consequence in ("keep", "continue"):
        report(database, protocol_copy(root, consequence), root / consequence)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple[Tables, str]]:
    root = built_once(tmp_path_factory, "clipped-reports", run_both)
    return {consequence: read_report(root / consequence) for consequence in ("keep", "continue")}


def analysed(tables: Tables) -> set[str]:
    return set(table(tables, "Participants and their measured coefficients")["code"])


def excluded_by_clipped(tables: Tables) -> tuple[str, int, int]:
    row = table(tables, "Exclusions").set_index("rule").loc[CLIPPED_RULE]
    return row["applied"], int(row["matched"]), int(row["removed"])


@pytest.mark.minutes(0.25)
def test_keep_analyses_the_clipped_and_gives_every_confirmatory_result_without_them(reports):
    tables, page = reports["keep"]
    assert analysed(tables) == {f"code{seed}" for seed in range(PEOPLE)}
    assert excluded_by_clipped(tables) == ("False", len(CLIPPED), 0)
    followed = table(tables, "Clipped capabilities and what followed").iloc[0]
    assert (followed["clipped_capability"], followed["continued_kept_in_the_analysis"],
            followed["continued_left_out_of_the_analysis"]) == ("keep", "2", "0")
    assert f"<h2>W{WITHOUT[1:]}</h2>" in page
    assert (f"{len(CLIPPED)} of the {PEOPLE} analysed participants had a capability "
            "clipped") in page
    assert f"over the {PEOPLE - len(CLIPPED)} analysed participants without them" in page
    for caption in CONFIRMATORY:
        primary, without = table(tables, caption), table(tables, f"{caption} {WITHOUT}")
        assert list(without.columns) == list(primary.columns)
        assert len(without) == len(primary) > 0
    mixed = table(tables, "Mixed models")
    fewer = table(tables, f"Mixed models {WITHOUT}")
    counts = zip(mixed["participants"], fewer["participants"], strict=True)
    assert {(int(every), int(some)) for every, some in counts} == {
        (PEOPLE, PEOPLE - len(CLIPPED))}
    assert list(mixed["estimate"]) != list(fewer["estimate"]), "fitted again without them"


def test_continue_leaves_the_clipped_out_and_gives_nothing_without_them(reports):
    tables, page = reports["continue"]
    assert analysed(tables) == {f"code{seed}" for seed in range(PEOPLE)} - set(CLIPPED)
    assert excluded_by_clipped(tables) == ("True", len(CLIPPED), len(CLIPPED))
    assert "participants with a clipped capability</h2>" not in page
    assert not [caption for caption in tables.tables if caption.endswith(WITHOUT)]


def test_keep_without_a_clipped_participant_says_so_in_one_line(tmp_path):
    database = write_study(tmp_path / "study.sqlite", ())
    tables, page = report(database, protocol_copy(tmp_path, "keep"), tmp_path / "out")
    assert "No analysed participant has a capability clipped at 0.01 or 0.99" in page
    assert not [caption for caption in tables.tables if "clipped capability" in caption
                and caption != "Clipped capabilities and what followed"]


def test_a_round_flagged_as_no_persons_counts_as_clipped_whatever_its_value():
    """A practice round the server took for no person's decorating (finished cookies with
    no element report, or quicker than the quickest plausible person) keeps a value that may
    lie inside the scale; the analysis treats it as a clipped capability all the same."""
    from analysis.flow import clipped_ids

    practice = pd.DataFrame({
        "participant_id": [1, 2, 3, 4], "measured": [1, 1, 1, 0],
        "capability": [0.5, 0.99, 0.5, None],
        "implausible": [None, None, "no-element-reports", None]})
    assert clipped_ids(practice) == {2, 3}
    assert clipped_ids(practice.drop(columns="implausible")) == {2}, "an older database"
