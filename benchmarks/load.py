r"""Load: 1, 2 and 4 server processes against 250, 500 and 1,000 participants at once, on
this machine, bots included.

    python -m benchmarks.load            # the whole matrix (about 40 minutes)
    python -m benchmarks.load --quick    # a smaller one (about 12 minutes)

Every configuration is a fresh ``study serve PROTOCOL --workers N --durability D`` (gunicorn
with gevent; both durabilities by default, ``--durability full`` for one;
several behind HAProxy with Redis) on a fresh database, and light bots
(``study.bots.light``) that keep N participants in the study: they arrive evenly over the
ramp, take the demo study's steps at a person's pace (pages read for seconds, every element
of a cookie placed at the human timing model's pace and reported as ``progress`` as the page
reports it, at once in practice and at most once a second in a played round, finished
cookies sent as acknowledged ``cookie`` messages), and a slot whose participant finished
takes a new one. After the ramp and a settling pause, a window of steady state is measured:

- cookie ack p50/p95/p99: from first sending a cookie to its acknowledgement, at the bot
  (a cookie resent after 4 s without an answer, as the page does, counts from the first);
- round-closing drift p95/max: ``closed_at - deadline`` of the rounds closed by the
  scheduler (``close_reason`` ``deadline`` or ``late``) whose deadline fell in the window;
- messages per second: client messages the server handled in the window (accepted, stored
  in ``messages``, or refused, logged in ``rejections``);
- CPU per message: the server's processes (gunicorn, HAProxy, Redis) CPU time in the window
  over those messages; the server's and the bots' CPU share of the machine; with several
  workers, the busiest one's CPU over the workers' mean (1: the work evenly shared);
- write lock: the share of the window a worker waited for another worker's write lock,
  and the share the workers together held it, which cannot pass 100 %: near it, SQLite's
  one writer is the limit and another worker adds none (each heartbeat records its
  process's totals, ``processes.lock_wait`` and ``lock_held``);
- acknowledged but missing: acknowledged messages the database lacks (whole run);
- lock errors: "database is locked" in the server's log (whole run).

The ``fast`` rows are a stress figure: bots that finish a cookie about every second on a
quick variant of the protocol (6 s rounds), far beyond a person's pace.
Goal: 1,000 participants with ack p95 <= 50 ms, drift p95 <= 50 ms and max <= 250 ms,
0 acknowledged missing, 0 lock errors.

``--floor`` adds the floor server (``benchmarks.floor``: Flask-SocketIO, gevent, one SQLite
transaction a message, nothing else) like every human row, right after it in each round:
its participants, durability and workers, its clients sending that study's mix of
messages, in teams of the study's people with as many pushes to teammates a message as the
study owed; the last table gives
every row's people per core, over its floor's CPU per message, and projected for 8 and 16
cores.
Each row with several workers is also given over one worker, beside the floor's same
ratio: what a second process costs on this machine whatever it runs. A worker's CPU a
message grows as its load falls (fewer messages share each wake of its event loop and
each commit), so ``--same-load`` also runs one worker at the participants each of several
carries (500 for two workers at 1,000) and gives the row over that too: what a second
process costs of its own.

``--repeat N`` runs the whole matrix N times, one configuration after another in each
round, forwards in odd rounds and backwards in even ones, and gives every ratio the
criteria are judged by (a later study's ack p95 over the first's, several workers over
one, full durability over normal) in each round and their median: this machine's speed
moves within minutes, and the same configuration's CPU a message has spread by a third
between rows ten minutes apart.

``--without-probes`` runs, right after every human row of a study with round probes, the
same configuration on a copy of its protocol with the ``[[probes]]`` tables removed, and
gives the row over it: CPU a message, CPU a participant-second and messages a
participant-second, with the probes the bots were shown, answered and missed. Both are
per message or per person, so a few hundred people measure what probes add at a thousand
(docs/capacity.md, Round probes).

Several ``--protocol`` run in every configuration, one after the other; each one's ack p95
is also given over the first's. Real teams of three against agent teammates (their lobby
and practice take about 200 s before the window opens; docs/capacity.md)::

    python -m benchmarks.load --protocol protocols/demo.toml protocols/teams3.toml \
        --workers 1,2 --participants 1000 --fast-workers '' --durability normal --settle 200
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from benchmarks.console import ConsoleViewers
from benchmarks.cpu import CORES, CpuWindow, Heartbeats
from benchmarks.floor import HEADER as FLOOR_HEADER
from benchmarks.floor import FloorRow, Teams, run_floor
from study.bots.audit import missing_acknowledged
from study.bots.light import FAST, HUMAN, SwarmPlan, SwarmReport, Tally, run_light_swarm
from study.bots.participant import StudyFacts
from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol

ROOT = Path(__file__).resolve().parents[1]
GOAL_ACK_P95, GOAL_DRIFT_P95, GOAL_DRIFT_MAX = 0.050, 0.050, 0.250
# Every bot comes from this machine's one address: its enrolments must not be limited as
# one person's would be (600 a minute held a thousand arrivals back for a minute).
ONE_ADDRESS_ENROLMENTS = "100000 per minute"
SETTLE_SECONDS = 5.0  # after the last arrival, before the window opens
# A teammate's station is pushed within a second (``study.web.participant.station_pushes``):
# team rounds whose ends are checked closed this long before the window's end.
PUSHED_WITHIN = 2.0
DEMO = ROOT / "protocols" / "demo.toml"
SPAWN_SECONDS = 4.0  # for the swarm's processes to start before the first arrival


@dataclass(frozen=True)
class Config:
    pace: str  # "human" or "fast"
    study: Path  # the protocol of the human-pace rows (the fast rows run a quick demo)
    workers: int
    participants: int
    durability: str = "full"  # study serve --durability
    backup_every: float = 0.0  # study serve --backup-every MINUTES (0: no backups)
    probes: bool = True  # False: the protocol's copy without its [[probes]] tables


@dataclass
class Row:
    """One configuration's figures."""

    config: Config
    cookie_ms: np.ndarray  # p50, p95, p99
    cookies: int
    drift_ms: np.ndarray  # p95, max
    closings: int
    messages_per_second: float
    cpu_ms_per_message: float
    server_share: float
    swarm_share: float
    machine_share: float
    lag_p95_ms: float
    missing: int
    lock_errors: int
    tally: Tally
    # each teammate's station at the end of the team rounds closed in the window, as each
    # other member should last have heard it: (team round, seat, code) -> (cookies, placed)
    final_stations: dict[tuple[int, int, str], tuple[int, int]] = field(default_factory=dict)
    # progress and acknowledged messages (cookies, pages, rounds) a participant-second
    mix: tuple[float, float] = (0.0, 0.0)
    # ``stations`` pushes the bots received a message handled, in the window
    pushes_per_message: float = 0.0
    cpu_ms_by_program: dict[str, float] = field(default_factory=dict)  # per message
    # share of the window a worker waited for another worker's write lock, on average
    lock_wait_share: float = float("nan")
    # share of the window the workers together held the write lock (at most 1)
    lock_held_share: float = float("nan")
    # syncs of the log a message handled, and their mean time (full durability only)
    syncs_per_message: float = float("nan")
    sync_ms: float = float("nan")
    console: str = ""  # the console's live views open in the run (``--console``)
    # the largest process of each program's resident memory at the window's end, MB
    memory_mb: dict[str, float] = field(default_factory=dict)
    # the busiest worker's CPU in the window over the workers' mean (1: evenly shared)
    busiest_worker: float = float("nan")
    # round probes whose deadline fell in the window: all, answered, missed
    probes: tuple[int, int, int] = (0, 0, 0)

    def study_name(self) -> str:
        return self.config.study.stem + ("" if self.config.probes else " (no probes)")

    def probes_line(self) -> str:
        """The round probes due in the window and the bots' handling of all of theirs."""
        due, answered, missed = self.probes
        t = self.tally
        return (f"round probes due in the window {due:,} (answered {answered:,}, missed "
                f"{missed:,}); the bots were shown {t.probes_shown:,}, answered "
                f"{t.probes_answered:,} and left {t.probes_missed:,} in the run")

    def cpu_ms_per_participant_second(self) -> float:
        """The server's CPU a participant-second: what a person costs whatever messages
        their page sends (a probe's own messages lower the CPU a message)."""
        return (self.cpu_ms_per_message * self.messages_per_second
                / self.config.participants)

    def people_per_core(self) -> float:
        """Participants one core carries at this row's CPU per message and mix, fully
        busy (a sizing figure: keep a server well below it); none for a row that
        handled no message (its server failed: the row's bot errors say why)."""
        if not self.messages_per_second:
            return float("nan")
        return 1000 / (self.cpu_ms_per_message * self.messages_per_second
                       / self.config.participants)

    def goal_met(self) -> bool:
        return bool(self.cookies and self.closings
                    and self.cookie_ms[1] <= GOAL_ACK_P95 * 1000
                    and self.drift_ms[0] <= GOAL_DRIFT_P95 * 1000
                    and self.drift_ms[1] <= GOAL_DRIFT_MAX * 1000
                    and self.missing == 0 and self.lock_errors == 0
                    and self.pushes_unseen() == 0)

    def details(self) -> str:
        t = self.tally
        refused = ", ".join(f"{reason} {n}" for reason, n in t.refused.most_common()) or "none"
        return (f"participants {t.participants} (finished {t.finished}), progress reports "
                f"{t.progress_sent}, {self.pushes_seen()}, server CPU ms a message by "
                f"program: {self.by_program()}{self.balance()}, the write lock held by the workers "
                f"together {self.lock_held_share:.1%} of the window, waiting for another "
                f"worker's {self.lock_wait_share:.1%} of a worker's time, {self.syncs()}"
                f"resent after a timeout {t.resent}, reconnects "
                f"{t.reconnects}, refused: {refused}{self.memory()}{self.console}")

    def syncs(self) -> str:
        """The log's syncs, under full durability: how often the commits waited for the
        disk, and how long (a slow disk's tail shows here, not in the CPU)."""
        if not self.syncs_per_message > 0:
            return ""
        return (f"syncs of the log {self.syncs_per_message:.2f} a message, "
                f"{self.sync_ms:.2f} ms each on average, ")

    def balance(self) -> str:
        """How evenly several workers shared the work: the busiest one bounds a server."""
        if self.config.workers < 2 or math.isnan(self.busiest_worker):
            return ""
        return f", the busiest worker {self.busiest_worker:.2f} times the workers' mean CPU"

    def memory(self) -> str:
        if not self.memory_mb:
            return ""
        largest = ", ".join(f"{name} {mb:,.0f} MB" for name, mb in
                            sorted(self.memory_mb.items(), key=lambda item: -item[1]))
        return f", resident at the window's end (the largest process of each): {largest}"

    def workers_cpu_ms(self) -> float:
        """The study's workers' CPU a message, without the balancer and the queue."""
        return sum(ms for name, ms in self.cpu_ms_by_program.items()
                   if name not in ("haproxy", "redis-server"))

    def by_program(self) -> str:
        """The server's CPU per message split by program: the study's workers (python),
        and with several workers HAProxy and Redis."""
        return ", ".join(f"{name} {ms:.2f}" for name, ms in
                         sorted(self.cpu_ms_by_program.items(), key=lambda item: -item[1]))

    def pushes_unseen(self) -> int:
        """Teammates' stations whose end a member was not pushed, over the team rounds
        that closed in the window (while every bot was still connected)."""
        seen = self.tally.stations_seen
        return sum(seen.get(key) != final for key, final in self.final_stations.items())

    def pushes_seen(self) -> str:
        if not self.final_stations:
            return "no station pushes owed"
        owed = len(self.final_stations)
        rounds = len({team_round for team_round, _, _ in self.final_stations})
        return (f"teammates' stations seen at their end {owed - self.pushes_unseen():,} of "
                f"{owed:,} in {rounds:,} team rounds closed in the window "
                f"({self.pushes_per_message:.2f} stations pushes a message in the window)")

    def markdown(self) -> str:
        c, d = self.cookie_ms, self.drift_ms
        backups = (f"every {self.config.backup_every * 60:g} s" if self.config.backup_every
                   else "none")
        return (f"| {self.study_name()} | {self.config.pace} | {self.config.durability} | "
                f"{self.config.workers} | "
                f"{self.config.participants} | {backups} | "
                f"{c[0]:.0f} / {c[1]:.0f} / {c[2]:.0f} ({self.cookies}) | "
                f"{d[0]:.0f} / {d[1]:.0f} ({self.closings}) | {self.messages_per_second:.0f} | "
                f"{self.cpu_ms_per_message:.2f} | {self.server_share:.0%} | "
                f"{self.swarm_share:.0%} | {self.machine_share:.0%} | "
                f"{self.lock_held_share:.0%} | {self.lag_p95_ms:.0f} | {self.missing} | "
                f"{self.lock_errors} | {sum(self.tally.errors.values())} | "
                f"{'yes' if self.goal_met() else 'no'} |")


HEADER = ("| study | pace | durability | workers | participants | backups | "
          "cookie ack p50 / p95 / p99 ms (cookies) | "
          "closing drift p95 / max ms (closings) | messages/s | server CPU ms/message | "
          "server CPU | bots CPU | machine busy | write lock held | bots' loop lag p95 ms | "
          "acknowledged missing | lock errors | bot errors | goal |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def without_probes(text: str) -> str:
    """A protocol's text with its ``[[probes]]`` tables removed, the rest as it was: the
    same study without probes, to measure what they cost."""
    kept, in_probe = [], False
    for line in text.splitlines(keepends=True):
        head = line.strip()
        if head.startswith("["):
            in_probe = head.startswith("[[probes]]")
        if not in_probe:
            kept.append(line)
    return "".join(kept)


def has_probes(protocol: Path) -> bool:
    return bool(load_protocol(protocol).probes)


def protocol_for(pace: str, directory: Path, human: Path = DEMO, probes: bool = True) -> Path:
    """The demo protocol as shipped (15 s rounds, a person's pace; or ``human``, without
    its probes unless ``probes``) or, for the stress rows, with 6 s rounds and speeds that
    make a bot finish a cookie about every second."""
    if pace == "human":  # the bots enrol with fresh codes: a copy open to them
        text = human.read_text(encoding="utf-8")
        text = text if probes else without_probes(text)
        copy = directory / human.name
        copy.write_text(text.replace("open_enrolment = false", "open_enrolment = true"),
                        encoding="utf-8")
        return copy
    return quick_protocol(ROOT / "protocols" / "demo.toml", directory / "fast.toml",
                          round_seconds=6.0, practice_seconds=3.0,
                          reference_speed=(1.5, 1.0), min_cookie_seconds=0.3)


def swarm_processes(participants: int, requested: int) -> int:
    return requested or (1 if participants <= 250 else 2)


def run_config(config: Config, args: argparse.Namespace, directory: Path) -> Row:
    directory.mkdir(parents=True, exist_ok=True)
    protocol = protocol_for(config.pace, directory, config.study, config.probes)
    db, log = directory / "load.sqlite", directory / "serve.log"
    backups = (("--backup-every", str(config.backup_every), "--backup-dir",
                str(directory / "backups")) if config.backup_every else ())
    server = ServeProcess(protocol, db, args.pools, log,
                          extra=("--workers", str(config.workers),
                                 "--durability", config.durability, *backups),
                          env={"STUDY_ENROL_RATE_LIMIT": ONE_ADDRESS_ENROLMENTS})
    server.start(timeout=180)
    start = time.time() + SPAWN_SECONDS
    measure_from = start + args.ramp + args.settle
    plan = SwarmPlan(server.url, config.participants, start, args.ramp, measure_from,
                     measure_from + args.steady, pace=HUMAN if config.pace == "human" else FAST,
                     facts=StudyFacts.from_protocol(load_protocol(protocol)), seed=args.seed,
                     prefix=f"{config.pace[0]}{config.workers}w")
    viewers = ConsoleViewers(server.url, args.console, plan.measure_from, plan.end)
    try:
        cpu = CpuWindow(server.process.pid, plan.measure_from, plan.end, db)
        with viewers:
            report = run_light_swarm(plan, swarm_processes(config.participants,
                                                           args.swarm_processes))
        time.sleep(1.0)  # the last rounds of the window close
    finally:
        server.stop()
    row = summarise(config, plan, report, cpu.used(), cpu.heartbeats(), db, server.output())
    return replace(row, console=viewers.summary(), memory_mb=cpu.memory_mb,
                   busiest_worker=cpu.busiest_over_mean(config.workers))


def summarise(config: Config, plan: SwarmPlan, report: SwarmReport,
              cpu: tuple[Counter[str], float], heartbeats: Heartbeats, db: Path,
              server_log: str) -> Row:
    window = plan.end - plan.measure_from
    # Every acknowledged cookie once, from its first send: one answered as a duplicate was
    # resent after its first ack came too late, and that wait is the participant's.
    in_window = [a for a in report.acked if a.event == "cookie"
                 and plan.measure_from <= a.sent_at <= plan.end]
    cookie = np.array([a.latency for a in in_window]) * 1000
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        drift = np.array([d for (d,) in connection.execute(
            "SELECT closed_at - deadline FROM rounds WHERE close_reason IN ('deadline', "
            "'late') AND deadline BETWEEN ? AND ?", (plan.measure_from, plan.end))]) * 1000
        messages = sum(connection.execute(f"SELECT count(*) FROM {table} WHERE at BETWEEN ? "
                                          "AND ?", (plan.measure_from, plan.end)).fetchone()[0]
                       for table in ("messages", "rejections"))
        progress, answered = (connection.execute(  # the floor's clients send this mix
            f"SELECT count(*) FROM messages WHERE event {kind} 'progress' AND at BETWEEN ? "
            "AND ?", (plan.measure_from, plan.end)).fetchone()[0] for kind in ("=", "!="))
        probes = connection.execute(
            "SELECT count(*), count(answered_at), coalesce(sum(missed), 0) FROM probes "
            "WHERE deadline BETWEEN ? AND ?", (plan.measure_from, plan.end)).fetchone()
    programs, busy = cpu
    server_cpu = programs.total() or float("nan")
    return Row(config,
               np.percentile(cookie, [50, 95, 99]) if len(cookie) else np.full(3, np.nan),
               len(cookie),
               np.array([np.percentile(drift, 95), drift.max()]) if len(drift)
               else np.full(2, np.nan), len(drift),
               messages / window, 1000 * server_cpu / max(messages, 1),
               server_cpu / (window * CORES), report.cpu_seconds / (window * CORES),
               busy / (window * CORES),
               float(np.percentile(report.lag, 95) * 1000) if len(report.lag) else float("nan"),
               len(missing_acknowledged(db, report.log)),
               server_log.count("database is locked"), report.tally,
               final_stations(db, plan.measure_from, plan.end - PUSHED_WITHIN),
               (progress / (window * config.participants),
                answered / (window * config.participants)),
               sum(n for second, n in report.tally.station_pushes.items()
                   if plan.measure_from <= second < plan.end) / max(messages, 1),
               {name: 1000 * seconds / max(messages, 1) for name, seconds in programs.items()},
               heartbeats.lock_wait / (window * config.workers),
               heartbeats.lock_held / window, heartbeats.syncs / max(messages, 1),
               1000 * heartbeats.sync_seconds / heartbeats.syncs if heartbeats.syncs
               else float("nan"), probes=tuple(probes))


def final_stations(db: Path, start: float, end: float
                   ) -> dict[tuple[int, int, str], tuple[int, int]]:
    """Each person's station at the end of the team rounds that began and closed in the
    window, as every other person playing the round should last have been pushed it:
    (team round, seat, the other's code) -> (cookies finished, elements placed on the
    next). Stations that never changed are left out: nothing was pushed of them."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'team_rounds'"
                                  ).fetchone():
            return {}
        rows = connection.execute(
            "SELECT r.team_round_id, s.seat, other.code, r.participant_cookies, coalesce(("
            "SELECT g.placed FROM progress g WHERE g.round_id = r.id AND g.cookie = "
            "r.participant_cookies + 1 ORDER BY g.id DESC LIMIT 1), 0), r.participant_cookies "
            "+ (SELECT count(*) FROM progress g WHERE g.round_id = r.id) FROM rounds r "
            "JOIN team_rounds t ON t.id = r.team_round_id JOIN seats s ON s.team_id = "
            "t.team_id AND s.participant_id = r.participant_id JOIN rounds o ON "
            "o.team_round_id = r.team_round_id AND o.participant_id != r.participant_id "
            "JOIN participants other ON other.id = o.participant_id WHERE r.started_at >= ? "
            "AND r.closed_at <= ?", (start, end)).fetchall()
    return {(team_round, seat, code): (cookies, placed)
            for team_round, seat, code, cookies, placed, work in rows if work}


def matrix(args: argparse.Namespace) -> list[Config]:
    configs = [Config("human", study, w, n, d, b) for b in args.backup_every
               for d in args.durability for w in args.workers for n in args.participants
               for study in args.protocol]
    if args.same_load:
        configs = with_same_load(configs)
    if getattr(args, "without_probes", False):
        configs = with_probes_removed(configs)
    return configs + [Config("fast", DEMO, w, n, d) for d in args.durability
                      for w in args.fast_workers for n in args.fast_participants]


def with_probes_removed(configs: list[Config]) -> list[Config]:
    """``configs`` with, right after each of a study with round probes, the same without
    them: the two meet the same minutes of the machine."""
    out: list[Config] = []
    for config in configs:
        out.append(config)
        if config.probes and has_probes(config.study):
            out.append(replace(config, probes=False))
    return out


def probe_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Each row with probes and the same configuration's row without them."""
    return [(row, none) for row in rows for none in rows
            if row.config.probes and none.config == replace(row.config, probes=False)]


def probes_name(row: Row) -> str:
    return (f"{row.config.study.stem}, {row.config.durability}, {row.config.workers} "
            f"worker(s), {row.config.participants}: probes over none")


def against_no_probes(rows: list[Row]) -> list[str]:
    """What round probes cost: each row over the same without probes, a message and a
    participant-second (a probe's messages are cheap ones and lower the first), with the
    probes due in the window and how the bots handled them."""
    lines = []
    for row, none in probe_pairs(rows):
        lines.append(
            f"{probes_name(row)}: CPU a message {row.cpu_ms_per_message:.3f} / "
            f"{none.cpu_ms_per_message:.3f} ms = "
            f"{row.cpu_ms_per_message / none.cpu_ms_per_message:.3f}; CPU a "
            f"participant-second {row.cpu_ms_per_participant_second():.3f} / "
            f"{none.cpu_ms_per_participant_second():.3f} ms = "
            f"{row.cpu_ms_per_participant_second() / none.cpu_ms_per_participant_second():.3f}"
            f"; messages a participant-second "
            f"{row.messages_per_second / row.config.participants:.3f} / "
            f"{none.messages_per_second / none.config.participants:.3f}; {row.probes_line()}")
    return lines


def with_probes(rows: list[Row]) -> list[Row]:
    """The rows as the protocols are, without the ``--without-probes`` copies."""
    return [row for row in rows if row.config.probes]


def with_same_load(configs: list[Config]) -> list[Config]:
    """``configs`` with, before each of several workers, one worker carrying as many
    participants as each of them does (unless the matrix has it already)."""
    out: list[Config] = []
    for config in configs:
        alone = replace(config, workers=1, participants=config.participants // config.workers)
        if config.workers > 1 and alone not in configs and alone not in out:
            out.append(alone)
        out.append(config)
    return out


def first_study_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Each row of a later study with the first study's row of the same configuration."""
    pairs = []
    for row in rows:
        first = next(r for r in rows if r.config.pace == row.config.pace
                     and (r.config.workers, r.config.participants, r.config.durability,
                          r.config.backup_every)
                     == (row.config.workers, row.config.participants, row.config.durability,
                         row.config.backup_every))
        if first is not row and first.config.study != row.config.study:
            pairs.append((row, first))
    return pairs


def against_first_study(rows: list[Row]) -> list[str]:
    """Each study's cookie ack p95 over the first study's in the same configuration (same
    run, same machine): what, say, real teams' pushes cost over agent teammates. The p95s
    are given to a tenth of a millisecond, so the ratio can be checked from them."""
    return [f"{row.config.study.stem} over {first.config.study.stem}, "
            f"{row.config.workers} worker(s), {row.config.participants}: "
            f"ack p95 {row.cookie_ms[1]:.1f} / {first.cookie_ms[1]:.1f} ms = "
            f"{row.cookie_ms[1] / first.cookie_ms[1]:.2f}"
            for row, first in first_study_pairs(rows)]


def full_over_normal_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Each human row under full durability with the same configuration's under normal."""
    pairs = []
    for row in (r for r in rows if r.config.pace == "human" and r.config.durability == "full"):
        normal = next((r for r in rows if r.config == replace(row.config, durability="normal")),
                      None)
        if normal is not None:
            pairs.append((row, normal))
    return pairs


def ratios(rows: list[Row]) -> dict[str, float]:
    """The ratios issue #29's criteria are judged by, from one round's rows: a later
    study's ack p95 over the first's, several workers over one (CPU a message, ack p95),
    and full durability over normal (ack p95)."""
    found: dict[str, float] = {}
    for row, none in probe_pairs(rows):
        found[f"{probes_name(row)}: CPU a message"] = (row.cpu_ms_per_message
                                                        / none.cpu_ms_per_message)
        found[f"{probes_name(row)}: CPU a participant-second"] = (
            row.cpu_ms_per_participant_second() / none.cpu_ms_per_participant_second())
    rows = with_probes(rows)
    for row, first in first_study_pairs(rows):
        found[f"{row.config.study.stem} over {first.config.study.stem}, "
              f"{row.config.durability}, {row.config.workers} worker(s), "
              f"{row.config.participants}: ack p95"] = row.cookie_ms[1] / first.cookie_ms[1]
    for row in several_workers(rows):
        one = one_worker_like(rows, row, row.config.participants)
        if one is not None:
            head = over_one_worker(row)
            found[f"{head}: CPU a message"] = row.cpu_ms_per_message / one.cpu_ms_per_message
            found[f"{head}: ack p95"] = row.cookie_ms[1] / one.cookie_ms[1]
    for full, normal in full_over_normal_pairs(rows):
        found[f"{full.config.study.stem}, {full.config.workers} worker(s), "
              f"{full.config.participants}: full over normal durability: ack p95"] = (
            full.cookie_ms[1] / normal.cookie_ms[1])
    return found


def over_rounds(turns: list[list[Row]]) -> list[str]:
    """Each ratio of every round, and their median: the machine's speed moves within
    minutes, so a ratio of two rows measured minutes apart varies from round to round, and
    the median of rounds run in turn says more than any one of them."""
    by_round = [ratios(rows) for rows in turns]
    lines = []
    for name in by_round[0]:
        values = [found[name] for found in by_round if name in found]
        median = f"; median {float(np.median(values)):.2f}" if len(values) > 1 else ""
        lines.append(f"{name}: {', '.join(f'{v:.2f}' for v in values)}{median}")
    return lines


FloorKey = tuple[str, int, str, int]


def floor_like(row: Row, args: argparse.Namespace, directory: Path) -> FloorRow:
    """The floor server (``benchmarks.floor``) like a human row: same participants,
    durability and workers, its clients sending the row's mix of messages, in teams of
    the study's people with as many pushes a message as the study owed."""
    study, participants, durability, workers = floor_key(row)
    team = load_protocol(row.config.study).team
    floor = run_floor(directory, durability, participants, *row.mix, ramp=args.ramp,
                      settle=SETTLE_SECONDS, steady=args.steady, seed=args.seed,
                      workers=workers, teams=Teams(team.persons if team else 1,
                                                   row.pushes_per_message))
    floor = replace(floor, mix=study)
    print(floor.markdown(), flush=True)
    return floor


def floor_key(row: Row) -> FloorKey:
    return (row.config.study.stem, row.config.participants, row.config.durability,
            row.config.workers)


def floor_of(row: Row, floors: dict[FloorKey, FloorRow]) -> FloorRow | None:
    """The floor run like ``row``: same mix, participants, durability and workers."""
    return floors.get(floor_key(row))


def against_one_worker(rows: list[Row], floors: dict[FloorKey, FloorRow]) -> list[str]:
    """Each human row with several workers over the same study on one worker: at the same
    participants (the workers' own CPU alone too, without HAProxy and Redis, and the floor's
    ratio at the same counts: what several processes cost on this machine and stack,
    against what the study adds), and, where it ran (``--same-load``), at the same
    participants a worker: a worker's CPU a message grows as its load falls, so this is
    what a second process costs of its own."""
    lines = []
    for row in several_workers(rows):
        head = over_one_worker(row)
        one = one_worker_like(rows, row, row.config.participants)
        if one is not None:
            floor, floor_one = floor_of(row, floors), floor_of(one, floors)
            against_floor = "" if floor is None or floor_one is None else \
                f"; the floor's {floor.cpu_ms_per_message / floor_one.cpu_ms_per_message:.2f}"
            lines.append(f"{head}, {over(row, one)}{against_floor}; ack p95 "
                         f"{row.cookie_ms[1]:.0f} against {one.cookie_ms[1]:.0f} ms")
        per_worker = row.config.participants // row.config.workers
        same_load = one_worker_like(rows, row, per_worker)
        if same_load is not None:
            lines.append(f"{head} at {per_worker} (the same people a worker), "
                         f"{over(row, same_load)}; "
                         f"ack p95 {row.cookie_ms[1]:.0f} against "
                         f"{same_load.cookie_ms[1]:.0f} ms")
    return lines


def several_workers(rows: list[Row]) -> list[Row]:
    """The human rows with more than one worker."""
    return [r for r in rows if r.config.pace == "human" and r.config.workers > 1]


def over_one_worker(row: Row) -> str:
    """How a several-worker row's ratios over one worker are named."""
    return (f"{row.config.study.stem}, {row.config.durability}, "
            f"{row.config.participants}: {row.config.workers} workers over 1")


def one_worker_like(rows: list[Row], row: Row, participants: int) -> Row | None:
    """The human row of ``row``'s study and durability on one worker with ``participants``."""
    return next((r for r in rows if r.config.pace == "human" and r.config.workers == 1
                 and (r.config.study, r.config.participants, r.config.durability)
                 == (row.config.study, participants, row.config.durability)), None)


def over(row: Row, one: Row) -> str:
    """``row``'s CPU a message over ``one``'s, all of it and the workers' alone."""
    return (f"CPU a message {row.cpu_ms_per_message / one.cpu_ms_per_message:.2f} (the "
            f"workers alone {row.workers_cpu_ms() / one.workers_cpu_ms():.2f})")


def capacity(rows: list[Row], floors: dict[FloorKey, FloorRow]) -> list[str]:
    """People per core for each row, over the floor's at the same durability and count, and
    projected for larger servers: cores x people per core at the most workers measured,
    at 70 % busy (the headroom the ack p95 goal needs)."""
    lines = ["| study | durability | workers | participants | messages per person-second "
             "| server CPU ms/message | over the floor's | people per core | "
             "8 cores at 70 % | 16 cores at 70 % |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in (r for r in rows if r.config.pace == "human"):
        floor = floor_of(row, floors)
        over = f"{row.cpu_ms_per_message / floor.cpu_ms_per_message:.2f}" if floor else "-"
        per_core = row.people_per_core()
        lines.append(f"| {row.config.study.stem} | {row.config.durability} | "
                     f"{row.config.workers} | {row.config.participants} | "
                     f"{row.messages_per_second / row.config.participants:.2f} | "
                     f"{row.cpu_ms_per_message:.2f} | {over} | {per_core:,.0f} | "
                     f"{8 * 0.7 * per_core:,.0f} | {16 * 0.7 * per_core:,.0f} |")
    return lines


def numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return number


def protocol_file(text: str) -> Path:
    """A protocol's file, or the name of one in ``protocols/`` (``teams3``)."""
    for path in (Path(text), ROOT / "protocols" / f"{text}.toml"):
        if path.is_file():
            return path
    shipped = ", ".join(sorted(path.stem for path in (ROOT / "protocols").glob("*.toml")))
    raise argparse.ArgumentTypeError(f"{text} is neither a protocol file nor one of "
                                     f"protocols/: {shipped}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="1 and 2 workers at 100 and 250 participants, 40 s windows")
    parser.add_argument("--workers", type=numbers, default=[1, 2, 4])
    parser.add_argument("--participants", type=numbers, default=[250, 500, 1000])
    parser.add_argument("--fast-workers", type=numbers, default=[1, 4])
    parser.add_argument("--fast-participants", type=numbers, default=[250])
    parser.add_argument("--durability", type=lambda text: text.split(","),
                        default=["full", "normal"],
                        help="study serve --durability values, comma-separated")
    parser.add_argument("--backup-every", type=lambda text: [float(x) for x in text.split(",")],
                        default=[0.0], metavar="MINUTES,...",
                        help="study serve --backup-every values for the human rows, "
                             "comma-separated (0: no backups)")
    parser.add_argument("--ramp", type=float, default=30.0,
                        help="seconds over which the participants arrive")
    parser.add_argument("--steady", type=float, default=60.0,
                        help="seconds of steady state measured after the ramp")
    parser.add_argument("--swarm-processes", type=int, default=0,
                        help="event-loop processes for the bots (default: 1 up to 250 "
                             "participants, else 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS,
                        help="seconds after the last arrival before the window opens (real "
                             "teams play only after practice and the lobby: about 100)")
    parser.add_argument("--protocol", type=protocol_file, nargs="+", default=[DEMO],
                        help="the studies of the human-pace rows (files, or names in "
                             "protocols/), each run in every configuration (default: the "
                             "demo); e.g. demo teams3 compares real teams of three with "
                             "agent teammates, and reports the ack p95 ratio")
    parser.add_argument("--floor", action="store_true",
                        help="also run the floor server (benchmarks.floor) like each "
                             "human row, right after it, with its study's mix of messages "
                             "and pushes")
    parser.add_argument("--same-load", action="store_true",
                        help="also run one worker at each several-worker row's participants "
                             "a worker, and give that row over it too")
    parser.add_argument("--console", type=int, default=0, metavar="N",
                        help="keep N of the console's live views open through each run, "
                             "as an experimenter watching does")
    parser.add_argument("--repeat", type=positive, default=1, metavar="N",
                        help="run the whole matrix N times, one configuration after "
                             "another in each round (backwards in even rounds), and give "
                             "every ratio of the criteria in each round and their median "
                             "(the machine's speed moves within minutes)")
    parser.add_argument("--without-probes", action="store_true",
                        help="also run, right after every human row of a study with round "
                             "probes, the same study without its [[probes]] tables, and "
                             "give the row's CPU a message and a participant-second over it")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep every configuration's database and server log in DIR")
    args = parser.parse_args(argv)
    if args.quick:
        args.workers, args.participants = [1, 2], [100, 250]
        args.fast_workers, args.fast_participants = [2], [100]
        args.ramp, args.steady = min(args.ramp, 15.0), min(args.steady, 40.0)
    with tempfile.TemporaryDirectory(prefix="study-load-") as scratch:
        base = args.keep or Path(scratch)
        args.pools = base / "pools"
        print(f"{time.strftime('%Y-%m-%d %H:%M')}, {CORES} cores, load average before "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; ramp {args.ramp:g} s, "
              f"window {args.steady:g} s", flush=True)
        turns, floors = run_rounds(args, base)
    print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report(turns, floors)
    return 0 if all(r.missing == 0 and r.lock_errors == 0 for rows in turns for r in rows) else 1


def in_running_order(configs: list[Config], turn: int) -> list[Config]:
    """The matrix in round ``turn``'s order: as given in odd rounds, backwards in even ones,
    so a machine that slows (or speeds up) through a run counts against the early rows in
    one round and the late ones in the next, not against the same rows (two workers, full
    durability) every time."""
    return configs if turn % 2 else configs[::-1]


def run_rounds(args: argparse.Namespace, base: Path
               ) -> tuple[list[list[Row]], list[dict[FloorKey, FloorRow]]]:
    """The matrix ``args.repeat`` times, forwards and backwards in turn (``in_running_order``);
    every row is printed as it ends, and each round's rows are kept in the matrix's order.
    With ``--floor`` each human row's floor runs right after it: this machine's speed moves
    within minutes, and a floor run after the whole matrix met another hour than its rows."""
    turns, floors = [], []
    for turn in range(1, args.repeat + 1):
        rows, found = [], {}
        configs = matrix(args)
        for config in in_running_order(configs, turn):
            name = (f"{config.study.stem}-{config.pace}-{config.durability}-"
                    f"{config.workers}w-{config.participants}-backup{config.backup_every:g}"
                    + ("" if config.probes else "-noprobes")
                    + (f"-round{turn}" if args.repeat > 1 else ""))
            row = run_config(config, args, base / name)
            rows.append(row)
            print(f"{name} ({time.strftime('%H:%M')}): {row.markdown()}", flush=True)
            print(f"    {row.details()}", flush=True)
            if config.pace == "human" and has_probes(config.study):
                print(f"    {row.probes_line()}", flush=True)
            for error, count in row.tally.errors.most_common(3):
                print(f"    bot error x{count}: {error}", flush=True)
            if args.floor and config.pace == "human" and config.probes:
                found[floor_key(row)] = floor_like(row, args, base / f"floor-{name}")
        turns.append(sorted(rows, key=lambda row: configs.index(row.config)))
        floors.append(found)
    return turns, floors


def report(turns: list[list[Row]], floors: list[dict[FloorKey, FloorRow]]) -> None:
    """Each round's table and ratios with its floors beside them, the criteria's ratios
    over the rounds, and people per core from the last round."""
    for turn, (rows, found) in enumerate(zip(turns, floors, strict=True), 1):
        print(f"\nround {turn} of {len(turns)}\n" if len(turns) > 1 else "")
        print(HEADER)
        for row in rows:
            print(row.markdown())
        kept = with_probes(rows)
        for line in (against_first_study(kept) + against_one_worker(kept, found)
                     + against_no_probes(rows)):
            print(line)
        if found:
            print(f"\n{FLOOR_HEADER}")
            for floor in found.values():
                print(floor.markdown())
    print("\nthe criteria's ratios, round by round" if len(turns) > 1 else "")
    for line in over_rounds(turns):
        print(line)
    print()
    for line in capacity(with_probes(turns[-1]), floors[-1]):
        print(line)


if __name__ == "__main__":
    sys.exit(main())
