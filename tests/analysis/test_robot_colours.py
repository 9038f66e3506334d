"""One colour per robot in every figure of the report: the presets keep their named
colours, a declared robot gets one no other robot of the study has (a declared robot once
took its palette index's colour, and welfare's Nash wore FEA's green), and the figures draw
each robot in its colour."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from analysis import figures
from study.protocol.loader import load_protocol

WELFARE = Path(__file__).resolve().parents[2] / "protocols" / "welfare.toml"
PRESETS = ("efficient", "fair", "fea")
TERMS = ("nash_p", "egalitarian_p", "nash_c", "egalitarian_c", "preference_equality",
         "capability_equality", "preference", "fairness")
DECLARED = 12  # the most [[algorithms]] a protocol declares


def robots(path: Path) -> tuple[list[str], list[str]]:
    """A protocol's robots as the report colours them: its conditions (the study's
    figures), then its pool's algorithms (the simulation's figures)."""
    protocol = load_protocol(path)
    return [condition.id for condition in protocol.conditions], list(protocol.pool.algorithms)


def many_declared(directory: Path) -> Path:
    """welfare with ten more declared robots in its pool, twelve in all beside Efficient
    and FEA, and a fourth condition, named apart, running one of them."""
    text = WELFARE.read_text(encoding="utf-8")
    names = [f"robot_{k}" for k in range(DECLARED - 2)]
    declared = "".join(
        f'\n[[algorithms]]\nid = "{name}"\nterms = {{ efficiency = {0.5 if k < 8 else 0.3}, '
        f'{TERMS[k % len(TERMS)]} = {0.5 if k < 8 else 0.7} }}\n'
        for k, name in enumerate(names))
    fourth = ('\n[[conditions]]\nid = "rawls"\nalgorithm = "robot_1"\n'
              'robot = "Kim"\ntransparency = "Robot Kim looks after the one worst off."\n')
    text = text.replace("\n[[algorithms]]\n", fourth + declared + "\n[[algorithms]]\n", 1)
    text, count = re.subn(r'(?m)^algorithms = \["efficient", "fea", "nash", "balance"\]$',
                          "algorithms = " + str(["efficient", "fea", "nash", "balance",
                                                 *names]).replace("'", '"'), text)
    assert count == 1
    path = directory / "many.toml"
    path.write_text(text, encoding="utf-8")
    return path


def assert_one_colour_per_robot(colours: dict[str, str]) -> None:
    assert len(set(colours.values())) == len(colours), colours
    for name in PRESETS:
        if name in colours:
            assert colours[name] == figures.COLOURS[name]
    preset_colours = {figures.COLOURS[name] for name in PRESETS}
    for name, shade in colours.items():
        if name not in PRESETS:
            assert shade not in preset_colours, name


def test_welfares_robots_have_four_colours_and_the_presets_theirs():
    conditions, algorithms = robots(WELFARE)
    assert conditions == ["efficient", "fea", "nash"]
    assert algorithms == ["efficient", "fea", "nash", "balance"]
    study = figures.robot_colours(conditions)
    report = figures.robot_colours([*conditions, *algorithms])
    assert_one_colour_per_robot(report)
    assert report["nash"] != report["fea"] != report["balance"] != report["nash"]
    assert {name: report[name] for name in study} == study, \
        "a robot has one colour in the study's figures and the simulation's"


def test_a_protocol_with_many_declared_robots_gives_each_its_own(tmp_path):
    conditions, algorithms = robots(many_declared(tmp_path))
    assert len(conditions) == 4 and len(algorithms) == DECLARED + 2
    colours = figures.robot_colours([*conditions, *algorithms])
    assert len(colours) == DECLARED + 3  # rawls, the condition's name for robot_1, too
    assert_one_colour_per_robot(colours)


def test_a_preset_listed_after_declared_robots_keeps_its_colour():
    colours = figures.robot_colours(["nash", "balance", "fair", "efficient"])
    assert_one_colour_per_robot(colours)
    assert colours["nash"] == figures.robot_colours(["efficient", "nash"])["nash"]


def hexes(colours: list) -> list[str]:
    return [matplotlib.colors.to_hex(shade) for shade in colours]


@pytest.fixture
def welfare_colours() -> dict[str, str]:
    conditions, _ = robots(WELFARE)
    return figures.robot_colours(conditions)


def legend(axis) -> dict[str, str]:
    """Each legend entry's colour: a line's, an error bar's or a bar's."""
    handles, labels = axis.get_legend_handles_labels()
    shades = {}
    for handle, label in zip(handles, labels, strict=True):
        if hasattr(handle, "patches"):
            shades[label] = hexes([handle.patches[0].get_facecolor()])[0]
        elif hasattr(handle, "lines"):
            shades[label] = hexes([handle.lines[0].get_color()])[0]
        else:
            shades[label] = hexes([handle.get_color()])[0]
    return shades


def test_the_report_figures_draw_each_robot_in_its_colour(welfare_colours):
    conditions = list(welfare_colours)
    predicted = pd.DataFrame({"outcome": "Fair", "condition": conditions,
                              "predicted_mean": [3.0, 4.0, 5.0], "ci_low": [2.0, 3.0, 4.0],
                              "ci_high": [4.0, 5.0, 6.0]})
    per_round = pd.DataFrame({"condition": np.repeat(conditions, 4),
                              "round": np.tile([1, 2, 3, 4], 3), "F": np.linspace(0, 1, 12),
                              "unit": np.repeat([1, 2, 3], 4)})
    rounds = pd.DataFrame({"algorithm": np.repeat(conditions, 2), "team_type": "participants",
                           "human": ["participant", "teammate"] * 3, "teams": 4,
                           "capable_rounds": [1.0, 2, 3, 4, 5, 6],
                           "preferred_rounds": [2.0, 3, 4, 5, 6, 7]})
    drawn = [figures.intervals_figure(predicted, colours=welfare_colours),
             figures.running_fairness_figure(per_round, ["condition"], "F", "t",
                                             welfare_colours),
             figures.allocations_figure(rounds, "t", 8, welfare_colours)]
    for figure in drawn:
        assert legend(figure.axes[0]) == welfare_colours
        figures.plt.close(figure)
