"""``study solve``: the readable table for one team and the batch CSV contract."""

import numpy as np
import pandas as pd
import pytest

from study.allocation.model import Algorithm, Team
from study.allocation.solver import solve
from study.cli import main

TEAM_ARGS = ["--c", "0.25,0.9", "--c", "0.3,0.7", "--p", "0.9,0.1", "--p", "0.4,0.6"]


def test_one_team_prints_a_round_by_round_table(capsys):
    assert main(["solve", *TEAM_ARGS, "--algorithm", "fair"]) == 0
    out = capsys.readouterr().out
    policy = solve(Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]]), Algorithm("fair"))
    assert f"reward {policy.reward:.4f}" in out
    lines = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(lines) == 8
    names = {0: "squares", 1: "letters"}
    assert [(row[1], row[2]) for row in lines] == [(names[a], names[b]) for a, b in policy.plan]
    final_f = float(lines[-1][6])
    assert final_f == pytest.approx(policy.round_metrics()["F"][-1], abs=5e-4)


def test_one_team_solves_all_three_algorithms_by_default(capsys):
    assert main(["solve", *TEAM_ARGS]) == 0
    out = capsys.readouterr().out
    assert out.count("reward") == 3
    assert "fea(w=0.7" in out


def test_invalid_coefficient_is_a_clear_error(capsys):
    assert main(["solve", "--c", "1.5,0.9", "--c", "0.3,0.7", *TEAM_ARGS[4:]]) == 2
    assert "c[0, 0] = 1.5" in capsys.readouterr().err


def test_bad_fea_bounds_are_a_clear_error(capsys):
    assert main(["solve", *TEAM_ARGS, "--fea-bounds", "1,0.5"]) == 2
    assert "hi must be greater than lo" in capsys.readouterr().err


def write_teams(path, count=40, seed=1):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"team": [f"t{k}" for k in range(count)]})
    for kind in "cp":
        for i in range(2):
            for j in range(2):
                frame[f"{kind}_{i}_{j}"] = rng.uniform(0.01, 0.99, count)
    frame.to_csv(path, index=False)
    return frame


@pytest.mark.parametrize(("order", "solver"), [("default", "exact"),
                                               ("anytime-fair", "exact"),
                                               ("default", "mdptoolbox")])
def test_batch_csv_contract(tmp_path, order, solver):
    frame = write_teams(tmp_path / "teams.csv")
    out = tmp_path / "results.csv"
    args = ["solve", "--teams", str(tmp_path / "teams.csv"), "--algorithm", "fea",
            "--w", "0.6", "--fea-bounds", "0.1,1.4", "--order", order, "--solver", solver,
            "--kits", "8,8", "--out", str(out)]
    assert main(args) == 0
    result = pd.read_csv(out)
    assert list(result["team"]) == list(frame["team"])
    expected_columns = {f"goal_{i}_{j}" for i in range(2) for j in range(2)} | {
        "actions", "reward", "E", "F_c", "F_p", "F", "FE"}
    assert expected_columns <= set(result.columns)
    algorithm = Algorithm("fea", w=0.6, lo=0.1, hi=1.4)
    for row in result.itertuples():
        c = np.array([[row.c_0_0, row.c_0_1], [row.c_1_0, row.c_1_1]])
        p = np.array([[row.p_0_0, row.p_0_1], [row.p_1_0, row.p_1_1]])
        policy = solve(Team(c, p), algorithm, order=order)
        rounds = [tuple(int(t) for t in step.split("-")) for step in row.actions.split(";")]
        assert rounds == policy.plan
        assert row.goal_0_1 == policy.goal_allocation[0, 1]
        assert row.reward == pytest.approx(policy.reward)


def test_batch_needs_one_algorithm_and_an_output(tmp_path, capsys):
    write_teams(tmp_path / "teams.csv")
    assert main(["solve", "--teams", str(tmp_path / "teams.csv"), "--out",
                 str(tmp_path / "o.csv")]) == 2
    assert "exactly one" in capsys.readouterr().err
    assert main(["solve", "--teams", str(tmp_path / "teams.csv"), "--algorithm", "fair"]) == 2
    assert "output CSV" in capsys.readouterr().err


def test_batch_reports_missing_and_invalid_columns(tmp_path, capsys):
    frame = write_teams(tmp_path / "teams.csv")
    frame.drop(columns=["p_1_1"]).to_csv(tmp_path / "missing.csv", index=False)
    assert main(["solve", "--teams", str(tmp_path / "missing.csv"), "--algorithm", "fair",
                 "--out", str(tmp_path / "o.csv")]) == 2
    assert "p_1_1" in capsys.readouterr().err
    frame.loc[3, "c_0_1"] = 2.0
    frame.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["solve", "--teams", str(tmp_path / "bad.csv"), "--algorithm", "fair",
                 "--out", str(tmp_path / "o.csv")]) == 2
    assert "c[3, 0, 1] = 2.0" in capsys.readouterr().err
