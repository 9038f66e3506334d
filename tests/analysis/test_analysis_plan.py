"""Planning the next study: simulated power against the closed form, the decorator model
against its expectation, and the plan command on a small pool."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from support.web import DEMO, ROOT

from analysis import cli, plan
from study.task.decorator import Decorator


def test_simulated_power_of_normal_differences_matches_the_paired_t_closed_form():
    effect = 0.5

    def draw(rng, n):
        return rng.normal(effect, 1.0, n)

    participants = (8, 16, 32, 48)
    curve = plan.power_curve(draw, participants, "t", 0.05, 4000,
                             np.random.default_rng(2))
    closed = plan.paired_t_power(np.array(participants), effect)
    for row, expected in zip(curve.itertuples(), closed, strict=True):
        assert row.ci_low - 0.01 <= expected <= row.ci_high + 0.01
    # the closed form itself: with huge n it tends to the normal-approximation power
    z = stats.norm.ppf(0.975)
    assert plan.paired_t_power(2000, 0.05) == pytest.approx(
        stats.norm.sf(z - 0.05 * np.sqrt(2000)) + stats.norm.cdf(-z - 0.05 * np.sqrt(2000)),
        abs=2e-3)


def test_without_a_difference_the_tests_reject_at_about_alpha():
    curve = plan.power_curve(plan.likert_draw(0.0, 1.5), (20, 40), "wilcoxon", 0.05, 3000,
                             np.random.default_rng(3))
    assert (curve["power"] < 0.075).all() and (curve["power"] > 0.025).all()


def test_cookie_counts_follow_the_decorator_model():
    rng = np.random.default_rng(5)
    decorator = Decorator((0.6, 0.3), (0.4, 0.15))
    reference = [len(decorator.cookie_times(0, 30.0, rng)) for _ in range(4000)]
    drawn = plan.cookie_counts(np.full(4000, decorator.speed(0)), 30.0, rng)
    assert drawn.mean() == pytest.approx(0.6 * 0.4 * 30, rel=0.02)
    assert drawn.mean() == pytest.approx(np.mean(reference), rel=0.03)
    assert drawn.std() == pytest.approx(np.std(reference), rel=0.08)


def test_team_cookies_expectation_is_speed_times_time():
    rng = np.random.default_rng(6)
    c = rng.uniform(0.2, 0.9, (60, 2, 2))
    goals = np.array([[[3, 1], [1, 3]]] * 60)
    cookies = plan.team_cookies(c, goals, (0.4, 0.15), 20.0, rng, 200)
    expected = (c * np.array([0.4, 0.15]) * goals * 20.0).sum(axis=(1, 2))
    assert cookies.mean(axis=1) == pytest.approx(expected, rel=0.06)


def test_needed_is_the_fewest_participants_reaching_the_target():
    curves = pd.DataFrame({"outcome": ["x"] * 3 + ["y"] * 3,
                           "participants": [10, 20, 30] * 2,
                           "power": [0.5, 0.85, 0.9, 0.1, 0.2, 0.3]})
    table = plan.needed(curves, 0.8).set_index("outcome")
    assert table.loc["x", "participants_needed"] == 20
    assert pd.isna(table.loc["y", "participants_needed"])


def test_plan_command_writes_curves_table_and_figure(tmp_path, capsys):
    from support.web import DEMO, small_pool

    pool = small_pool(tmp_path / "pools")
    out = tmp_path / "plan"
    assert cli.main(["plan", str(DEMO), "--pool", pool.name, "--out", str(out),
                     "--simulations", "60", "--participants", "6,12,24",
                     "--cookies-difference", "3"]) == 0
    curves = pd.read_csv(out / "plan.csv")
    assert set(curves["participants"]) == {6, 12, 24}
    assert curves.groupby("outcome")["power"].apply(lambda p: p.is_monotonic_increasing
                                                    or p.iloc[-1] >= p.iloc[0]).all()
    assert "mean 3.00" in curves["outcome"].iloc[0]
    assert (out / "plan.png").exists() and (out / "plan.svg").exists()
    assert "participants_needed" in capsys.readouterr().out


def test_help_shows_plain_numbers(capsys):
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = capsys.readouterr().out
    assert "np.float64" not in text and "0.1, ..., 1" in text
    assert "(default: None)" not in text and "(default: 100000)" in text


def pilot_database(path, protocol_name: str, speeds: list[tuple[float, float]]):
    """A pilot database whose participants finished practice at ``speeds`` (squares,
    letters cookies per second)."""
    from study.storage.database import Storage

    storage = Storage(path)
    for k, pair in enumerate(speeds):
        pid = storage.insert("participants", {"code": f"pilot-{k}", "protocol": protocol_name,
                                               "created_at": 1e9, "step": "done"})
        for task_type, speed in enumerate(pair):
            storage.insert("measurements", {"participant_id": pid, "kind": "capability",
                                            "task_type": task_type, "value": 0.5,
                                            "speed": speed, "at": 1e9 + k})
    storage.close()
    return path


def test_participants_are_drawn_from_the_pilots_measured_capabilities(tmp_path):
    from study.protocol.loader import load_protocol

    protocol = load_protocol(ROOT / "protocols" / "study2.toml")
    squares, letters = (cookie.reference_speed for cookie in protocol.cookies)
    measured = [(0.25 * squares, 0.70 * letters), (0.30 * squares, 0.90 * letters),
                (0.50 * squares, 2.00 * letters)]  # the last one's letters clip at 0.99
    pilot = pilot_database(tmp_path / "pilot.sqlite", "study2", measured)
    drawn = plan.participant_capabilities(protocol, pilot, 300, np.random.default_rng(1))
    assert drawn.shape == (300, 2)
    rows = {tuple(np.round(row, 6)) for row in drawn}
    assert rows == {(0.25, 0.7), (0.3, 0.9), (0.5, 0.99)}


def test_without_a_pilot_participants_are_people_of_the_human_model():
    from study.people.speed import PERSON_SPREAD
    from study.protocol.loader import load_protocol

    protocol = load_protocol(DEMO)
    drawn = plan.participant_capabilities(protocol, None, 300, np.random.default_rng(2))
    assert drawn.shape == (300, 2) and ((drawn >= 0.01) & (drawn <= 0.99)).all()
    # People differ by a speed factor with a log sd of PERSON_SPREAD (plus a round's own
    # noise): far narrower than the pool's uniform [0.01, 0.99] (log sd about 1).
    spread = np.log(drawn).std(axis=0)
    assert (spread > PERSON_SPREAD / 2).all() and (spread < 3 * PERSON_SPREAD).all(), spread


def test_the_plan_puts_the_drawn_participants_in_the_participants_seat():
    c = np.zeros((3, 2, 2))
    humans = np.array([0, 1, 1])
    people = np.array([[0.2, 0.7], [0.3, 0.8], [0.4, 0.9]])
    seated = plan.with_participants(c, humans, people)
    assert (seated[[0, 1, 2], humans] == people).all()
    assert (seated[[0, 1, 2], 1 - humans] == 0).all() and (c == 0).all()


def test_plan_command_takes_a_pilot(tmp_path, capsys):
    from support.web import small_pool

    from study.protocol.loader import load_protocol

    references = [cookie.reference_speed for cookie in load_protocol(DEMO).cookies]
    pilot = pilot_database(tmp_path / "pilot.sqlite", "demo",
                           [(0.3 * references[0], 0.8 * references[1])] * 5)
    pool = small_pool(tmp_path / "pools")
    out = tmp_path / "plan"
    assert cli.main(["plan", str(DEMO), "--pool", pool.name, "--out", str(out),
                     "--simulations", "30", "--participants", "6,12", "--pilot",
                     str(pilot)]) == 0
    assert set(pd.read_csv(out / "plan.csv")["participants"]) == {6, 12}
    other = pilot_database(tmp_path / "other.sqlite", "study2", [(0.1, 0.1)] * 5)
    assert cli.main(["plan", str(DEMO), "--pool", pool.name, "--out", str(out), "--pilot",
                     str(other)]) == 2
    assert "holds participants of protocol 'study2', not 'demo'" in capsys.readouterr().err
