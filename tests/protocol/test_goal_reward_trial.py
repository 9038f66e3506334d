"""A goal reward given as code is tried in a child process: code that exits, ends its
process on import, hangs, crashes, returns texts or changes its values after a few calls
is refused by ``study check`` at its ``python`` line, saying what happened, and ``study
check`` warns of a memory that is always empty and of robots a teammate rule can never
tell apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.protocols import SECOND_CONDITION

from study.cli import main
from study.protocol.loader import parse_protocol
from study.protocol.toml_source import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
DEMO_TEXT = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")
CODED = '''[[algorithms]]
id = "coded"
python = "{source}"
{extra}
[[conditions]]
id = "fair"
algorithm = "coded"'''


def coded_protocol(folder: Path, source: str, extra: str = "") -> tuple[Path, int]:
    """The demo with its second robot running ``source``; the file and its python line."""
    assert SECOND_CONDITION in DEMO_TEXT
    text = DEMO_TEXT.replace(SECOND_CONDITION, CODED.format(source=source, extra=extra), 1)
    path = folder / "coded.toml"
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index(f'python = "{source}"') + 1
    return path, line


def refusal(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``study check``'s one line of error (it must refuse)."""
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(("function", "extra", "words"), [
    ("exits", "", "called sys.exit(3) in call 1 of 6 (64 teams); that would end the "
                  "command or the server running it"),
    ("hangs", "python_seconds = 1\n", "did not return within 1 s in call 1 of 6 (64 teams) "
                                      "(python_seconds = 1;"),
    ("crashes", "", "crashed its process (SIGSEGV) in call 1 of 6 (64 teams)"),
    ("in_place", "", "raised ValueError: assignment destination is read-only"),
    ("texts", "", "returned ndarray of dtype object, not numbers"),
    ("random_after_two_calls", "", "returned other values in call 4 of 6 than in call 1 "
                                   "for the same 64 teams"),
])
def test_study_check_refuses_code_at_its_python_line_saying_what_happened(
        tmp_path, capsys, function, extra, words):
    path, line = coded_protocol(tmp_path, f"goal_rewards_example:{function}", extra)
    err = refusal(path, capsys)
    assert err.startswith(f"study: error: {path}:{line}: algorithms.0.python: {words}"), err


def test_a_module_that_ends_its_process_on_import_is_refused(tmp_path, capsys):
    (tmp_path / "ends_on_import.py").write_text(
        "import os\n\nos._exit(7)\n\n\ndef reward(c, p, allocations):\n    return 0.5\n",
        encoding="utf-8")
    path, line = coded_protocol(tmp_path, "ends_on_import:reward")
    err = refusal(path, capsys)
    assert err.startswith(f"study: error: {path}:{line}: algorithms.0.python: ended its "
                          "process (exit code 7, as os._exit() does) while its module was "
                          "imported; that would end the command"), err


def test_a_module_that_hangs_on_import_has_the_same_time_limit(tmp_path, capsys):
    (tmp_path / "hangs_on_import.py").write_text(
        "import time\n\ntime.sleep(60)\n\n\ndef reward(c, p, allocations):\n    return 0.5\n",
        encoding="utf-8")
    path, line = coded_protocol(tmp_path, "hangs_on_import:reward", "python_seconds = 1\n")
    err = refusal(path, capsys)
    assert err.startswith(f"study: error: {path}:{line}: algorithms.0.python: did not "
                          "return within 1 s while its module was imported"), err


def test_deterministic_code_passes_and_the_time_limit_is_the_protocols(tmp_path, capsys):
    path, _ = coded_protocol(tmp_path, "goal_rewards_example:slowest_first",
                             "python_seconds = 2.5\n")
    assert main(["check", str(path)]) == 0
    assert "coded = code goal_rewards_example:slowest_first" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "field", "words"), [
    ("python_seconds = 0\n", "algorithms.0.python_seconds", "must be greater than 0"),
    ("python_seconds = 61\n", "algorithms.0.python_seconds", "must be at most 60"),
])
def test_the_time_limit_is_a_positive_number_of_seconds(tmp_path, extra, field, words):
    path, _ = coded_protocol(tmp_path, "goal_rewards_example:slowest_first", extra)
    with pytest.raises(ProtocolError, match=words) as caught:
        parse_protocol(path.read_text(encoding="utf-8"), path)
    assert caught.value.field == field


def test_a_time_limit_without_code_is_refused():
    text = DEMO_TEXT.replace(SECOND_CONDITION, '''[[algorithms]]
id = "shares"
terms = { fairness = 1 }
python_seconds = 2

[[conditions]]
id = "fair"
algorithm = "shares"''', 1)
    with pytest.raises(ProtocolError, match="only a goal reward given as code") as caught:
        parse_protocol(text, "shares.toml")
    assert caught.value.field == "algorithms.0.python_seconds"


# --- warnings ----------------------------------------------------------------------------

MEMORY_FIRST = '''[[algorithms]]
id = "balance"
terms = { fairness = 1 }
memory = "study"

[[conditions]]
id = "balance"
algorithm = "balance"
robot = "Bea"
transparency = "Robot Bea evens out the kits over the study."

'''


def warnings_of(folder: Path, text: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    path = folder / "warned.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["check", str(path)]) == 0
    return [line.strip() for line in capsys.readouterr().out.splitlines()
            if "WARNING" in line and "conditions." in line]


def memory_first(order: str) -> str:
    """The demo with a robot with memory as its first condition, in ``order``."""
    first = DEMO_TEXT.index("[[conditions]]")
    text = DEMO_TEXT[:first] + MEMORY_FIRST + DEMO_TEXT[first:]
    return text.replace('condition_order = "alternate"', f'condition_order = "{order}"', 1)


def test_memory_on_a_robot_always_met_first_is_warned_of(tmp_path, capsys):
    text = memory_first("fixed")
    line = text.splitlines().index('algorithm = "balance"') + 1
    warned = warnings_of(tmp_path, text, capsys)
    assert warned == [f"WARNING: {tmp_path / 'warned.toml'}:{line}: conditions.0.algorithm: "
                      'Robot Bea runs balance, whose memory = "study" counts the kits of '
                      'earlier sessions, but condition_order = "fixed" always puts it '
                      "first: its memory is always empty, so it plans as it would without "
                      "memory"]


def test_memory_in_a_counterbalanced_order_is_not_warned_of(tmp_path, capsys):
    assert warnings_of(tmp_path, memory_first("alternate"), capsys) == []


def same_algorithm_twice(rule: str) -> str:
    """The demo with both robots running Efficient, under teammate rule ``rule``."""
    text = DEMO_TEXT.replace(SECOND_CONDITION, SECOND_CONDITION.replace(
        'algorithm = "fair"', 'algorithm = "efficient"'), 1)
    return text.replace('rule = "typed"', f'rule = "{rule}"', 1)


@pytest.mark.parametrize(("rule", "consequence"), [
    ("typed", 'no member is ever placed on target: every participant gets the nearest '
              'member (unplaced = "continue")'),
    ("distinct", "it passes over every candidate and takes the nearest member for everyone"),
])
def test_one_algorithm_twice_under_a_rule_that_needs_plans_apart_is_warned_of(
        tmp_path, capsys, rule, consequence):
    text = same_algorithm_twice(rule)
    line = text.splitlines().index('algorithm = "efficient"', text.splitlines().index(
        'id = "fair"')) + 1
    warned = warnings_of(tmp_path, text, capsys)
    assert warned == [f"WARNING: {tmp_path / 'warned.toml'}:{line}: conditions.1.algorithm: "
                      "runs efficient as conditions.0 (Robot Chris) does: teammate rule "
                      f'"{rule}" needs every two robots\' plans to differ, and one algorithm '
                      f"follows one plan on a team, so {consequence}"]


def test_one_algorithm_twice_under_the_nearest_rule_is_not_warned_of(tmp_path, capsys):
    assert warnings_of(tmp_path, same_algorithm_twice("nearest"), capsys) == []
