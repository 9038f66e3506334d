"""A measured practice round no person's page could have sent is flagged, not measured: a
scripted client that sends a finished cookie every 0.52 s and no element report (letters
at 1.87 cookies a second, 28 times the demo's reference speed) dials in no capability, nor
one that reports an element before each of those cookies (faster than the human model's
quickest plausible person). Either is flagged as a clipped value is (``clipped`` 1, no
speed, the reason in ``implausible``), and the protocol's ``clipped_capability`` follows:
under ``unmatched`` the unmatched page. People at the human model's pace, the quickest the
robustness test plays included, are measured as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.clipped import practise_at
from support.people import Person
from support.web import DEMO, FakeClock, journey, make_app, rows

from study.people.speed import ROBUSTNESS_PACES, population_speeds
from study.protocol.loader import load_protocol
from study.task.cookies import target
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.progress import (
    FASTER_THAN_PEOPLE,
    NO_ELEMENT_REPORTS,
    fastest_speed,
)

SCRIPTED_SECONDS = 0.52  # the scripted client's cookie interval, past min_cookie_seconds


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pools")


def demo_with(directory: Path, consequence: str) -> Path:
    """The demo (a cookie may follow another after 0.5 s) with ``clipped_capability =
    consequence``."""
    text = DEMO.read_text(encoding="utf-8")
    assert text.count('clipped_capability = "keep"') == 1
    path = directory / f"demo-{consequence}.toml"
    path.write_text(text.replace('clipped_capability = "keep"',
                                 f'clipped_capability = "{consequence}"'), encoding="utf-8")
    return path


def study_app(directory: Path, pools: Path, consequence: str, clock: FakeClock) -> Any:
    protocol = demo_with(directory, consequence)
    teammates = PoolTeammates.for_protocol(load_protocol(protocol), pools)
    return make_app(directory, teammates, clock, protocol=protocol)


def first_element(round_state: dict[str, Any]) -> Any:
    """The cookie with its first element placed, as the page reports it."""
    wanted = round_state["target"]
    return wanted["letters"][:1] if wanted["kind"] == "letters" else wanted["cells"][:1]


def practise_scripted(app: Any, clock: FakeClock, person: Person, report: bool) -> None:
    """Consent, ratings and four practice rounds of a finished cookie every
    ``SCRIPTED_SECONDS`` to the deadline, each after one element report if ``report``."""
    person.submit("consent", {"agree": True})
    person.submit("themes")
    person.submit("preferences", {"ratings": {"ravens": 6, "steelers": 2}})
    for number in range(1, 5):
        current = person.send("start_round", {"round": number})["state"]["round"]
        clock.now = current["started_at"] + SCRIPTED_SECONDS
        while clock.now < current["deadline"]:
            if report:
                assert person.send("progress", {"round_id": current["id"],
                                                "content": first_element(current)})["ok"]
            assert person.cookie(current)["ok"]
            clock.advance(SCRIPTED_SECONDS)
        clock.now = current["deadline"]
        journey(app).tick(clock.now)


def capabilities(app: Any, code: str) -> list[dict[str, Any]]:
    return rows(app, "SELECT m.* FROM measurements m JOIN participants p ON "
                     "p.id = m.participant_id WHERE p.code = ? AND m.kind = 'capability' "
                     "ORDER BY m.task_type", code)


def step_of(app: Any, code: str) -> str:
    return journey(app).storage.participant(code)["step"]


@pytest.mark.parametrize(("report", "reason"), [(False, NO_ELEMENT_REPORTS),
                                                (True, FASTER_THAN_PEOPLE)])
def test_a_scripted_practice_is_flagged_not_measured(tmp_path, pools, report, reason):
    clock = FakeClock()
    app = study_app(tmp_path, pools, "keep", clock)
    code = journey(app).enrol()["code"]
    practise_scripted(app, clock, Person(app, code), report)
    squares, letters = capabilities(app, code)
    seconds = load_protocol(DEMO).practice_seconds
    assert letters["cookies"] / letters["seconds"] == pytest.approx(
        int(seconds / SCRIPTED_SECONDS) / seconds)  # what it claimed
    for row in (squares, letters):
        assert (row["implausible"], row["speed"], row["clipped"]) == (reason, None, 1)
    assert step_of(app, code) == "teammate"  # keep: the team is formed on the value, flagged


def test_under_unmatched_a_scripted_practice_meets_the_unmatched_page(tmp_path, pools):
    clock = FakeClock()
    app = study_app(tmp_path, pools, "unmatched", clock)
    code = journey(app).enrol()["code"]
    practise_scripted(app, clock, Person(app, code), report=False)
    assert step_of(app, code) == "unmatched"


@pytest.mark.parametrize("pace", [1.0, min(ROBUSTNESS_PACES)])
def test_people_at_the_models_pace_are_measured(tmp_path, pools, pace):
    clock = FakeClock()
    app = study_app(tmp_path, pools, "unmatched", clock)
    code = journey(app).enrol()["code"]
    practise_at(app, clock, Person(app, code), pace, seed=7)
    for row in capabilities(app, code):
        assert row["implausible"] is None and row["speed"] > 0


def test_nobody_of_the_models_population_is_as_quick_as_the_quickest_plausible_person():
    protocol = load_protocol(Path(__file__).resolve().parents[3] / "protocols" / "study1.toml")
    seconds = protocol.practice_seconds
    cookies = [target(protocol, task_type) for task_type in (0, 1)]
    speeds = population_speeds(cookies, seconds, people=300, seed=5)
    quickest = np.array([fastest_speed(cookie, seconds) for cookie in cookies])
    assert (speeds.max(axis=0) < quickest / 2).all()
