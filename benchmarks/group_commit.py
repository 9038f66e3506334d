"""Group commit under full durability: one gevent process, many participants writing at once.

    python -m benchmarks.group_commit                      # 300 writers, 10 s each mode
    python -m benchmarks.group_commit --writers 500 --seconds 20

Each mode runs in a fresh process patched by gevent, as a ``study serve`` worker is, on a
fresh database in ``--dir`` (default: the working directory's ``var/``, a real disk; a
tmpfs would make fsync free): ``--writers`` greenlets each write one event (a row of
``steps``) at a random moment of every ``--interval`` seconds, for ``--seconds``.

- ``normal``: ``--durability normal`` (no fsync before the ack);
- ``full``: ``--durability full``, one fsync of the log for every commit made before it,
  asked of a helper process while the event loop goes on (``study.storage.wal_sync``);
- ``sqlite-full``: SQLite's own ``synchronous=FULL``, what ``full`` was before: an fsync
  inside every commit, holding the event loop.

Reported per mode: events a second, event latency (from asking to write to returning, when
the ack would be sent) p50/p95/p99, commits per fsync, and the event loop's lag (how late a
greenlet that sleeps 1 ms wakes, p99 and max: how long the process served nobody).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("normal", "full", "sqlite-full")

CHILD = """
import json, random, sys, time
from gevent import monkey
monkey.patch_all()
import gevent
import numpy as np
from study.storage.database import Storage

mode, path, writers, seconds, interval = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
    float(sys.argv[4]), float(sys.argv[5])
storage = Storage(path, "full" if mode == "full" else "normal")
if mode == "sqlite-full":
    storage.db.execute("PRAGMA synchronous=FULL")
with storage.event() as db:
    pid = db.execute("INSERT INTO participants (code, protocol, created_at, step) "
                     "VALUES ('bench', 'demo', 0, 'consent')").lastrowid
latencies, lags = [], []
end = time.monotonic() + seconds

def writer(rng):
    while True:
        gevent.sleep(rng.uniform(0, interval))
        if time.monotonic() >= end:
            return
        asked = time.monotonic()
        storage.insert("steps", {"participant_id": pid, "step": "bench", "at": time.time()})
        latencies.append(time.monotonic() - asked)
        gevent.sleep(max(0.0, interval - (time.monotonic() - asked)))

def ticker():
    while time.monotonic() < end:
        asked = time.monotonic()
        gevent.sleep(0.001)
        lags.append(time.monotonic() - asked - 0.001)

sync = storage.wal_sync
syncs, committed = (sync.syncs, sync.committed) if sync else (0, 0)
started = time.monotonic()
gevent.joinall([gevent.spawn(ticker)] + [gevent.spawn(writer, random.Random(i))
                                         for i in range(writers)])
elapsed = time.monotonic() - started
ms = lambda values, q: float(np.percentile(values, q) * 1000)
print(json.dumps({
    "events_per_second": len(latencies) / elapsed,
    "latency_ms": [ms(latencies, q) for q in (50, 95, 99)],
    "commits_per_fsync": ((sync.committed - committed) / max(1, sync.syncs - syncs)) if sync
                         else (1.0 if mode == "sqlite-full" else None),
    "lag_ms": [ms(lags, 99), max(lags) * 1000]}))
"""


def run_mode(mode: str, directory: Path, args: argparse.Namespace) -> dict[str, object]:
    database = directory / f"group-commit-{mode}.sqlite"
    run = subprocess.run([sys.executable, "-c", CHILD, mode, str(database), str(args.writers),
                          str(args.seconds), str(args.interval)],
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def markdown(mode: str, result: dict[str, object]) -> str:
    p50, p95, p99 = result["latency_ms"]
    lag99, lag_max = result["lag_ms"]
    per_fsync = result["commits_per_fsync"]
    grouped = "-" if per_fsync is None else f"{per_fsync:.1f}"
    return (f"| {mode} | {result['events_per_second']:,.0f} | {p50:.1f} / {p95:.1f} / "
            f"{p99:.1f} | {grouped} | {lag99:.1f} / {lag_max:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds between one writer's events")
    parser.add_argument("--dir", type=Path, default=Path("var"))
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    print("| mode | events/s | event latency p50 / p95 / p99 ms | commits per fsync | "
          "loop lag p99 / max ms |\n|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="group-commit-") as scratch:
        for mode in MODES:
            print(markdown(mode, run_mode(mode, Path(scratch), args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
