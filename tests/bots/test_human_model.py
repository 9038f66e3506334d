"""The human decorating-speed model: grounded times, spread, and the calibrated protocols."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.web import LiveServer

from study.bots import StudyFacts, profile_for, run_swarm
from study.bots.servers import quick_protocol
from study.people.scale import (
    PAPER_CENTRES,
    PAPER_RANGES,
    calibrated_reference,
    paper_references,
    protocol_scale,
    share_in_ranges,
    weight_on_paper_scale,
)
from study.people.speed import (
    DRAGGING,
    POINTING,
    ROBUSTNESS_PACES,
    Human,
    coefficients,
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


def test_the_calibrated_reference_puts_the_typical_speed_at_the_ranges_centre():
    rng = np.random.default_rng(7)
    speeds = np.exp(rng.normal(np.log(0.05), 0.2, 4000))
    reference = calibrated_reference(speeds, 0.63, 1.00)
    typical = np.exp(np.log(speeds / reference).mean())
    assert typical == pytest.approx(np.sqrt(0.63 * 1.00))


def test_fea_on_another_scale_is_fea_at_another_weight():
    """``w'/(1-w') = k w/(1-w)``: the shipped FEA on the compressed scale (0.7, 0.29) is the
    paper's FEA at about 0.40; on the paper's scale the weight is its own."""
    assert weight_on_paper_scale(0.7, 0.29) == pytest.approx(0.4036, abs=1e-4)
    assert weight_on_paper_scale(0.7, 1.0) == pytest.approx(0.7)
    shifted = weight_on_paper_scale(0.7, 0.5)
    assert shifted / (1 - shifted) == pytest.approx(0.5 * 0.7 / 0.3)


SHIPPED = sorted(path.stem for path in PROTOCOLS.glob("*.toml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_protocol_measures_the_typical_person_on_the_papers_scale(name):
    """The human model's typical person lands within 1 % of the centres of the paper's
    ranges (squares about 0.26, letters about 0.79) under every shipped protocol's
    reference speeds: the robots choose on the scale the paper's people measured on."""
    protocol = load_protocol(PROTOCOLS / f"{name}.toml")
    scale = protocol_scale(protocol)
    assert not scale.off
    assert scale.factors == pytest.approx((1.0, 1.0), abs=0.01)
    assert scale.typical == pytest.approx((0.26, 0.79), rel=0.10)
    assert tuple(c.reference_speed for c in protocol.cookies) == pytest.approx(
        paper_references(protocol), rel=0.01)


@pytest.mark.parametrize("name", ["demo", "study1"])
def test_only_a_few_percent_of_the_population_clip_and_only_at_the_top(name):
    """With the model's person-to-person spread, squares never clip and letters clip at
    0.99 for a few percent (people quicker than the paper's quickest); nobody at 0.01."""
    protocol = load_protocol(PROTOCOLS / f"{name}.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    shipped = tuple(cookie.reference_speed for cookie in protocol.cookies)
    values = coefficients(population_speeds(targets, protocol.practice_seconds, 2000, 5),
                          shipped)
    assert (values <= 0.01).sum() == 0
    top = (values >= 0.99).mean(axis=0)
    assert top[0] == 0.0 and 0.01 < top[1] < 0.10, top


def test_people_at_the_models_pace_measure_inside_the_papers_ranges():
    """Study1's people at the model's own pace measure where the paper's people did:
    squares in [0.20, 0.32] and letters in [0.63, 1.00], but for a round's chance."""
    protocol = load_protocol(PROTOCOLS / "study1.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    shipped = tuple(cookie.reference_speed for cookie in protocol.cookies)
    values = coefficients(pace_speeds(targets, protocol.practice_seconds, 1.0, 400, 6), shipped)
    assert share_in_ranges(values, PAPER_RANGES) > 0.9
    assert np.median(values, axis=0) == pytest.approx(PAPER_CENTRES, rel=0.05)


def test_the_robustness_paces_clip_the_quickest_on_letters_and_nobody_slow():
    """At 0.3 times the model's times letters clip for everyone (the paper's scale has no
    room for them; they follow the protocol's declared consequence), at 2.5 times nobody."""
    protocol = load_protocol(PROTOCOLS / "study2.toml")
    targets = [target(protocol, task_type) for task_type in range(2)]
    shipped = tuple(cookie.reference_speed for cookie in protocol.cookies)
    quick, slow = (coefficients(pace_speeds(targets, 30.0, pace, 100, 7), shipped)
                   for pace in ROBUSTNESS_PACES)
    assert (quick[:, 1] >= 0.99).all() and (quick[:, 0] < 0.99).all()
    assert ((slow > 0.01) & (slow < 0.99)).all()


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
