"""The page's own words (``[texts]``, docs/protocol.md): defaults in one place, each
overridden per key by a protocol; unknown keys and unknown placeholders are refused with
file, line and field like every other mistake."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from study.protocol.loader import ProtocolError, load_protocol, parse_protocol
from study.protocol.texts import DEFAULT_TEXTS, placeholders, plural_of
from study.web.console.holds import apply_action
from study.web.participant.pages import status

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")


def page_script() -> str:
    """The participant page's script: every module of ``static/js``."""
    return "\n".join(path.read_text(encoding="utf-8")
                     for path in sorted((ROOT / "static" / "js").glob("*.js")))


def with_texts(table: str) -> str:
    """The demo with a [texts] table before its [recruitment] section."""
    return DEMO.replace("[recruitment]", f"[texts]\n{table}\n\n[recruitment]", 1)


def test_without_texts_the_defaults_apply():
    assert load_protocol(ROOT / "protocols" / "demo.toml").texts == DEFAULT_TEXTS


def test_a_text_overrides_its_default_only():
    texts = parse_protocol(with_texts('time_up = "Zeit!"\nfinished = "Fertig: {count}"')).texts
    assert texts == {**DEFAULT_TEXTS, "time_up": "Zeit!", "finished": "Fertig: {count}"}


@pytest.mark.parametrize(("table", "field", "words"), [
    ('time_upp = "Zeit!"', "texts.time_upp", "did you mean 'time_up'"),
    ('finished = "Fertig: {cout}"', "texts.finished", "{cout} is not filled in here"),
    ('continue = " "', "texts.continue", "must not be empty"),
    ('language = "Deutsch"', "texts.language", "language tag"),
    ("time_up = 3", "texts.time_up", "must be a text"),
    ('team_waiting = "Warten auf {count} Teammitglieder"', "texts.team_waiting",
     "goes with texts.team_waiting_one"),
    ('missing_one = "Eine Frage fehlt."', "texts.missing_one", "goes with texts.missing"),
])
def test_mistakes_are_named_at_their_line(table, field, words):
    text = with_texts(table)
    with pytest.raises(ProtocolError) as refused:
        parse_protocol(text, "study.toml")
    line = text.splitlines().index(table) + 1
    assert f"study.toml:{line}: {field}:" in str(refused.value) and words in str(refused.value)


def test_a_singular_may_show_the_number_its_default_leaves_out_and_nothing_else():
    both = 'missing = "Offen: {count}"\nmissing_one = "Offen: {count} Frage"'
    assert parse_protocol(with_texts(both)).texts["missing_one"] == "Offen: {count} Frage"
    table = 'missing = "Offen: {count}"\nmissing_one = "Offen: {number}"'
    with pytest.raises(ProtocolError) as refused:
        parse_protocol(with_texts(table), "study.toml")
    assert "texts.missing_one: {number} is not filled in here (placeholders: {count})" in \
        str(refused.value)


def test_every_text_with_a_number_has_its_singular_shown_for_one():
    script = page_script()
    singulars = [key for key in DEFAULT_TEXTS if plural_of(key)]
    assert {"team_waiting_one", "summary_one", "missing_one", "lobby_waiting_one"} <= \
        set(singulars)
    for key in singulars:
        plural = plural_of(key)
        assert placeholders(DEFAULT_TEXTS[key]) <= placeholders(DEFAULT_TEXTS[plural]), key
        assert re.search(rf'\btn\("{plural}", ', script), plural  # chosen by its number
        assert f'"{key}"' not in script, key  # never shown whatever the number
    for text in DEFAULT_TEXTS.values():  # no number shown as "teammate(s)"
        assert "(s)" not in text and "(er)" not in text


def test_every_default_placeholder_is_one_the_page_fills_in():
    script = page_script()
    for key, text in DEFAULT_TEXTS.items():
        for name in placeholders(text):
            assert re.search(rf"\b{name}: ", script), (key, name)


def test_the_german_demo_overrides_every_text():
    german = tomllib.loads((ROOT / "protocols" / "demo-de.toml").read_text(encoding="utf-8"))
    assert set(german["texts"]) == set(DEFAULT_TEXTS)
    texts = load_protocol(ROOT / "protocols" / "demo-de.toml").texts
    assert texts["language"] == "de" and texts["time_up"] != DEFAULT_TEXTS["time_up"]


def test_the_hold_pages_come_from_the_protocol(app):
    storage = app.extensions["study"].storage
    app.extensions["study"].enrol("held-1")
    participant = storage.participant("held-1")
    german = load_protocol(ROOT / "protocols" / "demo-de.toml")
    apply_action(storage, participant, "pause", "", None, 0.0)
    page = status(german, storage, participant)["hold_page"]
    assert page == {"title": german.texts["paused_title"], "text": german.texts["paused_text"]}
