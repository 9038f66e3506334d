"""The goal reward given as code in docs/algorithms.md, run from the page itself: declared
beside a protocol it passes ``study check``, equals the term it spells out, and reaches the
same goals."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from study.allocation.model import Algorithm, goal_reward, state_space
from study.allocation.solver import solve_batch
from study.pool.placing import protocol_algorithm
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "algorithms.md"
SECOND_CONDITION = '[[conditions]]\nid = "fair"\nalgorithm = "fair"'


def documented_code() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    return code


@pytest.fixture
def protocol_path(tmp_path: Path) -> Path:
    """The demo with its second robot running the page's code, saved beside it as
    ``doc_rewards.py`` (a module name no other test imports)."""
    (tmp_path / "doc_rewards.py").write_text(documented_code(), encoding="utf-8")
    text = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")
    assert SECOND_CONDITION in text
    path = tmp_path / "coded.toml"
    path.write_text(text.replace(SECOND_CONDITION, '''[[algorithms]]
id = "coded"
python = "doc_rewards:preference_nash"

[[conditions]]
id = "fair"
algorithm = "coded"''', 1), encoding="utf-8")
    return path


def test_the_pages_goal_reward_passes_the_check_and_spells_its_term(protocol_path):
    protocol = load_protocol(protocol_path)   # study check imports and tries the code
    coded = protocol_algorithm(protocol, "coded")
    assert coded.code.source == "doc_rewards:preference_nash"
    term = Algorithm("term", terms={"nash_p": 1.0})
    rng = np.random.default_rng(7)
    c, p = rng.uniform(0.01, 0.99, (200, 2, 2)), rng.uniform(0.01, 0.99, (200, 2, 2))
    for kits in ((8, 8), (2, 2)):
        goals = state_space(2, kits).goal_allocations
        for team in range(0, 200, 13):
            assert goal_reward(coded, c[team], p[team], goals) == pytest.approx(
                goal_reward(term, c[team], p[team], goals), abs=1e-12)
        mine, theirs = solve_batch(c, p, coded, kits), solve_batch(c, p, term, kits)
        assert (mine.goal_allocations == theirs.goal_allocations).all()
    assert protocol.pool_spec().algorithms == ("efficient", "fair")
