"""Protocols of three and four robots."""

from __future__ import annotations

import re
from pathlib import Path

from support.web import ROOT

THREE = ROOT / "tests" / "three_robots.toml"
# The demo's second condition, which the algorithm tests replace with robots declared as data.
SECOND_CONDITION = '[[conditions]]\nid = "fair"\nalgorithm = "fair"'
# A fourth robot declared as data (docs/protocol.md, [[algorithms]]): half the slower
# human's capability utility, half the team's efficiency.
FOURTH = '''
[[algorithms]]
id = "maximin"
terms = { egalitarian_c = 0.5, efficiency = 0.5 }

[[conditions]]
id = "maximin"
algorithm = "maximin"
robot = "Max"
transparency = "Robot Max looks after whoever of you is slower, then the team's cookies."
'''


def with_conditions(text: str, extra: str) -> str:
    """The protocol ``text`` with ``extra`` [[conditions]] tables after its last one."""
    last = text.rindex("[[conditions]]")
    end = text.index("\n[", last + 1)
    return text[:end] + "\n" + extra + text[end:]


def four_robots(folder: Path) -> Path:
    """The three-robot protocol with a fourth robot, a declared maximin algorithm."""
    path = folder / "four.toml"
    path.write_text(with_conditions(THREE.read_text(encoding="utf-8"), FOURTH)
                    .replace('name = "three"', 'name = "four"'), encoding="utf-8")
    return path


def study2_at(folder: Path, squares: float, letters: float, extra: str = "",
              teams: int | None = None) -> Path:
    """study2 as shipped with its two reference speeds replaced (squares' comes first),
    ``extra`` tables after it and, with ``teams``, a pool of that many teams."""
    text = (ROOT / "protocols" / "study2.toml").read_text(encoding="utf-8")
    assert text.index("[cookies.squares]") < text.index("[cookies.letters]")
    speeds = iter((squares, letters))
    text, count = re.subn(r"(?m)^reference_speed = .*$",
                          lambda _: f"reference_speed = {next(speeds)}", text)
    assert count == 2
    if teams is not None:
        text, count = re.subn(r"(?m)^teams = [\d_]+", f"teams = {teams}", text)
        assert count == 1
    path = folder / f"study2-{squares}-{letters}-{teams}.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


# A round probe after every round (docs/protocol.md, [[probes]]).
PROBES = '''
[[probes]]
id = "fair_round"
text = "How fair was the robot's choice of kits this round?"
scale = "agreement"
after = "every"
seconds = 8
'''


def three_with_probes(folder: Path, probes: str = PROBES) -> Path:
    """The three-robot protocol asking ``probes`` between its rounds."""
    path = folder / "three-probes.toml"
    path.write_text(THREE.read_text(encoding="utf-8") + probes, encoding="utf-8")
    return path
