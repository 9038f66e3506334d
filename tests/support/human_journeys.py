"""Simulated people at human pace through the real journey code, in process.

Each person (``study.people.speed``) consents, rates the themes and plays the four practice
rounds: every element placed is a ``progress`` message and every finished cookie a
``cookie`` message to ``Journey.handle``, at the times the model gives, on an injected
clock; ``tick`` closes the rounds. The team is then formed as in a live study, so the
measured coefficients and both robots' plans are the ones a real run would store.

    .venv/bin/python tests/support/human_journeys.py [--participants 400] [--seed 1]

prints, per shipped protocol, how often the two robots' plans (and goals) differ, the
share of measured coefficients in the ranges its pool samples and the share clipped
(``docs/human-model.md``). With ``--formation PROTOCOL...`` it prints, for the human
model's population with every rating pattern and for the robustness test's paces from 0.3
to 2.5 times the model's times, the shares clipped per cookie type, in the pool's ranges,
gone on, unmatched, and in the target team (``docs/teams-by-design.md``).
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from study.people.scale import share_in_ranges
from study.people.speed import Human
from study.protocol.loader import load_protocol
from study.storage.database import Storage
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.journey import Journey

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ROOT / "protocols"
START = 1_750_000_000.0
_ids = itertools.count()


class Clock:
    """Time that moves only when the simulation says so."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Person:
    """What the study stored for one simulated person."""

    code: str
    capabilities: tuple[float, ...]
    clipped: tuple[bool, ...]
    plans: tuple[str, ...]
    goals: tuple[str, ...]
    robots_identical: int | None
    distance: float | None
    passed_over: int | None
    live_type: str | None = None
    participant_role: str | None = None
    target_met: int | None = None
    step: str | None = None
    preferences: tuple[float, ...] = ()

    @property
    def in_target(self) -> bool:
        """Placed in the target team, with two robots that follow different plans."""
        return bool(self.target_met) and self.plans_differ

    @property
    def nearest_differs(self) -> bool:
        """Whether the robots differed with the nearest pool member already."""
        return self.passed_over == 0 and self.plans_differ

    @property
    def plans_differ(self) -> bool:
        return len(set(self.plans)) > 1

    @property
    def goals_differ(self) -> bool:
        return len(set(self.goals)) > 1


class HumanJourneys:
    """One study run (protocol, database, pool, clock) driven by simulated people."""

    def __init__(self, protocol_path: Path, directory: Path, pools: Path,
                 teammates: Any = None) -> None:
        self.protocol = load_protocol(protocol_path)
        # A simulation, not a study: nothing waits for the disk.
        self.storage = Storage(directory / f"{self.protocol.name}.sqlite", durability="normal")
        self.storage.db.execute("PRAGMA synchronous=OFF")
        self.clock = Clock()
        self.teammates = teammates or PoolTeammates.for_protocol(self.protocol, pools)
        self.journey = Journey(self.protocol, self.storage, self.teammates, self.clock)

    def send(self, code: str, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.journey.handle(event, code, {"msg_id": f"sim-{next(_ids):010d}",
                                                 **payload})

    def submit(self, code: str, step: str, data: dict[str, Any] | None = None) -> None:
        reply = self.send(code, "submit", {"step": step, "data": data or {}})
        assert reply["ok"], reply

    def person(self, code: str, human: Human, rng: np.random.Generator,
               ratings: dict[str, int] | None = None) -> Person:
        """Consent, ratings (random unless given) and practice; what the study stored
        about the person."""
        self.journey.enrol(code)
        self.submit(code, "consent", {"agree": True})
        self.submit(code, "themes")
        points = self.protocol.preference_scale.points
        self.submit(code, "preferences", {"ratings": ratings or {
            theme.id: int(rng.integers(1, points + 1)) for theme in self.protocol.themes}})
        for number in range(1, len(self.protocol.practice) + 1):
            self.play_round(code, number, human, rng)
        return self.stored(code)

    def play_round(self, code: str, number: int, human: Human,
                   rng: np.random.Generator) -> None:
        reply = self.send(code, "start_round", {"round": number})
        assert reply["ok"], reply
        current = reply["state"]["round"]
        seconds = current["deadline"] - current["started_at"]
        for action in human.round_actions(current["target"], seconds, rng):
            self.clock.now = current["started_at"] + action.at
            event = "cookie" if action.finished else "progress"
            self.send(code, event, {"round_id": current["id"], "content": action.content})
        self.clock.now = current["deadline"]
        self.journey.tick(self.clock.now)

    def stored(self, code: str) -> Person:
        participant = self.storage.participant(code)
        assert participant is not None
        pid = participant["id"]
        capabilities = self.storage.all(
            "SELECT value, clipped FROM measurements WHERE participant_id = ? AND "
            "kind = 'capability' ORDER BY task_type", (pid,))
        sessions = self.storage.all(
            "SELECT plan, goal FROM sessions WHERE participant_id = ? AND number > 0 "
            "ORDER BY number", (pid,))
        preferences = self.storage.all(
            "SELECT value FROM measurements WHERE participant_id = ? AND "
            "kind = 'preference' ORDER BY task_type", (pid,))
        teammate = self.storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                                    (pid,)) or {}
        return Person(code, tuple(row["value"] for row in capabilities),
                      tuple(bool(row["clipped"]) for row in capabilities),
                      tuple(row["plan"] for row in sessions),
                      tuple(row["goal"] for row in sessions), participant["robots_identical"],
                      teammate.get("distance"), teammate.get("passed_over"),
                      teammate.get("live_type"), teammate.get("participant_role"),
                      teammate.get("target_met"), participant["step"],
                      tuple(row["value"] for row in preferences))

    def run(self, people: int, seed: int) -> list[Person]:
        rng = np.random.default_rng(seed)
        return [self.person(f"human{index:05d}", Human.sample(rng), rng)
                for index in range(people)]


# The population of the team-formation table (docs/teams-by-design.md): paces from 0.3 to
# 2.5 times the human model's times (the span the shipped protocols measure unclipped,
# docs/human-model.md), and every theme-rating pattern of two themes.
PACES = (0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)
RATING_PATTERNS = {"first strongly": (7, 1), "second strongly": (1, 7),
                   "first mildly": (5, 4), "second mildly": (4, 5), "tied high": (6, 6),
                   "tied low": (2, 2)}


@dataclass(frozen=True)
class Simulated:
    """One person of the population and what the study stored about them."""

    pace: float
    pattern: str
    person: Person


def _ratings(run: HumanJourneys, pattern: str) -> dict[str, int]:
    themes = [theme.id for theme in run.protocol.themes[:2]]
    ratings = dict(zip(themes, RATING_PATTERNS[pattern], strict=True))
    ratings.update({theme.id: 4 for theme in run.protocol.themes[2:]})
    return ratings


def population(run: HumanJourneys, people: int, seed: int) -> list[Simulated]:
    """``people`` simulated people spread evenly over ``PACES`` x ``RATING_PATTERNS``: the
    robustness test's paces, far beyond the model's spread of people."""
    rng = np.random.default_rng(seed)
    cells = list(itertools.product(PACES, RATING_PATTERNS))
    result = []
    for index in range(people):
        pace, pattern = cells[index % len(cells)]
        person = run.person(f"pop{index:05d}", Human(pace=pace), rng, _ratings(run, pattern))
        result.append(Simulated(pace, pattern, person))
    return result


def model_population(run: HumanJourneys, people: int, seed: int) -> list[Simulated]:
    """``people`` of the human model's population (each drawn with the model's
    person-to-person spread), spread evenly over ``RATING_PATTERNS``."""
    rng = np.random.default_rng(seed)
    result = []
    for index in range(people):
        pattern = list(RATING_PATTERNS)[index % len(RATING_PATTERNS)]
        human = Human.sample(rng)
        person = run.person(f"model{index:05d}", human, rng, _ratings(run, pattern))
        result.append(Simulated(human.pace, pattern, person))
    return result


def _outcome_cells(run: HumanJourneys, row: list[Simulated]) -> list[str]:
    """Clipped per type, in the pool's ranges, gone on, unmatched, and in the target team
    (with differing plans) among those placed."""
    ranges = tuple(tuple(pair) for pair in run.protocol.pool_spec().sample_c[0])
    values = np.array([p.person.capabilities for p in row])
    onward = [p for p in row if p.person.step in ("lobby", "teammate")]
    placed = ("-" if run.protocol.team is not None or not onward
              else f"{np.mean([p.person.in_target for p in onward]):.0%}")
    return [*(f"{np.mean([p.person.clipped[j] for p in row]):.0%}" for j in range(2)),
            f"{share_in_ranges(values, ranges):.0%}", f"{len(onward) / len(row):.0%}",
            f"{np.mean([p.person.step == 'unmatched' for p in row]):.0%}", placed]


OUTCOME_HEADER = ("squares clipped | letters clipped | in the pool's ranges | on to a "
                  "teammate or the lobby | unmatched | in the target team, of those placed |")


def _outcome_table(run: HumanJourneys, first: str,
                   rows: list[tuple[str, list[Simulated]]]) -> str:
    lines = [f"| {first} | people | {OUTCOME_HEADER}", "|---|---|" + "---|" * 6]
    lines += [f"| {label} | {len(row)} | " + " | ".join(_outcome_cells(run, row)) + " |"
              for label, row in rows]
    return "\n".join(lines)


def population_table(run: HumanJourneys, people: list[Simulated]) -> str:
    """The human model's population per rating pattern, as a Markdown table."""
    rows = [(f"{name} {RATING_PATTERNS[name]}", [p for p in people if p.pattern == name])
            for name in RATING_PATTERNS]
    return _outcome_table(run, "rating pattern", [*rows, ("all", people)])


def robustness_table(run: HumanJourneys, people: list[Simulated]) -> str:
    """People at fixed paces, every rating pattern, per pace, as a Markdown table."""
    rows = [(f"{pace:g}", [p for p in people if p.pace == pace]) for pace in PACES]
    return _outcome_table(run, "pace (x model times)", [*rows, ("all", people)])


def where_they_ended(people: list[Simulated]) -> str:
    """How many ended in which live team and role (or on the unmatched page)."""
    counts: dict[str, int] = {}
    for simulated in people:
        person = simulated.person
        key = (f"{person.live_type}, participant {person.participant_role}"
               if person.live_type else str(person.step))
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{key}: {count}" for key, count in sorted(counts.items(),
                                                                key=lambda kv: -kv[1]))


def _ranges(run: HumanJourneys) -> str:
    ranges = run.protocol.pool_spec().sample_c[0]
    return ", ".join(f"{cookie.name} [{low:g}, {high:g}]"
                     for cookie, (low, high) in zip(run.protocol.cookies, ranges, strict=True))


def summary(name: str, run: HumanJourneys, people: list[Person]) -> str:
    matched = [p for p in people if p.plans]
    values = np.array([p.capabilities for p in matched])
    ranges = tuple(tuple(pair) for pair in run.protocol.pool_spec().sample_c[0])
    clipped = np.mean([any(p.clipped) for p in people])
    plans = np.mean([p.plans_differ for p in matched])
    goals = np.mean([p.goals_differ for p in matched])
    nearest = np.mean([p.nearest_differs for p in matched])
    passed = [p for p in matched if p.passed_over]
    return (f"| {name} | {len(people)} | {len(matched)} | {nearest:.1%} | {plans:.1%} | "
            f"{goals:.1%} | {np.mean([p.distance for p in matched]):.3f} | "
            f"{np.median([p.passed_over for p in passed]) if passed else 0:g} | "
            f"{share_in_ranges(values, ranges):.1%} | {clipped:.1%} | "
            f"{np.median(values[:, 0]):.2f} / {np.median(values[:, 1]):.2f} |")


def formation(protocols: list[Path], people: int, seed: int, pools: Path) -> None:
    """Print each protocol's population and robustness tables."""
    print(f"{people} people of the human model's population per protocol and as many at "
          f"the paces {', '.join(f'{p:g}' for p in PACES)} x its times, seed {seed}\n")
    with tempfile.TemporaryDirectory() as directory:
        for number, path in enumerate(protocols):
            for kind, draw, table in (("population", model_population, population_table),
                                      ("paces", population, robustness_table)):
                database = Path(directory) / f"{number}-{kind}"  # one study name, two runs
                database.mkdir()
                run = HumanJourneys(path, database, pools)
                simulated = draw(run, people, seed)
                title = ("the human model's population, per rating pattern" if table is
                         population_table else "the robustness test, per pace")
                print(f"### {path.name}: {title} (its pool samples {_ranges(run)})\n")
                print(table(run, simulated))
                print(f"\nWhere they ended: {where_they_ended(simulated)}\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="robots' plans at human pace, in process")
    parser.add_argument("--participants", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pools", type=Path, default=ROOT / "var" / "pools")
    parser.add_argument("--formation", nargs="*", type=Path, metavar="PROTOCOL",
                        help="the team-formation table of these protocols (default: study1 "
                             "and study2) over paces and rating patterns")
    args = parser.parse_args()
    if args.formation is not None:
        formation(args.formation or [PROTOCOLS / "study1.toml", PROTOCOLS / "study2.toml"],
                  args.participants, args.seed, args.pools)
        return
    print(f"{args.participants} simulated people per protocol, seed {args.seed}\n")
    print("| protocol | people | matched | plans differ with the nearest member | plans "
          "differ | goals differ | mean d | median members passed over (when any) | coefficients "
          "in the pool's ranges | clipped | median c squares / letters |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name in ("demo", "study1", "study2"):
            run = HumanJourneys(PROTOCOLS / f"{name}.toml", Path(directory), args.pools)
            print(summary(name, run, run.run(args.participants, args.seed)), flush=True)


if __name__ == "__main__":
    main()
