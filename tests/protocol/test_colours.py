"""The theme's words are readable on its icing: WCAG 2 contrast ratios, computed for every
shipped protocol's theme colours with the ink the page gets, and ``study check`` refusing a
colour on which no ink reaches AA. (``tests/web/participant/test_browser_refresh.py`` reads the
badges and the letters on a cookie as Chromium draws them.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from study.cli import main
from study.protocol.colours import AA_RATIO, DARK_INK, LIGHT_INK, contrast, ink_on, luminance
from study.protocol.loader import load_protocol, parse_protocol
from study.protocol.toml_source import ProtocolError
from study.task.cookies import target
from study.web.participant.pages import themes_json

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "protocols").glob("*.toml"))
DEMO = ROOT / "protocols" / "demo.toml"


def test_the_ratio_follows_wcag():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#c99700", "#c99700") == pytest.approx(1.0)
    assert contrast("#ffffff", "#000000") == contrast("#000000", "#ffffff")
    assert luminance("#ffffff") == pytest.approx(1.0) and luminance("#000000") == 0.0
    # WCAG's well-known borderline grey: #767676 passes AA on white, #777777 does not
    assert contrast("#767676", "#ffffff") >= AA_RATIO > contrast("#777777", "#ffffff")


def test_the_ink_is_the_one_that_contrasts_more():
    assert ink_on("#4b2e83") == LIGHT_INK  # the Ravens' purple
    assert ink_on("#c99700") == DARK_INK  # the Steelers' gold: no more gold on gold
    assert contrast("#c99700", "#fff6e5") < 3, "the gold as text on the page's cream fails"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_every_shipped_theme_reaches_aa_with_the_ink_the_page_gets(path):
    protocol = load_protocol(path)
    shown = {theme["id"]: theme for theme in themes_json(protocol)}
    for theme in protocol.themes:
        assert shown[theme.id]["ink"] == ink_on(theme.colour)
        ratio = contrast(theme.colour, shown[theme.id]["ink"])
        assert ratio >= AA_RATIO, f"{path.name}: {theme.id} {theme.colour} {ratio:.2f}:1"
    for task_type in (0, 1):
        cookie = target(protocol, task_type)
        assert contrast(cookie["colour"], cookie["ink"]) >= AA_RATIO


def test_the_page_never_writes_in_the_theme_colour_itself():
    """A theme colour is only ever a fill or a line: text on it uses ``--theme-ink``."""
    css = (ROOT / "static" / "css" / "bakery.css").read_text(encoding="utf-8")
    text_colour = r"(?<![-\w])color:\s*"
    assert not re.search(text_colour + r"var\(--theme\)", css)
    for rule in re.findall(r"[^{}]*\{[^{}]*background:\s*var\(--theme\)[^{}]*\}", css):
        colours = re.findall(text_colour + r"([^;}]+)", rule)
        assert all(c.strip() == "var(--theme-ink)" for c in colours), rule
    assert re.search(r"\.theme-cookie span \{[^}]*" + text_colour + r"var\(--theme-ink\)", css)


def unreadable_demo(colour: str) -> str:
    return DEMO.read_text(encoding="utf-8").replace('colour = "#c99700"', f'colour = "{colour}"')


@pytest.mark.parametrize("colour", ["#ff0000", "#777777", "#2f9e44"])
def test_study_check_refuses_a_colour_no_ink_is_readable_on(colour, tmp_path, capsys):
    assert contrast(colour, ink_on(colour)) < AA_RATIO
    text = unreadable_demo(colour)
    line = text.splitlines().index(f'colour = "{colour}"') + 1
    with pytest.raises(ProtocolError) as caught:
        parse_protocol(text, "unreadable.toml")
    assert (caught.value.field, caught.value.line) == ("themes.1.colour", line)
    assert "WCAG AA" in str(caught.value)
    path = tmp_path / "unreadable.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["check", str(path)]) == 2
    assert f"themes.1.colour: text on {colour} reaches only" in capsys.readouterr().err


@pytest.mark.parametrize("colour", ["#000000", "#ffffff", "#8b4513", "#ffb612"])
def test_study_check_takes_a_colour_some_ink_is_readable_on(colour):
    protocol = parse_protocol(unreadable_demo(colour), "readable.toml")
    assert protocol.theme("steelers").colour == colour
