"""The analysis of real teams (docs/teams.md): the team flow, per-member fairness for three
humans against hand-computed values, parity between people, and the team as a cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support.people import Person, play_round, practise, to_session
from support.teams import team_protocol
from support.web import FakeClock, make_app, small_pool

from analysis import flow, models, real_teams
from analysis.load import load


@pytest.fixture(scope="module")
def teammates3(tmp_path_factory: pytest.TempPathFactory):
    return small_pool(tmp_path_factory.mktemp("pools3"), kits=(3, 3), humans=3)


@pytest.fixture(scope="module")
def database(tmp_path_factory, teammates3):
    """Three people in a team of three play session 1; the third leaves after round 1."""
    directory = tmp_path_factory.mktemp("real-teams-db")
    clock = FakeClock()
    app = make_app(directory, teammates3, clock, team_protocol(directory, seats=3))
    people = [Person(app, f"member-{n}") for n in range(3)]
    for n, person in enumerate(people):
        practise(app, clock, person, squares=1 + n, letters=3 - n % 2)
    to_session(app, clock, people, 1)
    play_round(app, clock, people)
    people[2].leave()
    for _ in range(30):
        clock.advance(1.0)
        app.extensions["study"].tick(clock.now)
    play_round(app, clock, people[:2])
    return directory / "study.sqlite"


def test_fairness_shares_for_three_humans_are_the_models():
    c = np.array([[0.2, 0.8], [0.5, 0.5], [0.9, 0.3]])
    p = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8]])
    held = np.array([[1, 1], [0, 2], [2, 0]])
    shares, equity = real_teams._shares(c, p, held)
    # a_i^f = sum_j f_ij T_ij / (6 / 3); b_i = (a^c + a^p) / 2
    assert shares == pytest.approx([(1.0 / 2 + 1.0 / 2) / 2, (1.0 / 2 + 1.2 / 2) / 2,
                                    (1.8 / 2 + 0.4 / 2) / 2])
    assert equity == pytest.approx([1.0 / 1.0, 1.2 / 1.0, 0.4 / 1.2])


def test_the_flow_counts_teams_seats_takeovers_and_the_lobby(database):
    tables = real_teams.load_teams(database)
    counts = dict(real_teams.flow(tables).itertuples(index=False))
    assert counts["teams"] == 1 and counts["teams formed by arrival"] == 1
    assert counts["person seats"] == 3
    assert counts["seats taken over by an agent"] == 1 and counts["taken over: away"] == 1
    assert counts["left the lobby: team"] == 3


def test_the_participant_flow_knows_the_lobby_and_a_dropped_seat(database):
    stages = flow.participant_stages(database)
    outcome = dict(zip(stages["code"], stages["outcome"], strict=True))
    assert outcome == {"member-0": "left", "member-1": "left", "member-2": "dropped"}
    table = flow.flow_table(stages).set_index("stage")
    assert table.loc["practised", "reached"] == 3 and table.loc["session 1", "reached"] == 3
    assert table.loc["session 1", "dropped"] == 1
    assert table["dropped"].sum() == 1


def test_members_count_every_seats_cookies_and_the_spread_is_the_teams(database):
    tables = real_teams.load_teams(database)
    rows = real_teams.members(tables)
    assert list(rows["seat"]) == [0, 1, 2]
    people = tables.person_cookies.groupby("seat")["cookies"].sum()
    agents = tables.seat_cookies.groupby("seat").size()
    expected = people.add(agents, fill_value=0).reindex([0, 1, 2], fill_value=0)
    assert list(rows["cookies"]) == list(expected)
    assert rows["taken_over"].tolist() == [False, False, True]
    spread = rows["share_b"].max() - rows["share_b"].min()
    assert rows["team_F"].iloc[0] == pytest.approx(spread)
    parity = real_teams.person_parity(rows)
    assert parity["pairs"].tolist() == [1]  # the two who played every round
    pair = rows[~rows["taken_over"]]
    assert parity["cookies"].iloc[0] == abs(pair["cookies"].iloc[0] - pair["cookies"].iloc[1])


def test_a_team_members_round_counts_the_others_cookies(database):
    data = load(database)
    team_rounds = data.rounds[data.rounds["team_round_id"].notna()]
    first = team_rounds[team_rounds["number"] == 1]
    for row in first.itertuples():
        others = first[first["participant_id"] != row.participant_id]["participant_cookies"]
        assert row.teammate_cookies == others.sum()


def test_the_team_is_a_cluster_with_its_people_nested():
    rng = np.random.default_rng(3)
    rows = []
    for team in range(12):
        team_effect = rng.normal(0, 2.0)
        for person in range(3):
            pid = 3 * team + person
            for condition, shift in (("a", 0.0), ("b", 1.0)):
                rows.append({"participant_id": pid, "team_id": team, "condition": condition,
                             "period": 1 + (condition == "b"),
                             "y": 5 + team_effect + shift + rng.normal(0, 0.3)})
    frame = pd.DataFrame(rows)
    clustered = models.mixed_model(frame, "y", reference="a")
    assert clustered["estimate"].iloc[0] == pytest.approx(
        frame.groupby("condition")["y"].mean().diff().iloc[-1])
    assert "not fitted" not in clustered["note"].iloc[0]
    import statsmodels.api as sm

    exog = sm.add_constant(pd.get_dummies(frame["condition"], drop_first=True, dtype=float))
    result, _, _ = models._fit_mixed(models._mixed(sm, frame, frame["y"], exog))
    assert result.model.n_groups == 12  # teams, not the 36 people
    team_variance = float(np.asarray(result.cov_re).ravel()[0])
    assert team_variance > 1.0 > float(result.vcomp[0])  # drawn: 4 for teams, 0 for people
