"""Bonuses: the protocol's [bonus] over what participants did and met, written as the
platform's bulk bonus lines that nobody can forge, and recorded so nobody is paid twice."""

import csv
import io
import json
from pathlib import Path

import pytest
from support.teams import team_protocol

from study.cli import main
from study.exports.bonus import amount, bonuses, export_bonuses, lobby_amount
from study.exports.tables import FORMULA_STARTS, build_export, record_server_run
from study.protocol.schema import Bonus
from study.protocol.toml_source import ProtocolError
from study.storage.database import Storage

ROOT = Path(__file__).resolve().parents[2]
BONUS = "\n[bonus]\nper_cookie = 0.05\nper_team_cookie = 0.02\ncap = 1.00\ncurrency = \"GBP\"\n"
TEAM_BONUS = ("\n[bonus]\nper_cookie = 0.05\nper_team_cookie = 0.02\nper_lobby_minute = 0.10\n"
              "lobby_cap = 1.50\nunmatched = 0.40\nteammate_dropped = 0.25\ncap = 2.00\n")


def protocol_with_bonus(tmp_path: Path, table: str = BONUS) -> Path:
    path = tmp_path / "demo.toml"
    path.write_text((ROOT / "protocols" / "demo.toml").read_text() + table)
    return path


def participant(storage: Storage, code: str, step: str, recruitment_id: str | None,
                rounds: list[tuple[int, int]]) -> int:
    """A participant at ``step`` with one collaborative session of closed rounds of
    ``(own cookies, teammate cookies)``, and an open practice round that never counts."""
    pid = storage.insert("participants", {"code": code, "protocol": "demo", "created_at": 1.0,
                                          "step": step, "recruitment_id": recruitment_id})
    practice = storage.insert("sessions", {"participant_id": pid, "number": 0,
                                           "kind": "practice", "rounds": 4, "created_at": 1.0})
    storage.insert("rounds", {"session_id": practice, "participant_id": pid, "number": 1,
                              "task_type": 0, "started_at": 1.0, "deadline": 2.0,
                              "seconds": 1.0, "closed_at": 2.0, "participant_cookies": 9,
                              "teammate_cookies": 0})
    session = storage.insert("sessions", {"participant_id": pid, "number": 1,
                                          "kind": "collaborative", "rounds": len(rounds),
                                          "created_at": 1.0})
    for number, (own, teammate) in enumerate(rounds, 1):
        storage.insert("rounds", {"session_id": session, "participant_id": pid,
                                  "number": number, "task_type": 0, "started_at": 1.0,
                                  "deadline": 2.0, "seconds": 1.0, "closed_at": 2.0,
                                  "participant_cookies": own, "teammate_cookies": teammate})
    return pid


def waited(storage: Storage, pid: int, minutes: float, outcome: str = "team") -> None:
    """A wait in the lobby of ``minutes`` that ended with ``outcome``."""
    storage.insert("lobby", {"participant_id": pid, "entered_at": 100.0,
                             "left_at": 100.0 + minutes * 60, "outcome": outcome})


def teamed(storage: Storage, seats: list[tuple[int | None, float | None]]) -> None:
    """A team of people ``(participant id, dropped at)``."""
    team = storage.insert("teams", {
        "protocol": "demo-team", "humans": len(seats), "persons": len(seats),
        "formation": "arrival", "formed_at": 1.0, "formed_by": "arrival",
        "condition_order": "[]", "team_c": "[]", "team_p": "[]", "session": 1})
    for seat, (pid, dropped_at) in enumerate(seats):
        storage.insert("seats", {"team_id": team, "seat": seat, "kind": "person",
                                 "participant_id": pid, "joined_at": 1.0,
                                 "dropped_at": dropped_at,
                                 "drop_reason": "away" if dropped_at else None})


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    record_server_run(storage, protocol_with_bonus(tmp_path), "demo", None, 1.0)
    participant(storage, "done-1", "done", "PROLIFIC-A", [(3, 2), (4, 1)])  # 7 own, 10 team
    participant(storage, "done-2", "done", "PROLIFIC-B", [(20, 20)])  # over the cap
    participant(storage, "done-3", "done", None, [(1, 0)])  # no recruitment id
    participant(storage, "left-1", "session-1", "PROLIFIC-C", [(5, 5)])  # not finished
    participant(storage, "zero-1", "done", "PROLIFIC-D", [])  # finished, nothing earned
    storage.close()
    return path


def export(database: Path, out: Path, *extra: str) -> int:
    return main(["export", str(database), "--out", str(out), "--bonus", *extra])


def platform_rows(out: Path) -> list[list[str]]:
    """bonus.csv as a platform's CSV reader sees it."""
    return list(csv.reader(io.StringIO((out / "bonus.csv").read_bytes().decode(),
                                       newline="")))


def test_the_formula_is_capped_and_never_rounds_up():
    rule = Bonus(per_cookie=0.05, per_team_cookie=0.02, cap=1.0)
    assert amount(rule, 7, 10) == pytest.approx(0.55)
    assert amount(rule, 20, 40) == pytest.approx(1.0)
    assert amount(Bonus(per_cookie=0.333), 1, 0) == pytest.approx(0.33)
    waiting = Bonus(per_lobby_minute=0.15, lobby_cap=1.0)
    assert lobby_amount(waiting, 4.99) == pytest.approx(0.74)
    assert lobby_amount(waiting, 60) == pytest.approx(1.0)


def test_only_finished_participants_with_an_id_are_paid(database):
    result = bonuses(database)
    assert result.source.startswith("the database's protocol snapshot")
    assert list(result.table["code"]) == ["done-1", "done-2", "done-3", "zero-1"]
    assert set(result.table["reason"]) == {"performance"}
    assert result.platform_csv().decode().splitlines() == ["PROLIFIC-A,0.55", "PROLIFIC-B,1.00"]


def test_study_export_bonus_writes_the_bulk_file(database, tmp_path, capsys):
    out = tmp_path / "bonus"
    assert export(database, out) == 0
    assert (out / "bonus.csv").read_text().splitlines() == ["PROLIFIC-A,0.55",
                                                             "PROLIFIC-B,1.00"]
    details = (out / "bonus-details.csv").read_text()
    assert "done-3" in details and "left-1" not in details
    assert details.splitlines()[0] == ("code,recruitment_id,reason,cookies,team_cookies,"
                                       "minutes,amount")
    printed = capsys.readouterr()
    assert "4 performance lines; 2 people paid, total 1.55 GBP" in printed.out
    assert "1 participants have no recruitment id" in printed.err


HOSTILE = {
    "comma and line break": "PROLIFIC-E,99.99\r\nPROLIFIC-F,50",
    "a formula": '=HYPERLINK("http://evil.example","claim")',
    "a sum": "+SUM(1,2)",
    "a minus": "-2+3",
    "an at sign": "@SUM(1)",
    "a tab": "\tPROLIFIC-G",
    "a quote": 'PROLIFIC-"H"',
    "ten kilobytes": "b" * 10_000,
}


def test_hostile_ids_in_the_database_are_written_quoted_escaped_and_capped(tmp_path):
    """Ids no enrolment accepts (tests/web/participant/test_recruitment.py), written into the
    database directly: every one is still a single cell of its own line, never a formula, and no
    amount is above the cap."""
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    record_server_run(storage, protocol_with_bonus(tmp_path), "demo", None, 1.0)
    for number, hostile in enumerate(HOSTILE.values()):
        participant(storage, f"hostile-{number}", "done", hostile, [(40, 40)])
    storage.close()
    out = tmp_path / "bonus"
    assert export(path, out) == 0
    rows = platform_rows(out)
    assert [row[0].removeprefix("'") for row in rows] == list(HOSTILE.values())
    for row, hostile in zip(rows, HOSTILE.values(), strict=True):
        assert len(row) == 2 and row[1] == "1.00"
        assert row[0] == ("'" + hostile if hostile.startswith(FORMULA_STARTS) else hostile)
    for line in (out / "bonus.csv").read_bytes().decode().split("\r\n"):
        assert not line.startswith(FORMULA_STARTS), line
    details = list(csv.DictReader(io.StringIO(
        (out / "bonus-details.csv").read_bytes().decode(), newline="")))
    assert [row["recruitment_id"].removeprefix("'") for row in details] == list(
        HOSTILE.values())
    assert all(float(row["amount"]) <= 1.0 for row in details)


def test_a_second_export_writes_no_line_twice(database, tmp_path, capsys):
    assert export(database, tmp_path / "first") == 0
    storage = Storage(database)
    participant(storage, "done-4", "done", "PROLIFIC-E", [(2, 0)])
    storage.close()
    assert export(database, tmp_path / "second") == 0
    assert platform_rows(tmp_path / "second") == [["PROLIFIC-E", "0.14"]]
    assert "4 lines were exported before and are left out" in capsys.readouterr().out

    assert export(database, tmp_path / "third") == 0
    assert "nothing new to pay" in capsys.readouterr().out
    assert not (tmp_path / "third").exists()

    assert export(database, tmp_path / "lost", "--again") == 0
    assert platform_rows(tmp_path / "lost") == [
        ["PROLIFIC-A", "0.55"], ["PROLIFIC-B", "1.00"], ["PROLIFIC-E", "0.14"]]
    storage = Storage(database)
    exports = storage.all("SELECT * FROM bonus_exports ORDER BY id")
    lines = storage.all("SELECT export_id, code, reason, amount FROM bonus_lines ORDER BY id")
    storage.close()
    assert [(e["again"], e["lines"], e["people"], e["total"]) for e in exports] == [
        (0, 4, 2, 1.55), (0, 1, 1, 0.14), (1, 5, 3, 1.69)]
    assert json.loads(exports[0]["rule"])["cap"] == 1.0
    assert [(line["export_id"], line["code"]) for line in lines[:5]] == [
        (1, "done-1"), (1, "done-2"), (1, "done-3"), (1, "zero-1"), (2, "done-4")]
    assert {line["reason"] for line in lines} == {"performance"}


def test_the_files_of_an_earlier_export_are_never_overwritten(database, tmp_path, capsys):
    out = tmp_path / "bonus"
    assert export(database, out) == 0
    before = (out / "bonus.csv").read_bytes()
    assert export(database, out, "--again") == 2
    assert "already holds bonus.csv" in capsys.readouterr().err
    assert (out / "bonus.csv").read_bytes() == before
    storage = Storage(database)
    assert storage.one("SELECT count(*) AS n FROM bonus_exports")["n"] == 1
    storage.close()


def test_again_belongs_to_bonus(database, tmp_path, capsys):
    assert main(["export", str(database), "--out", str(tmp_path / "all"), "--again"]) == 2
    assert "--again" in capsys.readouterr().err


def team_database(tmp_path: Path) -> tuple[Path, Storage]:
    path = tmp_path / "team.sqlite"
    protocol = team_protocol(tmp_path)
    protocol.write_text(protocol.read_text() + TEAM_BONUS)
    storage = Storage(path)
    record_server_run(storage, protocol, "demo-team", None, 1.0)
    return path, storage


def test_waits_drops_and_unmatched_ends_are_paid_with_their_reasons(tmp_path):
    path, storage = team_database(tmp_path)
    ada = participant(storage, "ada-1", "done", "PROLIFIC-A", [(10, 0)])  # 0.50 + 0.20
    bo = participant(storage, "bo-22", "dropped", "PROLIFIC-B", [(2, 0)])
    cy = participant(storage, "cy-333", "unmatched", "PROLIFIC-C", [])
    dee = participant(storage, "dee-4", "session-1", "PROLIFIC-D", [])  # still waiting
    waited(storage, ada, 4.5)
    waited(storage, bo, 3.0)
    waited(storage, cy, 30.0, "timeout")  # past lobby_cap
    storage.insert("lobby", {"participant_id": dee, "entered_at": 100.0})
    teamed(storage, [(ada, None), (bo, 500.0)])
    storage.close()
    out = tmp_path / "bonus"
    assert export(path, out) == 0
    details = list(csv.DictReader(io.StringIO((out / "bonus-details.csv").read_text(),
                                              newline="")))
    assert [(row["code"], row["reason"], row["minutes"], row["amount"]) for row in details] == [
        ("ada-1", "lobby-wait", "4.5", "0.45"), ("ada-1", "teammate-dropped", "", "0.25"),
        ("ada-1", "performance", "", "0.7"), ("bo-22", "lobby-wait", "3.0", "0.3"),
        ("cy-333", "lobby-wait", "30.0", "1.5"), ("cy-333", "unmatched", "", "0.4")]
    assert platform_rows(out) == [["PROLIFIC-A", "1.40"], ["PROLIFIC-B", "0.30"],
                                  ["PROLIFIC-C", "1.90"]]


def test_the_cap_counts_what_earlier_exports_paid(tmp_path):
    """A person paid 1.50 for the wait may get 0.50 more for performance (cap 2.00), in a
    later export as in the same one."""
    path, storage = team_database(tmp_path)
    ada = participant(storage, "ada-1", "session-1", "PROLIFIC-A", [(40, 40)])
    waited(storage, ada, 60.0)
    storage.close()
    first, _ = export_bonuses(path, tmp_path / "first")
    assert list(first.table["amount"]) == [1.5]
    storage = Storage(path)
    with storage.event():
        storage.update("participants", ada, {"step": "done"})
    storage.close()
    second, _ = export_bonuses(path, tmp_path / "second")
    assert list(second.table["reason"]) == ["performance"]
    assert list(second.table["amount"]) == [0.5]
    assert platform_rows(tmp_path / "second") == [["PROLIFIC-A", "0.50"]]
    everything, _ = export_bonuses(path, tmp_path / "again", again=True)
    assert list(everything.table["amount"]) == [1.5, 0.5]


def test_the_export_documents_the_bonus_record(database, tmp_path):
    assert export(database, tmp_path / "bonus") == 0
    full = build_export(database)
    assert full.undocumented == []
    assert full.rows["bonus_exports"] == 1 and full.rows["bonus_lines"] == 4


def test_the_readme_bonus_example_runs_on_the_shipped_study(tmp_path, capsys):
    """README.md's `study export var/study2.sqlite --bonus --out bonus/` on a database of
    the shipped study2 protocol."""
    readme = (ROOT / "README.md").read_text()
    assert "study export var/study2.sqlite --bonus --out bonus/" in readme
    path = tmp_path / "study2.sqlite"
    storage = Storage(path)
    record_server_run(storage, ROOT / "protocols" / "study2.toml", "study2", None, 1.0)
    participant(storage, "done-1", "done", "5f3e9a1c77d04b2e8a6c1f90", [(6, 5)])
    storage.close()
    assert export(path, tmp_path / "bonus") == 0
    assert platform_rows(tmp_path / "bonus") == [["5f3e9a1c77d04b2e8a6c1f90", "0.23"]]


def test_a_protocol_without_a_bonus_is_refused(tmp_path, capsys):
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    record_server_run(storage, ROOT / "protocols" / "demo.toml", "demo", None, 1.0)
    storage.close()
    assert export(path, tmp_path / "out") == 2
    assert "declares no bonus formula" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_negative_rate_is_refused_with_its_line(tmp_path):
    from study.protocol.loader import load_protocol

    path = protocol_with_bonus(tmp_path, "\n[bonus]\nper_cookie = -1\n")
    with pytest.raises(ProtocolError, match=r"bonus\.per_cookie"):
        load_protocol(path)


def test_pay_for_a_lobby_or_a_teammate_needs_a_team(tmp_path):
    from study.protocol.loader import load_protocol

    for key in ("per_lobby_minute = 0.1", "teammate_dropped = 0.5"):
        path = protocol_with_bonus(tmp_path, f"\n[bonus]\n{key}\n")
        with pytest.raises(ProtocolError, match=r"bonus\.\w+: pays for a \[team\]"):
            load_protocol(path)
