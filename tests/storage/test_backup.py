"""Backups while serving: SQLite's online backup API copies a database that is being
written, the copy is checked and whole, old copies rotate out, `study serve
--backup-every` keeps copies of a running study, and a copy restores."""

import errno
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from support.storage import wait_for

from study.bots.servers import ServeProcess
from study.cli import main
from study.storage.backup import BackupFailed, backup, backup_name, rotate
from study.storage.database import Storage

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"


def count(path: Path, table: str = "participants") -> int:
    with sqlite3.connect(path) as connection:
        return connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_a_database_being_written_is_copied_whole_and_writes_go_on(tmp_path):
    database = tmp_path / "study.sqlite"
    storage = Storage(database)
    written: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        try:
            while not stop.is_set() or len(written) < 200:
                storage.insert("participants", {"code": f"w{len(written):06d}",
                                                "protocol": "demo", "created_at": 1.0,
                                                "step": "consent"})
                written.append(1)
        except BaseException as error:
            errors.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    while len(written) < 100:
        time.sleep(0.01)
    before = len(written)
    made = backup(database, tmp_path / "copy.sqlite")
    stop.set()
    writer.join(timeout=60)
    storage.close()
    assert not errors
    assert made.path.is_file() and not (tmp_path / "copy.sqlite.partial").exists()
    copied = count(made.path)
    assert before <= copied <= len(written)
    with sqlite3.connect(made.path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert len(written) >= 200  # the writer went on after the copy, never refused


def test_a_missing_database_is_refused_and_leaves_nothing(tmp_path):
    with pytest.raises(BackupFailed, match="no such database"):
        backup(tmp_path / "absent.sqlite", tmp_path / "copy.sqlite")
    assert list(tmp_path.iterdir()) == []


def study_database(path: Path, participants: int = 400) -> Path:
    """A study database of a few hundred kilobytes: more than a small full disk takes."""
    storage = Storage(path)
    for number in range(participants):
        storage.insert("participants", {"code": f"p{number:06d}", "protocol": "demo",
                                        "created_at": 1.0, "step": "consent",
                                        "external_ids": "x" * 400})
    storage.close()
    return path


@pytest.fixture
def small_filesystem(tmp_path):
    """A 64 KiB tmpfs: a real destination that fills up (mounting needs root; elsewhere
    the in-process tests below cover the same paths)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_destination_is_named_not_the_database(tmp_path, small_filesystem, capsys):
    database = study_database(tmp_path / "study.sqlite")
    assert main(["backup", str(database), "--out", str(small_filesystem / "copy.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"study: error: --out = '{small_filesystem / 'copy.sqlite'}': "
                          f"{small_filesystem}: the destination is full (")
    assert "bytes free, the copy of study.sqlite needs about" in err
    assert "DB =" not in err
    assert list(small_filesystem.iterdir()) == []  # no partial copy takes the space
    assert count(database) == 400


def test_sqlite_finding_the_destination_full_blames_the_destination(tmp_path, monkeypatch):
    """SQLite's own "database or disk is full" while writing the copy (a page limit on the
    copy's connection stands in for the disk): the destination is named, nothing left."""
    database = study_database(tmp_path / "study.sqlite")
    connect = sqlite3.connect

    def limited(path, *args, **kwargs):
        connection = connect(path, *args, **kwargs)
        if str(path).endswith(".partial"):
            connection.execute("PRAGMA max_page_count = 4")
        return connection

    monkeypatch.setattr(sqlite3, "connect", limited)
    out = tmp_path / "backups" / "copy.sqlite"
    with pytest.raises(BackupFailed, match=r"backups: the destination is full \(") as failed:
        backup(database, out)
    assert failed.value.side == "destination" and "untouched" in str(failed.value)
    assert list(out.parent.iterdir()) == []


def test_a_disk_full_when_syncing_the_copy_leaves_no_partial_file(tmp_path, monkeypatch):
    database = study_database(tmp_path / "study.sqlite", participants=10)

    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "backups" / "copy.sqlite"
    with pytest.raises(BackupFailed, match="the destination is full") as failed:
        backup(database, out)
    assert failed.value.side == "destination"
    assert list(out.parent.iterdir()) == []


def test_a_damaged_database_is_still_named_as_the_source(tmp_path, capsys):
    damaged = tmp_path / "study.sqlite"
    damaged.write_bytes(b"not a database at all" * 100)
    assert main(["backup", str(damaged), "--out", str(tmp_path / "copy.sqlite")]) == 2
    assert capsys.readouterr().err.startswith(
        f"study: error: DB = '{damaged}': {damaged}: file is not a database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.sqlite"]


def test_old_copies_rotate_out(tmp_path):
    start = datetime(2026, 11, 24, tzinfo=UTC)
    names = [backup_name(Path("study2.sqlite"), start + timedelta(minutes=k)) for k in range(5)]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "other-20261124T000000Z.sqlite").write_bytes(b"")
    deleted = rotate(tmp_path, Path("study2.sqlite"), keep=2)
    assert [p.name for p in deleted] == names[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*names[3:], "other-20261124T000000Z.sqlite"])


def test_study_backup_refuses_unclear_requests(tmp_path, capsys):
    database = tmp_path / "study.sqlite"
    Storage(database).close()
    assert main(["backup", str(database)]) == 2
    assert main(["backup", str(database), "--out", str(tmp_path / "a.sqlite"),
                 "--every", "1"]) == 2
    assert main(["backup", str(tmp_path / "absent.sqlite"), "--out",
                 str(tmp_path / "b.sqlite")]) == 2
    assert main(["backup", str(database), "--out", str(tmp_path / "c.sqlite")]) == 0
    assert "integrity ok" in capsys.readouterr().out


@pytest.mark.slow
def test_serve_keeps_backups_of_the_running_study_and_one_restores(tmp_path):
    database, backups = tmp_path / "demo.sqlite", tmp_path / "backups"
    server = ServeProcess(DEMO, database, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--backup-every", "0.02", "--backup-dir", str(backups),
                                 "--backup-keep", "3"))
    server.start(timeout=180)
    try:
        for _ in range(3):  # participants arrive while backups run
            assert requests.get(f"{server.url}/start", timeout=30).status_code == 200
        wait_for(lambda: len(list(backups.glob("demo-*.sqlite"))) >= 3)
        assert backing_up(backups)
        enrolled = count(database)
        wait_for(lambda: count(sorted(backups.glob("demo-*.sqlite"))[-1]) == enrolled)
        assert len(list(backups.glob("demo-*.sqlite"))) <= 3 + 1  # rotation keeps up
    finally:
        server.stop()
    assert "backups: every 0.02 min" in server.output()
    newest = sorted(backups.glob("demo-*.sqlite"))[-1]
    # Restore as docs/deploy.md says: the server stopped, the copy put in place of the
    # database and its WAL files, the server started again on it.
    restored = tmp_path / "restored" / "demo.sqlite"
    restored.parent.mkdir()
    shutil.copy(newest, restored)
    again = ServeProcess(DEMO, restored, tmp_path / "pools", tmp_path / "again.log")
    again.start(timeout=180)
    try:
        assert requests.get(f"{again.url}/healthz", timeout=30).status_code == 200
    finally:
        again.stop()
    assert count(restored) == enrolled
    wait_for(lambda: not backing_up(backups))  # the backup child stopped with its server


def backing_up(directory: Path) -> bool:
    """Whether a `study backup --every` process writing into ``directory`` is alive."""
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = status.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"backup" in words and str(directory).encode() in words:
            return True
    return False
