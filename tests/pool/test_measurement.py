"""The continuous capability measure: partial cookies checked and stored, the speed counting
the unfinished cookie, rounds cut by downtime, and robots whose plans coincide flagged.

The clock is injected and rounds close by ``tick(now)``; downtime is constructed by closing
a round as the server's recovery does, with the study's last sign of life before the crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.human_journeys import HumanJourneys
from support.web import FakeClock, msg

from study.task.cookies import letters_target, squares_target
from study.web.console.live import snapshot
from study.web.participant.agent_pool import algorithm_for, live_team, session_row
from study.web.participant.progress import Placement, placement
from study.web.participant.rejections import Rejected

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"
LETTERS, SQUARES = letters_target("GO STEELERS"), squares_target("BR")


def study(app: Any) -> Any:
    return app.extensions["study"]


def send(app: Any, code: str, event: str, **payload: Any) -> dict[str, Any]:
    return study(app).handle(event, code, {"msg_id": msg(), **payload})


def to_practice(app: Any, code: str) -> None:
    study(app).enrol(code)
    for step, data in (("consent", {"agree": True}), ("themes", {}),
                       ("preferences", {"ratings": {"ravens": 6, "steelers": 2}})):
        assert send(app, code, "submit", step=step, data=data)["ok"]


def start(app: Any, code: str, number: int) -> dict[str, Any]:
    reply = send(app, code, "start_round", round=number)
    assert reply["ok"], reply
    return reply["state"]["round"]


def progress(app: Any, clock: FakeClock, code: str, current: dict[str, Any], at: float,
             content: Any) -> dict[str, Any]:
    clock.now = current["started_at"] + at
    return send(app, code, "progress", round_id=current["id"], content=content)


def cookie(app: Any, clock: FakeClock, code: str, current: dict[str, Any],
           at: float) -> None:
    """A cookie finished ``at`` seconds into the round, its first element reported half a
    second before, as the page reports every element but the last."""
    target = current["target"]
    content = target["letters"] if target["kind"] == "letters" else target["cells"]
    assert progress(app, clock, code, current, at - 0.5, content[:1])["ok"]
    clock.now = current["started_at"] + at
    assert send(app, code, "cookie", round_id=current["id"], content=content)["ok"]


def close(app: Any, clock: FakeClock, current: dict[str, Any], **recovery: Any) -> None:
    clock.now = current["deadline"] + (60 if recovery else 0)
    assert study(app).tick(clock.now, **recovery) == 1


def capabilities(app: Any, code: str) -> list[dict[str, Any]]:
    pid = study(app).storage.participant(code)["id"]
    return study(app).storage.all("SELECT * FROM measurements WHERE participant_id = ? AND "
                                  "kind = 'capability' ORDER BY task_type", (pid,))


# --- partial cookies ------------------------------------------------------------------


def test_letters_count_the_prefix_that_spells_the_target():
    assert placement(LETTERS, "GOST") == Placement(4, 4, 0.4)
    assert placement(LETTERS, "GOX") == Placement(3, 2, 0.2), "a wrong letter must come off again"
    assert placement(LETTERS, "GOXTEELERS").correct == 2
    assert placement(LETTERS, "").fraction == 0.0


def test_squares_count_right_boxes_minus_wrong_ones():
    cells = SQUARES["cells"]
    wrong = next(c for c in range(35) if c not in cells)
    assert placement(SQUARES, cells[:5]) == Placement(5, 5, 0.25)
    assert placement(SQUARES, [*cells[:5], wrong]) == Placement(6, 4, 0.2)
    assert placement(SQUARES, [wrong]).correct == 0
    assert placement(SQUARES, cells).fraction == 1.0


@pytest.mark.parametrize("target, content", [
    (LETTERS, "go"), (LETTERS, ["G"]), (LETTERS, "G" * 65), (SQUARES, [0, 0]),
    (SQUARES, [35]), (SQUARES, [True]), (SQUARES, "12"),
])
def test_malformed_partial_cookies_are_refused(target, content):
    with pytest.raises(Rejected, match="malformed"):
        placement(target, content)


def test_progress_arrives_through_the_socket_and_is_stored(app, clock):
    to_practice(app, "prog-1")
    page = app.test_client()
    page.get("/p/prog-1")  # the participant page gives this browser its cookie
    client = app.extensions["socketio"].test_client(app, flask_test_client=page)
    assert client.emit("join", {"code": "prog-1"}, callback=True)["ok"]
    current = start(app, "prog-1", 1)
    clock.advance(1.0)
    cells = current["target"]["cells"]
    reply = client.emit("progress", {"msg_id": msg(), "round_id": current["id"],
                                     "content": cells[:3]}, callback=True)
    assert reply["ok"], reply
    [row] = study(app).storage.all("SELECT * FROM progress")
    assert (row["cookie"], row["placed"], row["correct"]) == (1, 3, 3)
    assert row["fraction"] == pytest.approx(3 / len(cells)) and row["at"] == clock.now


def test_progress_outside_a_running_round_is_refused(app, clock):
    to_practice(app, "prog-2")
    current = start(app, "prog-2", 1)
    late = progress(app, clock, "prog-2", current, study(app).protocol.practice_seconds + 1, [])
    assert late["reason"] == "round-closed"
    assert send(app, "prog-2", "progress", round_id=current["id"] + 99,
                content=[])["reason"] == "out-of-order"
    assert study(app).storage.one("SELECT count(*) AS n FROM progress")["n"] == 0


# --- the capability measure -----------------------------------------------------------


def play_practice(app: Any, clock: FakeClock, code: str) -> list[dict[str, Any]]:
    """Round 2 (squares): one cookie and 5 of 20 boxes; round 4 (letters): no cookie and
    4 letters, one of them taken off again; rounds 1 and 3: one cookie each."""
    played = []
    for number in range(1, 5):
        current = start(app, code, number)
        played.append(current)
        if number == 2:
            cookie(app, clock, code, current, 9.0)
            cells = current["target"]["cells"]
            for count in range(1, 6):
                assert progress(app, clock, code, current, 9.5 + count, cells[:count])["ok"]
        elif number == 4:
            for at, content in ((2, "G"), (4, "GO"), (6, "GOS"), (7, "GOSX"), (8, "GOS"),
                                (9, "GOST"), (11, "GOSTX")):
                assert progress(app, clock, code, current, at, content)["ok"]
        else:
            cookie(app, clock, code, current, 10.0)
        if number < 4:
            close(app, clock, current)
    return played


def test_a_practice_round_counts_the_unfinished_cookie_by_its_correct_fraction(app, clock):
    to_practice(app, "measure-1")
    played = play_practice(app, clock, "measure-1")
    close(app, clock, played[3])
    squares, letters = capabilities(app, "measure-1")
    protocol = study(app).protocol
    seconds = protocol.practice_seconds
    assert (squares["cookies"], squares["fraction"]) == (1, pytest.approx(5 / 20))
    assert squares["speed"] == pytest.approx(1.25 / seconds)
    assert squares["value"] == pytest.approx(1.25 / seconds / protocol.cookies[0].reference_speed)
    assert (letters["cookies"], letters["fraction"]) == (0, pytest.approx(0.4))
    assert letters["value"] == pytest.approx(0.4 / seconds / protocol.cookies[1].reference_speed)
    assert squares["seconds"] == seconds and squares["cut_by_downtime"] == 0
    assert 0.01 < letters["value"] < 0.99 and 0.01 < squares["value"] < 0.99


def test_a_round_cut_by_downtime_is_measured_over_the_time_the_server_was_up(app, clock):
    to_practice(app, "crash-1")
    played = play_practice(app, clock, "crash-1")
    letters_round = played[3]
    close(app, clock, letters_round, reason="recovery",
          alive_until=letters_round["started_at"] + 10.0)
    row = study(app).storage.one("SELECT * FROM rounds WHERE id = ?", (letters_round["id"],))
    assert row["close_reason"] == "recovery" and row["alive_until"] is not None
    letters = capabilities(app, "crash-1")[1]
    assert letters["cut_by_downtime"] == 1 and letters["seconds"] == pytest.approx(10.0)
    assert letters["fraction"] == pytest.approx(0.4), "only what arrived before the crash"
    reference = study(app).protocol.cookies[1].reference_speed
    assert letters["value"] == pytest.approx(0.4 / 10.0 / reference)


def test_a_round_mostly_lost_to_downtime_adds_the_first_round_of_its_type(app, clock):
    to_practice(app, "crash-2")
    played = play_practice(app, clock, "crash-2")
    letters_round = played[3]
    close(app, clock, letters_round, reason="recovery",
          alive_until=letters_round["started_at"] + 5.0)
    letters = capabilities(app, "crash-2")[1]
    seconds = study(app).protocol.practice_seconds
    assert letters["seconds"] == pytest.approx(seconds + 5.0)
    assert (letters["cookies"], letters["fraction"]) == (1, pytest.approx(0.2))
    assert letters["speed"] == pytest.approx(1.2 / (seconds + 5.0))
    assert letters["cut_by_downtime"] == 1


def test_a_server_down_from_the_start_of_the_round_measures_the_first_round(app, clock):
    to_practice(app, "crash-3")
    played = play_practice(app, clock, "crash-3")
    close(app, clock, played[3], reason="recovery", alive_until=played[3]["started_at"] - 1)
    letters = capabilities(app, "crash-3")[1]
    assert letters["seconds"] == pytest.approx(study(app).protocol.practice_seconds)
    assert (letters["cookies"], letters["fraction"]) == (1, 0.0)


# --- the manipulation -----------------------------------------------------------------


def test_robots_with_the_same_plan_are_flagged(app, clock):
    to_practice(app, "same-1")
    played = play_practice(app, clock, "same-1")
    close(app, clock, played[3])
    storage = study(app).storage
    participant = storage.participant("same-1")
    plans = [s["plan"] for s in storage.all("SELECT plan FROM sessions WHERE participant_id = ? "
                                            "AND number > 0", (participant["id"],))]
    assert participant["robots_identical"] == int(plans[0] == plans[1])


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("protocol-pools")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["demo", "study2"])
def test_at_human_pace_the_two_robots_differ_for_almost_everyone(name, tmp_path, pools):
    run = HumanJourneys(PROTOCOLS / f"{name}.toml", tmp_path, pools)
    people = run.run(120, seed=7)
    matched = [p for p in people if p.plans]
    # The rest could not be placed in the target team and met the unmatched page.
    assert len(matched) >= 0.95 * len(people)
    assert all(p.step == "unmatched" for p in people if not p.plans)
    differ = np.mean([p.plans_differ for p in matched])
    assert differ >= 0.95, f"{name}: the robots differ for only {differ:.0%}"
    assert all(p.robots_identical == int(not p.plans_differ) for p in matched)
    values = np.array([p.capabilities for p in matched])
    assert ((values > 0.01) & (values < 0.99)).mean() > 0.9, "coefficients are not clipped"
    assert all(json.loads(p.plans[0]) for p in matched)


@dataclass(frozen=True)
class Member:
    """A pool member as ``TeammateSource`` answers it."""

    team_index: int
    participant_human: int
    teammate_c: np.ndarray
    teammate_p: np.ndarray
    distance: float


@dataclass(frozen=True)
class Placed:
    """A member as ``TeammateSource`` places it: every live team meets the target."""

    match: Member
    rank: int
    live_type: str = "twins"
    participant_role: str = "most-capable"
    meets_target: bool = True


class TwoMembers:
    """A teammate source whose nearest member gives both robots one plan, the next not."""

    name = "two-members"
    fea_bounds = (0.0, 1.5)
    rule = "typed"
    unplaced = "continue"

    def __init__(self, same: Member, different: Member) -> None:
        self.same, self.different = same, different

    def nearest(self, c: np.ndarray, p: np.ndarray, preferred: int | None = None) -> Placed:
        return Placed(self.same, 0)

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str,
                   preferred: int | None = None) -> Iterator[Placed]:
        yield from (Placed(self.same, 0), Placed(self.different, 1))


def plans_differ(protocol: Any, member: Member, c: np.ndarray, p: np.ndarray) -> bool:
    team = live_team(member, c, p)
    plans = [session_row(protocol, condition, team, 0, algorithm_for(condition, None))[0]["plan"]
             for condition in protocol.conditions]
    return plans[0] != plans[1]


def measured_like_play_practice(journey: Any) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients ``play_practice`` measures, and the ratings of ``to_practice``."""
    references = [cookie.reference_speed for cookie in journey.protocol.cookies]
    seconds = journey.protocol.practice_seconds
    c = np.array([min(0.99, 1.25 / seconds / references[0]),
                  min(0.99, 0.4 / seconds / references[1])])
    return c, np.array([0.01 + 0.98 * 5 / 6, 0.01 + 0.98 * 1 / 6])


def members_by_plans(journey: Any) -> tuple[Member, Member]:
    """A member with which both robots follow one plan, and one with which they differ."""
    c, p = measured_like_play_practice(journey)
    rng = np.random.default_rng(8)
    members = [Member(k, 0, rng.uniform(0.01, 0.99, 2), rng.uniform(0.01, 0.99, 2), 0.1 * k)
               for k in range(200)]
    same = next(m for m in members if not plans_differ(journey.protocol, m, c, p))
    different = next(m for m in members if plans_differ(journey.protocol, m, c, p))
    return same, different


def formed_with(app: Any, clock: FakeClock, code: str,
                source: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Practice played and the team formed from ``source(same, different)``: the journey,
    the participant and their teammates row."""
    to_practice(app, code)
    played = play_practice(app, clock, code)
    journey = study(app)
    journey.agent_team.teammates = source(*members_by_plans(journey))
    close(app, clock, played[3])
    participant = journey.storage.participant(code)
    teammate = journey.storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                                   (participant["id"],))
    return journey, participant, teammate


def test_the_teammate_is_the_nearest_member_with_which_the_robots_differ(app, clock):
    journey, participant, teammate = formed_with(app, clock, "apart-1", TwoMembers)
    same, different = journey.agent_team.teammates.same, journey.agent_team.teammates.different
    assert capabilities(app, "apart-1")[0]["value"] == pytest.approx(
        measured_like_play_practice(journey)[0][0])
    assert (teammate["pool_team"], teammate["passed_over"]) == (different.team_index, 1)
    assert (teammate["nearest_team"], teammate["passed_same_plan"]) == (same.team_index, 1)
    assert teammate["distance"] == pytest.approx(different.distance)
    assert participant["robots_identical"] == 0
    live = snapshot(journey.storage, clock.now, lambda code: 0)["participants"]
    assert [row["robots_identical"] for row in live] == [False]


def test_robots_that_coincide_with_every_member_are_flagged_in_the_console(app, clock):
    journey, participant, teammate = formed_with(
        app, clock, "same-2", lambda same, _: TwoMembers(same, same))
    sessions = journey.storage.all("SELECT plan FROM sessions WHERE participant_id = ? AND "
                                   "number > 0", (participant["id"],))
    assert sessions[0]["plan"] == sessions[1]["plan"] and participant["robots_identical"] == 1
    assert (teammate["pool_team"], teammate["passed_over"]) == (
        journey.agent_team.teammates.same.team_index, 0)
    live = snapshot(journey.storage, clock.now, lambda code: 0)["participants"][0]
    assert live["robots_identical"] is True


class OffTarget(TwoMembers):
    """No member forms the target team; the protocol lets the participant continue."""

    def candidates(self, c: np.ndarray, p: np.ndarray, rule: str,
                   preferred: int | None = None) -> Iterator[Placed]:
        if rule == "distinct":
            yield Placed(self.different, 1, "mixed-reversed", "other", False)


def test_participants_placed_off_target_are_counted_and_flagged_in_the_console(app, clock):
    journey, participant, teammate = formed_with(app, clock, "off-3", OffTarget)
    assert participant["step"] == "teammate"
    assert (teammate["target_met"], teammate["live_type"]) == (0, "mixed-reversed")
    pool = journey.agent_team.teammates
    assert (teammate["nearest_team"], teammate["pool_team"]) == (
        pool.same.team_index, pool.different.team_index)
    live = snapshot(journey.storage, clock.now, lambda code: 0)
    assert live["target"] == {"in_target": 0, "off_target": 1, "unmatched": 0,
                              "unmatched_clipped": 0}
    assert live["participants"][0]["team"] == {"type": "mixed-reversed", "role": "other",
                                               "target_met": False}
