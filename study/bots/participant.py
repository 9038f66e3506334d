"""A simulated participant: reads each page's state as the browser does and answers it.

Capabilities drive the cookie pace through ``study.task.decorator.Decorator`` (the model the
agent teammate uses), preferences drive the theme ratings, and a behaviour says how the
participant treats the connection: working steadily, idling, refreshing the page mid-round,
or leaving for a while and coming back. The ``human`` behaviour decorates element by element
at a person's pace instead (``study.people.speed``), reporting each element as the page does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from study.bots.client import AckLog, Connection, State
from study.bots.probe_answers import KitsSeen, ProbeAnswers
from study.bots.progress_reports import ProgressReports
from study.people.speed import Human
from study.protocol.schema import MAX_CONDITIONS
from study.task.decorator import Decorator

TERMINAL_STEPS = ("done", "declined", "withdrawn", "unmatched", "dropped")
# A real team's bot waits this long beyond what the server announces (a lobby's timer, the
# next round's start) before it gives up.
TEAM_PATIENCE = 900.0
# Practice and every collaborative session a protocol can have (one per condition).
ROUND_STEPS = ("practice", *(f"session-{n}" for n in range(1, MAX_CONDITIONS + 1)))
COOKIE_NAMES = ("squares", "letters")
DEADLINE_MARGIN = 0.1  # a cookie this close to the deadline would arrive too late; skip it
# A bot's cookie times vary as a person's do: the human model's element spread (0.3)
# averaged over a cookie's ten to twenty elements (docs/human-model.md).
COOKIE_VARIATION = 0.1
# How long before the deadline a decorator bot reports its cookie in progress: past the
# 95th percentile of a loaded server's acknowledgements (docs/capacity.md).
UNFINISHED_LEAD = 1.0
SPACING_MARGIN = 0.02  # seconds added to the protocol's shortest time between cookies
REFUSED_PAUSE = 0.5  # seconds a refused bot waits before it looks at its state again
# As the page: ask for the state this long after a deadline, then this often while waiting.
SYNC_GRACE = 1.5
SYNC_SECONDS = 4.0
# Reference speeds (cookies/s) a bot assumes without the served protocol (quicker than the
# shipped protocols', so that bots pass quickly); given the protocol, it uses its own.
DEFAULT_REFERENCE_SPEED = (0.4, 0.15)
# Capabilities of bots drawn without a protocol's people: anywhere but near the clip bounds.
UNIFORM_CAPABILITIES = ((0.3, 0.95), (0.3, 0.95))
# The highest capability a bot is drawn with: a measurement's chance then rarely clips it.
HIGHEST_DRAWN = 0.95


@dataclass(frozen=True)
class Behaviour:
    """How a bot treats pages, rounds and its connection.

    ``pace`` scales the decorator's speed, ``read_seconds`` is spent on every page,
    ``idle`` makes no cookies, ``refresh_at`` (fraction of a round) reloads the page once a
    round, ``away_seconds`` drops the connection mid-round for that long, ``human`` places
    every element at the pace of a person drawn from ``study.people.speed`` (capabilities
    then come from that person's measured speed, not from the profile).
    """

    name: str
    pace: float = 1.0
    read_seconds: float = 0.0
    idle: bool = False
    refresh_at: float | None = None
    away_seconds: float = 0.0
    human: bool = False


BEHAVIOURS: dict[str, Behaviour] = {
    "fast": Behaviour("fast", pace=1.0),
    "slow": Behaviour("slow", pace=0.5, read_seconds=1.0),
    "idle": Behaviour("idle", idle=True, read_seconds=2.0),
    "refreshing": Behaviour("refreshing", refresh_at=0.4),
    "disconnecting": Behaviour("disconnecting", refresh_at=0.3, away_seconds=3.0),
    "human": Behaviour("human", read_seconds=1.0, human=True),
}


DEFAULT_PROBE_ANSWERS = ProbeAnswers()


@dataclass(frozen=True)
class Profile:
    """Who the bot is: capability and preference per cookie type, a behaviour, a seed."""

    capabilities: tuple[float, float] = (0.6, 0.6)
    preferences: tuple[float, float] = (0.7, 0.3)
    behaviour: Behaviour = BEHAVIOURS["fast"]
    seed: int = 0
    stop_at: str | None = None  # leave the study here: "STEP" or "STEP:ROUNDS" played
    probes: ProbeAnswers = DEFAULT_PROBE_ANSWERS  # how it answers round probes


def stop_point_reached(stop_at: str | None, state: State) -> bool:
    """Whether a bot that leaves at ``stop_at`` leaves now: on reaching the step, or on a
    round step once that many of its rounds are over (``session-2:1``)."""
    step, _, rounds = (stop_at or "").partition(":")
    if state.get("step") != step:
        return False
    current = state.get("round") or {}
    return not rounds or (not current.get("running") and (current.get("next") or 1) > int(rounds))


@dataclass(frozen=True)
class StudyFacts:
    """What a bot needs from the protocol that the state does not carry: the reference
    speeds that turn its capabilities into cookies per second, and the shortest time the
    server accepts between two cookies (no hand is faster, however late the last one was)."""

    reference_speed: tuple[float, ...] = DEFAULT_REFERENCE_SPEED
    min_cookie_seconds: float = 0.5
    # Where the protocol's people measure: its pool's ranges, or the paper's
    # (``study.calibration.pilot.pool_target``), for bots drawn as its population.
    capability_ranges: tuple[tuple[float, float], ...] = UNIFORM_CAPABILITIES

    @classmethod
    def from_protocol(cls, protocol: Any) -> StudyFacts:
        from study.calibration.pilot import pool_target

        return cls(tuple(c.reference_speed for c in protocol.cookies),
                   protocol.min_cookie_seconds,
                   tuple(pool_target(protocol, j) for j in range(len(protocol.cookies))))


DEFAULT_FACTS = StudyFacts()


@dataclass
class Outcome:
    """What happened to one bot, for summaries and checks."""

    code: str
    behaviour: str
    final_step: str | None = None
    rounds: int = 0
    cookies: int = 0
    reconnects: int = 0
    error: str | None = None
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)
    stopped: bool = False  # left the study at its profile's stop point
    probes_answered: int = 0
    probes_missed: int = 0



def rating_of(preference: float, points: int) -> int:
    """The rating that measures back to ``preference`` (MODEL.md's mapping)."""
    return 1 + round((preference - 0.01) / 0.98 * (points - 1))


def theme_ratings(preferences: tuple[float, ...], themes: list[dict[str, Any]],
                  points: int) -> dict[str, int]:
    """Ratings that measure back to the bot's preferences. A theme the page puts on a
    cookie type gets that type's preference; themes the study assigns after the ratings
    (themes by rating) get the bot's preferences from the highest down, since the rule
    puts the higher-rated theme on its preferred type: the bot measures its own values in
    the order the rule places them. A theme beyond the types gets the middle."""
    unplaced = iter(sorted(preferences, reverse=True))
    ratings = {}
    for theme in themes:
        cookie = theme.get("cookie")
        preference = (preferences[COOKIE_NAMES.index(cookie)] if cookie in COOKIE_NAMES
                      else next(unplaced, None))
        ratings[theme["id"]] = ((points + 1) // 2 if preference is None
                                else rating_of(preference, points))
    return ratings


def page_answers(state: State, preferences: tuple[float, ...],
                 rng: np.random.Generator) -> dict[str, Any]:
    """What a bot submits on a page: consent, theme ratings that measure back to its
    preferences (the page says which cookie type carries each theme), any valid answers."""
    step, page = state["step"], state.get("page") or {}
    if step == "consent":
        return {"agree": True}
    if step == "debrief":
        return {"consent": True}
    if step == "preferences":
        points = int((page.get("scale") or {}).get("points", 7))
        return {"ratings": theme_ratings(preferences, page.get("themes", []), points)}
    if step.startswith("questionnaire") or step == "post":
        return {"answers": {item["id"]: answer_item(item, rng)
                            for item in page.get("items", [])}}
    return {}


def answer_item(item: dict[str, Any], rng: np.random.Generator) -> Any:
    """A bot's answer to a questionnaire item: any valid value of its kind (a rank puts
    the robots in a random order, a pairwise item picks one of each pair or the tie)."""
    kind = item.get("kind")
    if kind == "likert":
        return int(rng.integers(1, int(item.get("points", 7)) + 1))
    if kind == "choice":
        return str(rng.choice(item["options"]))
    if kind == "rank":
        return [item["robots"][k]["id"] for k in rng.permutation(len(item["robots"]))]
    if kind == "pairwise":
        return {pair["key"]: str(rng.choice([pair["a"]["id"], pair["b"]["id"],
                                             *(["="] if item.get("tie") else [])]))
                for pair in item["pairs"]}
    if kind == "number":
        return float(item.get("min", 0))
    return "A bot's answer."

class Bot:
    """Drives one participant from the consent page to the end of the study."""

    def __init__(self, base_url: str, code: str, profile: Profile, log: AckLog, *,
                 facts: StudyFacts = DEFAULT_FACTS, patience: float = 60.0,
                 stop: Callable[[], bool] = lambda: False) -> None:
        self.connection = Connection(base_url, code, log)
        self.profile = profile
        self.facts = facts
        self.patience = patience
        self.stop = stop
        self.rng = np.random.default_rng(profile.seed)
        speed = tuple(s * profile.behaviour.pace for s in facts.reference_speed)
        self.decorator = Decorator(profile.capabilities, speed, COOKIE_VARIATION)
        self.human = Human.sample(np.random.default_rng([profile.seed, 1]))
        self.outcome = Outcome(code, profile.behaviour.name)
        self.kits = KitsSeen(profile.preferences)
        self.probe_rng = np.random.default_rng([profile.seed, 2])  # the other draws stay
        self.probes_seen: set[tuple[int, str]] = set()

    def run(self, max_seconds: float = 3600.0) -> Outcome:
        """Take part until a terminal step, ``stop()`` or ``max_seconds``; never raises."""
        started = time.monotonic()
        try:
            state = self.connection.open(self.patience)
            while (state["step"] not in TERMINAL_STEPS and not self.stop()
                   and not stop_point_reached(self.profile.stop_at, state)
                   and time.monotonic() - started < max_seconds):
                self._note(state["step"])
                state = self.act(state)
        except Exception as error:  # a bot reports its failure; the swarm goes on
            self.outcome.error = f"{type(error).__name__}: {error}"
        finally:
            self.connection.close()
        state = self.connection.state or {}
        self.outcome.final_step = state.get("step")
        self.outcome.stopped = bool(state) and stop_point_reached(self.profile.stop_at, state)
        self.outcome.seconds = time.monotonic() - started
        return self.outcome

    def _note(self, step: str) -> None:
        if not self.outcome.steps or self.outcome.steps[-1] != step:
            self.outcome.steps.append(step)

    # --- pages --------------------------------------------------------------------------

    def act(self, state: State) -> State:
        """One move on the current step; returns the state after it."""
        state = self.answer_probes(state)
        step = state["step"]
        if step in ROUND_STEPS:
            return self.play_round(state)
        if step == "lobby":  # the server forms the team, or a timer ends the wait
            self._await_team(lambda s: s["step"] != "lobby")
            return self.connection.state
        time.sleep(self.profile.behaviour.read_seconds)
        ack = self.connection.request("submit", {"step": step, "data": self.page_data(state)},
                                      self.patience)
        if not ack.get("ok"):
            time.sleep(REFUSED_PAUSE)
        return ack.get("state") or self.connection.state

    def page_data(self, state: State) -> dict[str, Any]:
        return page_answers(state, self.profile.preferences, self.rng)

    # --- round probes -------------------------------------------------------------------

    def probe_answer(self, probe: dict[str, Any]) -> int | None:
        """The bot's answer to an open probe by its response model, or None (missed)."""
        share = self.kits.preferred_share(probe["session"])
        return self.profile.probes.answer(share, int(probe["points"]), self.probe_rng)

    def answer_probes(self, state: State) -> State:
        """Answer the open probes as a person at the page does: it is shown, then tapped
        after the page's reading time, or left, and then, between an individual's rounds,
        the start button waits for its deadline."""
        for probe in state.get("probes") or []:
            key = (probe["round_id"], probe["id"])
            if key in self.probes_seen or probe["deadline"] <= self.connection.server_now():
                continue
            self.probes_seen.add(key)
            about = {"round_id": probe["round_id"], "probe": probe["id"]}
            self.connection.request("probe", {**about, "value": None}, self.patience)
            value = self.probe_answer(probe)
            if value is None:
                self.outcome.probes_missed += 1
                if _start_waits(state):
                    self._sleep_until(probe["deadline"])
                continue
            time.sleep(self.profile.behaviour.read_seconds)
            if self.connection.request("probe", {**about, "value": value},
                                       self.patience).get("ok"):
                self.outcome.probes_answered += 1
        return self.connection.state or state

    # --- rounds -------------------------------------------------------------------------

    def play_round(self, state: State) -> State:
        """Start the next round, decorate until its deadline, wait for the server to close
        it. A running round (after a refresh or a restart) is resumed, not restarted."""
        current = state.get("round")
        if current and current.get("team") and not current.get("running"):
            step = state["step"]  # the server starts a team's rounds
            self._await_team(lambda s: s["step"] != step
                             or bool((s.get("round") or {}).get("running")))
            return self.connection.state
        if not (current and current.get("running")):
            number = _next_round(current)
            if number is None:
                self._await_step_change(state["step"])
                return self.connection.state
            ack = self.connection.request("start_round", {"round": number}, self.patience)
            current = (ack.get("state") or {}).get("round")
            if not ack.get("ok") or not (current and current.get("running")):
                time.sleep(REFUSED_PAUSE)
                return self.connection.state
        self.outcome.rounds += 1
        self.kits.saw(current["session"], current["id"], current["task_type"])
        self.decorate(current)
        self._await_close(current["id"], current["deadline"])
        return self.connection.state

    def decorate(self, current: dict[str, Any]) -> None:
        """Finish cookies at the decorator's pace; refresh or leave once if the behaviour
        says so. Cookie times are counted from the round's start at the server; a cookie
        that fell due while the page was away is lost work, as it is for a person."""
        behaviour = self.profile.behaviour
        if behaviour.human:
            self.decorate_by_hand(current)
            return
        seconds = current["deadline"] - current["started_at"]
        times = [] if behaviour.idle else self.decorator.fresh_times(
            current["task_type"], seconds, self.rng)
        interrupt = (None if behaviour.refresh_at is None
                     else current["started_at"] + behaviour.refresh_at * seconds)
        content = cookie_content(current["target"])
        done = int(current.get("cookies", 0))
        lost_until = 0.0
        earliest = current["started_at"] + self.facts.min_cookie_seconds + SPACING_MARGIN
        last = current["started_at"]
        for at in [current["started_at"] + t for t in times][done:]:
            if interrupt is not None and at > interrupt:
                self._sleep_until(interrupt)
                lost_until = self.interrupt()
                interrupt = None
            if at < lost_until:
                continue
            self._sleep_until(max(at, earliest))
            if self.connection.server_now() >= current["deadline"] - DEADLINE_MARGIN \
                    or self.stop():
                return
            if measured_round(current):
                self._report(current["id"], partial_content(current["target"], 0.5))
            ack = self.connection.request(
                "cookie", {"round_id": current["id"], "content": content}, self.patience)
            if ack.get("ok"):
                self.outcome.cookies += 1
            last = self.connection.server_now()
            earliest = last + self.facts.min_cookie_seconds + SPACING_MARGIN
        if interrupt is not None and interrupt < current["deadline"]:
            self._sleep_until(interrupt)
            self.interrupt()
        elif not behaviour.idle:
            self.report_unfinished(current, last)

    def report_unfinished(self, current: dict[str, Any], last: float) -> None:
        """Report the cookie in progress shortly before the deadline, as the page does, so
        the speed counts it by its fraction: whole cookies alone measure a slow cookie in
        steps of half the scale. ``UNFINISHED_LEAD`` before the deadline, so that a report
        delayed as a busy server delays an acknowledgement still counts."""
        at = current["deadline"] - UNFINISHED_LEAD
        share = self.decorator.unfinished(current["task_type"], at - last)
        content = partial_content(current["target"], share)
        if content is None or self.stop():
            return
        self._sleep_until(at)
        if self.connection.server_now() < current["deadline"] - DEADLINE_MARGIN:
            self._report(current["id"], content)

    def decorate_by_hand(self, current: dict[str, Any]) -> None:
        """Place the elements at the person's pace, reported as ``progress`` messages with
        the cookie as then decorated as the page reports them (``ProgressReports``), each
        finished cookie a ``cookie`` message."""
        seconds = current["deadline"] - current["started_at"]
        reports = ProgressReports.of(current)
        for action in self.human.round_actions(current["target"], seconds, self.rng):
            self._report_held(reports, current["id"], current["started_at"] + action.at)
            self._sleep_until(current["started_at"] + action.at)
            if self.stop() or self.connection.server_now() >= current["deadline"]:
                return
            if not action.finished:
                if reports.offer(self.connection.server_now(), action.content):
                    self._report(current["id"], action.content)
                continue
            reports.drop()
            ack = self.connection.request(
                "cookie", {"round_id": current["id"], "content": action.content},
                self.patience)
            if ack.get("ok"):
                self.outcome.cookies += 1
        self._report_held(reports, current["id"], current["deadline"])

    def _report_held(self, reports: ProgressReports, round_id: int, before: float) -> None:
        """Send the report waiting for its interval to end, if it ends before ``before``."""
        due = reports.due()
        if due is not None and due <= before:
            self._sleep_until(due)
            if not self.stop():
                self._report(round_id, reports.take())

    def _report(self, round_id: int, content: Any) -> None:
        self.connection.request("progress", {"round_id": round_id, "content": content},
                                self.patience)

    def interrupt(self) -> float:
        """Reload the page (refreshing) or go away for a while first (disconnecting);
        returns the server time the page was back."""
        self.connection.close()
        time.sleep(self.profile.behaviour.away_seconds)
        self.connection.open(self.patience)
        self.outcome.reconnects += 1
        return self.connection.server_now()

    def _sleep_until(self, server_time: float) -> None:
        while not self.stop():
            left = server_time - self.connection.server_now()
            if left <= 0:
                return
            time.sleep(min(left, 0.25))

    def _await_close(self, round_id: int, deadline: float) -> None:
        """Wait for the server to close the round; reconnect if the socket went away."""
        def closed(state: State) -> bool:
            current = state.get("round") or {}
            return current.get("id") != round_id or not current.get("running")

        give_up = time.monotonic() + max(0.0, deadline - self.connection.server_now()) \
            + self.patience
        if not self._await(closed, deadline + SYNC_GRACE, give_up) and not self.stop():
            raise TimeoutError(f"round {round_id} was not closed by the server")

    def _await_step_change(self, step: str) -> None:
        if not self._await(lambda s: s["step"] != step,
                           self.connection.server_now() + SYNC_SECONDS,
                           time.monotonic() + self.patience) and not self.stop():
            raise TimeoutError(f"step {step} did not move on after its last round")

    def _await_team(self, ready: Callable[[State], bool]) -> None:
        """Wait for the team: its formation in the lobby, or its next round."""
        if not self._await(ready, self.connection.server_now() + SYNC_SECONDS,
                           time.monotonic() + TEAM_PATIENCE) and not self.stop():
            raise TimeoutError("the team did not go on")

    def _await(self, ready: Callable[[State], bool], sync_at: float, give_up: float) -> bool:
        """Wait for a state that is ``ready`` as the page does: reconnect if the socket went
        away, and from server time ``sync_at`` on ask for the state every ``SYNC_SECONDS``
        (its push may have been lost)."""
        while not self.stop() and time.monotonic() < give_up:
            if self.connection.wait_for(ready, 0.5):
                return True
            if not self.connection.connected:
                self.connection.open(self.patience)
                self.outcome.reconnects += 1
            elif self.connection.server_now() >= sync_at:
                self.connection.sync()
                sync_at = self.connection.server_now() + SYNC_SECONDS
        return False


def _start_waits(state: State) -> bool:
    """Whether the page holds a start button for an open probe: between an individual's
    rounds (a team's rounds start by themselves)."""
    current = state.get("round") or {}
    return (state["step"] in ROUND_STEPS and not current.get("running")
            and not current.get("team"))


def _next_round(current: dict[str, Any] | None) -> int | None:
    """The round to start next (the state's ``next``), or None when the step's last round
    is over and the server is about to move on."""
    if not current:
        return 1
    number = current.get("next")
    return number if isinstance(number, int) and number <= current["of"] else None


def cookie_content(target: dict[str, Any]) -> Any:
    """A correct cookie, read from the target the server sent (as the page does)."""
    if target["kind"] == "letters":
        return target["letters"]
    return list(target["cells"])


def measured_round(current: dict[str, Any]) -> bool:
    """A practice round, whose page reports every element (``progress_seconds`` 0): the
    server measures the person on it and takes a cookie that came with no element report
    for no person's (``study.web.participant.progress.not_a_person``)."""
    return not current.get("progress_seconds")


def partial_content(target: dict[str, Any], share: float) -> Any:
    """The cookie with its first ``share`` of elements placed correctly, as the page
    reports a cookie in progress; ``None`` when not one element is."""
    whole = cookie_content(target)
    placed = int(len(whole) * share)
    if placed == 0:
        return None
    return whole[:placed] if target["kind"] == "letters" else sorted(whole[:placed])


def profile_for(index: int, behaviour: str, seed: int = 0,
                capability_ranges: tuple[tuple[float, float], ...] = UNIFORM_CAPABILITIES,
                ) -> Profile:
    """A varied but reproducible profile for bot ``index`` of a swarm: capabilities drawn
    uniformly within ``capability_ranges`` per type (a protocol's people:
    ``StudyFacts.capability_ranges``), preferences anywhere on the scale."""
    rng = np.random.default_rng([seed, index])
    c = np.array([rng.uniform(lo, min(hi, HIGHEST_DRAWN)) for lo, hi in capability_ranges])
    c = c.round(2)
    p = rng.uniform(0.05, 0.95, 2).round(2)
    return Profile((float(c[0]), float(c[1])), (float(p[0]), float(p[1])),
                   BEHAVIOURS[behaviour], seed=seed * 100_003 + index)


def with_behaviour(profile: Profile, behaviour: str) -> Profile:
    return replace(profile, behaviour=BEHAVIOURS[behaviour])
