"""Every malformed protocol of the corpus is refused with its line and field, by the loader
and by ``study check``, and never with a traceback; the shipped protocols pass.

The corpus (``tests/protocols_malformed/``, written by ``make_malformed_protocols.py``)
holds one realistic mistake per file; each file's second line says which field and line
the error must name.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from study.cli import main
from study.protocol.loader import load_protocol, parse_protocol
from study.protocol.toml_source import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "protocols_malformed").glob("*.toml"))
SHIPPED = sorted((ROOT / "protocols").glob("*.toml"))


def expected(path: Path) -> tuple[str, int]:
    match = re.search(rb"^# expect: (\S+) @ (\d+)$", path.read_bytes(), re.MULTILINE)
    assert match, f"{path.name} has no '# expect:' line"
    return match.group(1).decode(), int(match.group(2))


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) >= 90
    kinds = {path.name.split("-")[0] for path in CORPUS}
    assert {"typo", "type", "range", "nan", "inf", "name", "syntax", "bytes", "deep",
            "missing", "pool"} <= kinds


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_the_loader_names_line_and_field(path):
    field, line = expected(path)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(path)
    error = caught.value
    assert (error.field, error.line) == (field, line), str(error)
    assert str(error).startswith(f"{path}:{line}: {field}: ")


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_study_check_refuses_with_one_line(path, capsys):
    field, line = expected(path)
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"study: error: {path}:{line}: {field}: ")


@pytest.mark.parametrize("name", ["bytes-latin1-page", "deep-array", "name-5000",
                                  "syntax-unclosed-array"])
def test_the_installed_command_shows_no_traceback(name):
    path = ROOT / "tests" / "protocols_malformed" / f"{name}.toml"
    field, line = expected(path)
    done = subprocess.run([sys.executable, "-m", "study.cli", "check", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert f"{path}:{line}: {field}: " in done.stderr


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_the_shipped_protocols_pass_study_check(path, capsys):
    assert main(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    protocol = load_protocol(path)
    assert err == ""
    assert out.startswith(f"{path}: valid protocol '{protocol.name}'")
    for condition in protocol.conditions:
        assert f"Robot {condition.robot} runs {condition.algorithm}" in out
    assert f"{protocol.rounds} rounds x {protocol.round_seconds:g} s" in out
    assert f"{protocol.pool_spec().teams:,} teams" in out


def test_study_check_needs_a_protocol_or_the_schema(capsys):
    assert main(["check"]) == 2
    assert "name a protocol file" in capsys.readouterr().err


def test_the_schema_never_overwrites_a_protocol(tmp_path, capsys):
    protocol = tmp_path / "mine.toml"
    protocol.write_text("[study]\n")
    assert main(["check", "--schema", str(protocol)]) == 2
    assert protocol.read_text() == "[study]\n" and ".json" in capsys.readouterr().err


def test_study_serve_refuses_what_study_check_refuses(tmp_path):
    """``study serve`` runs the same check before it builds or writes anything: the name
    "../../evil" creates no database outside (or inside) ``var/``."""
    path = ROOT / "tests" / "protocols_malformed" / "name-path.toml"
    field, line = expected(path)
    done = subprocess.run([sys.executable, "-m", "study.cli", "serve", str(path), "--port", "0"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"study: error: {path}:{line}: {field}: ")
    assert list(tmp_path.rglob("*")) == [] and not (tmp_path.parent / "evil.sqlite").exists()


MUTATIONS = ["[", "]", "{", "}", "=", '"', "'", '"""', "\n", "#", ".", ",", "nan", "inf",
             "-", "1e10", "true", "[[x]]", "\x00", "\\", "é", "9" * 30]


def mutated(text: str, rng: random.Random) -> str:
    """``text`` with one to four random cuts, insertions and duplicated lines."""
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(text))
        choice = rng.random()
        if choice < 0.3:
            text = text[:at] + text[at + rng.randint(1, 40):]
        elif choice < 0.7:
            text = text[:at] + rng.choice(MUTATIONS) + text[at:]
        else:
            lines = text.split("\n")
            lines.insert(rng.randrange(len(lines)), rng.choice(lines))
            text = "\n".join(lines)
    return text


def test_random_damage_is_refused_with_a_line_and_a_field_or_is_harmless():
    demo = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")
    rng = random.Random(11)
    refused = 0
    for _ in range(300):
        try:
            parse_protocol(mutated(demo, rng), "damaged.toml")
        except ProtocolError as error:
            refused += 1
            assert error.line is not None and error.line >= 1 and error.field, str(error)
    assert refused >= 200
