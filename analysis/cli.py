"""The ``analysis`` command: a report from a study database (and a pool), or its frames as CSV.

    analysis report DB [--pool POOL] --out DIR
    analysis export DB --out DIR
    analysis simulate PROTOCOL [--pool POOL] --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from study.cli import add_commands, chosen_command, run_command

if TYPE_CHECKING:
    from analysis import load

# pandas, matplotlib and the analysis modules are imported only by the command being run.
COMMANDS = {"report": "self-contained HTML report with tables and figures",
            "export": "the tidy data frames as CSV",
            "plan": "participants needed to detect a difference, by simulated power",
            "simulate": "the simulation study of the protocol's algorithms against Efficient"}


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default only where it has one and its help does not already say
    it in words."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text:
            return text
        return super()._get_help_string(action)


def _pair(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI like 0,1.5, got {text!r}") from None
    return lo, hi


def _weights(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected weights like 0,0.5,1, got {text!r}") from None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the command it names is registered in full."""
    parser = argparse.ArgumentParser(
        prog="analysis", description="Analyse a fair-teaming study database and team pools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    registers = {"report": _register_report, "export": _register_export,
                 "plan": _register_plan, "simulate": _register_simulate}
    add_commands(commands, COMMANDS, chosen_command(sys.argv[1:] if argv is None else argv,
                                                    list(COMMANDS)),
                 lambda name: registers[name](commands))
    return parser


def _register_report(commands: argparse._SubParsersAction) -> None:
    from analysis import report, tradeoff

    defaults = report.ReportOptions()
    make = commands.add_parser(
        "report", help=COMMANDS["report"],
        formatter_class=DefaultsFormatter,
        description="Write DIR/report.html (figures embedded), DIR/figures/*.png|svg and "
                    "DIR/tables/*.csv from the study database DB and, with --pool, the "
                    "simulation comparisons of a pool file. Several databases of the same "
                    "protocol (sites, days) are pooled with the site as a factor.")
    make.add_argument("databases", type=Path, nargs="+", metavar="DB",
                      help="the study's SQLite file(s)")
    make.add_argument("--protocol", type=Path,
                      help="the protocol file, for a database without its snapshot "
                           "(default: the snapshot the server stored in the database)")
    make.add_argument("--pool", type=Path, help="a pool file (Parquet) built by `study`")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.add_argument("--sweep-teams", type=int, default=defaults.sweep_teams,
                      help="pool teams in the FEA weight sweep")
    make.add_argument("--order-sample", type=int, default=defaults.order_sample,
                      help="pool teams per team type in the round-order comparison")
    make.add_argument("--weights", type=_weights, default=tradeoff.DEFAULT_WEIGHTS,
                      help="FEA weights to sweep, comma-separated (default: 0, 0.1, ..., 1)")
    make.add_argument("--bounds", type=_pair, action="append", metavar="LO,HI",
                      help="FE' bounds to sweep (repeatable; default: the pool's own)")
    make.add_argument("--attribute", action="append", dest="attributes", metavar="ITEM",
                      help="post-study item to compare participant groups by (repeatable; "
                           f"default: {', '.join(defaults.attributes)})")
    make.add_argument("--seed", type=int, default=0, help="seed of samples and bootstraps")
    make.set_defaults(handler=run_report)


def _register_export(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help=COMMANDS["export"],
        description="Write every tidy frame (participants, sessions, rounds, allocations, "
                    "cookies, answers, practice, teammates, status), the participant flow "
                    "and the analysis set the protocol declares, and the per-session "
                    "outcomes and fairness over time of that set as CSV, with "
                    "metadata.json.")
    export.add_argument("database", type=Path, metavar="DB", help="the study's SQLite file")
    export.add_argument("--out", type=Path, required=True, help="output folder")
    export.set_defaults(handler=run_export)


def run_report(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis import load, report
    from study.pool.store import read_metadata

    defaults = report.ReportOptions()
    datasets = [load.load(path) for path in args.databases]
    pool = record = None
    if args.pool is not None:
        record = read_metadata(args.pool)
        pool = pd.read_parquet(args.pool)
    options = report.ReportOptions(attributes=tuple(args.attributes or defaults.attributes),
                                   sweep_teams=args.sweep_teams,
                                   order_sample=args.order_sample, weights=args.weights,
                                   bounds=tuple(args.bounds or ()), seed=args.seed,
                                   protocol=args.protocol)
    path = report.write_report(datasets, args.out, pool, record, options)
    print(f"report written to {path}")
    return 0


def export_frames(data: load.StudyData, out: Path) -> list[Path]:
    """Every tidy frame, the participant flow and the analysis set, and the derived
    per-session frames of the analysis set as CSV, plus the metadata."""
    from analysis import flow, questionnaires, report, sessions

    out.mkdir(parents=True, exist_ok=True)
    frames = dict(data.frames())
    study = report.prepare([data])
    frames["participant_flow"] = flow.flow_table(study.stages,
                                                 len(study.design.conditions) or None)
    frames["participant_stages"] = study.stages
    frames["analysis_set"] = study.chosen.participants
    frames["analysis_sessions"] = study.chosen.sessions
    if not study.analysed.participants.empty:
        frames["session_outcomes"] = sessions.session_outcomes(study.analysed)
        frames["session_fairness"], frames["round_fairness"] = (
            sessions.session_fairness_over_time(study.analysed))
    kinds = {item.id: item.kind for item in study.design.post_items}
    answers = study.analysed.answers
    for name, read, kind in (("robot_ranks", questionnaires.rankings, "rank"),
                             ("robot_pairs", questionnaires.pairwise_choices, "pairwise")):
        if kind in kinds.values():  # one row per robot (rank) or pair of robots
            frames[name] = read(answers, [i for i, k in kinds.items() if k == kind])
    paths = []
    for name, frame in frames.items():
        paths.append(out / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    (out / "metadata.json").write_text(json.dumps(data.metadata, indent=2, default=str),
                                       encoding="utf-8")
    return paths


def run_export(args: argparse.Namespace) -> int:
    from analysis import load

    paths = export_frames(load.load(args.database), args.out)
    print(f"{len(paths)} tables written to {args.out}")
    return 0


def _register_plan(commands: argparse._SubParsersAction) -> None:
    from analysis.plan import DEFAULT_PARTICIPANTS, PlanOptions

    defaults = PlanOptions()
    make = commands.add_parser(
        "plan", help=COMMANDS["plan"], formatter_class=DefaultsFormatter,
        description="Estimate by simulation how many participants (each meeting every "
                    "condition) detect a difference in team cookies between every two "
                    "conditions (the pool's teams with participants' capabilities from a "
                    "pilot or the human model, the conditions' policies and the decorator "
                    "model) and in a Likert item, at the given power; with more than two "
                    "conditions the pairs are Holm-adjusted, as the report adjusts them. "
                    "Writes DIR/plan.csv, DIR/needed.csv and DIR/plan.png|svg.")
    make.add_argument("protocol", type=Path, metavar="PROTOCOL", help="the protocol file")
    make.add_argument("--pool", type=Path, required=True,
                      help="a pool file (Parquet) built by `study pool build`")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.add_argument("--pilot", type=Path, metavar="DB",
                      help="a pilot database of this protocol: simulated participants' "
                           "capabilities are drawn from its measured ones (default: people "
                           "of the human decorating-speed model)")
    make.add_argument("--conditions", type=_names, metavar="A,B[,C,D]",
                      help="the conditions to compare, two to four (default: all the "
                           "protocol's)")
    make.add_argument("--power", type=float, default=defaults.power, help="target power")
    make.add_argument("--alpha", type=float, default=defaults.alpha,
                      help="two-sided significance level")
    make.add_argument("--simulations", type=int, default=defaults.simulations,
                      help="simulated studies per number of participants")
    make.add_argument("--participants", type=_counts, default=DEFAULT_PARTICIPANTS,
                      help="numbers of participants to simulate, comma-separated "
                           f"(default: {', '.join(map(str, DEFAULT_PARTICIPANTS))})")
    make.add_argument("--likert-difference", type=float, default=defaults.likert_difference,
                      help="difference in scale points to detect in a Likert item")
    make.add_argument("--likert-sd", type=float, default=defaults.likert_sd,
                      help="spread (sd) of one rating around the participant's own mean")
    make.add_argument("--cookies-difference", type=float,
                      help="difference in team cookies to detect (default: the one the "
                           "policies and the decorator model give)")
    make.add_argument("--seed", type=int, default=defaults.seed, help="seed of the simulation")
    make.set_defaults(handler=run_plan)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not 2 <= len(names) <= 4 or len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"expected two to four different conditions like "
                                         f"efficient,fair,fea, got {text!r}")
    return names


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 6,12,24, got {text!r}") from None
    if min(counts) < 3:
        raise argparse.ArgumentTypeError("every number of participants must be at least 3")
    return counts


def run_plan(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis import figures, plan
    from study.pool.store import read_metadata
    from study.protocol.loader import load_protocol
    from study.protocol.pool_spec import PoolSpec

    protocol = load_protocol(args.protocol)
    record = read_metadata(args.pool)
    spec = PoolSpec.from_dict(record["spec"], name=record["name"])
    options = plan.PlanOptions(power=args.power, alpha=args.alpha,
                               simulations=args.simulations, participants=args.participants,
                               likert_difference=args.likert_difference,
                               likert_sd=args.likert_sd,
                               cookies_difference=args.cookies_difference, seed=args.seed,
                               pilot=args.pilot)
    curves, needed = plan.plan(pd.read_parquet(args.pool), protocol, spec.fea, options,
                               args.conditions)
    args.out.mkdir(parents=True, exist_ok=True)
    curves.to_csv(args.out / "plan.csv", index=False)
    needed.to_csv(args.out / "needed.csv", index=False)
    figures.save(figures.power_figure(curves, args.power), args.out, "plan")
    print(needed.to_string(index=False))
    return 0


def _register_simulate(commands: argparse._SubParsersAction) -> None:
    make = commands.add_parser(
        "simulate", help=COMMANDS["simulate"], formatter_class=DefaultsFormatter,
        description="The paper's Simulation Studies #1 and #2 for every algorithm the "
                    "protocol declares and every preset its conditions run, against "
                    "Efficient, on every team of its pool and per team type: how often each "
                    "departs from Efficient, its efficiency cost, each term's gap, the "
                    "fair-gap bins, the rounds on each human's most capable and most "
                    "preferred type by role, and the share of teams where each keeps its "
                    "goal on the paper's capability scale. Writes DIR/*.csv, "
                    "DIR/algorithms.json and the figures "
                    "DIR/departures|term_gaps|rounds.png|svg, and prints the tables.")
    make.add_argument("protocol", type=Path, metavar="PROTOCOL", help="the protocol file")
    make.add_argument("--pool", type=Path,
                      help="a pool file (default: the protocol's own pool, built in --pools "
                           "if it is not there)")
    make.add_argument("--pools", type=Path, default=Path("var/pools"),
                      help="where team pools are built and cached (as `study serve`)")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.set_defaults(handler=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    import time

    from analysis import algorithm_study
    from study.pool import Pool, ensure_pool
    from study.protocol.loader import load_protocol

    started = time.perf_counter()
    protocol = load_protocol(args.protocol)
    path = args.pool or ensure_pool(protocol.pool_spec(), args.pools, progress=None)
    study = algorithm_study.run(Pool.open(path), protocol, progress=_say)
    paths = algorithm_study.write(study, args.out, progress=_say)
    print(algorithm_study.format_study(study))
    print(f"\n{len(paths)} files written to {args.out} in "
          f"{time.perf_counter() - started:.1f} s (the study itself "
          f"{study.seconds['study']:.1f} s, the figures {study.seconds['figures']:.1f} s)")
    return 0


def _say(message: str) -> None:
    """Progress of a long step, on stderr so the tables alone go to stdout."""
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(argv), argv)


if __name__ == "__main__":
    sys.exit(main())
