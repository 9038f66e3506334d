"""Algorithms declared in a protocol (``[[algorithms]]``): loaded as declared, run by
conditions by id, summarised by ``study check``, and solved by ``study solve --protocol``
for one team and for a CSV of teams. The refusals are in the malformed corpus
(``tests/protocols_malformed/algorithm-*.toml``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.protocols import SECOND_CONDITION

from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve, solve_batch
from study.cli import main
from study.pool.placing import protocol_algorithm
from study.protocol.loader import DeclaredAlgorithm, load_protocol, parse_protocol
from study.protocol.toml_source import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
DEMO_TEXT = (ROOT / "protocols" / "demo.toml").read_text()
DECLARED = '''[[algorithms]]
id = "maximin"
terms = { egalitarian_c = 0.5, efficiency = 0.5 }

[[algorithms]]
id = "remembering"
terms = { fairness = 0.6, efficiency = 0.4 }
memory = "study"

[[algorithms]]
id = "equity"
terms = { efficiency = 0.6, fair_equity = 0.4 }
fea_bounds = [0.1, 1.5]

[[algorithms]]
id = "slowest"
python = "goal_rewards_example:slowest_first"

[[conditions]]
id = "fair"
algorithm = "maximin"'''
TEAM = ["--c", "0.25,0.9", "--c", "0.3,0.7", "--p", "0.9,0.1", "--p", "0.4,0.6"]


@pytest.fixture
def protocol_path(tmp_path: Path) -> Path:
    assert SECOND_CONDITION in DEMO_TEXT
    path = tmp_path / "declared.toml"
    path.write_text(DEMO_TEXT.replace(SECOND_CONDITION, DECLARED, 1), encoding="utf-8")
    return path


def test_declared_algorithms_load_as_written(protocol_path):
    protocol = load_protocol(protocol_path)
    assert protocol.condition("fair").algorithm == "maximin"
    assert protocol.algorithms == (
        DeclaredAlgorithm("maximin", (("egalitarian_c", 0.5), ("efficiency", 0.5))),
        DeclaredAlgorithm("remembering", (("fairness", 0.6), ("efficiency", 0.4)), memory=True),
        DeclaredAlgorithm("equity", (("efficiency", 0.6), ("fair_equity", 0.4)), (0.1, 1.5)),
        DeclaredAlgorithm("slowest", python="goal_rewards_example:slowest_first"))
    assert protocol.declared("fair") is None


def test_the_protocol_makes_the_models_algorithms(protocol_path):
    protocol = load_protocol(protocol_path)
    assert protocol_algorithm(protocol, "maximin") == Algorithm(
        "maximin", terms={"efficiency": 0.5, "egalitarian_c": 0.5})
    equity = protocol_algorithm(protocol, "equity")
    assert (equity.lo, equity.hi, equity.terms) == (0.1, 1.5, (("efficiency", 0.6),
                                                                ("fair_equity", 0.4)))
    assert protocol_algorithm(protocol, "remembering").memory
    assert protocol_algorithm(protocol, "slowest").code.source == (
        "goal_rewards_example:slowest_first")
    assert protocol_algorithm(protocol, "efficient") == Algorithm("efficient")


def test_existing_protocols_run_the_presets_as_before():
    study2 = load_protocol(ROOT / "protocols" / "study2.toml")
    fea = protocol_algorithm(study2, "fea")
    spec = study2.pool_spec()
    assert fea == Algorithm("fea", w=0.7, lo=spec.fea.lo, hi=spec.fea.hi)
    assert study2.algorithms == ()


def test_study_check_summarises_the_declared_algorithms(protocol_path, capsys):
    assert main(["check", str(protocol_path)]) == 0
    out = capsys.readouterr().out
    assert "fair: Robot Pat runs maximin" in out
    assert "maximin = 0.5 egalitarian_c + 0.5 efficiency" in out
    assert "remembering = 0.6 fairness + 0.4 efficiency; memory over the study" in out
    assert "equity = 0.6 efficiency + 0.4 fair_equity (bounds [0.1, 1.5])" in out
    assert "slowest = code goal_rewards_example:slowest_first" in out


def test_a_fair_equity_term_may_take_the_pools_bounds(protocol_path):
    text = protocol_path.read_text().replace("fea_bounds = [0.1, 1.5]", 'fea_bounds = "pool"')
    with pytest.raises(ProtocolError, match=r'algorithms\.2\.fea_bounds: "pool" needs "fea"'):
        parse_protocol(text, "declared.toml")
    with_pool_fea = text.replace('algorithms = ["efficient", "fair"]',
                                 'algorithms = ["efficient", "fair", "fea"]').replace(
        "[pool.teammate]\n", '[pool.fea]\nbounds = [0.2, 3.0]\nbounds_source = "a test"\n\n'
                             "[pool.teammate]\n", 1)
    protocol = parse_protocol(with_pool_fea, protocol_path)
    equity = protocol_algorithm(protocol, "equity")
    assert (equity.lo, equity.hi) == (0.2, 3.0)


def test_study_solve_solves_a_declared_algorithm_for_one_team(protocol_path, capsys):
    assert main(["solve", "--protocol", str(protocol_path), "--algorithm", "maximin",
                 "--kits", "8,8", *TEAM]) == 0
    out = capsys.readouterr().out
    algorithm = protocol_algorithm(load_protocol(protocol_path), "maximin")
    policy = solve(Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]]), algorithm)
    assert out.startswith("maximin(0.5 efficiency + 0.5 egalitarian_c) (default order): "
                          f"reward {policy.reward:.4f}")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    names = {0: "squares", 1: "letters"}
    assert [(row[1], row[2]) for row in rows] == [(names[a], names[b]) for a, b in policy.plan]


def test_study_solve_counts_the_history_for_an_algorithm_with_memory(protocol_path, capsys):
    args = ["solve", "--protocol", str(protocol_path), "--algorithm", "remembering",
            "--kits", "8,8", *TEAM]
    assert main([*args, "--history", "0,8", "--history", "8,0"]) == 0
    remembered = capsys.readouterr().out
    assert main(args) == 0
    forgotten = capsys.readouterr().out
    assert remembered.splitlines()[-2] != forgotten.splitlines()[-2]   # other goals
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    algorithm = protocol_algorithm(load_protocol(protocol_path), "remembering")
    policy = solve(team, algorithm, history=np.array([[0, 8], [8, 0]]))
    assert f"reward {policy.reward:.4f}" in remembered


def test_study_solve_without_a_protocol_knows_only_the_presets(capsys):
    assert main(["solve", *TEAM, "--algorithm", "maximin"]) == 2
    assert "declared algorithms need --protocol" in capsys.readouterr().err


def test_study_solve_takes_feas_settings_from_the_protocol(protocol_path, capsys):
    assert main(["solve", "--protocol", str(protocol_path), "--algorithm", "equity",
                 "--w", "0.5", *TEAM]) == 2
    assert "with --protocol FEA takes the protocol's weight and bounds" in (
        capsys.readouterr().err)
    assert main(["solve", "--protocol", str(protocol_path), "--algorithm", "greedy",
                 *TEAM]) == 2
    assert "must be one of efficient, fair, fea, maximin, remembering, equity, slowest" in (
        capsys.readouterr().err)


def write_teams(path: Path, count: int = 30, with_history: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"team": [f"t{k}" for k in range(count)]})
    for kind in "cp":
        for i in range(2):
            for j in range(2):
                frame[f"{kind}_{i}_{j}"] = rng.uniform(0.01, 0.99, count)
    if with_history:
        squares = rng.integers(0, 9, count)   # one earlier session of 8 + 8 kits
        for i, held in enumerate((squares, 8 - squares)):
            frame[f"history_{i}_0"], frame[f"history_{i}_1"] = held, 8 - held
    frame.to_csv(path, index=False)
    return frame


@pytest.mark.parametrize(("name", "order"), [("maximin", "default"),
                                             ("remembering", "default"),
                                             ("remembering", "anytime-fair"),
                                             ("slowest", "default")])
def test_study_solve_solves_a_csv_of_teams_with_a_declared_algorithm(protocol_path, tmp_path,
                                                                     name, order):
    frame = write_teams(tmp_path / "teams.csv", with_history=name == "remembering")
    out = tmp_path / "results.csv"
    assert main(["solve", "--protocol", str(protocol_path), "--algorithm", name,
                 "--kits", "8,8", "--teams", str(tmp_path / "teams.csv"), "--order", order,
                 "--out", str(out)]) == 0
    result = pd.read_csv(out)
    c = frame[[f"c_{i}_{j}" for i in range(2) for j in range(2)]].to_numpy().reshape(-1, 2, 2)
    p = frame[[f"p_{i}_{j}" for i in range(2) for j in range(2)]].to_numpy().reshape(-1, 2, 2)
    history = None
    if name == "remembering":
        history = frame[[f"history_{i}_{j}" for i in range(2) for j in range(2)]].to_numpy(
            float).reshape(-1, 2, 2)
    algorithm = protocol_algorithm(load_protocol(protocol_path), name)
    batch = solve_batch(c, p, algorithm, (8, 8), history=history)
    assert np.allclose(result["reward"], batch.reward, rtol=0, atol=1e-12)
    for i in range(2):
        for j in range(2):
            assert (result[f"goal_{i}_{j}"] == batch.goal_allocations[:, i, j]).all()
