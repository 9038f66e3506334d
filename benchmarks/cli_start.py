"""Command start-up: each command in fresh processes against ``python -c pass`` in one run.

    python -m benchmarks.cli_start [--runs 7]

For every command: the median and the slowest wall time of ``--runs`` fresh processes,
the median as a ratio to the interpreter alone, and the peak resident memory. The children
cache their bytecode under a temporary directory, as an installed package has it, even
where ``PYTHONDONTWRITEBYTECODE`` is set; the first run of each command, which writes
that cache, is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
STUDY1 = str(Path(__file__).resolve().parent.parent / "protocols" / "study1.toml")
ONE_TEAM = ["--c", "0.25,0.9", "--c", "0.3,0.7", "--p", "0.9,0.1", "--p", "0.4,0.6"]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "study --help": [str(BIN / "study"), "--help"],
    "study solve --help": [str(BIN / "study"), "solve", "--help"],
    "study pool --help": [str(BIN / "study"), "pool", "--help"],
    "study check protocols/study1.toml": [str(BIN / "study"), "check", STUDY1],
    "study solve (one team, 3 algorithms)": [str(BIN / "study"), "solve", *ONE_TEAM],
    "analysis --help": [str(BIN / "analysis"), "--help"],
}


def run_once(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of one fresh process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=environment)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}")
    return elapsed, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        for name, command in COMMANDS.items():
            run_once(command, environment)
            runs = [run_once(command, environment) for _ in range(args.runs)]
            results[name] = (statistics.median(t for t, _ in runs), max(t for t, _ in runs),
                             max(m for _, m in runs))
    baseline = results["python -c pass"][0]
    print(f"{'command':<42}{'median':>8}{'slowest':>9}{'x python':>10}{'peak':>10}")
    for name, (seconds, slowest, peak) in results.items():
        print(f"{name:<42}{seconds:>7.3f}s{slowest:>8.3f}s{seconds / baseline:>10.1f}"
              f"{peak:>7.0f} MiB")


if __name__ == "__main__":
    main()
