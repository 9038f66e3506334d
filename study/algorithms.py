"""A protocol's algorithms as the model's ``Algorithm``: presets by name, ``[[algorithms]]``
tables (weighted terms or a goal reward given as code), and FEA's bounds where a protocol
takes them from.

Reading a protocol needs no numpy (``study.protocol``); a command that solves imports
this module, and ``study check`` imports it only to try a goal reward given as code.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from study.model import (
    ALGORITHMS,
    Algorithm,
    GoalRewardCode,
    GoalRewardFunction,
    InvalidInput,
    code_goal_rewards,
    state_space,
)

if TYPE_CHECKING:
    from study.pool.spec import FeaSettings
    from study.protocol import DeclaredAlgorithm, Protocol

# Teams a goal reward given as code is tried on by ``study check``: enough for every
# goal to meet varied coefficients, few enough to take milliseconds.
SAMPLE_TEAMS = 64
SAMPLE_SEED = 20_28


def import_goal_reward(source: str, folder: Path | None = None) -> GoalRewardFunction:
    """The function ``module:function`` names, from the Python path or else from
    ``folder`` (the protocol's), so a lab's module can sit beside its protocol."""
    module_name, _, function_name = source.partition(":")
    module = _import(source, module_name, folder)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise InvalidInput("python", source, f"module {module_name} has no function "
                                             f"{function_name}")
    return function


def _import(source: str, module_name: str, folder: Path | None) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        top = module_name.split(".")[0]
        if folder is None or error.name != top:
            raise InvalidInput("python", source, f"cannot be imported: {error}") from None
    except Exception as error:  # the lab's module failed while importing
        raise InvalidInput("python", source, f"cannot be imported: {type(error).__name__}: "
                                             f"{error}") from None
    sys.path.append(str(folder))
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # not found beside the protocol either, or failed there
        raise InvalidInput("python", source, f"cannot be imported from the Python path or "
                                             f"{folder}: {type(error).__name__}: {error}"
                           ) from None
    finally:
        sys.path.remove(str(folder))


def goal_reward_code(source: str, folder: Path | None = None) -> GoalRewardCode:
    return GoalRewardCode(source, import_goal_reward(source, folder))


def goal_reward_code_problem(source: str, humans: int, kits: tuple[int, ...], memory: bool,
                             folder: Path | None = None) -> str | None:
    """What is wrong with a goal reward given as code, tried twice on the same sample
    teams of the protocol's size (and, with memory, an earlier session's kits); None when
    it returns one finite value in [0, 1] per goal, the same both times."""
    try:
        code = goal_reward_code(source, folder)
        c, p, allocations = sample_goal_allocations(humans, kits, memory)
        first = code_goal_rewards(code, c, p, allocations)
        second = code_goal_rewards(code, c, p, allocations)
    except InvalidInput as error:
        return error.reason
    differs = np.argwhere(first != second)
    if len(differs):
        team, goal = (int(i) for i in differs[0])
        return (f"returned different values on a second call with the same teams (team "
                f"{team}, goal {goal}: {float(first[team, goal])!r}, then "
                f"{float(second[team, goal])!r}); "
                "a goal reward must be deterministic")
    return None


def sample_goal_allocations(humans: int, kits: tuple[int, ...],
                            memory: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teams ``c, p [B, h, n]`` drawn from [0.01, 0.99] and every goal's allocation
    ``[B, G, h, n]``; with memory, plus a random goal of an earlier session per team."""
    space = state_space(humans, kits)
    rng = np.random.default_rng(SAMPLE_SEED)
    shape = (SAMPLE_TEAMS, humans, len(kits))
    c, p = rng.uniform(0.01, 0.99, shape), rng.uniform(0.01, 0.99, shape)
    goals = space.goal_allocations
    allocations = np.broadcast_to(goals, (SAMPLE_TEAMS, *goals.shape))
    if memory:
        earlier = goals[rng.integers(len(goals), size=SAMPLE_TEAMS)]
        allocations = allocations + earlier[:, None]
    return c, p, allocations


def declared_algorithm(declared: DeclaredAlgorithm, pool_fea: FeaSettings | None,
                       folder: Path | None = None) -> Algorithm:
    """The model's algorithm of an ``[[algorithms]]`` table; its fair_equity term scaled by
    its own bounds, or by the pool's (``fea_bounds = "pool"``)."""
    bounds = declared.fea_bounds
    if bounds is None and pool_fea is not None:
        bounds = (pool_fea.lo, pool_fea.hi)
    lo, hi = bounds if bounds is not None else (0.0, 1.0)
    code = None if declared.python is None else goal_reward_code(declared.python, folder)
    return Algorithm(declared.id, lo=lo, hi=hi, terms=declared.terms, memory=declared.memory,
                     code=code)


def protocol_algorithm(protocol: Protocol, name: str) -> Algorithm:
    """The algorithm a protocol runs by ``name``: the id of an ``[[algorithms]]`` table, or
    a preset; FEA with the weight and bounds of the first condition running it, else of
    ``[pool.fea]``."""
    pool_fea = protocol.pool_spec().fea
    declared = protocol.declared(name)
    if declared is not None:
        return declared_algorithm(declared, pool_fea, protocol.path.parent)
    if name not in ALGORITHMS:
        names = ", ".join([*ALGORITHMS, *(a.id for a in protocol.algorithms)])
        raise InvalidInput("--algorithm", name, f"must be one of {names} (the presets and "
                                                f"the algorithms {protocol.path} declares)")
    if name != "fea":
        return Algorithm(name)
    pool_bounds = None if pool_fea is None else (pool_fea.lo, pool_fea.hi)
    condition = next((c for c in protocol.conditions if c.algorithm == "fea"), None)
    w, bounds = ((condition.w, condition.fea_bounds or pool_bounds) if condition is not None
                 else (None if pool_fea is None else pool_fea.w, pool_bounds))
    if w is None or bounds is None:
        raise InvalidInput("--algorithm", name, f"{protocol.path} gives FEA no bounds: no "
                                                "condition runs it and [pool.fea] is absent")
    return Algorithm("fea", w=w, lo=bounds[0], hi=bounds[1])
