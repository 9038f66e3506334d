"""Agent seats: their coefficients from the pool, matched to the people present, and the
times at which an agent finishes its cookies.

Eq. 6 for a team: among the pool's admitted teams, the one whose humans lie nearest the
people present (each person in a seat of their own, the seats chosen to minimise the summed
squared distance), and, when the protocol names team types, only teams whose *live* team
(the people in their seats, agents in the rest) is of one of them. The agents take that
team's other humans' coefficients.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from study.pool.teamtypes import team_type_codes
from study.protocol.loader import Protocol
from study.protocol.pool_names import TEAM_TYPES
from study.task.cookies import theme_scale
from study.task.decorator import Decorator, round_rng


@dataclass(frozen=True)
class SeatFill:
    """Each seat's coefficients: ``people[k]`` sits in ``seat_of[k]``; the pool team
    ``pool_team`` gives the agents theirs."""

    c: np.ndarray  # [h, n]
    p: np.ndarray  # [h, n]
    seat_of: tuple[int, ...]
    pool_team: int
    distance: float


def fill_with_agents(pool: Any, c: np.ndarray, p: np.ndarray, team_types: tuple[str, ...],
                     reading: str) -> SeatFill | None:
    """The pool team nearest the people ``c, p`` (``[m, n]``, m below the pool's humans),
    with the people in the seats that fit best; None when no admitted team gives a live
    team of ``team_types`` (any, if none) by the protocol's reading of the most capable
    human. It runs inside the lobby's write transaction, so live teams are classified
    nearest first, a few at a time, not the whole pool for every seating."""
    admitted, pool_c, pool_p = pool.admitted
    wanted = [TEAM_TYPES.index(name) for name in team_types]
    # apart[seat][k]: each team's squared distance from person k were they in that seat,
    # summed a task type's column at a time (numpy's sum over a short last axis is slow)
    apart = [[sum((pool_c[:, seat, j] - c[k, j]) ** 2 + (pool_p[:, seat, j] - p[k, j]) ** 2
                  for j in range(c.shape[1])) for k in range(len(c))]
             for seat in range(pool_c.shape[1])]
    best: tuple[float, int, tuple[int, ...]] | None = None
    for seats in itertools.permutations(range(pool_c.shape[1]), len(c)):
        columns = list(seats)
        cost = sum(apart[seat][k] for k, seat in enumerate(seats))
        if wanted:
            row = _nearest_of_types(pool_c, pool_p, (columns, c, p), cost, wanted, reading)
        else:
            row = int(np.argmin(cost)) if len(cost) else None
        if row is not None and (best is None or cost[row] < best[0]):
            best = (float(cost[row]), row, seats)
    if best is None:
        return None
    cost, row, seats = best
    team_c, team_p = pool_c[row].copy(), pool_p[row].copy()
    team_c[list(seats)], team_p[list(seats)] = c, p
    return SeatFill(team_c, team_p, tuple(seats), int(admitted[row]), float(np.sqrt(cost)))


def _nearest_of_types(pool_c: np.ndarray, pool_p: np.ndarray,
                      seated: tuple[list[int], np.ndarray, np.ndarray], cost: np.ndarray,
                      wanted: list[int], reading: str) -> int | None:
    """The row of least ``cost`` (the lowest on a tie) whose live team, the people
    ``seated`` (their seats, ``c``, ``p``) and the row's others beside them, is of a
    ``wanted`` type: the rows up to a cost are classified, that cost rising eightfold in
    rows each time none is."""
    columns, c, p = seated
    looked = 0
    while looked < len(cost):
        looked = min(max(8 * looked, 64), len(cost))
        cutoff = np.partition(cost, looked - 1)[looked - 1]
        rows = np.flatnonzero(cost <= cutoff)  # every tie at the cutoff too
        rows = rows[np.argsort(cost[rows], kind="stable")]
        live_c, live_p = pool_c[rows], pool_p[rows]
        live_c[:, columns], live_p[:, columns] = c, p
        fits = np.flatnonzero(np.isin(team_type_codes(live_c, live_p, reading), wanted))
        if len(fits):
            return int(rows[fits[0]])
        looked = max(looked, len(rows))
    return None


def live_type(c: np.ndarray, p: np.ndarray, reading: str) -> str:
    """The team type of one team's coefficients (MODEL.md, "Team types"), by the
    protocol's reading of the most capable human."""
    return TEAM_TYPES[int(team_type_codes(c[None], p[None], reading)[0])]


def agent_times(protocol: Protocol, seat: dict[str, Any], team_round: dict[str, Any],
                task_type: int) -> list[float]:
    """Seconds into the round at which the agent in ``seat`` finishes each cookie: seeded by
    team, seat, session and round, so it replays identically after a restart. An agent
    decorates the protocol's own themes (those of ``[cookies]``)."""
    rng = round_rng(team_round["team_id"], seat["seat"], team_round["session"],
                    team_round["number"], 7)
    return agent(protocol, seat).cookie_times(task_type, team_round["seconds"], rng)


def agent(protocol: Protocol, seat: dict[str, Any]) -> Decorator:
    references = tuple(c.reference_speed / theme_scale(protocol, j, c.theme)
                       for j, c in enumerate(protocol.cookies))
    return Decorator(capability=(seat["c_squares"], seat["c_letters"]),
                     reference_speed=references)
