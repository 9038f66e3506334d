"""``study pool build | summary | bounds | match`` from the command line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from study.allocation.model import state_space
from study.cli import main
from study.pool import Pool
from study.pool.bounds import derive_bounds
from study.pool.columns import goal_sums

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "study2.parquet"
    assert main(["pool", "build", str(PROTOCOLS / "study2.toml"), "--out", str(out),
                 "--teams", "9000", "--chunk", "4000"]) == 0
    return out


def test_build_writes_the_overridden_size_in_row_groups_of_the_chunk(pool_file):
    assert Pool.load(pool_file).teams == 9_000
    assert pq.ParquetFile(pool_file).metadata.num_row_groups == 3


def test_summary_prints_both_tables_and_json_the_same_numbers(pool_file, capsys):
    capsys.readouterr()
    assert main(["pool", "summary", str(pool_file)]) == 0
    text = capsys.readouterr().out
    assert "Simulation Study #1" in text and "Simulation Study #2" in text
    assert main(["pool", "summary", str(pool_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pool"]["teams"] == 9_000
    assert f"{data['study1']['selected']:,} of 9,000" in text
    mixed = data["study2"]["mixed"]
    assert set(data["study2"]) == {"mixed", "twins", "negative"}
    # each human gets 8 kits: rounds on a type never exceed 8
    for algorithm in ("efficient", "fair", "fea"):
        for role in ("most_capable", "other"):
            assert 0 <= mixed[algorithm][role]["capable"] <= 8
    # MODEL.md: in Mixed teams the Efficient plan gives the most capable human their most
    # capable type more often, and their preferred type less often, than FEA
    assert mixed["efficient"]["most_capable"]["capable"] > mixed["fea"]["most_capable"]["capable"]
    assert (mixed["efficient"]["most_capable"]["preferred"]
            < mixed["fea"]["most_capable"]["preferred"])


def test_bounds_are_the_extremes_or_percentiles_of_abs_fe(pool_file, capsys):
    pool = Pool.load(pool_file)
    c, p = pool.coefficients
    space = state_space(2, (8, 8))
    values = np.abs(goal_sums(c, p, space.allocations[space.goals]).fair_equity())
    bounds = derive_bounds(pool_file)
    assert (bounds.lo, bounds.hi) == (values.min(), values.max())
    assert bounds.goal_states == values.size
    assert main(["pool", "bounds", str(pool_file), "--percentiles", "1,99", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lo"] == pytest.approx(np.percentile(values, 1))
    assert data["hi"] == pytest.approx(np.percentile(values, 99))
    assert "percentiles 1 and 99" in data["source"] and pool.record["teams_digest"][:16] \
        in data["source"]
    assert main(["pool", "bounds", str(pool_file)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("bounds = [")


def test_bad_percentiles_are_refused(pool_file, capsys):
    assert main(["pool", "bounds", str(pool_file), "--percentiles", "99,1"]) == 2
    assert "--percentiles" in capsys.readouterr().err


def test_match_prints_the_teammate_and_json(pool_file, capsys):
    capsys.readouterr()
    assert main(["pool", "match", str(pool_file), "--c", "0.3,0.8", "--p", "0.9,0.2",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    expected = Pool.load(pool_file).match([0.3, 0.8], [0.9, 0.2])
    assert data["team_index"] == expected.team_index
    assert data["teammate_c"] == expected.teammate_c.tolist()
    assert main(["pool", "match", str(pool_file), "--c", "0.3,0.8", "--p", "0.9,0.2",
                 "--role", "any", "--team-types", "twins"]) == 0
    assert "team type in twins; participant as any member" in capsys.readouterr().out


def test_match_with_an_empty_filter_fails_naming_it(pool_file, capsys):
    assert main(["pool", "match", str(pool_file), "--c", "0.3,0.8", "--p", "0.9,0.2",
                 "--team-types", "mixed-reversed"]) == 2
    assert "no team in pool" in capsys.readouterr().err


def test_build_refuses_a_malformed_protocol(tmp_path, capsys):
    text = (PROTOCOLS / "study2.toml").read_text(encoding="utf-8")
    sample = "c = [[0.20, 0.32], [0.63, 1.00]]"
    assert text.count(sample) == 1
    protocol = tmp_path / "bad.toml"
    protocol.write_text(text.replace(sample, "c = [0.9, 0.1]"), encoding="utf-8")
    assert main(["check", str(protocol)]) == 2
    checked = capsys.readouterr().err
    assert main(["pool", "build", str(protocol), "--out", str(tmp_path / "x.parquet")]) == 2
    assert capsys.readouterr().err == checked and "bad.toml:" in checked


def test_reading_a_file_that_is_not_a_pool_fails_clearly(tmp_path, capsys):
    other = tmp_path / "other.parquet"
    other.write_bytes(b"not parquet")
    assert main(["pool", "summary", str(other)]) == 2
    assert "cannot be read as Parquet" in capsys.readouterr().err


@pytest.mark.parametrize("action", [["summary"], ["match", "--c", "0.3,0.8", "--p", "0.9,0.2"],
                                    ["bounds"]])
def test_reading_a_pool_does_not_import_pandas(pool_file, action):
    code = ("import sys\nfrom study.cli import main\n"
            f"main({['pool', action[0], str(pool_file), *action[1:]]!r})\n"
            "print('pandas' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=True)
    assert result.stdout.splitlines()[-1] == "False"
