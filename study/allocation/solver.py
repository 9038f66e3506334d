"""Optimal allocation policies: an exact fast solver and the pymdptoolbox reference.

The fast solver uses what the allocation MDP guarantees: transitions are deterministic,
reward is paid only on entering a goal, and every goal is entered after exactly ``R``
rounds. So the value of a state is ``gamma^(R - t - 1)`` times the best goal reward still
reachable from it, and the optimal goals and actions follow from the goal rewards alone,
without building transition arrays. It is vectorised over many teams at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from study.allocation.memo import cached_value
from study.allocation.model import (
    Algorithm,
    InvalidInput,
    StateSpace,
    Team,
    all_metrics,
    code_goal_rewards,
    goal_major_sums,
    reward_from_sums,
    state_space,
    validate_coefficients,
    validate_history,
)
from study.allocation.terms import DISCOUNT

TIE_TOLERANCE = 1e-9
ORDERS = ("default", "anytime-fair")
SOLVERS = ("exact", "mdptoolbox")


def goal_reward_rows(space: StateSpace, algorithm: Algorithm, c: np.ndarray,
                     p: np.ndarray, history: np.ndarray | None = None) -> np.ndarray:
    """``[G, B]`` goal rewards, one row per goal state, for teams ``[B, h, n]``.

    ``history [B, h, n]``: the kits each human got in the study's earlier sessions; an
    algorithm with memory counts them in its goal reward (MODEL.md), others ignore them.
    """
    history = history if algorithm.memory else None
    if algorithm.code is not None:
        goals = space.goal_allocations
        totals = goals if history is None else goals[None] + history[:, None]
        return np.ascontiguousarray(code_goal_rewards(algorithm.code, c, p, totals).T)
    sums = goal_major_sums(c, p, space.goal_allocations)
    if history is not None:
        sums = sums.with_history(c, p, history)
    return reward_from_sums(algorithm, sums)


def goal_rewards(space: StateSpace, algorithm: Algorithm, c: np.ndarray,
                 p: np.ndarray, history: np.ndarray | None = None) -> np.ndarray:
    """``[B, G]`` goal rewards of every goal state for a batch of teams ``[B, h, n]``."""
    return goal_reward_rows(space, algorithm, c, p, history).T


def team_goal_rewards(space: StateSpace, algorithm: Algorithm, team: Team,
                      history: np.ndarray | None = None) -> list[float]:
    """``[G]``: one team's goal rewards, equal to its row of ``goal_rewards``. The team's
    goal sums serve every algorithm without code or a history to count."""
    if algorithm.code is None and not (algorithm.memory and history is not None):
        return team.goal_sums(space).rewards(algorithm)
    rows = goal_reward_rows(space, algorithm, team.c[None], team.p[None],
                            None if history is None else history[None])
    return rows[:, 0].tolist()


def best_reachable(space: StateSpace, rewards: np.ndarray) -> np.ndarray:
    """``[B, S]``: the best goal reward still reachable from every state."""
    masked = np.where(space.reachable_goals[None], rewards[:, None, :], -np.inf)
    return masked.max(axis=-1)


def exact_action_table(space: StateSpace, rewards: np.ndarray) -> np.ndarray:
    """``[B, S]``: the optimal action in every state under the default tie rule.

    Every successor of a state lies the same number of rounds from the goals, so Q values
    compare as the best goal rewards the actions keep within reach. Invalid actions earn
    -1 and stay put, so they are never optimal while goal rewards are non-negative; in a
    goal state every action earns 0 and action 0 is taken.
    """
    best = best_reachable(space, rewards)
    successor = space.successor
    valid = successor >= 0
    value_after = np.where(valid[None], best[:, np.where(valid, successor, 0)], -np.inf)
    optimal = value_after >= best[:, :, None] - TIE_TOLERANCE
    actions = np.argmax(optimal, axis=-1)
    actions[:, space.goals] = 0
    return actions


def optimal_goal_sets(rewards: np.ndarray) -> np.ndarray:
    """``[B, G]`` booleans: the goals whose reward is within the tolerance of the best."""
    return rewards >= rewards.max(axis=-1, keepdims=True) - TIE_TOLERANCE


def optimal_goal_masks(rows: np.ndarray) -> np.ndarray:
    """``[B]`` bit masks (bit ``g`` for goal ``g``) of the goals within the tolerance of
    the best, from goal-major rewards ``[G, B]`` (at most 63 goals)."""
    optimal = rows >= rows.max(axis=0) - TIE_TOLERANCE
    weights = _goal_weights(len(rows))
    return np.sum(optimal * weights, axis=0, dtype=weights.dtype)


@lru_cache(maxsize=64)
def _goal_weights(count: int) -> np.ndarray:
    """``[G, 1]``: bit ``g`` for goal ``g``, in the smallest type that holds them."""
    dtype = np.uint16 if count <= 16 else np.uint64
    return np.left_shift(dtype(1), np.arange(count, dtype=dtype))[:, None]


MAX_GOALS_FOR_LOOKUP = 16


def _goal_bits(count: int) -> np.ndarray:
    return np.left_shift(np.uint64(1), np.arange(count, dtype=np.uint64))


def _walk_to_goal_sets(space: StateSpace, targets: np.ndarray) -> tuple[np.ndarray,
                                                                       np.ndarray]:
    """From the start, take the lowest-numbered action that keeps a goal of the target set
    (a bit mask per row) within reach, for every row at once."""
    bits = _goal_bits(len(space.goals))
    reach_bits = np.append((space.reachable_goals * bits).sum(axis=1, dtype=np.uint64),
                           np.uint64(0))
    current = np.zeros(len(targets), dtype=np.intp)
    plan = np.empty((len(targets), space.rounds), dtype=np.int8)
    for round_number in range(space.rounds):
        successors = space.successor[current]
        keeps_goal = (reach_bits[successors] & targets[:, None]) != 0
        choice = np.argmax(keeps_goal, axis=1)
        plan[:, round_number] = choice
        current = successors[np.arange(len(targets)), choice]
    return plan, np.searchsorted(space.goals, current)


@lru_cache(maxsize=16)
def _plans_by_goal_set(space: StateSpace) -> tuple[np.ndarray, np.ndarray]:
    """The walk for every possible set of optimal goals, so a batch only looks it up."""
    masks = np.arange(2 ** len(space.goals), dtype=np.uint64)
    return _walk_to_goal_sets(space, masks)


@lru_cache(maxsize=16)
def _plan_lists(space: StateSpace) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """``_plans_by_goal_set`` as plain tuples: one team indexes them faster."""
    plans, goals = _plans_by_goal_set(space)
    return tuple(tuple(plan) for plan in plans.tolist()), tuple(goals.tolist())


def plan_batch(space: StateSpace, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``plan_rows`` for team-major rewards ``[B, G]``."""
    return plan_rows(space, np.asarray(rewards).T)


def plan_rows(space: StateSpace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walk the default-rule policy from the start for a batch of teams.

    From the start the robot keeps an optimal goal within reach with its lowest-numbered
    action, so the plan depends only on the set of optimal goals: with few goals every
    set's plan is computed once and looked up. Takes goal-major rewards ``[G, B]``;
    returns the actions of each round ``[B, R]`` and the goal reached ``[B]`` as an index
    into ``space.goals``.
    """
    goal_count = len(space.goals)
    if goal_count > 63:
        return _plan_batch_by_table(space, rows.T)
    targets = optimal_goal_masks(rows)
    if goal_count > MAX_GOALS_FOR_LOOKUP:
        return _walk_to_goal_sets(space, targets.astype(np.uint64))
    plans, goals = _plans_by_goal_set(space)
    return plans[targets], goals[targets]


def optimal_goal_positions(space: StateSpace, rows: np.ndarray) -> np.ndarray:
    """``[B]``: the goal ``plan_rows`` reaches (an index into ``space.goals``), without
    gathering the plans."""
    if len(space.goals) > MAX_GOALS_FOR_LOOKUP:
        return plan_rows(space, rows)[1]
    return _plans_by_goal_set(space)[1][optimal_goal_masks(rows)]


def _plan_batch_by_table(space: StateSpace, rewards: np.ndarray) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """The same walk through full action tables, for spaces with more than 63 goals."""
    tables = exact_action_table(space, rewards)
    plans = np.array([_walk(space, table) for table in tables], dtype=np.int8)
    goals = np.array([_end_state(space, plan) for plan in plans])
    return plans, np.searchsorted(space.goals, goals)


@dataclass(frozen=True)
class BatchSolution:
    """Optimal plans of one algorithm for a batch of teams."""

    space: StateSpace
    algorithm: Algorithm
    plans: np.ndarray
    goal_positions: np.ndarray
    goal_rows: np.ndarray

    @property
    def rewards(self) -> np.ndarray:
        """``[B, G]``: every goal's reward per team."""
        return self.goal_rows.T

    @property
    def goal_allocations(self) -> np.ndarray:
        """``[B, h, n]``: the kits each human holds at the goal reached."""
        return self.space.allocations[self.space.goals[self.goal_positions]]

    @property
    def reward(self) -> np.ndarray:
        return at_positions(self.goal_rows, self.goal_positions)


def at_positions(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``rows[positions[b], b]`` for every team ``b`` (``rows`` is goal-major ``[G, B]``)."""
    flat = positions * rows.shape[1] + np.arange(rows.shape[1])
    return np.ascontiguousarray(rows).reshape(-1)[flat]


def solve_batch(c: np.ndarray, p: np.ndarray, algorithm: Algorithm,
                kits: tuple[int, ...] | None = None, chunk: int = 32768,
                history: np.ndarray | None = None) -> BatchSolution:
    """Optimal default-order plans for teams ``c, p`` of shape ``[B, h, n]``; ``history``
    (same shape): the kits of the study's earlier sessions, for an algorithm with memory.

    Teams are solved ``chunk`` at a time so intermediates stay in cache; the result does
    not depend on the chunk size.
    """
    c, p = validate_coefficients(c, p)
    if c.ndim != 3:
        raise InvalidInput("c", list(c.shape), "a batch has shape [teams, humans, task types]")
    if history is not None:
        history = validate_history(history, c.shape)
    kits = tuple(kits) if kits is not None else (8,) * c.shape[2]
    space = state_space(c.shape[1], kits)
    if space.task_types != c.shape[2]:
        raise InvalidInput("kits", list(kits), f"must name {c.shape[2]} task types")
    rows = np.empty((len(space.goals), len(c)))
    plans = np.empty((len(c), space.rounds), dtype=np.int8)
    goals = np.empty(len(c), dtype=np.intp)
    for start in range(0, len(c), chunk):
        part = slice(start, start + chunk)
        rows[:, part] = goal_reward_rows(space, algorithm, c[part], p[part],
                                         None if history is None else history[part])
        plans[part], goals[part] = plan_rows(space, rows[:, part])
    return BatchSolution(space, algorithm, plans, goals, rows)


# --- the reference ---------------------------------------------------------------------


def mdp_arrays(space: StateSpace, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ``P [A, S, S]`` and ``R [S, A]`` of MODEL.md for one team's goal rewards."""
    actions = len(space.actions)
    transitions = np.zeros((actions, space.size, space.size))
    reward = np.zeros((space.size, actions))
    goal_reward_of = np.full(space.size, np.nan)
    goal_reward_of[space.goals] = rewards
    is_goal = np.zeros(space.size, dtype=bool)
    is_goal[space.goals] = True
    for state in range(space.size):
        for action in range(actions):
            target = space.successor[state, action]
            if is_goal[state]:
                transitions[action, state, state] = 1.0
            elif target < 0:
                transitions[action, state, state] = 1.0
                reward[state, action] = -1.0
            else:
                transitions[action, state, target] = 1.0
                if is_goal[target]:
                    reward[state, action] = goal_reward_of[target]
    return transitions, reward


def reference_action_table(space: StateSpace, rewards: np.ndarray) -> np.ndarray:
    """``[S]`` optimal actions from pymdptoolbox with the paper's settings."""
    import mdptoolbox.mdp

    transitions, reward = mdp_arrays(space, rewards)
    solver = mdptoolbox.mdp.PolicyIteration(transitions, reward, DISCOUNT, max_iter=100,
                                            eval_type=1)
    solver.run()
    return np.array(solver.policy)


# --- a solved policy -------------------------------------------------------------------


def _end_state(space: StateSpace, actions: list[int] | np.ndarray, start: int = 0) -> int:
    state = start
    for action in actions:
        state = int(space.successor[state, action])
    return state


def _walk(space: StateSpace, table: np.ndarray, start: int = 0) -> list[int]:
    """The actions the policy takes from ``start`` until a goal."""
    actions, state = [], start
    while space.depth[state] < space.rounds:
        action = int(table[state])
        actions.append(action)
        state = int(space.successor[state, action])
    return actions


def _best_ordering(space: StateSpace, unfairness: np.ndarray, start: int,
                   goal: int) -> list[int]:
    """Among all action sequences from ``start`` to ``goal``, the one whose running
    unfairness is smallest at its worst round, then smallest on average; ties go to the
    lowest-numbered actions. Two exact dynamic programmes over the state lattice."""
    reach = space.reachable_goals[:, int(np.searchsorted(space.goals, goal))]
    order = np.argsort(-space.depth, kind="stable")
    worst = np.full(space.size, np.inf)
    worst[goal] = unfairness[goal]
    for state in order:
        if state == goal or not reach[state] or space.depth[state] >= space.rounds:
            continue
        nexts = [s for s in space.successor[state] if s >= 0 and reach[s]]
        worst[state] = max(unfairness[state] if state != start else 0.0,
                           min(worst[s] for s in nexts))
    ceiling = worst[start] + TIE_TOLERANCE
    total = np.full(space.size, np.inf)
    total[goal] = unfairness[goal]
    for state in order:
        if state == goal or not reach[state] or space.depth[state] >= space.rounds:
            continue
        nexts = [s for s in space.successor[state] if s >= 0 and reach[s] and worst[s] <= ceiling]
        own = unfairness[state] if state != start else 0.0
        total[state] = own + min((total[s] for s in nexts), default=np.inf)
    actions, state = [], start
    while state != goal:
        candidates = [(total[s], a) for a, s in enumerate(space.successor[state])
                      if s >= 0 and reach[s] and worst[s] <= ceiling]
        least = min(value for value, _ in candidates)
        action = min(a for value, a in candidates if value <= least + TIE_TOLERANCE)
        actions.append(action)
        state = int(space.successor[state, action])
    return actions


def _optimal_goal_mask(rewards: list[float]) -> int:
    """``optimal_goal_masks`` for one team's rewards (bit ``g`` for goal ``g``)."""
    threshold = max(rewards) - TIE_TOLERANCE
    mask, bit = 0, 1
    for reward in rewards:
        if reward >= threshold:
            mask |= bit
        bit <<= 1
    return mask


@dataclass(frozen=True)
class Policy:
    """An optimal policy for one team and algorithm, to be asked about any state.

    The plan from the start is looked up by the set of optimal goals, as ``solve_batch``
    does, so one team and a batch agree; the action table for every other state is
    computed only when a state off that plan is asked about.
    """

    team: Team
    algorithm: Algorithm
    space: StateSpace
    rewards: list[float]
    order: str = "default"
    reference_table: np.ndarray | None = field(default=None, repr=False)
    history: np.ndarray | None = field(default=None, repr=False)

    @cached_value
    def goal_rewards(self) -> np.ndarray:
        """``[G]``: every goal's reward (``rewards`` as an array)."""
        return np.array(self.rewards)

    @cached_value
    def table(self) -> np.ndarray:
        """``[S]``: the optimal action in every state (the reference's, if it solved)."""
        if self.reference_table is not None:
            return self.reference_table
        return exact_action_table(self.space, self.goal_rewards[None])[0]

    @cached_value
    def _start(self) -> tuple[list[int], int]:
        """The action numbers of the default-order plan from the start state, and the
        goal it reaches (as an index into ``space.goals``)."""
        if self.reference_table is not None or len(self.space.goals) > 63:
            actions = _walk(self.space, self.table)
            goal = _end_state(self.space, actions)
            return actions, int(np.searchsorted(self.space.goals, goal))
        rewards = self.rewards
        mask = _optimal_goal_mask(rewards)
        if len(rewards) > MAX_GOALS_FOR_LOOKUP:
            plans, goals = _walk_to_goal_sets(self.space, np.array([mask], dtype=np.uint64))
            return plans[0].tolist(), int(goals[0])
        plans, goals = _plan_lists(self.space)
        return list(plans[mask]), goals[mask]

    @property
    def start_actions(self) -> list[int]:
        return self._start[0]

    @cached_value
    def start_path(self) -> list[int]:
        """The states the default-order plan passes through, one per depth."""
        states = [0]
        for action in self.start_actions:
            states.append(int(self.space.successor[states[-1], action]))
        return states

    @cached_value
    def running_unfairness(self) -> np.ndarray:
        """``[S]``: the unfairness this algorithm penalises, in every state."""
        values = self.algorithm.running_unfairness(self.team.c, self.team.p,
                                                   self.space.allocations, self.history)
        return np.nan_to_num(values, nan=0.0)

    @property
    def goal(self) -> int:
        """The goal state the policy reaches from the start."""
        return int(self.space.goals[self._start[1]])

    def _default_actions_from(self, state: int) -> list[int]:
        if state == 0:
            return self.start_actions
        depth = int(self.space.depth[state])
        if self.start_path[depth] == state:
            return self.start_actions[depth:]
        return _walk(self.space, self.table, state)

    def actions_from(self, state: int) -> list[int]:
        """The action numbers the robot takes from ``state`` until the session ends."""
        if self.order == "anytime-fair" and self.space.reachable_goals[
                state, int(np.searchsorted(self.space.goals, self.goal))]:
            return _best_ordering(self.space, self.running_unfairness, state, self.goal)
        return self._default_actions_from(state)

    def action(self, allocation: np.ndarray) -> tuple[int, ...]:
        """The kit type each human gets next, given the kits each holds (``[h, n]``)."""
        state = self.space.state_of(allocation)
        if self.space.depth[state] >= self.space.rounds:
            raise ValueError("every kit has been handed out: the session is over")
        action = self.actions_from(state)[0]
        return tuple(int(t) for t in self.space.actions[action])

    @cached_value
    def plan(self) -> list[tuple[int, ...]]:
        """Round by round, the kit type each human gets, from the start state."""
        types = self.space.action_types
        actions = self.start_actions if self.order == "default" else self.actions_from(0)
        return [types[a] for a in actions]

    @cached_value
    def trajectory(self) -> np.ndarray:
        """``[R + 1, h, n]``: the kits each human holds before round 1 and after each round."""
        steps = np.zeros((len(self.plan) + 1, self.space.humans, self.space.task_types),
                         dtype=int)
        for round_number, types in enumerate(self.plan, start=1):
            steps[round_number] = steps[round_number - 1]
            steps[round_number, np.arange(self.space.humans), types] += 1
        return steps

    def round_metrics(self) -> dict[str, np.ndarray]:
        """Every metric of this session's kits after each round (rows 1..R of the
        trajectory), plus the reward's running unfairness (of the totals, with memory)."""
        after = self.trajectory[1:]
        metrics = all_metrics(self.team.c, self.team.p, after)
        metrics["unfairness"] = self.algorithm.running_unfairness(self.team.c, self.team.p,
                                                                  after, self.history)
        return metrics

    @property
    def goal_allocation(self) -> np.ndarray:
        return self.space.allocations[self.goal]

    @property
    def reward(self) -> float:
        return self.rewards[self._start[1]]


def solve(team: Team, algorithm: Algorithm, kits: tuple[int, ...] | None = None,
          order: str = "default", solver: str = "exact",
          history: np.ndarray | None = None) -> Policy:
    """The optimal policy of ``algorithm`` for ``team``, in every reachable state.

    ``history [h, n]``: the kits each human got in the study's earlier sessions. An
    algorithm with memory plans this session on the totals (MODEL.md: the session starts
    from the state they left); one without ignores it.
    """
    if history is not None:
        history = validate_history(history, team.c.shape)
    if order not in ORDERS:
        raise InvalidInput("order", order, f"must be one of {', '.join(ORDERS)}")
    if solver not in SOLVERS:
        raise InvalidInput("solver", solver, f"must be one of {', '.join(SOLVERS)}")
    space = state_space(team.humans, (8,) * team.task_types if kits is None else tuple(kits))
    if space.task_types != team.task_types:
        raise InvalidInput("kits", list(space.kits), f"must name {team.task_types} task types")
    rewards = team_goal_rewards(space, algorithm, team, history)
    table = (reference_action_table(space, np.array(rewards)) if solver == "mdptoolbox"
             else None)
    return Policy(team, algorithm, space, rewards, order, table, history)
