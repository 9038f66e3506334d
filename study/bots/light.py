"""Light bots for load runs: hundreds of participants on one event loop (uvloop) per process.

The thread-per-bot client (``study.bots.client``) costs a thread, a reader thread and a
blocking wait per participant, too much for a thousand participants on the server's own
machine. Here every participant is a coroutine with its own ``socketio.AsyncClient`` over a
websocket, its own cookie jar (so a balancer's stickiness sees a browser each) and one shared
connection pool. A bot does what the page does (``static/js/bakery.js``): it loads the page,
joins, answers every page, starts its rounds, reports its cookie in progress as ``progress``
when the page would (``study.bots.progress_reports``; no ack asked, as the page) and every
finished cookie as ``cookie`` (acked, resent with the same ``msg_id`` after 4 s without an
answer), and every round probe shown as ``probe`` and then tapped or left, by the response
model of the full bots (``study.bots.probe_answers``). The pace is a person's
(``study.people.speed``) or, for a stress figure, the decorator's at a quick protocol's
speeds.

``run_light_swarm`` keeps ``participants`` bots in the study for a while, each slot taking a
new participant when its last one finished, in one or several processes, and returns the
acknowledgements (``AckLog``, for ``study.bots.audit``) and how busy the bots themselves were.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import socketio
import uvloop

from study.bots.client import Acked, AckLog, State, new_msg_id, routed_url
from study.bots.participant import (
    DEFAULT_FACTS,
    DEFAULT_PROBE_ANSWERS,
    ROUND_STEPS,
    SPACING_MARGIN,
    TEAM_PATIENCE,
    TERMINAL_STEPS,
    StudyFacts,
    _start_waits,
    cookie_content,
    page_answers,
)
from study.bots.probe_answers import KitsSeen, ProbeAnswers
from study.bots.progress_reports import ProgressReports
from study.people.speed import Human, noise
from study.task.decorator import Decorator

ACK_TIMEOUT = 4.0  # the page's ACK_TIMEOUT_MS: no answer by then, the message is sent again
LAG_PROBE_SECONDS = 0.1
DEFLATE_WINDOW_BITS = 15  # aiohttp's permessage-deflate offer, a browser's window
# Seconds a person spends on a page before answering it (mean; each visit varies).
HUMAN_PAGE_SECONDS = {"consent": 8.0, "themes": 6.0, "preferences": 6.0, "teammate": 4.0,
                      "intro": 4.0, "questionnaire": 20.0, "post": 15.0, "debrief": 6.0,
                      "probe": 3.0}
PROBE_MARGIN = 0.5  # a probe read this close to its deadline is tapped before it, not after
HUMAN_START_SECONDS = 1.5  # reading the round's page before clicking "start"
FAST_PAGE_SECONDS = 0.05
ERROR_PAUSE = 5.0  # a slot whose participant failed takes the next one after this pause
CANCEL_RETRY_SECONDS = 1.0  # at the run's end, bots not yet stopped are cancelled again


class Gone(Exception):
    """The socket went away; the bot reconnects and sends again."""


@dataclass(frozen=True)
class Pace:
    """How a light bot spends its time: ``human`` places element after element at a
    person's pace (``study.people.speed``); otherwise cookies come at the decorator's pace.
    ``page_scale`` shortens (or lengthens) the person's reading of pages and round starts."""

    human: bool = True
    page_scale: float = 1.0

    def page_seconds(self, step: str, rng: np.random.Generator) -> float:
        if not self.human:
            return FAST_PAGE_SECONDS
        kind = "questionnaire" if step.startswith("questionnaire") else step
        return self.page_scale * HUMAN_PAGE_SECONDS.get(kind, 4.0) * noise(rng, 0.4)

    def start_seconds(self, rng: np.random.Generator) -> float:
        if not self.human:
            return FAST_PAGE_SECONDS
        return self.page_scale * HUMAN_START_SECONDS * noise(rng, 0.4)


HUMAN = Pace(human=True)
FAST = Pace(human=False)


@dataclass
class Tally:
    """What a swarm process did, besides the acknowledgements."""

    participants: int = 0
    finished: int = 0
    progress_sent: int = 0
    probes_shown: int = 0  # round probes the bots' pages showed (``probe`` with no value)
    probes_answered: int = 0
    probes_missed: int = 0  # shown and left unanswered, by the response model
    # the latest (cookies, placed) of each teammate's station a bot was pushed, by team
    # round, seat and the bot's code
    stations_seen: dict[tuple[int, int, str], tuple[int, int]] = field(default_factory=dict)
    # ``stations`` pushes this process's bots received, by the second they arrived in
    station_pushes: Counter[int] = field(default_factory=Counter)
    resent: int = 0
    reconnects: int = 0
    rerouted: int = 0  # connected again to a team's process once in the team
    refused: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        self.participants += other.participants
        self.finished += other.finished
        self.progress_sent += other.progress_sent
        self.probes_shown += other.probes_shown
        self.probes_answered += other.probes_answered
        self.probes_missed += other.probes_missed
        self.stations_seen.update(other.stations_seen)
        self.station_pushes.update(other.station_pushes)
        self.resent += other.resent
        self.reconnects += other.reconnects
        self.rerouted += other.rerouted
        self.refused.update(other.refused)
        self.errors.update(other.errors)


class LightBot:
    """One participant's tab, from the page load to a terminal step (or the end of the run)."""

    def __init__(self, base_url: str, code: str, seed: tuple[int, ...], pace: Pace,
                 facts: StudyFacts,
                 log: AckLog, tally: Tally, connector: aiohttp.BaseConnector,
                 probes: ProbeAnswers = DEFAULT_PROBE_ANSWERS) -> None:
        self.base_url = base_url.rstrip("/")
        self.code = code
        self.pace = pace
        self.facts = facts
        self.log = log
        self.tally = tally
        self.connector = connector
        self.rng = np.random.default_rng(list(seed))
        self.human = Human.sample(self.rng)
        capabilities = tuple(float(c) for c in self.rng.uniform(0.3, 0.95, 2))
        self.preferences = tuple(float(p) for p in self.rng.uniform(0.05, 0.95, 2))
        self.decorator = Decorator(capabilities, facts.reference_speed)
        self.probes = probes
        self.kits = KitsSeen(self.preferences)
        self.probe_rng = np.random.default_rng([*seed, 2])  # the other draws stay as they were
        self.probes_seen: set[tuple[int, str]] = set()
        self.http: aiohttp.ClientSession | None = None
        self.sio: socketio.AsyncClient | None = None
        self.url = ""  # the Socket.IO address of the connection, route included
        self.state: State | None = None
        self.offset = 0.0
        self.changed = asyncio.Event()

    # --- connection ---------------------------------------------------------------------

    async def open(self, patience: float) -> None:
        """Load the page, connect and join, retrying with backoff until ``patience``."""
        give_up = time.monotonic() + patience
        delay = 0.1
        while True:
            try:
                await self._open_once()
                return
            except (aiohttp.ClientError, socketio.exceptions.SocketIOError, Gone,
                    TimeoutError) as error:
                await self.close()
                if time.monotonic() + delay > give_up:
                    raise Gone(f"server unreachable: {type(error).__name__}") from None
                await asyncio.sleep(delay)
                delay = min(2 * delay, 2.0)

    async def _open_once(self) -> None:
        if self.http is None:
            self.http = aiohttp.ClientSession(connector=self.connector, connector_owner=False,
                                              cookie_jar=aiohttp.CookieJar(unsafe=True))
        async with self.http.get(f"{self.base_url}/p/{self.code}") as page:
            page.raise_for_status()
            await page.read()
        # Its websocket asks for permessage-deflate, as every browser's does: what the
        # server grants a page, it grants the bot (``study.web.serving.websockets``).
        sio = socketio.AsyncClient(reconnection=False, http_session=self.http,
                                   handle_sigint=False,
                                   websocket_extra_options={"compress": DEFLATE_WINDOW_BITS})
        sio.on("state", self._remember)
        sio.on("stations", self._stations)
        sio.on("disconnect", self._lost)
        self.url = routed_url(self.base_url, self.code, self.state)
        await sio.connect(self.url, transports=["websocket"], wait_timeout=ACK_TIMEOUT * 2)
        self.sio = sio
        ack = await self._call("join", {"code": self.code})
        if not ack.get("ok"):
            raise RuntimeError(f"join refused: {ack.get('reason')}")

    async def close(self) -> None:
        sio, self.sio = self.sio, None
        if sio is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sio.disconnect(), 2.0)

    async def shut(self) -> None:
        await self.close()
        if self.http is not None:
            await self.http.close()
            self.http = None

    async def _remember(self, state: State) -> None:
        """Keep the newest state (by the server's clock: an ack and a push may cross)."""
        if not isinstance(state, dict):
            return
        if self.state is not None and state.get("now", 0) < self.state.get("now", 0):
            return
        self.state = state
        self.offset = state.get("now", time.time()) - time.time()
        self.changed.set()

    async def _stations(self, push: dict[str, Any]) -> None:
        """Teammates placed elements or finished cookies (the page redraws their stations)."""
        self.tally.station_pushes[int(time.time())] += 1
        for station in push.get("stations", []):
            self.tally.stations_seen[station["team_round"], station["seat"], self.code] = (
                station["cookies"], station["placed"])

    async def _lost(self, *_: Any) -> None:
        self.changed.set()

    def server_now(self) -> float:
        return time.time() + self.offset

    # --- messages -----------------------------------------------------------------------

    async def _call(self, event: str, message: dict[str, Any]) -> dict[str, Any]:
        sio = self.sio
        if sio is None or not sio.connected:
            raise Gone(event)
        try:
            ack = await sio.call(event, message, timeout=ACK_TIMEOUT)
        except socketio.exceptions.TimeoutError:
            self.tally.resent += 1
            raise Gone(event) from None
        except socketio.exceptions.SocketIOError:
            raise Gone(event) from None
        ack = ack if isinstance(ack, dict) else {"ok": False, "reason": "malformed-ack"}
        if ack.get("state"):
            await self._remember(ack["state"])
        return ack

    async def request(self, event: str, payload: dict[str, Any],
                      patience: float) -> dict[str, Any]:
        """Send until answered, as the page does: same ``msg_id`` after a timeout or a
        reconnect, so the server applies it once."""
        message = {"msg_id": new_msg_id(), **payload}
        sent_at = time.time()  # the first send: what the participant waits, resends included
        while True:
            try:
                ack = await self._call(event, message)
            except Gone:
                if self.sio is None or not self.sio.connected:
                    await self.close()
                    await self.open(patience)
                    self.tally.reconnects += 1
                continue
            self._record(event, message, ack, sent_at)
            return ack

    def _record(self, event: str, message: dict[str, Any], ack: dict[str, Any],
                sent_at: float) -> None:
        duplicate = ack.get("reason") == "duplicate"
        if ack.get("ok") or duplicate:
            self.log.accept(Acked(self.code, event, message["msg_id"], message, sent_at,
                                  time.time(), duplicate))
        else:
            self.log.refuse(self.code, event, str(ack.get("reason")))
            self.tally.refused[str(ack.get("reason"))] += 1

    async def progress(self, round_id: int, content: Any) -> None:
        """An element placed: reported without an ack, and not resent, as the page does."""
        sio = self.sio
        if sio is not None and sio.connected:
            with contextlib.suppress(socketio.exceptions.SocketIOError):
                await sio.emit("progress", {"msg_id": new_msg_id(), "round_id": round_id,
                                            "content": content})
                self.tally.progress_sent += 1

    async def wait_for(self, ready: Callable[[State], bool], timeout: float) -> bool:
        give_up = time.monotonic() + timeout
        while not (self.state is not None and ready(self.state)):
            left = give_up - time.monotonic()
            if left <= 0:
                return False
            if self.sio is None or not self.sio.connected:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
        return True

    async def sleep_until(self, server_time: float) -> None:
        await asyncio.sleep(max(0.0, server_time - self.server_now()))

    # --- the study ----------------------------------------------------------------------

    async def run(self, patience: float) -> str | None:
        """Take part until a terminal step; returns that step."""
        await self.open(patience)
        while self.state is not None and self.state["step"] not in TERMINAL_STEPS:
            if not (self.sio and self.sio.connected):
                await self.open(patience)
                self.tally.reconnects += 1
            elif routed_url(self.base_url, self.code, self.state) != self.url:
                await self.close()  # joined a team: to its process, as the page does
                await self.open(patience)
                self.tally.rerouted += 1
            await self.answer_probes(self.state, patience)
            step = self.state["step"]
            if step in ROUND_STEPS:
                await self.play_round(self.state, patience)
                continue
            if step == "lobby":  # the server forms the team, or a timer ends the wait
                await self.wait_for(lambda s: s["step"] != "lobby", TEAM_PATIENCE)
                continue
            await asyncio.sleep(self.pace.page_seconds(step, self.rng))
            await self.request("submit", {"step": step, "data": self.page_data(self.state)},
                               patience)
        return self.state["step"] if self.state else None

    def page_data(self, state: State) -> dict[str, Any]:
        return page_answers(state, self.preferences, self.rng)

    async def answer_probes(self, state: State, patience: float) -> None:
        """Each open probe as the page handles it (``static/js/probes.js``): reported shown,
        then tapped after reading it, or left; a probe left holds an individual's start
        button until its deadline. Its load is then a person's, not a guess."""
        for probe in state.get("probes") or []:
            key = (probe["round_id"], probe["id"])
            if key in self.probes_seen or probe["deadline"] <= self.server_now():
                continue
            self.probes_seen.add(key)
            about = {"round_id": probe["round_id"], "probe": probe["id"]}
            await self.request("probe", {**about, "value": None}, patience)
            self.tally.probes_shown += 1
            value = self.probes.answer(self.kits.preferred_share(probe["session"]),
                                       int(probe["points"]), self.probe_rng)
            if value is None:
                self.tally.probes_missed += 1
                if _start_waits(state):
                    await self.sleep_until(probe["deadline"])
                continue
            reading = self.pace.page_seconds("probe", self.rng)
            await asyncio.sleep(max(0.0, min(reading, probe["deadline"] - PROBE_MARGIN
                                             - self.server_now())))
            if (await self.request("probe", {**about, "value": value}, patience)).get("ok"):
                self.tally.probes_answered += 1

    async def play_round(self, state: State, patience: float) -> None:
        step, current = state["step"], state.get("round") or {}
        if current.get("team") and not current.get("running"):  # the server starts it
            await self.wait_for(lambda s: s["step"] != step
                                or bool((s.get("round") or {}).get("running")), TEAM_PATIENCE)
            return
        if not current.get("running"):
            number = current.get("next", 1) if current else 1
            if not isinstance(number, int) or number > current.get("of", number):
                await self.wait_for(lambda s: s["step"] != step, patience)
                return
            await asyncio.sleep(self.pace.start_seconds(self.rng))
            ack = await self.request("start_round", {"round": number}, patience)
            current = (ack.get("state") or {}).get("round") or {}
            if not ack.get("ok") or not current.get("running"):
                await asyncio.sleep(0.5)
                return
        self.kits.saw(current["session"], current["id"], current["task_type"])
        if self.pace.human:
            await self.decorate_by_hand(current, patience)
        else:
            await self.decorate_fast(current, patience)
        round_id = current["id"]
        closed = await self.wait_for(
            lambda s: (s.get("round") or {}).get("id") != round_id
            or not (s.get("round") or {}).get("running"),
            max(0.0, current["deadline"] - self.server_now()) + patience)
        if not closed and self.sio is not None and self.sio.connected:
            raise TimeoutError(f"round {round_id} was not closed by the server")

    async def decorate_by_hand(self, current: dict[str, Any], patience: float) -> None:
        seconds = current["deadline"] - current["started_at"]
        reports = ProgressReports.of(current)
        for action in self.human.round_actions(current["target"], seconds, self.rng):
            at = current["started_at"] + action.at
            if at < self.server_now() - 1.0:
                continue  # due while the page was away: lost work, as for a person
            await self.report_held(reports, current["id"], at)
            await self.sleep_until(at)
            if self.server_now() >= current["deadline"]:
                return
            if action.finished:
                reports.drop()
                await self.request("cookie", {"round_id": current["id"],
                                              "content": action.content}, patience)
            elif reports.offer(self.server_now(), action.content):
                await self.progress(current["id"], action.content)
        await self.report_held(reports, current["id"], current["deadline"])

    async def report_held(self, reports: ProgressReports, round_id: int,
                          before: float) -> None:
        """Send the report waiting for its interval to end, if it ends before ``before``."""
        due = reports.due()
        if due is not None and due <= before:
            await self.sleep_until(due)
            await self.progress(round_id, reports.take())

    async def decorate_fast(self, current: dict[str, Any], patience: float) -> None:
        seconds = current["deadline"] - current["started_at"]
        content = cookie_content(current["target"])
        times = self.decorator.cookie_times(current["task_type"], seconds, self.rng)
        earliest = current["started_at"] + self.facts.min_cookie_seconds + SPACING_MARGIN
        for offset in times[int(current.get("cookies", 0)):]:
            await self.sleep_until(max(current["started_at"] + offset, earliest))
            if self.server_now() >= current["deadline"] - 0.1:
                return
            await self.request("cookie", {"round_id": current["id"], "content": content},
                               patience)
            earliest = self.server_now() + self.facts.min_cookie_seconds + SPACING_MARGIN


@dataclass
class SwarmReport:
    """Acknowledgements, tallies and the bots' own cost, from one or several processes
    (plain lists, so a report crosses from a swarm process by pickling)."""

    acked: list[Acked]
    refused: list[tuple[str, str, str]]
    tally: Tally
    cpu_seconds: float  # the swarm processes' CPU time within the measured window
    lag: np.ndarray  # how late the processes' event loops woke up, seconds, in the window
    processes: int

    @property
    def log(self) -> AckLog:
        return AckLog(self.acked, self.refused)

    def latencies(self, event: str = "cookie") -> np.ndarray:
        """Seconds from the last send to the ack, over first-time acceptances."""
        return np.array([a.latency for a in self.acked if a.event == event and not a.duplicate])

    def merge(self, other: SwarmReport) -> None:
        self.acked.extend(other.acked)
        self.refused.extend(other.refused)
        self.tally.add(other.tally)
        self.cpu_seconds += other.cpu_seconds
        self.lag = np.concatenate([self.lag, other.lag])
        self.processes += other.processes


@dataclass(frozen=True)
class SwarmPlan:
    """Who runs when: ``participants`` slots arriving evenly over ``ramp`` seconds from
    ``start`` (epoch), kept busy until ``end`` (or, without ``recycle``, until each slot's
    participant finished); the window ``[measure_from, end]`` is what the CPU and lag
    figures cover."""

    base_url: str
    participants: int
    start: float
    ramp: float
    measure_from: float
    end: float
    pace: Pace = HUMAN
    facts: StudyFacts = DEFAULT_FACTS
    patience: float = 60.0
    seed: int = 0
    prefix: str = "light"
    recycle: bool = True  # a slot whose participant finished takes a new one


async def _slot(plan: SwarmPlan, index: int, log: AckLog, tally: Tally,
                connector: aiohttp.BaseConnector) -> None:
    """One place in the study: a participant, and when it finished, the next one."""
    await asyncio.sleep(max(0.0, plan.start + plan.ramp * index / plan.participants
                            - time.time()))
    visit = 0
    while time.time() < plan.end:
        code = f"{plan.prefix}{plan.seed}x{index}x{visit}"
        bot = LightBot(plan.base_url, code, (plan.seed, index, visit), plan.pace, plan.facts,
                       log, tally, connector)
        tally.participants += 1
        failed = False
        try:
            if await bot.run(plan.patience) in TERMINAL_STEPS:
                tally.finished += 1
        except asyncio.CancelledError:
            raise
        except Exception as error:  # one bot's failure is counted; the swarm goes on
            tally.errors[f"{type(error).__name__}: {str(error)[:80]}"] += 1
            failed = True
        finally:
            await asyncio.shield(bot.shut())
        if not plan.recycle:
            return
        if failed:
            await asyncio.sleep(ERROR_PAUSE)
        visit += 1


async def _probe_lag(plan: SwarmPlan, lags: list[float]) -> None:
    """How late the loop wakes from a short sleep: if the bots starve their own loop,
    their latencies would include that wait."""
    while time.time() < plan.end:
        asked = time.perf_counter()
        await asyncio.sleep(LAG_PROBE_SECONDS)
        if time.time() >= plan.measure_from:
            lags.append(time.perf_counter() - asked - LAG_PROBE_SECONDS)


async def _mark_cpu(moment: float, marks: list[float]) -> None:
    await asyncio.sleep(max(0.0, moment - time.time()))
    marks.append(time.process_time())


async def _run_slots(plan: SwarmPlan, slots: range) -> SwarmReport:
    log, tally, lags, cpu_from = AckLog(), Tally(), [], []
    connector = aiohttp.TCPConnector(limit=0)
    try:
        helpers = [asyncio.create_task(_mark_cpu(plan.measure_from, cpu_from)),
                   asyncio.create_task(_probe_lag(plan, lags))]
        bots = [asyncio.create_task(_slot(plan, index, log, tally, connector))
                for index in slots]
        await asyncio.wait(bots, timeout=max(0.0, plan.end - time.time()))
        cpu_seconds = time.process_time() - cpu_from[0] if cpu_from else 0.0
        await cancel_all([*bots, *helpers])
    finally:
        await connector.close()
    return SwarmReport(log.acked, log.refused, tally, cpu_seconds, np.array(lags), 1)


async def cancel_all(tasks: list[asyncio.Task]) -> None:
    """Cancel until every task has ended: a cancellation that lands inside the Socket.IO
    client can be swallowed there, and a bot then went on past the run's end, keeping
    the whole swarm waiting for it."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_RETRY_SECONDS)
    for task in tasks:  # retrieved, so none is reported as never retrieved
        if not task.cancelled():
            task.exception()


def _run_process(plan: SwarmPlan, slots: range) -> SwarmReport:
    """One swarm process, on uvloop: a bot's latencies include its own loop's lag, which a
    person's browser, serving one page, does not have (asyncio's own loop lagged about
    twice as long: ``docs/measurements/capacity-log.md``)."""
    return uvloop.run(_run_slots(plan, slots))


def run_light_swarm(plan: SwarmPlan, processes: int = 1) -> SwarmReport:
    """Run the plan's slots split over ``processes`` event loops (one process each, or
    this process alone when 1); returns when ``plan.end`` has passed."""
    if processes <= 1:
        return _run_process(plan, range(plan.participants))
    share = math.ceil(plan.participants / processes)
    parts = [range(i, min(i + share, plan.participants))
             for i in range(0, plan.participants, share)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(parts), mp_context=context) as pool:
        reports = list(pool.map(_run_process, [plan] * len(parts), parts))
    merged = reports[0]
    for report in reports[1:]:
        merged.merge(report)
    return merged
