"""``make bench`` (``benchmarks.run``): every benchmark, each at a quick size its own
command accepts."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from benchmarks.run import BENCHMARKS, ROOT, chosen, main


def test_every_benchmark_with_a_command_is_run():
    commands = {path.stem for path in (ROOT / "benchmarks").glob("*.py")
                if "\ndef main(" in path.read_text(encoding="utf-8")}
    assert commands - {"run"} == {benchmark.name for benchmark in BENCHMARKS}


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda benchmark: benchmark.name)
def test_each_quick_size_is_options_its_command_takes(benchmark):
    # argparse converts each value as it reads it and stops at --help, printing the options
    shown = subprocess.run([sys.executable, "-m", f"benchmarks.{benchmark.name}",
                            *benchmark.quick, "--help"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    for option in (word for word in benchmark.quick if word.startswith("--")):
        assert re.search(rf"{option}\b", shown), option


def test_an_unknown_name_is_refused_with_the_names_there_are():
    with pytest.raises(SystemExit, match="no benchmark named nonsense; there are solver"):
        chosen(["solver", "nonsense"])
    assert [benchmark.name for benchmark in chosen(["flood", "solver"])] == ["flood", "solver"]


def test_the_list_says_what_each_measures_and_runs_nothing(capsys):
    assert main(["--list", "load"]) == 0
    assert capsys.readouterr().out == ("load: people at a person's pace on 1 and 2 workers: "
                                       "acks, CPU, pushes (quick: --quick)\n")
