"""The protocol loader: the shipped studies load, and mistakes are named by line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.protocol import load_protocol, parse_protocol, preference_coefficient
from study.tomlsource import ProtocolError

PROTOCOLS = Path(__file__).resolve().parents[1] / "protocols"
DEMO_TEXT = (PROTOCOLS / "demo.toml").read_text()


def test_study1_is_the_papers_first_study():
    study = load_protocol(PROTOCOLS / "study1.toml")
    assert (study.kits, study.rounds, study.round_seconds, study.practice_seconds) == (
        (8, 8), 8, 30, 30)
    assert [(c.algorithm, c.robot) for c in study.conditions] == [("efficient", "Chris"),
                                                                  ("fair", "Pat")]
    assert study.measured_practice_rounds() == {0: 2, 1: 4}
    labels = [item.label for item in study.session_questionnaire.items]
    assert labels == ["Cap-Agree", "Cap-Rating", "Pref-Agree", "Pref-Rating", "Fair-Overall",
                      "Fair-Overall-Open"]
    assert all(item.scale.points == 7 for item in study.session_questionnaire.items[:5])
    assert {item.id for item in study.post_questionnaire.items} >= {
        "better_consideration", "next_time", "age", "gender"}


def test_study2_has_fea_transparency_and_the_added_item():
    study = load_protocol(PROTOCOLS / "study2.toml")
    fea = study.condition("fea")
    assert fea.algorithm == "fea" and fea.w == 0.7 and fea.fea_bounds is None
    assert study.condition("efficient").transparency == (
        "Robot Chris considers only the decoration cookie speeds (yours and your teammate's) "
        "in its assignments.")
    assert fea.transparency.startswith("Robot Pat considers both the decoration cookie speeds")
    added = next(i for i in study.post_questionnaire.items
                 if i.id == "better_consideration_scale")
    assert added.kind == "likert" and added.scale.points == 7
    assert study.fill_robots(added.scale.anchors[0]) == "Robot Chris did much better"


def test_the_demo_is_short():
    demo = load_protocol(PROTOCOLS / "demo.toml")
    assert demo.rounds == 2 and demo.round_seconds <= 10 and demo.practice_seconds <= 10


def broken(old: str, new: str) -> tuple[ProtocolError, str]:
    assert old in DEMO_TEXT, old
    text = DEMO_TEXT.replace(old, new, 1)
    with pytest.raises(ProtocolError) as caught:
        parse_protocol(text, "demo.toml")
    return caught.value, text


@pytest.mark.parametrize(("old", "new", "field", "words"), [
    ('algorithm = "efficient"', 'algorithm = "fastest"', "conditions.0.algorithm", "one of"),
    ("round_seconds = 8", "round_seconds = -8", "study.round_seconds", "at least 1"),
    ("kits = [2, 2]", "kits = [2, 1]", "study.kits", "multiple"),
    ('practice = ["squares", "squares", "letters", "letters"]',
     'practice = ["squares", "letters", "letters"]', "study.practice", "two squares"),
    ('theme = "ravens"', 'theme = "eagles"', "cookies.squares.theme", "names no theme"),
    ('scale = "liking"', 'scale = "likeness"', "preferences.scale", "names no scale"),
    ('initials = "BR"', 'initials = "BRAVO"', "themes.0.initials", "1 to 4"),
    ('robot = "Chris"', "robot = 7", "conditions.0.robot", "text"),
])
def test_errors_name_the_line_and_the_field(old, new, field, words):
    error, text = broken(old, new)
    assert error.field == field and words in str(error)
    assert error.line == next(n for n, line in enumerate(text.splitlines(), 1)
                              if line.startswith(new))


def test_a_misspelt_page_is_named_with_a_suggestion():
    error, _ = broken("[pages.debrief]", "[pages.debriefing]")
    assert error.field == "pages.debriefing" and "did you mean 'debrief'?" in str(error)


def test_a_missing_page_is_named():
    start = DEMO_TEXT.index("[pages.debrief]")
    end = DEMO_TEXT.index("[pages.done]")
    with pytest.raises(ProtocolError) as caught:
        parse_protocol(DEMO_TEXT[:start] + DEMO_TEXT[end:], "demo.toml")
    assert caught.value.field == "pages.debrief" and "required" in str(caught.value)


def test_a_missing_item_text_is_named():
    error, _ = broken('text = "Your gender"', "")
    assert error.field.startswith("questionnaires.post.items.") and error.field.endswith(".text")


def test_preference_ratings_map_onto_the_model_range():
    assert preference_coefficient(1, 7) == pytest.approx(0.01)
    assert preference_coefficient(7, 7) == pytest.approx(0.99)
    assert preference_coefficient(4, 7) == pytest.approx(0.5)


def test_errors_in_a_repeated_table_name_the_line_of_that_table(tmp_path):
    from study.tomlsource import TomlSource

    text = ('[study]\nname = "x"\n\n[[conditions]]\nrobot = "A"\n\n[[conditions]]\n'
            'algorithm = "fair"\nrobot = "B"\n\n[conditions.extra]\nnote = 1\n')
    source = TomlSource.parse(text)
    assert source.line_of("conditions.0.robot") == 5
    assert source.line_of("conditions.1.robot") == 9
    assert source.line_of("conditions.1") == 7
    assert source.line_of("conditions.1.extra.note") == 12
    assert source.line_of("study.name") == 2
    assert source.line_of("study.missing") == 1
