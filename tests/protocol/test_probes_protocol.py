"""Round probes as a protocol declares them (docs/protocol.md, [[probes]]): the three forms
of ``after``, and what is refused at its line."""

from __future__ import annotations

import pytest
from support.web import ROOT

from study.protocol.loader import ProtocolError, load_protocol, parse_protocol

THREE = (ROOT / "tests" / "three_robots.toml").read_text(encoding="utf-8")


def probe(after: str = '"every"', scale: str = "agreement", seconds: str = "8",
          extra: str = "") -> str:
    return (f'\n[[probes]]\nid = "fair_round"\ntext = "How fair was it?"\nscale = "{scale}"\n'
            f"after = {after}\nseconds = {seconds}\n{extra}")


@pytest.mark.parametrize(("after", "asked"), [
    ('"every"', [1, 2]), ('"every 2"', [2]), ("[2]", [2]), ("[1]", [1])])
def test_after_says_which_rounds_of_a_session_a_probe_follows(after, asked):
    declared = parse_protocol(THREE + probe(after)).probes[0]
    assert [n for n in (1, 2) if declared.due_after(n)] == asked
    assert declared.scale.points == 7 and declared.seconds == 8.0
    assert declared.subject == "participant"


def test_every_n_asks_after_every_nth_round():
    declared = parse_protocol(THREE.replace("kits = [2, 2]", "kits = [8, 8]")
                              + probe('"every 3"')).probes[0]
    assert [n for n in range(1, 9) if declared.due_after(n)] == [3, 6]


def test_a_probe_may_ask_about_the_teammates():
    text = THREE + probe(extra='for = "teammates"\n')
    assert parse_protocol(text).probes[0].subject == "teammates"


@pytest.mark.parametrize(("text", "field", "words"), [
    (probe(scale="fairness"), "probes.0.scale", "names no scale"),
    (probe("[1, 3]"), "probes.0.after", "round 3 is beyond the 2 rounds"),
    (probe('"every 5"'), "probes.0.after", "round 5 is beyond"),
    (probe("[0]"), "probes.0.after", "a list of round numbers from 1"),
    (probe("[]"), "probes.0.after", "a list of round numbers from 1"),
    (probe('"each"'), "probes.0.after", '"every", "every N"'),
    (probe(seconds="0"), "probes.0.seconds", "greater than 0"),
    (probe(seconds="-2"), "probes.0.seconds", "greater than 0"),
    (probe() + probe(), "probes.1.id", "unique"),
    (probe(extra='for = "robot"\n'), "probes.0.for", "participant"),
])
def test_a_wrong_probe_is_refused_at_its_key(text, field, words):
    with pytest.raises(ProtocolError) as error:
        parse_protocol(THREE + text)
    assert error.value.field == field
    assert words in str(error.value)
    assert error.value.line is not None


@pytest.mark.parametrize(("name", "after"), [
    ("welfare", [1, 2, 3, 4, 5, 6, 7, 8]), ("teams3", [1, 2, 3, 4, 5, 6]),
    ("demo", [2]), ("demo-de", [2])])
def test_the_shipped_studies_ask_how_fair_each_round_was(name, after):
    protocol = load_protocol(ROOT / "protocols" / f"{name}.toml")
    (declared,) = protocol.probes
    assert declared.id == "fair_round" and declared.seconds == 8
    assert [n for n in range(1, protocol.rounds + 1) if declared.due_after(n)] == after
    assert declared.scale.points == 7
    assert declared.text.startswith("Wie fair" if name == "demo-de" else "How fair")
