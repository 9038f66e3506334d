"""Load: N concurrent bot participants against one ``study serve`` process on loopback.

    python -m benchmarks.load [--participants 100] [--round-seconds 6] [--practice-seconds 3]

Reports the latency from a cookie being sent to its acknowledgement (target: p95 <= 50 ms),
how far round closings drift from their deadlines (target: within 100 ms), and how many
acknowledged messages are missing from the database (must be 0). The server runs the demo
protocol with shorter rounds and faster reference speeds, so every bot decorates a cookie
every second or so; the database and the pool live in a temporary directory.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from study.bots import BEHAVIOURS, StudyFacts, bot_codes, profile_for, run_swarm
from study.bots.audit import closing_drift, missing_acknowledged
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol import load_protocol

ROOT = Path(__file__).resolve().parents[1]
MIX = ("fast", "fast", "fast", "slow", "refreshing")


def percentiles(values: np.ndarray, scale: float = 1000.0) -> str:
    if not len(values):
        return "none"
    p50, p95, p99, top = np.percentile(values * scale, [50, 95, 99, 100])
    return f"p50 {p50:7.1f}  p95 {p95:7.1f}  p99 {p99:7.1f}  max {top:7.1f}  (n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--round-seconds", type=float, default=6.0)
    parser.add_argument("--practice-seconds", type=float, default=3.0)
    parser.add_argument("--stagger", type=float, default=0.05,
                        help="seconds between two bots' arrivals")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--behaviours", default=",".join(MIX),
                        help=f"cycled over the bots ({', '.join(BEHAVIOURS)})")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep the database, protocol and server log in DIR")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="study-load-") as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp / "load.toml",
                                  round_seconds=args.round_seconds,
                                  practice_seconds=args.practice_seconds,
                                  reference_speed=(1.5, 1.0), min_cookie_seconds=0.3)
        server = ServeProcess(protocol, tmp / "load.sqlite", tmp / "pools", tmp / "serve.log")
        server.start(timeout=120)
        try:
            names = list(itertools.islice(itertools.cycle(args.behaviours.split(",")),
                                          args.participants))
            codes = bot_codes(args.participants, prefix="load")
            result = run_swarm(server.url, codes,
                               [profile_for(i, name, seed=1) for i, name in enumerate(names)],
                               facts=StudyFacts.from_protocol(load_protocol(protocol)),
                               max_seconds=args.max_seconds, stagger=args.stagger)
        finally:
            server.stop()
        report(result, tmp / "load.sqlite", codes, args)
        missing = missing_acknowledged(tmp / "load.sqlite", result.log)
    return 0 if not missing and all(o.error is None for o in result.outcomes) else 1


def report(result, db: Path, codes: list[str], args: argparse.Namespace) -> None:
    latencies = result.latencies("cookie")
    drift = closing_drift(db, codes)
    missing = missing_acknowledged(db, result.log)
    print(f"{args.participants} bots ({args.behaviours}), rounds {args.round_seconds:g} s, "
          f"practice {args.practice_seconds:g} s, one server process, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(result.summary())
    print(f"cookie sent -> ack, ms      {percentiles(latencies)}")
    print(f"all messages -> ack, ms     "
          f"{percentiles(np.array([a.latency for a in result.log.acked]))}")
    print(f"round closing - deadline, ms {percentiles(drift)}")
    within = float(np.mean(np.abs(drift) <= 0.1)) if len(drift) else float("nan")
    print(f"closings within 100 ms: {within:.1%}")
    print(f"acknowledged but missing from the database: {len(missing)}")
    p95 = float(np.percentile(latencies, 95) * 1000) if len(latencies) else float("nan")
    print(f"targets: cookie ack p95 <= 50 ms: {'met' if p95 <= 50 else 'MISSED'}; "
          f"closing drift <= 100 ms: {'met' if within == 1.0 else 'MISSED'}; "
          f"missing == 0: {'met' if not missing else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())
