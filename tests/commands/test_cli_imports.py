"""The commands start light: help and one-team solving never import the heavy libraries,
and the one-line summaries ``study --help`` lists are the command modules' own."""

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from study.cli import COMMANDS, chosen_command, main

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"
HEAVY = ("pandas", "scipy", "pyarrow", "matplotlib", "flask", "dask", "mdptoolbox",
         "socketio", "tqdm")

PROBE = """
import json, sys
from {module} import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {heavy!r})))
"""


def heavy_imports(module: str, argv: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The heavy top-level packages a fresh interpreter has imported after ``argv``."""
    code = PROBE.format(module=module, argv=argv, heavy=heavy)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=True)
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize(("module", "argv"), [
    ("study.cli", ["--help"]),
    ("study.cli", ["solve", "--help"]),
    ("study.cli", ["pool", "--help"]),
    ("study.cli", ["check", "--help"]),
    ("study.cli", ["solve", "--c", "0.25,0.9", "--c", "0.3,0.7", "--p", "0.9,0.1",
                   "--p", "0.4,0.6"]),
    ("analysis.cli", ["--help"]),
])
def test_help_and_one_team_import_no_heavy_library(module, argv):
    assert heavy_imports(module, argv) == []


def test_checking_a_protocol_imports_no_heavy_library():
    """``study check`` reads and validates a protocol (its pool section included) with the
    model's plain names; numpy comes with the human model alone, which places the typical
    person on the protocol's capability scale."""
    study1 = str(PROTOCOLS / "study1.toml")
    assert heavy_imports("study.cli", ["check", study1]) == []


def test_reading_a_protocol_imports_no_numpy():
    """Reading and validating a protocol takes plain Python: TOML and the model's names."""
    code = ("import sys\nfrom study.protocol.loader import load_protocol\n"
            f"load_protocol({str(PROTOCOLS / 'study1.toml')!r})\n"
            "print('numpy' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=True)
    assert result.stdout.strip() == "False"


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    words = " ".join(capsys.readouterr().out.split())
    for name, summary in COMMANDS.items():
        assert f"{name} {summary}" in words


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_command_modules_own(name):
    parser = argparse.ArgumentParser()
    subcommands = parser.add_subparsers()
    importlib.import_module(f"study.commands.{name}").register(subcommands)
    (action,) = subcommands._choices_actions
    assert action.dest == name and action.help == COMMANDS[name]


def test_the_chosen_command_is_the_first_argument_that_is_not_an_option():
    names = list(COMMANDS)
    assert chosen_command(["pool", "build", "x.toml"], names) == "pool"
    assert chosen_command(["-h", "solve"], names) == "solve"
    assert chosen_command(["--help"], names) is None
    assert chosen_command(["nonsense", "solve"], names) is None


def test_an_unknown_command_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["nonsense"])
    assert stop.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
