"""Bonuses: the protocol's formula over the collaborative cookies of the participants who
finished, written as the platform's bulk bonus lines."""

from pathlib import Path

import pytest

from study.bonus import amount, bonuses
from study.cli import main
from study.export import record_server_run
from study.protocol_schema import Bonus
from study.storage import Storage
from study.tomlsource import ProtocolError

ROOT = Path(__file__).resolve().parent.parent
BONUS = "\n[bonus]\nper_cookie = 0.05\nper_team_cookie = 0.02\ncap = 1.00\ncurrency = \"GBP\"\n"


def protocol_with_bonus(tmp_path: Path, table: str = BONUS) -> Path:
    path = tmp_path / "demo.toml"
    path.write_text((ROOT / "protocols" / "demo.toml").read_text() + table)
    return path


def participant(storage: Storage, code: str, step: str, recruitment_id: str | None,
                rounds: list[tuple[int, int]]) -> None:
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


def test_the_formula_is_capped_and_never_rounds_up():
    rule = Bonus(per_cookie=0.05, per_team_cookie=0.02, cap=1.0)
    assert amount(rule, 7, 10) == pytest.approx(0.55)
    assert amount(rule, 20, 40) == pytest.approx(1.0)
    assert amount(Bonus(per_cookie=0.333), 1, 0) == pytest.approx(0.33)


def test_only_finished_participants_with_an_id_are_paid(database):
    result = bonuses(database)
    assert result.source.startswith("the database's protocol snapshot")
    assert list(result.table["code"]) == ["done-1", "done-2", "done-3", "zero-1"]
    assert result.platform_csv().decode().splitlines() == ["PROLIFIC-A,0.55", "PROLIFIC-B,1.00"]


def test_study_export_bonus_writes_the_bulk_file(database, tmp_path, capsys):
    out = tmp_path / "bonus"
    assert main(["export", str(database), "--out", str(out), "--bonus"]) == 0
    assert (out / "bonus.csv").read_text().splitlines() == ["PROLIFIC-A,0.55",
                                                             "PROLIFIC-B,1.00"]
    details = (out / "bonus-details.csv").read_text()
    assert "done-3" in details and "left-1" not in details
    printed = capsys.readouterr()
    assert "4 finished, 2 paid, total 1.55 GBP" in printed.out
    assert "1 finished participants have no recruitment id" in printed.err


def test_a_protocol_without_a_bonus_is_refused(tmp_path, capsys):
    path = tmp_path / "study.sqlite"
    storage = Storage(path)
    record_server_run(storage, ROOT / "protocols" / "demo.toml", "demo", None, 1.0)
    storage.close()
    assert main(["export", str(path), "--out", str(tmp_path / "out"), "--bonus"]) == 2
    assert "declares no bonus formula" in capsys.readouterr().err


def test_a_negative_rate_is_refused_with_its_line(tmp_path):
    from study.protocol import load_protocol

    path = protocol_with_bonus(tmp_path, "\n[bonus]\nper_cookie = -1\n")
    with pytest.raises(ProtocolError, match=r"bonus\.per_cookie"):
        load_protocol(path)
