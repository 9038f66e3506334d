"""The ``analysis`` command: a report from a study database (and a pool), or its frames as CSV.

    analysis report DB [--pool POOL] --out DIR
    analysis export DB --out DIR
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
            "export": "the tidy data frames as CSV"}


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
    registers = {"report": _register_report, "export": _register_export}
    add_commands(commands, COMMANDS, chosen_command(sys.argv[1:] if argv is None else argv,
                                                    list(COMMANDS)),
                 lambda name: registers[name](commands))
    return parser


def _register_report(commands: argparse._SubParsersAction) -> None:
    from analysis import report, tradeoff

    defaults = report.ReportOptions()
    make = commands.add_parser(
        "report", help=COMMANDS["report"],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Write DIR/report.html (figures embedded), DIR/figures/*.png|svg and "
                    "DIR/tables/*.csv from the study database DB and, with --pool, the "
                    "simulation comparisons of a pool file.")
    make.add_argument("database", type=Path, metavar="DB", help="the study's SQLite file")
    make.add_argument("--pool", type=Path, help="a pool file (Parquet) built by `study`")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.add_argument("--sweep-teams", type=int, default=defaults.sweep_teams,
                      help="pool teams in the FEA weight sweep")
    make.add_argument("--order-sample", type=int, default=defaults.order_sample,
                      help="pool teams per team type in the round-order comparison")
    make.add_argument("--weights", type=_weights, default=tradeoff.DEFAULT_WEIGHTS,
                      help="FEA weights to sweep, comma-separated")
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
                    "cookies, answers, practice, teammates) and the per-session outcomes "
                    "and fairness over time as CSV, with metadata.json.")
    export.add_argument("database", type=Path, metavar="DB", help="the study's SQLite file")
    export.add_argument("--out", type=Path, required=True, help="output folder")
    export.set_defaults(handler=run_export)


def run_report(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis import load, report
    from study.pool.store import read_metadata

    defaults = report.ReportOptions()
    data = load.load(args.database)
    pool = record = None
    if args.pool is not None:
        record = read_metadata(args.pool)
        pool = pd.read_parquet(args.pool)
    options = report.ReportOptions(attributes=tuple(args.attributes or defaults.attributes),
                                   sweep_teams=args.sweep_teams,
                                   order_sample=args.order_sample, weights=args.weights,
                                   bounds=tuple(args.bounds or ()), seed=args.seed)
    path = report.write_report(data, args.out, pool, record, options)
    print(f"report written to {path}")
    return 0


def export_frames(data: load.StudyData, out: Path) -> list[Path]:
    """Every tidy frame and the derived per-session frames as CSV, plus the metadata."""
    from analysis import sessions

    out.mkdir(parents=True, exist_ok=True)
    frames = dict(data.frames())
    if not data.participants.empty:
        frames["session_outcomes"] = sessions.session_outcomes(data)
        frames["session_fairness"], frames["round_fairness"] = (
            sessions.session_fairness_over_time(data))
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


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(build_parser(argv), argv)


if __name__ == "__main__":
    sys.exit(main())
