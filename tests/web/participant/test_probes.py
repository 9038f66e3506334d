"""Round probes on the server (docs/protocol.md, [[probes]]): a row for each due probe when a
round closes, the first answer stored, a late or second answer refused, overdue probes
marked missed by the clock or the next state read, and the state a refreshed page gets."""

from __future__ import annotations

import io
import itertools
from typing import Any

import pandas as pd
import pytest
from support.protocols import PROBES, three_with_probes
from support.web import FakeClock, make_app, moment, rows, small_pool

from study.exports.tables import build_export
from study.web.console import live

SECONDS = 8.0


class Person:
    """One participant's messages straight to the journey, on the test's clock."""

    def __init__(self, app: Any, clock: FakeClock, code: str) -> None:
        self.app, self.journey, self.clock, self.code = app, app.extensions["study"], clock, code
        self.ids = itertools.count()
        self.journey.enrol(code)

    def send(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.journey.handle(event, self.code,
                                   {"msg_id": f"{self.code}-{next(self.ids):04d}", **payload})

    def submit(self, step: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.send("submit", {"step": step, "data": data or {}})
        assert reply["ok"], reply
        return reply["state"]

    def play_round(self, number: int) -> dict[str, Any]:
        """Start round ``number``, let the clock close it; the closed round's row."""
        reply = self.send("start_round", {"round": number})
        assert reply["ok"], reply
        current = reply["state"]["round"]
        self.clock.now = current["deadline"] + 0.25
        self.journey.tick(self.clock.now)
        return rows(self.app, "SELECT * FROM rounds WHERE id = ?", current["id"])[0]

    def to_first_session(self) -> None:
        self.submit("consent", {"agree": True})
        self.submit("themes")
        self.submit("preferences", {"ratings": {"ravens": 7, "steelers": 2}})
        for number in range(1, 5):
            self.play_round(number)
        self.submit("teammate")
        self.submit("intro-1")

    def answer(self, row: dict[str, Any], value: Any) -> dict[str, Any]:
        return self.send("probe", {"round_id": row["id"], "probe": "fair_round",
                                   "value": value})


@pytest.fixture(scope="module")
def teammates(tmp_path_factory):
    return small_pool(tmp_path_factory.mktemp("pools"), teammate={"unplaced": "continue"})


def person_of(tmp_path, teammates, probes: str = PROBES) -> Person:
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, three_with_probes(tmp_path, probes))
    person = Person(app, clock, "prober")
    person.to_first_session()
    return person


def probes_of(person: Person) -> list[dict[str, Any]]:
    return rows(person.app, "SELECT * FROM probes ORDER BY id")


def test_a_closed_round_opens_its_probe_and_practice_opens_none(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    assert probes_of(person) == []  # four practice rounds closed: no probe
    row = person.play_round(1)
    (probe,) = probes_of(person)
    session = rows(person.app, "SELECT * FROM sessions WHERE id = ?", row["session_id"])[0]
    assert probe["round_id"] == row["id"] and probe["session_id"] == session["id"]
    assert (probe["session_number"], probe["round_number"]) == (1, 1)
    assert probe["deadline"] == moment(row["closed_at"] + SECONDS)
    assert (probe["shown_at"], probe["answered_at"], probe["value"], probe["missed"]) == (
        None, None, None, 0)
    shown = person.journey.state("prober")["probes"]
    assert [(p["id"], p["round_id"], p["round"], p["points"]) for p in shown] == [
        ("fair_round", row["id"], 1, 7)]
    assert shown[0]["deadline"] == moment(probe["deadline"])
    assert shown[0]["anchors"][0] == "Strongly disagree"


def test_only_the_rounds_a_probe_follows_open_it(tmp_path, teammates):
    person = person_of(tmp_path, teammates, PROBES.replace('"every"', "[2]"))
    person.play_round(1)
    assert probes_of(person) == []
    second = person.play_round(2)
    assert [(p["round_id"], p["round_number"]) for p in probes_of(person)] == [
        (second["id"], 2)]
    # after the session's last round the questionnaire's page carries the probe
    state = person.journey.state("prober")
    assert state["step"] == "questionnaire-1"
    assert [p["round"] for p in state["probes"]] == [2]


def test_an_answer_is_stored_once_with_when_it_was_shown_and_given(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    row = person.play_round(1)
    shown_at = person.clock.advance(0.5)
    assert person.answer(row, None)["ok"]  # the page showed it
    answered_at = person.clock.advance(3.0)
    reply = person.answer(row, 6)
    assert reply["ok"] and reply["state"]["probes"] == []
    (probe,) = probes_of(person)
    assert (probe["value"], probe["missed"]) == (6, 0)
    assert probe["shown_at"] == moment(shown_at)
    assert probe["answered_at"] == moment(answered_at)
    person.clock.advance(1.0)
    second = person.answer(row, 2)
    assert (second["ok"], second["reason"]) == (False, "probe-answered")
    assert probes_of(person)[0]["value"] == 6
    assert rows(person.app, "SELECT reason FROM rejections")[-1]["reason"] == "probe-answered"


def test_a_late_answer_is_refused_and_the_probe_missed(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    row = person.play_round(1)
    person.clock.advance(SECONDS + 0.01)
    reply = person.answer(row, 5)
    assert (reply["ok"], reply["reason"]) == (False, "probe-missed")
    assert reply["state"]["probes"] == []
    (probe,) = probes_of(person)
    assert (probe["value"], probe["answered_at"], probe["missed"]) == (None, None, 1)


@pytest.mark.parametrize("value", [0, 8, 3.5, True, "4"])
def test_a_value_off_the_scale_is_refused(tmp_path, teammates, value):
    person = person_of(tmp_path, teammates)
    row = person.play_round(1)
    reply = person.answer(row, value)
    assert (reply["ok"], reply["reason"]) == (False, "invalid-answer")
    assert probes_of(person)[0]["answered_at"] is None


def test_a_probe_never_asked_is_out_of_order(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    practice = rows(person.app, "SELECT * FROM rounds ORDER BY id")[0]
    assert person.answer(practice, 4)["reason"] == "out-of-order"
    reply = person.send("probe", {"round_id": practice["id"], "probe": "enjoy", "value": 4})
    assert reply["reason"] == "malformed"


def test_the_clock_marks_an_overdue_probe_missed(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    person.play_round(1)
    person.journey.tick(person.clock.advance(SECONDS - 0.5))
    assert probes_of(person)[0]["missed"] == 0
    person.journey.tick(person.clock.advance(1.0))
    assert probes_of(person)[0]["missed"] == 1


def test_a_refresh_keeps_an_answered_probe_answered_and_a_missed_one_missed(
        tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    first = person.play_round(1)
    assert person.answer(first, 3)["ok"]
    assert person.journey.join("prober")["state"]["probes"] == []  # answered: not again
    person.clock.advance(1.0)
    second = person.play_round(2)  # the next round may start before an old deadline
    assert [p["round_id"] for p in person.journey.state("prober")["probes"]] == [second["id"]]
    person.clock.advance(SECONDS)
    joined = person.journey.join("prober")["state"]  # the state read marks it missed
    assert joined["probes"] == []
    assert [(p["round_number"], p["value"], p["missed"]) for p in probes_of(person)] == [
        (1, 3, 0), (2, None, 1)]


def test_a_withdrawal_deletes_the_probes(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    person.answer(person.play_round(1), 4)
    assert person.send("withdraw", {})["ok"]
    assert probes_of(person) == []


def test_study_export_writes_the_probes_with_their_codebook(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    person.answer(person.play_round(1), 4)
    person.clock.advance(1.0)
    person.play_round(2)
    person.journey.tick(person.clock.advance(SECONDS))
    export = build_export(tmp_path / "study.sqlite")
    table = pd.read_csv(io.BytesIO(export.files["probes.csv"]))
    assert table["probe"].tolist() == ["fair_round", "fair_round"]
    assert table[["round_number", "value", "missed"]].fillna(-1).values.tolist() == [
        [1, 4, 0], [2, -1, 1]]
    assert pd.read_parquet(io.BytesIO(export.files["probes.parquet"]))["value"].tolist()[0] == 4
    codebook = pd.read_csv(io.BytesIO(export.files["codebook.csv"]))
    assert codebook.loc[codebook["table"] == "probes", "column"].tolist() == [
        "id", "participant_id", "session_id", "round_id", "session_number", "round_number",
        "probe", "shown_at", "deadline", "answered_at", "value", "missed"]


def test_the_console_counts_each_persons_answered_and_missed_probes(tmp_path, teammates):
    person = person_of(tmp_path, teammates)
    storage = person.journey.storage
    participant = storage.participant("prober")

    def counted() -> Any:
        return live.participant_rows(storage, [participant], lambda code: 0)[0]["probes"]

    assert counted() is None  # asked nothing yet
    person.answer(person.play_round(1), 5)
    person.clock.advance(1.0)
    person.play_round(2)
    assert counted() == {"answered": 1, "missed": 0}
    person.journey.tick(person.clock.advance(SECONDS))
    assert counted() == {"answered": 1, "missed": 1}
