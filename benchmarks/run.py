"""Every benchmark in turn, each at a quick size, as ratios measured in one run (``make
bench``); each one's own command gives its full size and its options.

    python -m benchmarks.run                    # every benchmark, quick (about 16 minutes)
    python -m benchmarks.run solver flood       # only these
    python -m benchmarks.run --full load        # at the benchmark's own default size
    python -m benchmarks.run --list             # what each measures, and its quick size

Each runs in a process of its own (some patch the standard library for gevent), one after
the other so none takes the other's cores, and the run ends with how long each took and
whether it met its own goal (its exit code).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Benchmark:
    name: str  # the module in benchmarks/
    measures: str
    quick: tuple[str, ...]  # its options at the quick size


BENCHMARKS = (
    Benchmark("solver", "the fast solver against pymdptoolbox and plain numpy",
              ("--reference-teams", "100", "--batch-teams", "100000", "--repeats", "3")),
    Benchmark("team_formation", "the typed teammate search on a large pool, a participant",
              ("--teams", "1e5", "--participants", "100")),
    Benchmark("human_model", "the protocols' reference speeds against the human model",
              ("--people", "1000")),
    Benchmark("cli_start", "each command's start-up against a bare interpreter",
              ("--runs", "3")),
    Benchmark("pool_study1", "the Study #1 pool: building, opening, matching, the live path",
              ("--reference-teams", "100", "--sizes", "1e4,1e5", "--dask-teams", "1e5",
               "--dask-workers", "1,2", "--open-teams", "1e5", "--queries", "500",
               "--live", "100")),
    Benchmark("websocket_compression", "what permessage-deflate costs a page's websocket",
              ("--messages", "5000", "--connections", "50", "--repeats", "3")),
    Benchmark("group_commit", "full durability's shared fsyncs under many writers",
              ("--writers", "100", "--seconds", "5")),
    Benchmark("flood", "what hostile socket traffic costs a served study", ("--quick",)),
    Benchmark("floor", "the least this stack does a message, to measure the server against",
              ("--participants", "100", "--steady", "20")),
    Benchmark("load", "people at a person's pace on 1 and 2 workers: acks, CPU, pushes",
              ("--quick",)),
)
BY_NAME = {benchmark.name: benchmark for benchmark in BENCHMARKS}


def command(benchmark: Benchmark, full: bool) -> list[str]:
    return [sys.executable, "-m", f"benchmarks.{benchmark.name}",
            *(() if full else benchmark.quick)]


def run(benchmark: Benchmark, full: bool) -> tuple[int, float]:
    """Run one, its output passed through; its exit code and seconds."""
    print(f"\n=== {benchmark.name}: {benchmark.measures}\n$ python "
          f"{' '.join(command(benchmark, full)[1:])}", flush=True)
    began = time.monotonic()
    code = subprocess.call(command(benchmark, full), cwd=ROOT)
    return code, time.monotonic() - began


def chosen(names: list[str]) -> list[Benchmark]:
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise SystemExit(f"no benchmark named {', '.join(unknown)}; "
                         f"there are {', '.join(BY_NAME)}")
    return [BY_NAME[name] for name in names] if names else list(BENCHMARKS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"the benchmarks to run (default: all of {', '.join(BY_NAME)})")
    parser.add_argument("--full", action="store_true",
                        help="each at its own default size rather than the quick one")
    parser.add_argument("--list", action="store_true", help="say what each measures, and stop")
    args = parser.parse_args(argv)
    benchmarks = chosen(args.names)
    if args.list:
        for benchmark in benchmarks:
            print(f"{benchmark.name}: {benchmark.measures} "
                  f"(quick: {' '.join(benchmark.quick) or 'its defaults'})")
        return 0
    results = [(benchmark, *run(benchmark, args.full)) for benchmark in benchmarks]
    print("\n| benchmark | seconds | exit code |\n|---|---|---|")
    for benchmark, code, seconds in results:
        print(f"| {benchmark.name} | {seconds:.0f} | {code} |")
    return 1 if any(code != 0 for _, code, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
