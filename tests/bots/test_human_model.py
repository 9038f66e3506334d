"""The human decorating-speed model: grounded times, spread, and the calibrated protocols."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.web import LiveServer

from study.bots import StudyFacts, profile_for, run_swarm
from study.bots.servers import quick_protocol
from study.people.speed import (
    DRAGGING,
    HEADROOM_PACES,
    HEADROOM_TOP,
    OBSERVED_RANGES,
    POINTING,
    Human,
    calibrated_reference,
    coefficients,
    headroom_references,
    measured_speed,
    pace_speeds,
    population_speeds,
)
from study.protocol.loader import load_protocol
from study.task.cookies import letters_target, matches, squares_target, target
from study.web import create_app
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.progress import placement

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"
LETTERS, SQUARES = letters_target("GO STEELERS"), squares_target("BR")


def test_fitts_law_uses_the_published_mouse_coefficients():
    assert POINTING.seconds(256, 16) == pytest.approx(-0.107 + 0.223 * np.log2(17))
    assert DRAGGING.seconds(256, 16) == pytest.approx(0.135 + 0.249 * np.log2(17))
    assert DRAGGING.seconds(256, 16) > POINTING.seconds(256, 16), "dragging is slower"
    assert POINTING.seconds(10, 1000) == 0.0, "never a negative time"


def test_a_letter_takes_longer_than_a_box_and_every_trial_varies():
    person, rng = Human(), np.random.default_rng(0)
    letters = [person.letter_seconds(10, rng) for _ in range(2000)]
    boxes = [person.click_seconds(46, 42, rng) for _ in range(2000)]
    assert np.mean(letters) > 2 * np.mean(boxes)
    assert 0.2 < np.std(letters) / np.mean(letters) < 0.4
    assert 1.0 < np.mean(letters) < 2.5 and 0.25 < np.mean(boxes) < 0.6


def test_people_differ_from_each_other():
    rng = np.random.default_rng(1)
    paces = np.array([Human.sample(rng).pace for _ in range(4000)])
    assert np.mean(paces) == pytest.approx(1.0, abs=0.02)
    assert 0.10 < np.std(np.log(paces)) < 0.16
    low, high = np.percentile(paces, [5, 95])
    assert 1.3 < high / low < 1.7


@pytest.mark.parametrize("cookie", [LETTERS, SQUARES], ids=["letters", "squares"])
def test_a_round_is_what_the_server_would_accept(cookie):
    actions = Human(slip=0.2).round_actions(cookie, 60.0, np.random.default_rng(2))
    assert [a.at for a in actions] == sorted(a.at for a in actions) and actions[-1].at < 60
    finished = [a for a in actions if a.finished]
    assert finished and all(matches(cookie, a.content) for a in finished)
    slips = 0
    for action in actions:
        checked = placement(cookie, action.content)
        assert (checked.correct, checked.fraction) == (action.correct,
                                                       pytest.approx(action.fraction))
        slips += checked.correct < checked.placed
    assert slips > 0, "some elements go wrong and are taken off again"


def test_the_measure_counts_the_unfinished_cookie_by_its_fraction():
    actions = Human().round_actions(LETTERS, 30.0, np.random.default_rng(3))
    cut = next(a for a in actions if not a.finished and a.correct >= 3).at
    done = [a for a in actions if a.at <= cut]
    expected = (sum(a.finished for a in done) + done[-1].correct / 10) / cut
    assert measured_speed(actions, cut) == pytest.approx(expected)


def test_a_short_round_measures_the_same_speed_as_a_long_one():
    speeds = population_speeds([SQUARES, LETTERS], 15.0, 600, seed=4)
    longer = population_speeds([SQUARES, LETTERS], 30.0, 600, seed=4)
    assert np.mean(speeds, axis=0) == pytest.approx(np.mean(longer, axis=0), rel=0.08)


def test_headroom_references_keep_the_papers_ratio_and_put_the_quickest_at_the_top():
    rng = np.random.default_rng(7)
    typical = np.exp(rng.normal(np.log([0.08, 0.05]), 0.1, (400, 2)))
    quickest = typical * 3.0
    paper = np.array([calibrated_reference(typical[:, j], *OBSERVED_RANGES[j])
                      for j in range(2)])
    references = np.array(headroom_references(typical, quickest))
    ratio = references / paper
    assert ratio[0] == pytest.approx(ratio[1]), "one factor for every type"
    top = np.median(quickest, axis=0) / references
    assert top.max() == pytest.approx(HEADROOM_TOP)
    assert top[1] > top[0], "letters stays the type measured higher"


@pytest.mark.parametrize("name", ["demo", "study1", "study2", "teams2", "teams3"])
def test_the_shipped_reference_speeds_measure_quick_and_slow_people_unclipped(name):
    """People at 0.3 and 2.5 times the model's times measure inside (0.01, 0.99) on both
    types under the shipped speeds, which are the headroom calibration's; the typical person
    measures letters above squares, at one fraction of the paper's ranges for both."""
    protocol = load_protocol(PROTOCOLS / f"{name}.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    seconds = protocol.practice_seconds
    speeds = population_speeds(targets, seconds, 1500, seed=5)
    quickest, slowest = (pace_speeds(targets, seconds, pace, 300, seed=5)
                         for pace in HEADROOM_PACES)
    shipped = tuple(cookie.reference_speed for cookie in protocol.cookies)
    assert shipped == pytest.approx(headroom_references(speeds, quickest), rel=0.05)
    for people in (quickest, slowest):
        values = coefficients(people, shipped)
        clipped = ((values <= 0.01) | (values >= 0.99)).mean(axis=0)
        assert (clipped < 0.05).all(), f"{name}: clipped shares {clipped}"
    typical = np.median(coefficients(speeds, shipped), axis=0)
    centres = np.sqrt(np.prod(OBSERVED_RANGES, axis=1))
    assert typical[1] > 2 * typical[0], "letters stays the cookie people are best at"
    assert typical[0] / centres[0] == pytest.approx(typical[1] / centres[1], rel=0.1)


@pytest.mark.minutes(0.7)
def test_a_human_bot_reports_every_element_and_is_measured_by_it(tmp_path):
    protocol_path = quick_protocol(PROTOCOLS / "demo.toml", tmp_path / "quick.toml",
                                   round_seconds=4.0, practice_seconds=8.0,
                                   reference_speed=(0.32, 0.068), min_cookie_seconds=0.5)
    protocol = load_protocol(protocol_path)
    app = create_app({"PROTOCOL": protocol_path, "DATABASE": tmp_path / "study.sqlite",
                      "TEAMMATES": PoolTeammates.for_protocol(protocol, tmp_path / "pools")})
    profile = replace(profile_for(0, "human", seed=5), stop_at="teammate")
    with LiveServer(app) as server:
        result = run_swarm(server.url, ["human-bot-1"], [profile],
                           facts=StudyFacts.from_protocol(protocol), max_seconds=120)
    assert [o.error for o in result.outcomes] == [None], result.summary()
    assert result.outcomes[0].final_step == "teammate"
    storage = app.extensions["study"].storage
    pid = storage.participant("human-bot-1")["id"]
    progress = storage.all("SELECT * FROM progress WHERE participant_id = ?", (pid,))
    sent = [a for a in result.log.acked if a.event == "progress"]
    assert len(progress) == len(sent) > 10, "every element placed is stored"
    measured = storage.all("SELECT * FROM measurements WHERE participant_id = ? AND "
                           "kind = 'capability' ORDER BY task_type", (pid,))
    assert all(0.01 < row["value"] < 0.99 for row in measured)
    assert any(row["fraction"] > 0 for row in measured), "the unfinished cookie counts"
