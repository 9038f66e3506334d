"""The floor: the least a server on this stack can do per message, to measure the study
server against in the same run.

    python -m benchmarks.floor --participants 1000 --progress-rate 0.8 --cookie-rate 0.1
    python -m benchmarks.floor --participants 1000 --team-size 3 --pushes-per-message 1.1

The floor server is Flask-SocketIO under gunicorn's gevent worker, as ``study serve``
runs, whose every message is one SQLite transaction: a ``progress`` message is one row and
no answer, a ``cookie`` message one row and an acknowledgement. Under ``--durability full``
it commits with SQLite's ``synchronous=FULL``, the plain way to be durable. With
``--team-size``, the clients are teams on one server, and after storing a message the
server pushes it to the teammates the client names (``--pushes-per-message`` on average),
as a real team's station pushes. Nothing else: no participants, rounds, rate limits or
checks.

With ``--workers N`` it is N such servers on one database file, each on a port of its own,
and the clients split evenly over them: what N processes sharing one SQLite file cost on
this stack and machine, without a balancer or a queue. A writer that finds the file locked
by another process waits without holding up its event loop.

Its clients are ``--participants`` Socket.IO connections (uvloop, in one or two processes,
as the light bots) that send progress and cookie messages at random moments, at
``--progress-rate`` and ``--cookie-rate`` a second each: ``benchmarks.load --floor`` gives
them the rates its study's bots sent in their window. Reported: cookie ack p50/p95/p99,
messages a second, pushes seen a message, and the floor servers' CPU milliseconds per
message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import uvloop

from benchmarks.cpu import CpuWindow
from study.bots.servers import free_port, wait_healthy

DURABILITIES = ("normal", "full")
SCHEMA = "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, code TEXT, " \
         "event TEXT, content TEXT, at REAL)"
CLIENTS_PER_PROCESS = 500
LOCKED_RETRY_SECONDS = 0.0005  # a gevent sleep: the other process's commit is that short


def create_app():  # type: ignore[no-untyped-def]
    """The floor server's app (``gunicorn 'benchmarks.floor:create_app()'``): its database
    and durability come from ``FLOOR_DB`` and ``FLOOR_DURABILITY``."""
    from flask import Flask
    from flask_socketio import SocketIO, join_room

    app = Flask(__name__)
    socketio = SocketIO(app, async_mode="gevent")
    db = sqlite3.connect(os.environ["FLOOR_DB"], check_same_thread=False,
                         isolation_level=None, timeout=0)  # SQLite's own wait stops the loop
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={os.environ['FLOOR_DURABILITY'].upper()}")
    db.execute(SCHEMA)

    def store(event: str, payload: dict) -> None:
        row = (payload.get("code"), event, str(payload.get("content")), time.time())
        while True:  # one transaction per message, retried while another process writes
            try:
                db.execute("INSERT INTO messages (code, event, content, at) "
                           "VALUES (?, ?, ?, ?)", row)
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error):
                    raise
                time.sleep(LOCKED_RETRY_SECONDS)

    def tell(event: str, payload: dict) -> None:
        """Push a stored message to the teammates it names, each in their own room."""
        for mate in payload.get("tell", ()):
            socketio.emit("station", {"code": payload.get("code"), "event": event,
                                      "content": payload.get("content")}, to=mate)

    @app.get("/healthz")
    def healthz() -> str:
        return "ok"

    @socketio.on("connect")
    def connect(auth: dict | None = None) -> None:
        if isinstance(auth, dict) and auth.get("code"):
            join_room(auth["code"])

    @socketio.on("progress")
    def progress(payload: dict) -> None:
        store("progress", payload)
        tell("progress", payload)

    @socketio.on("cookie")
    def cookie(payload: dict) -> dict:
        store("cookie", payload)
        tell("cookie", payload)
        return {"ok": True, "msg_id": payload.get("msg_id")}

    return app


class FloorServer:
    """``workers`` floor servers on one database, in one process group (their CPU is
    measured as one): one gunicorn with one gevent worker each, on a port of its own."""

    def __init__(self, directory: Path, durability: str, workers: int = 1) -> None:
        self.db = directory / "floor.sqlite"
        self.urls = tuple(f"http://127.0.0.1:{free_port()}" for _ in range(workers))
        self.durability = durability
        self.log = directory / "floor.log"
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> FloorServer:
        try:
            self._start()
        except BaseException:  # none left running when one fails to start
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        env = {**os.environ, "FLOOR_DB": str(self.db), "FLOOR_DURABILITY": self.durability}
        with self.log.open("w") as log:
            for url in self.urls:
                command = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1",
                           "--worker-connections", "10000", "-b", url.removeprefix("http://"),
                           "--log-level", "warning", "benchmarks.floor:create_app()"]
                group = self.group if self.processes else 0  # 0: a group of its own
                self.processes.append(subprocess.Popen(command, env=env, stdout=log,
                                                       stderr=log, process_group=group))
                wait_healthy(url, 60, self.processes[-1])  # one creates the file at a time

    @property
    def group(self) -> int:
        """Their process group: the first gunicorn's."""
        return self.processes[0].pid

    def __exit__(self, *exc: object) -> None:
        if self.processes:
            os.killpg(self.group, 15)
            for process in self.processes:
                process.wait(timeout=30)

    def messages_between(self, start: float, end: float) -> int:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as connection:
            return connection.execute("SELECT count(*) FROM messages WHERE at BETWEEN ? AND ?",
                                      (start, end)).fetchone()[0]


@dataclass(frozen=True)
class Teams:
    """How the floor's clients are grouped: teams of ``size``, each message pushed to
    ``pushes_per_message`` teammates on average (none: every client alone)."""

    size: int = 1
    pushes_per_message: float = 0.0


@dataclass(frozen=True)
class Traffic:
    """What the clients send: per participant, messages a second of each kind."""

    urls: tuple[str, ...]  # the floor servers; team t connects to the t-th, in turn
    progress_rate: float
    cookie_rate: float
    start: float  # when the first client connects (they arrive over ``ramp``)
    ramp: float
    measure_from: float
    end: float
    participants: int
    teams: Teams  # participants n and m are teammates when n // size == m // size

    def teammates(self, number: int) -> list[str]:
        first = number - number % self.teams.size
        return [f"floor-{m}" for m in range(first, min(first + self.teams.size,
                                                        self.participants)) if m != number]

    def url(self, number: int) -> str:
        """A team's server: teammates share one, as the balancer routes a study's teams."""
        return self.urls[number // self.teams.size % len(self.urls)]


@dataclass
class Seen:
    """What one client process's connections measured."""

    latencies: list[float] = field(default_factory=list)  # cookie acks sent in the window
    pushes: int = 0  # teammates' pushes received in the window


def told(traffic: Traffic, mates: list[str], rng: np.random.Generator) -> list[str]:
    """The teammates to push a message to: ``pushes_per_message`` of them on average."""
    whole = int(traffic.teams.pushes_per_message)
    count = whole + (rng.uniform() < traffic.teams.pushes_per_message - whole)
    return [str(mate) for mate in rng.permutation(mates)[:count]] if mates else []


async def participant(traffic: Traffic, number: int, rng: np.random.Generator,
                      seen: Seen) -> None:
    """Connection ``number``: progress and cookie messages at random moments; cookie acks
    timed and teammates' pushes counted (those inside the window)."""
    import socketio

    code = f"floor-{number}"
    mates = traffic.teammates(number)
    await asyncio.sleep(max(0.0, traffic.start + rng.uniform(0, traffic.ramp) - time.time()))
    client = socketio.AsyncClient(reconnection=False)

    @client.on("station")
    def station(_: dict) -> None:
        if traffic.measure_from <= time.time() <= traffic.end:
            seen.pushes += 1

    await client.connect(traffic.url(number), transports=["websocket"], auth={"code": code},
                         wait_timeout=60)
    rate = traffic.progress_rate + traffic.cookie_rate
    sent = 0
    try:
        while time.time() < traffic.end:
            await asyncio.sleep(rng.exponential(1 / rate))
            sent += 1
            payload = {"code": code, "msg_id": f"{code}-{sent}", "content": sent,
                       "tell": told(traffic, mates, rng)}
            if rng.uniform() * rate < traffic.progress_rate:
                await client.emit("progress", payload)
                continue
            moment = time.time()
            await client.call("cookie", payload, timeout=60)
            if traffic.measure_from <= moment <= traffic.end:
                seen.latencies.append(time.time() - moment)
    finally:
        await client.disconnect()


async def _clients(traffic: Traffic, numbers: range, seed: int) -> Seen:
    seen = Seen()
    rngs = np.random.default_rng(seed).spawn(len(numbers))
    await asyncio.gather(*(participant(traffic, number, rng, seen)
                           for number, rng in zip(numbers, rngs, strict=True)))
    return seen


def _run_clients(traffic: Traffic, numbers: range, seed: int) -> Seen:
    return uvloop.run(_clients(traffic, numbers, seed))  # as the light bots (their loop's lag)


def run_clients(traffic: Traffic, seed: int) -> tuple[np.ndarray, int]:
    """The clients in processes of at most ``CLIENTS_PER_PROCESS``, teams kept whole in
    one process; every cookie's latency, and the pushes received."""
    size = CLIENTS_PER_PROCESS - CLIENTS_PER_PROCESS % traffic.teams.size
    everyone = traffic.participants
    chunks = [range(n, min(n + size, everyone)) for n in range(0, everyone, size)]
    with ProcessPoolExecutor(len(chunks)) as pool:
        parts = list(pool.map(_run_clients, [traffic] * len(chunks), chunks,
                              [seed + n for n in range(len(chunks))]))
    return (np.array([latency for part in parts for latency in part.latencies]),
            sum(part.pushes for part in parts))


@dataclass
class FloorRow:
    durability: str
    workers: int
    participants: int
    cookie_ms: np.ndarray  # p50, p95, p99
    cookies: int
    messages_per_second: float
    cpu_ms_per_message: float
    pushes_per_message: float = 0.0  # teammates' pushes the clients received
    mix: str = ""  # the study whose mix of messages the clients sent

    def markdown(self) -> str:
        c = self.cookie_ms
        server = f"floor as {self.mix}" if self.mix else "floor"
        return (f"| {server} | {self.durability} | {self.workers} | {self.participants} | "
                f"{c[0]:.0f} / {c[1]:.0f} / {c[2]:.0f} ({self.cookies}) | "
                f"{self.messages_per_second:.0f} | {self.pushes_per_message:.2f} | "
                f"{self.cpu_ms_per_message:.2f} |")


HEADER = ("| server | durability | workers | participants | cookie ack p50 / p95 / p99 ms "
          "(cookies) | messages/s | pushes a message | server CPU ms/message |\n"
          "|---|---|---|---|---|---|---|---|")


def run_floor(directory: Path, durability: str, participants: int, progress_rate: float,
              cookie_rate: float, ramp: float, settle: float, steady: float,
              seed: int = 1, workers: int = 1, teams: Teams = Teams()) -> FloorRow:
    """One floor configuration: fresh servers and database, the clients, the figures."""
    directory.mkdir(parents=True, exist_ok=True)
    with FloorServer(directory, durability, workers) as server:
        start = time.time() + 2.0
        measure_from = start + ramp + settle
        traffic = Traffic(server.urls, progress_rate, cookie_rate, start, ramp, measure_from,
                          measure_from + steady, participants, teams)
        cpu = CpuWindow(server.group, measure_from, traffic.end)
        latencies, pushes = run_clients(traffic, seed)
        messages = server.messages_between(measure_from, traffic.end)
    server_cpu = cpu.used()[0].total() or float("nan")
    return FloorRow(durability, workers, participants,
                    np.percentile(latencies * 1000, [50, 95, 99]) if len(latencies)
                    else np.full(3, np.nan), len(latencies), messages / steady,
                    1000 * server_cpu / max(messages, 1), pushes / max(messages, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=250)
    parser.add_argument("--progress-rate", type=float, default=0.8,
                        help="progress messages a second per participant")
    parser.add_argument("--cookie-rate", type=float, default=0.1,
                        help="cookie messages a second per participant")
    parser.add_argument("--durability", type=lambda text: text.split(","),
                        default=list(DURABILITIES))
    parser.add_argument("--workers", type=lambda text: [int(n) for n in text.split(",")],
                        default=[1], help="floor servers on one database, comma-separated "
                        "counts (e.g. 1,2: one run each)")
    parser.add_argument("--team-size", type=int, default=1,
                        help="clients in teams of this many, each team on one server")
    parser.add_argument("--pushes-per-message", type=float, default=0.0,
                        help="teammates each message is pushed to, on average")
    parser.add_argument("--ramp", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--steady", type=float, default=30.0)
    parser.add_argument("--dir", type=Path, default=Path("var/floor"),
                        help="where the databases go (a real disk: a tmpfs makes fsync free)")
    args = parser.parse_args(argv)
    if args.team_size < 1 or not 0 <= args.pushes_per_message <= args.team_size - 1:
        parser.error("--team-size must be 1 or more, and --pushes-per-message between 0 "
                     "and the teammates a client has (--team-size - 1)")
    print(HEADER)
    for durability in args.durability:
        for workers in args.workers:
            row = run_floor(args.dir / f"{durability}-{workers}w", durability,
                            args.participants, args.progress_rate, args.cookie_rate,
                            args.ramp, args.settle, args.steady, workers=workers,
                            teams=Teams(args.team_size, args.pushes_per_message))
            print(row.markdown(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
