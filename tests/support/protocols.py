"""Protocols of three and four robots."""

from __future__ import annotations

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
