"""``study serve`` refuses a console password shorter than twelve characters, saying its
length and never the password, before anything is created, bound or printed (the port is
held by another program: a start that went on would stop there instead)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from study.bots.servers import free_port
from study.commands.serve import MIN_CONSOLE_PASSWORD

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"


def serve(tmp_path: Path, password: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STUDY_CONSOLE_PASSWORD": password}
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        return subprocess.run(
            [sys.executable, "-m", "study.cli", "serve", str(DEMO), "--port",
             str(held.getsockname()[1]), "--db", str(tmp_path / "study.sqlite"), "--pools",
             str(tmp_path / "pools")],
            capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


@pytest.mark.parametrize("password", ["s3cr3t", "let-me-in", "eleven-char"])
def test_a_short_console_password_is_refused_by_its_length(tmp_path, password):
    done = serve(tmp_path, password)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(f"study: error: STUDY_CONSOLE_PASSWORD = "
                                  f"'{len(password)} characters': the console password needs "
                                  f"at least {MIN_CONSOLE_PASSWORD} characters"), done.stderr
    assert password not in done.stderr
    assert not (tmp_path / "pools").exists() and not (tmp_path / "study.sqlite").exists()
