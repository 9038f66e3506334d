"""``study check`` shows where the human model's typical person measures under a protocol's
reference speeds, beside the paper's centres, and warns of a scale more than 10 % off
them with the weight each FEA robot amounts to on the paper's scale (MODEL.md, "The
capability scale is part of the algorithm")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.protocols import study2_at

from study.cli import main
from study.people.scale import protocol_scale, weight_on_paper_scale
from study.protocol.loader import load_protocol

# A declared algorithm of FEA's form: its efficiency weight is FEA's w.
LEAN_FEA = """
[[algorithms]]
id = "lean"
terms = { efficiency = 0.6, fair_equity = 0.4 }
fea_bounds = "pool"
"""


def checked(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["check", str(path)]) == 0, "a warning, not a refusal"
    out, err = capsys.readouterr()
    assert err == ""
    return out.splitlines()


def test_a_protocol_off_the_papers_scale_is_warned_of_with_feas_weight_there(tmp_path,
                                                                             capsys):
    path = study2_at(tmp_path, 1.15, 0.244, LEAN_FEA)
    lines = checked(path, capsys)
    scale = protocol_scale(load_protocol(path))
    assert scale.off and scale.factor == pytest.approx(0.29, abs=0.01)
    (row,) = [line for line in lines if line.lstrip().startswith("scale ")]
    assert row.endswith(scale.describe())
    assert "the human model's typical person measures" in row
    assert "squares 0.07" in row and "letters 0.22" in row and "x0.29" in row
    (warning,) = [line for line in lines if "WARNING" in line]
    assert "more than 10% off the paper's (squares x0.29, letters x0.29)" in warning
    weights = dict(re.findall(r"(\w+): FEA w = [\d.]+ acts as the paper's FEA at w = "
                              r"([\d.]+)", warning))
    assert set(weights) == {"fea", "lean"}
    assert float(weights["fea"]) == pytest.approx(0.40, abs=0.005)
    assert float(weights["fea"]) == pytest.approx(weight_on_paper_scale(0.7, scale.factor),
                                                  abs=0.005)
    assert float(weights["lean"]) == pytest.approx(weight_on_paper_scale(0.6, scale.factor),
                                                   abs=0.005)
    assert "fea: FEA w = 0.7 acts" in warning and "lean: FEA w = 0.6 acts" in warning


def test_a_protocol_on_the_papers_scale_gets_no_warning(tmp_path, capsys):
    path = study2_at(tmp_path, 0.3285, 0.0697, LEAN_FEA)
    lines = checked(path, capsys)
    scale = protocol_scale(load_protocol(path))
    assert not [line for line in lines if "WARNING" in line]
    assert not scale.off
    squares, letters = scale.typical
    assert squares == pytest.approx(0.26, rel=0.10)
    assert letters == pytest.approx(0.79, rel=0.10)
    assert any(line.endswith(scale.describe()) for line in lines)


def test_the_weight_on_the_papers_scale_follows_the_odds():
    """``w'/(1-w') = k w/(1-w)``: the issue's figure and the two ends."""
    assert weight_on_paper_scale(0.7, 0.29) == pytest.approx(0.4036, abs=1e-4)
    assert weight_on_paper_scale(0.7, 1.0) == pytest.approx(0.7)
    assert weight_on_paper_scale(0.0, 0.29) == 0.0
    assert weight_on_paper_scale(1.0, 0.29) == pytest.approx(1.0)
