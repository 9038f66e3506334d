"""Algorithms as data (MODEL.md): the presets keep the rewards, plans and pools they had
before algorithms became weighted terms, bit for bit; declared terms, memory over the
study and goal rewards given as code are solved exactly (a brute force over the goal
states, and pymdptoolbox in every state)."""

from __future__ import annotations

import hashlib
import itertools
import re
from pathlib import Path

import goal_rewards_example
import numpy as np
import pyarrow.parquet as pq
import pytest
from support.allocation import BOUNDS, brute_reward

from study.allocation.algorithms import goal_reward_code
from study.allocation.model import (
    Algorithm,
    GoalRewardCode,
    InvalidInput,
    Team,
    goal_major_sums,
    goal_reward,
    reward_from_sums,
    scale_fair_equity,
    state_space,
)
from study.allocation.solver import (
    TIE_TOLERANCE,
    best_reachable,
    exact_action_table,
    goal_reward_rows,
    goal_rewards,
    reference_action_table,
    solve,
    solve_batch,
)
from study.allocation.trial import goal_reward_problem
from study.pool import PoolSpec, build_pool

TRIAL_SECONDS = 5.0  # the protocol's default python_seconds
PRESETS = [Algorithm("efficient"), Algorithm("fair"), Algorithm("fea", lo=0.0, hi=2.0),
           Algorithm("fea", w=0.55, lo=0.1, hi=0.9)]

# --- the presets, bit for bit ------------------------------------------------------------
#
# Digests of what the code computed before the presets became weighted terms (same
# specs, seeds and teams, run on the unchanged tree): pool columns with the spec's digest,
# and the goal rewards and plans of four presets on three state spaces.

POOL_SPEC = """\
[pool]
teams = {teams}
seed = 11
humans = {humans}
kits = {kits}
algorithms = ["efficient", "fair", "fea"]

[pool.fea]
w = 0.7
bounds = [0.0, 2.0]
bounds_source = "test"
"""
POOL_DIGESTS = {
    (2, (8, 8), 3000): ("f3011922c3af23e25cbf5f4c410c9045", "98f473c7b160efecbb75cae3a4ac9ea4"),
    (3, (3, 3), 900): ("34ca3e46bb6d25a0cfd59a96e0337552", "8effe5832386e807717501396786588e"),
}
REWARD_DIGESTS = {  # (humans, kits): per preset, (goal reward rows, plans and goals)
    (2, (8, 8)): [("e2c7e953afd9653ea087583b98085e42", "e41bb3e649d30efaeb2e199f35c1a02c"),
                  ("673050130149e8e14952e55fd1906a6f", "a7065e557d07f5b51f4e86092c5af8d6"),
                  ("c798d3ca4098ee532d7c25eaacd6f658", "7e63247a02ad2a89532dce3e47a6cbdb"),
                  ("29fcd888e35036a3c5731002212d070e", "a17f70d557ecef5ffd0bb5e7062e32ec")],
    (2, (3, 3, 2)): [("206ad4bbc228e9d630612a8da0506e5b", "3e200921a5abc0db7f6c9ae410865f85"),
                     ("70f2159792a5c22d72ffb78f5d47a2fb", "840a830a198e3ff687d691b0494a63de"),
                     ("4ff615dae0a6a05d54e00d7cf9a59704", "ad10ed7c15012dd6f5bd9a7696325399"),
                     ("d6356c22e60b726c472787dae0476f6b", "ece3168a227b407d08e5bb89e09db8f6")],
    (3, (3, 3, 3)): [("7a40773b4ff69c2ffd07673b78bef19d", "ada0b294c3816d3960af64515a3ea74d"),
                     ("15e7df1cbac1430632fd9cfbd5d632dc", "8aafa3f81f2d2bf0390348cb9d99edbe"),
                     ("4164a15434d207119b018f6751bb65ab", "0e94f6e59578279a1c87a2b0874d94c1"),
                     ("88a6471b1aac3b05acbaede1b3a6802a", "92ec55ea7490f522b0f75c6f939617bf")],
}


def digest(arrays: list[np.ndarray]) -> str:
    hasher = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        hasher.update(f"{array.dtype}{array.shape}".encode())
        hasher.update(array.tobytes())
    return hasher.hexdigest()[:32]


def pool_digest(path: Path) -> str:
    """Every column of a pool file, by name, with its type and values."""
    table = pq.read_table(path)
    columns = []
    for name in sorted(table.column_names):
        column = table.column(name).combine_chunks()
        if name == "team_type":
            columns.append(np.array(column.dictionary_decode().to_pylist(), dtype="U16"))
        else:
            columns.append(column.to_numpy())
    return digest([np.array(sorted(table.column_names), dtype="U40"), *columns])


@pytest.mark.parametrize(("humans", "kits", "teams"), list(POOL_DIGESTS))
def test_the_presets_build_the_same_pool_file_bit_for_bit(tmp_path, humans, kits, teams):
    path = tmp_path / "spec.toml"
    path.write_text(POOL_SPEC.format(teams=teams, humans=humans, kits=list(kits)))
    spec = PoolSpec.from_protocol(path)
    built = build_pool(spec, tmp_path / "pool.parquet", chunk=1000, workers=2, progress=False)
    assert (pool_digest(built), spec.digest()[:32]) == POOL_DIGESTS[(humans, kits, teams)]


def test_the_presets_give_the_same_rewards_plans_and_goals_bit_for_bit():
    rng = np.random.default_rng(2028)   # one stream over the spaces, as when stored
    for (humans, kits), expected in REWARD_DIGESTS.items():
        shape = (400, humans, len(kits))
        c, p = rng.uniform(0.01, 0.99, shape), rng.uniform(0.01, 0.99, shape)
        space = state_space(humans, kits)
        for algorithm, (rows, plans) in zip(PRESETS, expected, strict=True):
            batch = solve_batch(c, p, algorithm, kits)
            assert digest([goal_reward_rows(space, algorithm, c, p)]) == rows, algorithm
            assert digest([batch.plans, batch.goal_positions]) == plans, algorithm


def old_reward(algorithm: Algorithm, sums) -> np.ndarray:
    """The presets' goal rewards as ``reward_from_sums`` computed them before terms."""
    if algorithm.name == "efficient":
        return sums.efficiency()
    if algorithm.name == "fair":
        return 1.0 - np.abs(sums.fairness())
    fairness_term = 1.0 - scale_fair_equity(sums.fair_equity(), algorithm.lo, algorithm.hi)
    fairness_term *= 1.0 - algorithm.w
    reward = algorithm.w * sums.efficiency()
    reward += fairness_term
    return reward


@pytest.mark.parametrize(("humans", "kits"), [(2, (8, 8)), (2, (3, 3, 2)), (3, (3, 3, 3))])
def test_preset_rewards_equal_the_old_formulas_and_their_terms_under_another_name(humans,
                                                                                  kits):
    rng = np.random.default_rng(humans * 10 + len(kits))
    c = rng.uniform(0.01, 0.99, (300, humans, len(kits)))
    p = rng.uniform(0.01, 0.99, (300, humans, len(kits)))
    space = state_space(humans, kits)
    sums = goal_major_sums(c, p, space.goal_allocations)
    for preset in PRESETS:
        old = old_reward(preset, sums)
        assert np.array_equal(reward_from_sums(preset, sums), old)
        same_terms = Algorithm("mine", lo=preset.lo, hi=preset.hi, terms=dict(preset.terms))
        assert np.array_equal(reward_from_sums(same_terms, sums), old)
        for team in range(0, 300, 37):
            live = solve(Team(c[team], p[team]), preset, kits=kits)
            assert live.rewards == old[:, team].tolist()


def test_presets_are_weighted_terms():
    assert Algorithm("efficient").terms == (("efficiency", 1.0),)
    assert Algorithm("fair").terms == (("fairness", 1.0),)
    assert Algorithm("fea", w=0.6).terms == (("efficiency", 0.6), ("fair_equity", 1.0 - 0.6))
    assert Algorithm("fea", w=0.6, lo=0, hi=2).describe() == "fea(w=0.6, bounds=0..2)"


# --- declared algorithms against a brute force over the goal states ----------------------

MIXES = {
    "maximin": ({"egalitarian_c": 0.5, "efficiency": 0.5}, False),
    "nash": ({"nash_c": 0.4, "nash_p": 0.3, "efficiency": 0.3}, False),
    "egalitarian_p": ({"egalitarian_p": 1.0}, False),
    "equalities": ({"capability_equality": 0.25, "preference_equality": 0.25,
                    "preference": 0.5}, False),
    "equity": ({"fair_equity": 0.6, "fairness": 0.2, "efficiency": 0.2}, False),
    "remembering": ({"fairness": 0.5, "efficiency": 0.5}, True),
    "remembering_nash": ({"nash_p": 0.6, "egalitarian_c": 0.4}, True),
}


def declared(name: str) -> Algorithm:
    terms, memory = MIXES[name]
    return Algorithm(name, lo=BOUNDS[0], hi=BOUNDS[1], terms=terms, memory=memory)


def enumerated_goals(humans: int, kits: tuple[int, ...]) -> list[np.ndarray]:
    """Every goal allocation, found without the state space: each human holds R kits and
    every kit is handed out."""
    rounds = sum(kits) // humans
    rows = [row for row in itertools.product(range(rounds + 1), repeat=len(kits))
            if sum(row) == rounds]
    return [np.array(combo) for combo in itertools.product(rows, repeat=humans)
            if all(sum(row[j] for row in combo) == kits[j] for j in range(len(kits)))]


def random_histories(count: int, humans: int, kits: tuple[int, ...],
                     rng: np.random.Generator) -> np.ndarray:
    """One earlier session per team: a random goal of the same kits."""
    goals = enumerated_goals(humans, kits)
    return np.array([goals[k] for k in rng.integers(len(goals), size=count)], dtype=float)


@pytest.mark.parametrize(("humans", "kits"), [(2, (8, 8)), (3, (3, 3)), (3, (2, 2, 2))])
@pytest.mark.parametrize("name", list(MIXES))
def test_declared_goals_equal_a_brute_force_over_the_goal_states(name, humans, kits):
    terms, memory = MIXES[name]
    rng = np.random.default_rng(len(name) * 7 + humans * len(kits))
    count = 40
    c = rng.uniform(0.01, 0.99, (count, humans, len(kits)))
    p = rng.uniform(0.01, 0.99, (count, humans, len(kits)))
    history = random_histories(count, humans, kits, rng) if memory else None
    goals = enumerated_goals(humans, kits)
    batch = solve_batch(c, p, declared(name), kits, history=history)
    for team in range(count):
        earlier = 0 if history is None else history[team]
        best = max(brute_reward(terms, c[team], p[team], goal + earlier) for goal in goals)
        reached = brute_reward(terms, c[team], p[team], batch.goal_allocations[team] + earlier)
        assert reached >= best - TIE_TOLERANCE, (team, reached, best)
        assert batch.reward[team] == pytest.approx(reached, abs=1e-12)
        if team % 8 == 0:
            policy = solve(Team(c[team], p[team]), declared(name), kits,
                           history=None if history is None else history[team])
            assert (policy.goal_allocation == batch.goal_allocations[team]).all()


def test_memory_counts_the_earlier_kits_and_only_with_memory():
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    earlier = np.array([[0, 8], [8, 0]])   # Efficient's goal in the first session
    forgetful = Algorithm("balance", terms={"fairness": 1.0})
    remembering = Algorithm("balance", terms={"fairness": 1.0}, memory=True)
    first = solve(team, remembering, history=earlier)
    assert first.goal_allocation.tolist() != solve(team, forgetful).goal_allocation.tolist()
    assert first.reward == pytest.approx(brute_reward({"fairness": 1.0}, team.c, team.p,
                                                      first.goal_allocation + earlier))
    assert solve(team, forgetful, history=earlier).rewards == solve(team, forgetful).rewards
    assert solve(team, remembering, history=np.zeros((2, 2))).rewards == pytest.approx(
        solve(team, forgetful).rewards, abs=1e-15)


@pytest.mark.parametrize(("history", "words"), [
    (np.zeros((3, 2)), "must have the teams' shape"),
    (np.array([[4, 4], [4, -4]]), "whole numbers"),
    (np.array([[4, 3.5], [4, 3.5]]), "whole numbers"),
    (np.array([[8, 0], [4, 2]]), "same number of kits"),
    (np.array([[np.nan, 0], [4, 4]]), "whole numbers"),
])
def test_a_history_that_no_study_leaves_is_refused(history, words):
    team = Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]])
    with pytest.raises(InvalidInput, match=words):
        solve(team, declared("remembering"), history=history)


def states_where_solvers_differ(space, rewards, fast, reference) -> list[int]:
    """States where the two solvers choose actions that are not exactly tied."""
    best = best_reachable(space, rewards[None])[0]
    differing = []
    for state in np.flatnonzero(fast != reference):
        values = [best[space.successor[state, a]] if space.successor[state, a] >= 0 else -1
                  for a in (fast[state], reference[state])]
        if state in space.goals or abs(values[0] - values[1]) > TIE_TOLERANCE:
            differing.append(int(state))
    return differing


@pytest.mark.parametrize(("humans", "kits", "count"), [(2, (8, 8), 40), (3, (3, 3), 12)])
@pytest.mark.parametrize("name", ["maximin", "nash", "equity", "remembering_nash"])
def test_declared_algorithms_match_pymdptoolbox_in_every_state(name, humans, kits, count):
    rng = np.random.default_rng(3 + humans)
    c = rng.uniform(0.01, 0.99, (count, humans, len(kits)))
    p = rng.uniform(0.01, 0.99, (count, humans, len(kits)))
    history = random_histories(count, humans, kits, rng)
    space = state_space(humans, kits)
    rewards = goal_rewards(space, declared(name), c, p, history)
    fast = exact_action_table(space, rewards)
    identical = 0
    for team in range(count):
        reference = reference_action_table(space, rewards[team])
        assert states_where_solvers_differ(space, rewards[team], fast[team], reference) == []
        identical += int((fast[team] == reference).all())
        if team < 3:
            policy = solve(Team(c[team], p[team]), declared(name), kits, solver="mdptoolbox",
                           history=history[team])
            assert policy.plan == solve(Team(c[team], p[team]), declared(name), kits,
                                        history=history[team]).plan
    assert identical >= count - 1


@pytest.mark.parametrize(("humans", "kits"), [(2, (8, 8)), (3, (3, 3, 3))])
def test_one_declared_team_equals_its_row_of_the_batch_exactly(humans, kits):
    rng = np.random.default_rng(17)
    c = np.round(rng.uniform(0.01, 0.99, (30, humans, len(kits))), 1)   # many exact ties
    p = np.round(rng.uniform(0.01, 0.99, (30, humans, len(kits))), 1)
    history = random_histories(30, humans, kits, rng)
    coded = Algorithm("coded", code=goal_reward_code("goal_rewards_example:slowest_first"),
                      memory=True)
    for algorithm in [declared("nash"), declared("remembering_nash"), coded]:
        batch = solve_batch(c, p, algorithm, kits, chunk=7, history=history)
        for team in range(30):
            policy = solve(Team(c[team], p[team]), algorithm, kits, history=history[team])
            assert policy.rewards == batch.rewards[team].tolist()
            assert policy.plan == [tuple(batch.space.actions[a]) for a in batch.plans[team]]


def test_anytime_fair_order_of_a_declared_algorithm_keeps_its_goal():
    rng = np.random.default_rng(4)
    c, p = rng.uniform(0.01, 0.99, (60, 2, 2)), rng.uniform(0.01, 0.99, (60, 2, 2))
    improved = 0
    for team in range(60):
        default = solve(Team(c[team], p[team]), declared("equity"))
        anytime = solve(Team(c[team], p[team]), declared("equity"), order="anytime-fair")
        assert (anytime.goal_allocation == default.goal_allocation).all()
        worst = [np.nanmax(policy.round_metrics()["unfairness"])
                 for policy in (default, anytime)]
        assert worst[1] <= worst[0] + 1e-12
        improved += worst[1] < worst[0] - 1e-9
    assert improved > 0


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"terms": {"egalitarian": 1.0}}, "did you mean .*'egalitarian_c'"),
    ({"terms": {"efficiency": 1.5, "fairness": -0.5}}, "at least 0"),
    ({"terms": {"efficiency": 0.5, "fairness": 0.4}}, "sum to 1"),
    ({"terms": {"efficiency": float("nan")}}, "finite"),
    ({"terms": {"efficiency": 1.0},
      "code": GoalRewardCode("m:f", goal_rewards_example.nash_welfare)}, "not both"),
])
def test_declared_algorithms_refuse_bad_terms(kwargs, words):
    with pytest.raises(InvalidInput, match=words):
        Algorithm("mine", **kwargs)


def test_a_preset_name_keeps_its_own_terms():
    with pytest.raises(InvalidInput, match="preset"):
        Algorithm("fair", terms={"efficiency": 1.0})
    with pytest.raises(InvalidInput, match="one of efficient, fair, fea"):
        Algorithm("maximin")


# --- goal rewards given as code ----------------------------------------------------------


def test_code_solves_like_the_term_it_spells():
    code = Algorithm("coded", code=goal_reward_code("goal_rewards_example:nash_welfare"))
    terms = Algorithm("nash", terms={"nash_c": 1.0})
    rng = np.random.default_rng(12)
    for humans, kits in ((2, (8, 8)), (3, (3, 3, 3))):
        c = rng.uniform(0.01, 0.99, (200, humans, len(kits)))
        p = rng.uniform(0.01, 0.99, (200, humans, len(kits)))
        by_code = solve_batch(c, p, code, kits)
        by_terms = solve_batch(c, p, terms, kits)
        assert np.allclose(by_code.rewards, by_terms.rewards, rtol=0, atol=1e-12)
        assert np.allclose(by_code.reward, by_terms.reward, rtol=0, atol=1e-12)


def test_code_that_no_term_spells_is_solved_exactly():
    code = Algorithm("coded", code=goal_reward_code("goal_rewards_example:slowest_first"))
    rng = np.random.default_rng(13)
    c, p = rng.uniform(0.01, 0.99, (50, 2, 2)), rng.uniform(0.01, 0.99, (50, 2, 2))
    goals = enumerated_goals(2, (8, 8))
    batch = solve_batch(c, p, code)
    for team in range(50):
        def slowest_first(held, team=team):
            rates = [float(c[team, i] @ held[i]) / held[i].sum() for i in range(2)]
            return (2 * min(rates) + sum(rates) / 2) / 3
        best = max(slowest_first(goal) for goal in goals)
        assert slowest_first(batch.goal_allocations[team]) >= best - TIE_TOLERANCE
    single = goal_reward(code, c[0], p[0], np.array(goals))
    assert single.shape == (len(goals),) and single.max() == pytest.approx(batch.reward[0])


@pytest.mark.parametrize(("function", "words"), [
    ("one_per_team", "returned shape"),
    ("undefined_somewhere", "must be finite"),
    ("above_one", r"must lie in \[0, 1\]"),
    ("in_place", "read-only"),
    ("texts", "dtype object, not numbers"),
])
def test_code_returning_what_no_goal_reward_is_stops_the_solve(function, words):
    algorithm = Algorithm("coded", code=goal_reward_code(f"goal_rewards_example:{function}"))
    with pytest.raises(InvalidInput, match=words):
        solve(Team([[0.25, 0.9], [0.3, 0.7]], [[0.9, 0.1], [0.4, 0.6]]), algorithm)


@pytest.mark.parametrize(("source", "words"), [
    ("goal_rewards_example:nash_welfare", None),
    ("goal_rewards_example:noisy", "returned other values in call 4 of 6 than in call 1"),
    ("goal_rewards_example:above_one", r"must lie in \[0, 1\]"),
    ("goal_rewards_example:missing", "has no function missing"),
    ("no_such_lab.rewards:nash", "No module named 'no_such_lab'"),
])
def test_the_trial_calls_code_on_several_batches_of_sample_teams(source, words):
    for memory in (False, True):
        problem = goal_reward_problem(source, 2, (8, 8), memory, None, TRIAL_SECONDS)
        if words is None:
            assert problem is None
        else:
            assert problem is not None and re.search(words, problem), problem


def test_code_beside_the_protocol_is_found(tmp_path):
    (tmp_path / "beside_the_protocol.py").write_text(
        "def flat(c, p, allocations):\n    return allocations.sum(axis=(-1, -2)) * 0.0 + 0.5\n")
    assert goal_reward_problem("beside_the_protocol:flat", 2, (4, 4), False, tmp_path,
                               TRIAL_SECONDS) is None
    assert "No module named" in goal_reward_problem("beside_the_protocol_not:flat", 2,
                                                    (4, 4), False, tmp_path, TRIAL_SECONDS)
