"""Every command that reads a protocol applies the protocol's checks first, as ``study
check`` does: a protocol it refuses is refused with the same message, before a pool of that
shape is sampled and solved (teams3 with four people asked 51 GiB at 20,000 teams) or a
server, a swarm or a calibration begins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from study.cli import main

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"
# teams3 changed where only the checks between parts see it: the pool's own section
# parses, so without the checks the pool is built.
COPIES = {
    "four-people": {"humans = 3\n": "humans = 4\n", "kits = [9, 9]\n": "kits = [8, 8]\n"},
    "three-types": {"kits = [9, 9]\n": "kits = [9, 9, 9]\n",
                    "c = [[0.20, 0.32], [0.63, 1.00]]":
                        "c = [[0.20, 0.32], [0.63, 1.00], [0.30, 0.50]]"},
}


def teams3_copy(folder: Path, name: str) -> Path:
    """teams3 with the ``[pool]`` section's lines changed as ``COPIES[name]`` says."""
    text = (PROTOCOLS / "teams3.toml").read_text(encoding="utf-8")
    head, pool = text.split("\n[pool]\n")
    for old, new in COPIES[name].items():
        assert pool.count(old) == 1, old
        pool = pool.replace(old, new)
    path = folder / f"{name}.toml"
    path.write_text(f"{head}\n[pool]\n{pool}", encoding="utf-8")
    return path


def refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The error line of a command that must exit 2."""
    capsys.readouterr()
    assert main(argv) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("study: error:")]
    return line


@pytest.mark.parametrize("name", list(COPIES))
def test_pool_build_refuses_what_study_check_refuses_with_its_message(tmp_path, capsys, name):
    protocol = teams3_copy(tmp_path, name)
    checked = refusal(capsys, ["check", str(protocol)])
    out = tmp_path / "pool.parquet"
    assert refusal(capsys, ["pool", "build", str(protocol), "--out", str(out),
                            "--teams", "1"]) == checked
    assert not out.exists()


def test_every_command_that_reads_a_protocol_refuses_it_as_study_check_does(tmp_path, capsys):
    protocol = teams3_copy(tmp_path, "four-people")
    checked = refusal(capsys, ["check", str(protocol)])
    pilot = tmp_path / "pilot.sqlite"
    commands = {
        "pool build": ["pool", "build", str(protocol), "--out", str(tmp_path / "p.parquet")],
        "solve": ["solve", "--protocol", str(protocol), "--c", "0.3,0.8", "--c", "0.5,0.6",
                  "--p", "0.9,0.1", "--p", "0.2,0.8"],
        "bot": ["bot", "http://127.0.0.1:9", "--participants", "1", "--protocol",
                str(protocol)],
        "calibrate": ["calibrate", str(pilot), "--protocol", str(protocol), "--out",
                      str(tmp_path / "calibrated.toml")],
        "contrast": ["contrast", str(protocol), "--pools", str(tmp_path / "pools")],
    }
    refused = {name: refusal(capsys, argv) for name, argv in commands.items()}
    assert refused == dict.fromkeys(commands, checked)
    # serve patches the standard library for gevent: in a process of its own
    served = subprocess.run(
        [sys.executable, "-m", "study.cli", "serve", str(protocol), "--db",
         str(tmp_path / "study.sqlite"), "--pools", str(tmp_path / "pools"), "--port", "9"],
        capture_output=True, text=True, timeout=120)
    assert (served.returncode, served.stderr.strip().splitlines()[-1]) == (2, checked)
    assert not (tmp_path / "pools").exists() and not (tmp_path / "study.sqlite").exists()
