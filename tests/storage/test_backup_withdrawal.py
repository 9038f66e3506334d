"""A withdrawal erases the person from the kept backups as well. ``study serve
--backup-every`` copies a running study while two participants, enrolled by Prolific ids,
play practice; one of them withdraws. Afterwards no file under the study's directory (the
database, its write-ahead log, the server's log, every backup, an export) holds the
withdrawn person's id, while every backup still holds the other's and is a whole database
that keeps the withdrawal as the study's own does. ``study backup --erase-withdrawn`` does
the same to copies kept elsewhere."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from support.recruitment import code_of, pid, recruitment_protocol
from support.storage import wait_for

from study.bots import BEHAVIOURS, Profile, StudyFacts, run_swarm
from study.bots.servers import ServeProcess, quick_protocol
from study.cli import main
from study.protocol.loader import load_protocol
from study.storage.backup import backup
from study.storage.database import Storage


def holding(directory: Path, needle: bytes) -> list[Path]:
    """Every file under ``directory`` whose bytes contain ``needle``."""
    return sorted(path for path in directory.rglob("*")
                  if path.is_file() and needle in path.read_bytes())


def participant_row(database: Path, code: str) -> dict:
    with sqlite3.connect(database) as connection:
        connection.row_factory = sqlite3.Row
        return dict(connection.execute("SELECT * FROM participants WHERE code = ?",
                                       (code,)).fetchone())


def integrity(database: Path) -> str:
    with sqlite3.connect(database) as connection:
        return connection.execute("PRAGMA integrity_check").fetchone()[0]


def withdraw_in_the_console(url: str, code: str) -> None:
    """The experimenter withdraws the participant (the console in demo mode)."""
    console = requests.Session()
    page = console.get(f"{url}/console", timeout=30).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    reply = console.post(f"{url}/console/participants/{code}", timeout=30, data={
        "action": "withdraw", "note": "asked by email", "csrf_token": token})
    assert reply.ok, reply.text


@pytest.mark.slow
@pytest.mark.minutes(1)
def test_after_a_withdrawal_no_file_of_the_study_holds_the_persons_id(tmp_path):
    study = tmp_path / "study"
    protocol = quick_protocol(recruitment_protocol(tmp_path / "prolific.toml"),
                              study / "quick.toml")
    db, backups = study / "var" / "study.sqlite", study / "backups"
    server = ServeProcess(protocol, db, study / "pools", study / "serve.log",
                          env={"STUDY_CONSOLE_PASSWORD": ""},
                          extra=("--backup-every", "0.02", "--backup-dir", str(backups),
                                 "--backup-keep", "100"))
    leaving, staying = pid("leaving"), pid("staying")
    try:
        server.start(timeout=180)
        codes = [code_of(requests.get(f"{server.url}/start?PROLIFIC_PID={person}",
                                      allow_redirects=False, timeout=30))
                 for person in (leaving, staying)]
        result = run_swarm(server.url, codes, [
            Profile((0.6, 0.6), (0.7, 0.3), BEHAVIOURS["fast"], seed=seed, stop_at="teammate")
            for seed in (1, 2)], facts=StudyFacts.from_protocol(load_protocol(protocol)),
            max_seconds=150, patience=30)
        assert [o.final_step for o in result.outcomes] == ["teammate"] * 2, result.summary()
        wait_for(lambda: bool(holding(backups, leaving.encode())),
                 what="a backup holding the participant")
        withdraw_in_the_console(server.url, codes[0])
        assert main(["export", str(db), "--out", str(study / "export")]) == 0
        wait_for(lambda: not holding(study, leaving.encode()),
                 what="no file holding the withdrawn id")
    finally:
        server.stop()
    assert holding(study, leaving.encode()) == []
    copies = sorted(backups.glob("*.sqlite"))
    assert len(copies) >= 2 and holding(backups, staying.encode()) == copies
    kept = participant_row(db, codes[0])
    assert kept["step"] == "withdrawn"
    for copy in copies:
        assert integrity(copy) == "ok"
        assert participant_row(copy, codes[0]) == kept
    assert "Traceback" not in server.output()


def test_copies_kept_elsewhere_are_erased_by_the_command(tmp_path, capsys):
    """Copies fetched to another machine: ``study backup --erase-withdrawn`` with a newer
    copy (or the database) that records the withdrawal."""
    database = tmp_path / "study.sqlite"
    storage = Storage(database)
    ids = {}
    for name in ("leaving", "staying"):
        ids[name] = storage.insert("participants", {
            "code": f"code-{name}", "protocol": "demo", "created_at": 1.0, "step": "practice",
            "consent": "given", "recruitment_id": pid(name), "origin": "recruitment"})
        storage.insert("steps", {"participant_id": ids[name], "step": "practice", "at": 2.0})
    elsewhere = tmp_path / "elsewhere"
    backup(database, elsewhere / "study-1.sqlite")
    storage.erase_participant(ids["leaving"], {"step": "withdrawn",
                                               "data_consent": "withdrawn",
                                               "withdrawn_at": 3.0})
    storage.close()
    shutil.copy(elsewhere / "study-1.sqlite", elsewhere / "by-hand.sqlite")
    (elsewhere / "notes.txt").write_text("not a copy")
    assert main(["backup", str(database), "--erase-withdrawn", str(elsewhere)]) == 0
    assert "2 of the copies" in capsys.readouterr().out
    assert holding(elsewhere, pid("leaving").encode()) == []
    assert holding(elsewhere, pid("staying").encode()) == [elsewhere / "by-hand.sqlite",
                                                           elsewhere / "study-1.sqlite"]
    for copy in ("by-hand.sqlite", "study-1.sqlite"):
        assert participant_row(elsewhere / copy, "code-leaving") == participant_row(
            database, "code-leaving")
        with sqlite3.connect(elsewhere / copy) as connection:
            assert connection.execute("SELECT count(*) FROM steps").fetchone()[0] == 1
    again = subprocess.run([sys.executable, "-m", "study.cli", "backup", str(database),
                            "--erase-withdrawn", str(elsewhere)], capture_output=True,
                           text=True, timeout=120)
    assert again.stdout.startswith("0 of the copies"), again
