"""What ``study check`` accepts, ``study serve`` can serve: kits whose solver tables would
not fit and implausible reference speeds are refused before anything is built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from study.allocation.model import state_space
from study.cli import main
from study.protocol.checks import count_states, readable_bytes, solver_size
from study.protocol.loader import load_protocol
from study.protocol.toml_source import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "protocols" / "demo.toml"


def demo_with(tmp_path: Path, pattern: str, line: str, count: int = 0) -> Path:
    """The demo protocol with every (or the first ``count``) line matching ``pattern``
    replaced."""
    text, replaced = re.subn(pattern, line, DEMO.read_text(encoding="utf-8"), count=count,
                             flags=re.MULTILINE)
    assert replaced
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def with_kits(tmp_path: Path, kits: str) -> Path:
    """The demo with ``kits`` in [study] and [pool] alike, as a lab would change both."""
    return demo_with(tmp_path, r"^kits = \[[^\]]*\]", f"kits = {kits}")


@pytest.mark.parametrize(("humans", "kits"), [
    (2, (2, 2)), (2, (8, 8)), (2, (6, 2)), (2, (0, 4)), (2, (3, 3, 2)), (3, (3, 3, 3)),
    (2, (16, 16)), (2, (63, 63)),
])
def test_the_states_are_counted_without_building_them(humans, kits):
    space = state_space(humans, kits)
    assert count_states(humans, kits) == (space.size, len(space.goals))


def test_kits_64_64_are_refused_with_the_size_they_need(tmp_path, capsys):
    path = with_kits(tmp_path, "[64, 64]")
    assert main(["check", str(path)]) == 2
    out, err = capsys.readouterr()
    # 20,000 pool teams x 46,849 states x (65 goals + 4 actions) x 8 bytes
    size = readable_bytes(20_000 * 46_849 * 69 * 8)
    assert size == "481.7 GiB"
    assert out == ""
    assert "study.kits: [64, 64] make 46,849 states and 65 goals" in err
    assert f"{size}, above the limit of 1.0 GiB" in err
    assert "Traceback" not in err


def test_kits_8_8_pass_and_the_summary_shows_the_solver_tables(tmp_path, capsys):
    path = with_kits(tmp_path, "[8, 8]")
    assert main(["check", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "solver" in out and "145 states, 9 goals, 4 actions; solver tables 14.7 KiB" in out


def test_the_limit_counts_a_pool_chunk_only_past_63_goals():
    assert solver_size((62, 62), 500_000).teams_at_once == 1
    assert solver_size((64, 64), 500_000).teams_at_once == 65_536
    assert solver_size((64, 64), 3).teams_at_once == 3


@pytest.mark.parametrize("speed", ["1e-300", "0.0005", "11.5", "1e300"])
def test_implausible_reference_speeds_are_refused_with_the_range(tmp_path, speed):
    path = demo_with(tmp_path, r"^reference_speed = [\d.]+", f"reference_speed = {speed}",
                     count=1)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(path)
    assert caught.value.field == "cookies.squares.reference_speed"
    assert ("must be between 0.001 and 10 cookies per second (one cookie in 1,000 s to ten "
            f"cookies a second) (got {float(speed)!r})") in str(caught.value)


@pytest.mark.parametrize("speed", ["0.001", "10"])
def test_the_ends_of_the_plausible_range_pass(tmp_path, speed):
    path = demo_with(tmp_path, r"^reference_speed = [\d.]+", f"reference_speed = {speed}",
                     count=1)
    assert load_protocol(path).cookies[0].reference_speed == float(speed)
