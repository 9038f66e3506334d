"""``study solve``: optimal allocation plans for one team or a CSV of teams, for the
presets or for the algorithms a protocol declares (``--protocol``)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from study.allocation.model import (
    ALGORITHMS,
    DEFAULT_FEA_WEIGHT,
    Algorithm,
    InvalidInput,
    Team,
    all_metrics,
)
from study.allocation.solver import ORDERS, SOLVERS, Policy, solve, solve_batch

if TYPE_CHECKING:
    import pandas as pd

    from study.protocol.loader import Protocol

TASK_NAMES = {0: "squares", 1: "letters"}
COEFFICIENT_COLUMN = re.compile(r"^(c|p|history)_(\d+)_(\d+)$")
DEFAULT_FEA_BOUNDS = (0.0, 1.0)


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "solve", help="optimal allocation plan for one team or a CSV of teams",
        description="Solve the allocation MDP. One team: give --c and --p once per human "
                    "(e.g. --c 0.2,0.9 --c 0.3,0.7 --p 0.9,0.1 --p 0.4,0.6) and read the "
                    "round-by-round plan. Many teams: --teams TEAMS.csv --out RESULTS.csv. "
                    "With --protocol, --algorithm also names the protocol's [[algorithms]].",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--c", action="append", metavar="C0,C1,...",
                        help="one human's capabilities per task type (repeat per human)")
    parser.add_argument("--p", action="append", metavar="P0,P1,...",
                        help="one human's preferences per task type (repeat per human)")
    parser.add_argument("--teams", type=Path, help="CSV with columns c_<i>_<j> and p_<i>_<j>")
    parser.add_argument("--out", type=Path, help="where batch results are written (CSV)")
    parser.add_argument("--protocol", type=Path,
                        help="a protocol whose algorithms --algorithm may name (declared ids "
                             "and presets, FEA with the protocol's weight and bounds); its "
                             "kits are the default")
    parser.add_argument("--algorithm", action="append", metavar="ID",
                        help=f"algorithm(s) to solve: {', '.join(ALGORITHMS)}, or with "
                             "--protocol an [[algorithms]] id (default: all three, or the "
                             "protocol's, for one team; exactly one with --teams)")
    parser.add_argument("--history", action="append", metavar="K0,K1,...",
                        help="kits one human got in the study's earlier sessions, per task "
                             "type (repeat per human; an algorithm with memory counts them; "
                             "--teams: columns history_<i>_<j>)")
    parser.add_argument("--kits", type=_int_list, default=None,
                        help="kits per task type, e.g. 8,8 (default: the protocol's, else 8 "
                             "of each type)")
    parser.add_argument("--w", type=float, default=None,
                        help=f"FEA weight on efficiency (without --protocol; default "
                             f"{DEFAULT_FEA_WEIGHT})")
    parser.add_argument("--fea-bounds", type=_float_pair, default=None, metavar="LO,HI",
                        help="bounds that scale |FE| into FE' (without --protocol; default "
                             f"{DEFAULT_FEA_BOUNDS[0]:g},{DEFAULT_FEA_BOUNDS[1]:g})")
    parser.add_argument("--order", choices=ORDERS, default="default",
                        help="round order of the optimal plan")
    parser.add_argument("--solver", choices=SOLVERS, default="exact",
                        help="exact fast solver or the pymdptoolbox reference")
    parser.set_defaults(handler=run)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers like 8,8, got {text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 0.2,0.8, got {text!r}") from None


def _float_pair(text: str) -> tuple[float, float]:
    values = _float_list(text)
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected LO,HI, got {text!r}")
    return values[0], values[1]


def algorithms_from(args: argparse.Namespace,
                    protocol: Protocol | None = None) -> list[Algorithm]:
    """The algorithms asked for: presets (FEA with --w and --fea-bounds), or with a
    protocol its presets and declared algorithms as it runs them."""
    if protocol is not None:
        from study.pool.placing import protocol_algorithm

        for flag, value in (("--w", args.w), ("--fea-bounds", args.fea_bounds)):
            if value is not None:
                raise InvalidInput(flag, value, "sets FEA without a protocol; with --protocol "
                                                "FEA takes the protocol's weight and bounds")
        return [protocol_algorithm(protocol, name)
                for name in args.algorithm or protocol_algorithm_names(protocol)]
    unknown = [name for name in args.algorithm or () if name not in ALGORITHMS]
    if unknown:
        raise InvalidInput("--algorithm", unknown[0], f"must be one of {', '.join(ALGORITHMS)} "
                                                      "(declared algorithms need --protocol)")
    lo, hi = args.fea_bounds or DEFAULT_FEA_BOUNDS
    w = DEFAULT_FEA_WEIGHT if args.w is None else args.w
    return [Algorithm(name, w=w, lo=lo, hi=hi) for name in args.algorithm or ALGORITHMS]


def protocol_algorithm_names(protocol: Protocol) -> list[str]:
    """The algorithms the protocol's conditions run, then the others it declares."""
    names = [condition.algorithm for condition in protocol.conditions]
    names += [algorithm.id for algorithm in protocol.algorithms]
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    protocol = None
    if args.protocol is not None:
        from study.protocol.loader import load_protocol

        protocol = load_protocol(args.protocol)
    kits = args.kits if args.kits is not None or protocol is None else protocol.kits
    if args.teams is not None:
        if args.out is None:
            raise InvalidInput("--out", None, "batch mode needs an output CSV")
        if not args.algorithm or len(args.algorithm) != 1:
            raise InvalidInput("--algorithm", args.algorithm, "batch mode takes exactly one")
        if args.history:
            raise InvalidInput("--history", args.history, "batch mode reads history_<i>_<j> "
                                                          "columns from --teams")
        solve_file(args.teams, args.out, algorithms_from(args, protocol)[0], kits,
                   args.order, args.solver)
        return 0
    if not args.c or not args.p:
        raise InvalidInput("--c/--p", None, "give both, once per human, or use --teams")
    team = Team(np.array([_float_list(row) for row in args.c]),
                np.array([_float_list(row) for row in args.p]))
    history = (None if not args.history
               else np.array([_float_list(row) for row in args.history]))
    for algorithm in algorithms_from(args, protocol):
        policy = solve(team, algorithm, kits, args.order, args.solver, history)
        print(format_policy(policy))
    return 0


# --- one team ----------------------------------------------------------------------------


def _task_name(task_type: int) -> str:
    return TASK_NAMES.get(task_type, f"type {task_type}")


def format_policy(policy: Policy) -> str:
    """A readable round-by-round table of who gets which kit and the metrics after it."""
    metrics = policy.round_metrics()
    humans = policy.space.humans
    header = (["round"] + [f"human {i}" for i in range(humans)]
              + ["E", "F_c", "F_p", "F", "FE", "unfair"])
    rows = []
    for number, types in enumerate(policy.plan):
        values = [metrics[key][number] for key in ("E", "F_c", "F_p", "F", "FE", "unfairness")]
        rows.append([str(number + 1)] + [_task_name(t) for t in types]
                    + [f"{v:.3f}" if k in (0, 5) else f"{v:+.3f}" for k, v in enumerate(values)])
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
             for row in [header, *rows]]
    goal = policy.goal_allocation
    summary = ", ".join(
        f"human {i}: " + " + ".join(f"{goal[i, j]} {_task_name(j)}"
                                    for j in range(goal.shape[1]))
        for i in range(humans))
    title = f"{policy.algorithm.describe()} ({policy.order} order): reward {policy.reward:.4f}"
    return "\n".join([title, *lines, f"goal: {summary}", ""])


# --- a file of teams ---------------------------------------------------------------------


def coefficients_from_frame(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``c, p`` arrays ``[B, h, n]`` from columns ``c_<i>_<j>`` and ``p_<i>_<j>``."""
    arrays = _arrays_from_frame(frame, ("c", "p"))
    return arrays["c"], arrays["p"]


def history_from_frame(frame: pd.DataFrame) -> np.ndarray | None:
    """``[B, h, n]`` kits of earlier sessions from columns ``history_<i>_<j>``, if any."""
    if not any(column.startswith("history_") for column in frame.columns):
        return None
    return _arrays_from_frame(frame, ("c", "history"))["history"]


def _arrays_from_frame(frame: pd.DataFrame, kinds: tuple[str, ...]) -> dict[str, np.ndarray]:
    found = {m.groups(): column for column in frame.columns
             if (m := COEFFICIENT_COLUMN.match(column))}
    if not any(kind == "c" for kind, _, _ in found):
        raise InvalidInput("teams", list(frame.columns),
                           "needs columns c_<human>_<type> and p_<human>_<type>")
    humans = 1 + max(int(i) for kind, i, _ in found if kind == "c")
    types = 1 + max(int(j) for kind, _, j in found if kind == "c")
    import pandas as pd

    arrays = {}
    for kind in kinds:
        missing = [f"{kind}_{i}_{j}" for i in range(humans) for j in range(types)
                   if (kind, str(i), str(j)) not in found]
        if missing:
            raise InvalidInput("teams", missing, "these columns are missing")
        columns = [f"{kind}_{i}_{j}" for i in range(humans) for j in range(types)]
        values = frame[columns].apply(pd.to_numeric, errors="coerce").to_numpy(float)
        arrays[kind] = values.reshape(len(frame), humans, types)
    return arrays


def solve_frame(frame: pd.DataFrame, algorithm: Algorithm, kits: tuple[int, ...] | None = None,
                order: str = "default", solver: str = "exact") -> pd.DataFrame:
    """The batch contract: input columns pass through, goal, plan and metrics are added
    (the metrics of this session's kits; an algorithm with memory plans on the totals)."""
    c, p = coefficients_from_frame(frame)
    history = history_from_frame(frame)
    if order == "default" and solver == "exact":
        batch = solve_batch(c, p, algorithm, kits, history=history)
        goals, plans, rewards = batch.goal_allocations, batch.plans, batch.reward
        actions = batch.space.actions
    else:
        from tqdm import tqdm

        policies = [solve(Team(c[k], p[k]), algorithm, kits, order, solver,
                          None if history is None else history[k])
                    for k in tqdm(range(len(frame)), desc=f"{algorithm.name} teams",
                                  disable=not sys.stderr.isatty())]
        goals = np.array([policy.goal_allocation for policy in policies])
        rewards = np.array([policy.reward for policy in policies])
        actions = policies[0].space.actions if policies else np.zeros((0, 1), int)
        plans = np.array([[policy.space.action_number(t) for t in policy.plan]
                          for policy in policies])
    result = frame.copy()
    humans, types = c.shape[1], c.shape[2]
    for i in range(humans):
        for j in range(types):
            result[f"goal_{i}_{j}"] = goals[:, i, j]
    result["actions"] = [";".join("-".join(str(t) for t in actions[a]) for a in plan)
                         for plan in plans]
    result["reward"] = rewards
    for name, values in all_metrics(c, p, goals).items():
        result[name] = values
    return result


def solve_file(teams: Path, out: Path, algorithm: Algorithm, kits: tuple[int, ...] | None,
               order: str, solver: str) -> None:
    import pandas as pd

    try:
        frame = pd.read_csv(teams)
    except (OSError, pd.errors.ParserError) as error:
        raise InvalidInput("--teams", str(teams), f"cannot be read as CSV ({error})") from None
    result = solve_frame(frame, algorithm, kits, order, solver)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out, index=False)
    print(f"solved {len(result)} teams with {algorithm.describe()} -> {out}")
