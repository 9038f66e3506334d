"""The protocol loader: the shipped studies load, and mistakes are named by line and field."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from study.protocol import schema
from study.protocol.loader import (
    AnalysisRules,
    Recruitment,
    load_protocol,
    parse_protocol,
    preference_coefficient,
)
from study.protocol.toml_source import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ROOT / "protocols"
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


def test_the_readme_layout_names_every_shipped_protocol_with_its_purpose():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `protocols/([^`]+\.toml)` \| (.*\S) \|$", readme, re.M))
    assert sorted(rows) == sorted(path.name for path in PROTOCOLS.glob("*.toml"))
    assert all(len(purpose.split()) >= 4 for purpose in rows.values()), rows


def test_the_demo_is_short():
    demo = load_protocol(PROTOCOLS / "demo.toml")
    assert demo.rounds == 2 and demo.round_seconds <= 15 and demo.practice_seconds <= 15


def broken(old: str, new: str) -> tuple[ProtocolError, str]:
    assert old in DEMO_TEXT, old
    text = DEMO_TEXT.replace(old, new, 1)
    with pytest.raises(ProtocolError) as caught:
        parse_protocol(text, "demo.toml")
    return caught.value, text


@pytest.mark.parametrize(("old", "new", "field", "words"), [
    ('algorithm = "efficient"', 'algorithm = "fastest"', "conditions.0.algorithm", "one of"),
    ("round_seconds = ", "round_seconds = -", "study.round_seconds", "at least 1"),
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


def test_hidden_characters_are_refused_but_tabs_newlines_and_right_to_left_text_pass():
    for hidden in ("\\u0000", "\\u0007", "\\u007f", "\\u0085", "\\r", "\\u202d", "\\u2066"):
        error, _ = broken('text = "Your age in years"', f'text = "Your age{hidden} in years"')
        assert error.field.endswith(".text") and "invisible character U+" in str(error)
    # Arabic with a right-to-left mark, a tab and a newline: what real texts hold
    fine = DEMO_TEXT.replace('text = "Your age in years"',
                             'text = "\\u0627\\u0644\\u0639\\u0645\\u0631\\u200f\\tin\\nyears"')
    age = next(item for item in parse_protocol(fine, "demo.toml").post_questionnaire.items
               if item.id == "age")
    assert age.text == "\u0627\u0644\u0639\u0645\u0631\u200f\tin\nyears"


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
    from study.protocol.toml_source import TomlSource

    text = ('[study]\nname = "x"\n\n[[conditions]]\nrobot = "A"\n\n[[conditions]]\n'
            'algorithm = "fair"\nrobot = "B"\n\n[conditions.extra]\nnote = 1\n')
    source = TomlSource.parse(text)
    assert source.line_of("conditions.0.robot") == 5
    assert source.line_of("conditions.1.robot") == 9
    assert source.line_of("conditions.1") == 7
    assert source.line_of("conditions.1.extra.note") == 12
    assert source.line_of("study.name") == 2
    assert source.line_of("study.missing") == 1


def test_sections_added_later_default_to_the_old_behaviour():
    text = DEMO_TEXT
    for section in ("[recruitment]", "[analysis]"):
        start = text.index(section)
        end = text.index("\n[", start + 1)
        text = text[:start] + text[end + 1:]
    protocol = parse_protocol(text, "demo.toml")
    assert protocol.recruitment == Recruitment()
    assert protocol.open_enrolment is True and protocol.recruitment.id_parameter is None
    assert protocol.analysis == AnalysisRules()
    assert protocol.analysis.keep_completed_sessions_of_incomplete


def test_recruitment_and_analysis_are_read():
    text = DEMO_TEXT.replace("[recruitment]\n", (
        '[recruitment]\nid_parameter = "PROLIFIC_PID"\n'
        'completion_url = "https://app.prolific.com/submissions/complete?cc=ABC123"\n'
        'return_url = "https://app.prolific.com/submissions/complete?cc=NOCONSENT"\n'
        "unconsented_expiry_minutes = 15\nbinding_idle_minutes = 5.5\n"), 1)
    start = text.index("[analysis]\n")
    text = text[:start] + (
        '[analysis]\nexclude = ["aborted", "failed-manipulation-check"]\n'
        "keep_completed_sessions_of_incomplete = false\n"
        'manipulation_check_item = "age"\nmanipulation_check_pass = ["16", "17"]\n\n'
    ) + text[text.index("[pool]\n", start):]
    protocol = parse_protocol(text)
    assert protocol.recruitment == Recruitment(
        "PROLIFIC_PID", "https://app.prolific.com/submissions/complete?cc=ABC123",
        "https://app.prolific.com/submissions/complete?cc=NOCONSENT", True, 15.0, 5.5)
    assert protocol.analysis == AnalysisRules(("aborted", "failed-manipulation-check"), False,
                                              "age", ("16", "17"))


def test_the_shipped_studies_declare_their_manipulation_check():
    """Every study with an agent teammate presented as a person checks the belief; real
    teams (docs/teams.md) have no deception to check, and none of its items."""
    for path in sorted(PROTOCOLS.glob("*.toml")):
        protocol = load_protocol(path)
        items = {i.id: i for i in protocol.post_questionnaire.items}
        if protocol.team is not None:
            assert protocol.analysis.manipulation_check_item is None
            assert "teammate_believed" not in items
            continue
        item = items[protocol.analysis.manipulation_check_item]
        assert set(protocol.analysis.manipulation_check_pass) <= set(item.options)


def test_study1_and_study2_do_not_enrol_unknown_codes():
    assert [load_protocol(PROTOCOLS / f"{name}.toml").open_enrolment
            for name in ("demo", "study1", "study2")] == [True, False, False]


def test_an_unknown_key_suggests_the_closest_one_at_its_line():
    error, text = broken("round_seconds = ", "round_secs = ")
    assert str(error).endswith("study.round_secs: unknown key; did you mean 'round_seconds'?")
    assert text.splitlines()[error.line - 1].startswith("round_secs")


def test_lines_inside_multiline_texts_are_not_taken_for_keys_or_headers():
    from study.protocol.toml_source import TomlSource

    text = ('[pages.consent]\ntext = """\n[study]\nname = "not a key"\n"""\n'
            'title = "Welcome"\n\n[study]\nname = "x"\n')
    source = TomlSource.parse(text)
    assert source.data["pages"]["consent"]["text"].startswith("[study]")
    assert (source.line_of("pages.consent.title"), source.line_of("study.name")) == (6, 9)
    assert source.layout.field_at(4) == "pages.consent.text"


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + DEMO_TEXT.encode())
    assert load_protocol(path).name == "demo"


def test_the_published_schema_is_the_generated_one(capsys):
    from study.cli import main
    from study.commands.check import schema_text

    published = (ROOT / "docs" / "protocol.schema.json").read_text(encoding="utf-8")
    assert published == schema_text(), "regenerate: study check --schema docs/protocol.schema.json"
    assert main(["check", "--schema"]) == 0
    assert capsys.readouterr().out == published


def test_editors_check_the_same_shape_with_the_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "protocol.schema.json").read_text(encoding="utf-8"))
    assert '"null"' not in json.dumps(schema), "TOML has no null"
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(PROTOCOLS.glob("*.toml")):
        assert list(validator.iter_errors(tomllib.loads(path.read_text()))) == [], path
    for name in ("typo-study-name", "name-path", "range-pool-ten-billion", "type-kits-text",
                 "url-javascript", "item-kind-unknown", "typo-pool-sample"):
        text = (ROOT / "tests" / "protocols_malformed" / f"{name}.toml").read_text()
        assert list(validator.iter_errors(tomllib.loads(text))), name


def test_the_schema_knows_the_pool_section_as_the_pool_reads_it():
    from study.pool.teamtypes import MOST_CAPABLE_READINGS, TEAM_TYPES
    from study.protocol import pool_spec as spec

    assert (schema.TEAM_TYPES, schema.ROLES, schema.MOST_CAPABLE_READINGS) == (
        TEAM_TYPES, spec.ROLES, MOST_CAPABLE_READINGS)
    assert set(schema.PoolSection.model_fields) == set(spec._POOL_KEYS)
    assert set(schema.Sample.model_fields) == set(spec._SAMPLE_KEYS)
    assert set(schema.Criteria.model_fields) == set(spec._CRITERIA_KEYS)
    assert set(schema.Teammate.model_fields) == {*spec._CRITERIA_KEYS, "role", "rule", "unplaced"}
    assert set(schema.Fea.model_fields) == set(spec._FEA_KEYS)


def test_the_protocol_guide_documents_every_key():
    guide = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    keys = _schema_keys(json.loads((ROOT / "docs" / "protocol.schema.json").read_text()))
    missing = sorted(key for key in keys if f"`{key}`" not in guide and f"`[{key}" not in guide)
    assert keys and not missing, missing


def _schema_keys(node: object) -> set[str]:
    """Every property name anywhere in a JSON Schema (page names included)."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for name, value in node.get("properties", {}).items():
            keys.add(name)
            keys |= _schema_keys(value)
        for key, value in node.items():
            if key != "properties":
                keys |= _schema_keys(value)
    elif isinstance(node, list):
        for value in node:
            keys |= _schema_keys(value)
    return keys
