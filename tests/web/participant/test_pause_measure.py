"""A console pause during a measured practice round does not distort the capability: the
round is measured without the time held and without the work done in it.

The same simulated person (same seed) plays the practice twice through the real journey
code: once undisturbed, once paused by the experimenter for 10 s in the middle of a
measured round, either stopping while paused or decorating on (the page stays on a running
round while paused).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.human_journeys import PROTOCOLS, HumanJourneys

from study.people.speed import Human
from study.pool import Pool, PoolSpec, ensure_pool
from study.protocol.loader import TASK_NAMES, load_protocol
from study.web.console.holds import apply_action, ensure_tables
from study.web.participant.agent_pool import PoolTeammates

STUDY2 = PROTOCOLS / "study2.toml"
PAUSE_AT, PAUSE_FOR = 10.0, 10.0
SEED = 5
PEOPLE = 48
# The protocol's own themes on both cookies ("BR" squares, "GO STEELERS" letters).
RATINGS = {"ravens": 6, "steelers": 2}


@dataclass(frozen=True)
class Pause:
    """The experimenter pauses the person in each of practice ``rounds`` from ``at``
    seconds into it for ``seconds``; the person stops meanwhile unless ``decorates_on``."""

    rounds: tuple[int, ...]
    at: float = PAUSE_AT
    seconds: float = PAUSE_FOR
    decorates_on: bool = False


class PausedJourneys(HumanJourneys):
    """Journeys in which the experimenter pauses the person during one practice round."""

    pause: Pause | None = None

    def play_round(self, code: str, number: int, human: Human,
                   rng: np.random.Generator) -> None:
        if self.pause is None or number not in self.pause.rounds:
            super().play_round(code, number, human, rng)
            return
        pause = self.pause
        reply = self.send(code, "start_round", {"round": number})
        current = reply["state"]["round"]
        start, seconds = current["started_at"], current["deadline"] - current["started_at"]
        participant = self.storage.participant(code)
        console = [(pause.at, "pause"), (pause.at + pause.seconds, "resume")]
        for action in human.round_actions(current["target"], seconds, rng):
            at = action.at
            if not pause.decorates_on and at >= pause.at:
                at += pause.seconds
            if at >= seconds:
                break
            while console and console[0][0] <= at:
                self._console(participant, start, *console.pop(0))
            self.clock.now = start + at
            reply = self.send(code, "cookie" if action.finished else "progress",
                              {"round_id": current["id"], "content": action.content})
            assert reply["ok"], reply
        for when, what in console:
            self._console(participant, start, when, what)
        self.clock.now = current["deadline"]
        self.journey.tick(self.clock.now)

    def _console(self, participant: dict[str, Any], start: float, at: float,
                 action: str) -> None:
        self.clock.now = start + at
        apply_action(self.storage, participant, action, "", None, self.clock.now)


@pytest.fixture(scope="module")
def teammates(tmp_path_factory: pytest.TempPathFactory) -> PoolTeammates:
    spec = PoolSpec.from_protocol(STUDY2).with_changes(teams=3000)
    path = ensure_pool(spec, tmp_path_factory.mktemp("pools"), progress=False)
    return PoolTeammates(Pool.load(path), str(path))


def measured(directory: Path, teammates: PoolTeammates, people: list[Human], seed: int,
             pause: Pause | None) -> list[dict[str, dict[str, Any]]]:
    """The capability rows stored for each person, by cookie type."""
    directory.mkdir()
    run = PausedJourneys(STUDY2, directory, directory, teammates)
    run.pause = pause
    ensure_tables(run.storage)
    rng = np.random.default_rng(seed)
    result = []
    for index, human in enumerate(people):
        person = run.person(f"person-{index:03d}", human, rng, RATINGS)
        participant = run.storage.participant(person.code)
        rows = run.storage.all("SELECT * FROM measurements WHERE kind = 'capability' AND "
                               "participant_id = ?", (participant["id"],))
        result.append({row["task_name"]: row for row in rows})
    return result


MEASURED = load_protocol(STUDY2).measured_practice_rounds()  # task type -> round


@pytest.mark.parametrize("decorates_on", [False, True], ids=["stops", "decorates-on"])
@pytest.mark.parametrize("task", TASK_NAMES)
def test_a_pause_in_a_measured_round_leaves_the_capability_within_5_percent(
        tmp_path, teammates, task, decorates_on):
    """A steady person (every element takes its mean time, no slips): what 20 s and 30 s
    of decorating measure differs only by where the cookies' boundaries fall."""
    steady = [Human(pace=1.0, spread=0.0, slip=0.0)]
    pause = Pause((MEASURED[TASK_NAMES.index(task)],), decorates_on=decorates_on)
    [undisturbed] = measured(tmp_path / "undisturbed", teammates, steady, SEED, None)
    [paused] = measured(tmp_path / "paused", teammates, steady, SEED, pause)
    assert 0.01 < undisturbed[task]["value"] < 0.99, "a clipped value would hide a difference"
    assert paused[task]["value"] == pytest.approx(undisturbed[task]["value"], rel=0.05)
    assert paused[task]["seconds"] == pytest.approx(undisturbed[task]["seconds"] - PAUSE_FOR)


def test_paused_people_measure_as_they_would_have_without_the_pause(tmp_path, teammates):
    """People of the model, each played twice with the same seed, paused in both measured
    rounds the second time: on average they measure as undisturbed (a 20 s measure of
    letters reads about 3 % lower than a 30 s one by itself: a start and an unfinished
    letter weigh more), each within a quarter (a letter is a tenth of a cookie); counting
    the pause as decorating time would have cost them a third."""
    people = [Human.sample(np.random.default_rng(seed)) for seed in range(PEOPLE)]
    undisturbed = measured(tmp_path / "undisturbed", teammates, people, SEED, None)
    paused = measured(tmp_path / "paused", teammates, people, SEED,
                      Pause(tuple(MEASURED.values())))
    for task in TASK_NAMES:
        pairs = [(p[task], u[task]) for p, u in zip(paused, undisturbed, strict=True)]
        ratios = np.array([p["speed"] / u["speed"] for p, u in pairs])
        counted = np.array([(p["cookies"] + p["fraction"]) / u["seconds"] / u["speed"]
                            for p, u in pairs])
        assert ratios.mean() == pytest.approx(1.0, abs=0.05), task
        assert ((ratios > 0.75) & (ratios < 1.25)).all(), task
        assert counted.mean() == pytest.approx(2 / 3, abs=0.05), task
